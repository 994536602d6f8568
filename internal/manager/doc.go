// Package manager assembles the Stepwise controller manager in one place:
// the scheme, what the informer cache holds and how it trims objects, the
// namespaces it watches (and, for a namespaced manager, the check at start
// that its RBAC lets it watch them), the clients and their field owners,
// Secrets and ConfigMaps read around the cache, kept to those namespaces, the
// controllers, their Prometheus metrics, the metrics endpoint and its
// authentication, and the health checks.
//
// cmd/manager parses flags into Options and calls New. Every test harness
// (envtest suites, the kwok end-to-end bed, the demo) calls NewWithHooks,
// the same setup, and sets only what a test must: in Options a metrics
// address, a private Prometheus registry so a restarted manager does not
// collide with the last one, the namespaces of a test and the controllers
// it plays itself; in Hooks, which cmd/manager cannot set, the clock, the
// analysis provider, the webhook policy, client wrappers that inject API
// faults, and SkipNameValidation. So the tests run the setup that ships.
package manager
