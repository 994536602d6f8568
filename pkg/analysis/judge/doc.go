// Package judge compares a canary with its stable side, measured at the
// same time, and decides whether the canary is worse.
//
// Everything here is a pure function of plain values: two sample sets in,
// a Result out; a list of per-metric verdicts in, a Score out. The
// controller renders the queries, collects the samples and writes status.
//
// The statistics, and why these:
//
//   - MannWhitney: the Mann-Whitney U test (Wilcoxon rank-sum). It assumes
//     no distribution (latencies and error rates are skewed, heavy-tailed
//     and often tied at zero), only that the samples are independent. The
//     p-value uses the normal approximation with the tie correction of the
//     variance and a continuity correction of 0.5, exactly as
//     scipy.stats.mannwhitneyu(method="asymptotic", use_continuity=True).
//     No exact distribution is computed for small samples: instead a side
//     with fewer than Compare.MinSamples values makes the metric
//     Inconclusive, so the approximation is never asked to decide on a
//     handful of values.
//   - HodgesLehmann: the median of all pairwise differences canary-stable,
//     the shift estimator that goes with the U test. The effect is that
//     shift divided by the stable median, so a tolerance of 0.25 reads
//     "25% worse than stable".
//   - Judge: a metric fails only when the difference is both significant
//     (p < 1-confidence, in the bad direction) and large (the effect
//     beyond the tolerance, in the bad direction). Significant but small,
//     or large but noisy, passes: a release is not stopped by a difference
//     nobody would act on, nor by noise.
//   - Decide: the weighted share of passing metrics, 0-100, against the
//     pass and marginal thresholds; a critical metric that fails aborts
//     whatever the score.
//
// # Stability
//
// This package is for other programs to import. While Stepwise's API is
// v1alpha1, an exported name may change in a minor release; every such
// change is in the CHANGELOG. It imports nothing of Stepwise's but
// pkg/analysis (docs/architecture.md).
package judge
