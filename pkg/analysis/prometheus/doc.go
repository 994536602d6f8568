// Package prometheus is the Prometheus analysis.Provider: it runs instant
// queries against the HTTP API (POST /api/v1/query, or GET where a proxy
// refuses POST) and reduces the answer to an analysis.Result as it streams
// in, keeping the values of at most MaxSeriesValues series (one per Pod,
// for a compared metric) and the number of series, never the series'
// labels.
//
// It only talks HTTP: it neither logs nor reads Kubernetes objects. The
// caller resolves secrets (the bearer token) and decides what to do with
// errors. What the server says is never quoted in an error but for the
// error text of a well-formed API error, truncated (see errors.go).
//
// # Stability
//
// This package is for other programs to import. While Stepwise's API is
// v1alpha1, an exported name may change in a minor release; every such
// change is in the CHANGELOG. It imports nothing of Stepwise's but
// pkg/analysis (docs/architecture.md).
package prometheus
