// Package podcache is how the controllers read the Pods the manager's
// informer cache holds: straight from the Pod informers' own indexers, by
// controller or by namespace and selector (Stores), the cached objects
// themselves, neither copied nor gathered into a list.
//
// controller-runtime's reader copies every object it lists (or, with
// UnsafeDisableDeepCopy, still copies each struct into the list), and when
// the cache watches a list of namespaces (--watch-namespaces) it keeps one
// informer per namespace behind a front without an indexer. Stores learns
// every Pod informer the cache makes, through cache.Options.NewInformer,
// so both setups are read the same way.
package podcache
