// Package judgeprom proves the judge (pkg/analysis/judge) against a real
// Prometheus: the traffic simulator serves per-image error rates and
// latency histograms for groups of simulated Pods, Prometheus scrapes it,
// and each story renders one query for a canary group and for the stable
// group (.Pods), runs both through the Prometheus provider, and judges the
// per-Pod samples.
//
// It covers the statistics end to end (queries, provider, samples,
// verdict, score) but not a Rollout: the stories on the kwok bed, with the
// controller promoting and aborting, come with the Rollout's compare API.
package judgeprom
