// Package stepanalysis is the analysis of one Rollout step, from the
// first thought to the verdict, as one unit: the reconciler calls Run
// once per round and writes what it returns.
//
// A round goes:
//
//  1. Start or carry on the step's tally in status.analysis (a new run
//     when the step decision asks for one, or the tally is for another step
//     or revision), one entry per metric of the spec.
//  2. Schedule each metric's first measurement: the step's canary Pods all
//     became ready on the canary revision at CanaryReadyAt; an in-place
//     update keeps their names, so their series carry the previous
//     revision's data up to that moment. The query's lookback (read from
//     the PromQL) plus the scrape margin, or initialDelay if longer, must
//     pass before a measurement reads only the canary's own data.
//  3. Measure each metric that is due (after its first time, and an
//     interval after its last measurement): render the query with
//     .CanaryAge, refuse a window that would still reach before the
//     canary's readiness, and ask the Measurer. A round whose namespace
//     already measures with its share of the workers (Shares) measures
//     nothing: its metrics stay due and it looks again in DeferRetry.
//     A job metric's measurement spans rounds: the Measurer creates its
//     Job (JobName, the same in every round until the measurement is
//     recorded) and the metric stays due, untallied, until DecideJob
//     reads an outcome from the Job's status; the round looks again at
//     the Job's deadline, or sooner when the watch on Jobs wakes it.
//  4. Tally each measurement (analysis.Next), combine the metrics' verdicts
//     (analysis.AssessAll), and say when to look again.
//
// Everything but the Measurer is pure, so every rule is table-tested; the
// Measurer (template values from the cache, the query against Prometheus)
// is the reconciler's.
package stepanalysis
