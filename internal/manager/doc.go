// Package manager assembles the Stepwise controller manager in one place:
// the scheme, what the informer cache holds and how it trims objects, the
// namespaces it watches (and, for a namespaced manager, the check at start
// that its RBAC lets it watch them), the clients and their field owners,
// Secrets and ConfigMaps read around the cache, kept to those namespaces, the
// controllers, their Prometheus metrics, the metrics endpoint and its
// authentication, and the health checks.
//
// cmd/manager parses flags into Options and calls New. Every test harness
// (envtest suites, the kwok end-to-end bed, the demo) calls New too, and
// sets only what a test must: a metrics address, a private Prometheus
// registry so a restarted manager does not collide with the last one,
// SkipNameValidation, the namespaces of a test, the controllers it plays
// itself, and the clock and analysis-provider hooks. So the tests run the
// setup that ships.
package manager
