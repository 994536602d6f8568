package manager

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// cacheOptions scopes the cache to namespaces (every namespace when empty).
// Managed fields are large and never read from the cache (they are read
// around it when needed, see workload.PartitionManagers): stripping them
// roughly halves the memory of the Pod cache.
func cacheOptions(namespaces []string) cache.Options {
	opts := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}
