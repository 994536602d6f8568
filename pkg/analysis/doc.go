// Package analysis decides whether a canary step is healthy from metric
// measurements.
//
// It is deliberately free of Kubernetes API types and of network access:
// plain values go in (a query result, a threshold, the list of measurements
// taken so far) and plain values come out (a Measurement, a Verdict). The
// controller owns the clock, the status and the calls to a Provider; this
// package only computes, so every rule below is covered by table tests.
//
// The flow for one metric at one step is:
//
//  0. Know when the canary's own data fills the query's window: Lookback
//     parses the PromQL; the first measurement waits for it (see
//     controllers/rollout/stepanalysis), CanaryAge renders a window that
//     grows with the canary, and CheckWindow refuses a rendered query that
//     still reads before the canary's readiness.
//  1. Render the query template with the rollout's Vars (CheckTemplate
//     refuses what a query does not need).
//  2. Measure: run the query through a Provider and Evaluate the Result
//     against the Threshold, giving a Measurement (Successful, Failed,
//     Inconclusive or Error).
//  3. Count the Measurement into the metric's tally with Next (Assess does
//     the same over a whole history) against the Limits, giving a Verdict
//     (Running, Passed, Failed or Inconclusive). While Running, the next
//     measurement is due at NextMeasurementAt.
//  4. AssessAll combines the per-metric verdicts into the step's verdict.
//
// The central promise is that no step ever passes without data: NaN, ±Inf,
// an empty vector, several series, an unexpected result type and query
// errors can never produce a Successful measurement, and a Passed verdict
// needs at least one Successful measurement.
//
// # Stability
//
// This package is for other programs to import. While Stepwise's API is
// v1alpha1, an exported name may change in a minor release; every such
// change is in the CHANGELOG. It imports nothing of Stepwise's but the API
// types and its own subpackages (docs/architecture.md).
package analysis
