// Package rollout reconciles Rollouts: it walks one workload (a Stepwise or
// OpenKruise CloneSet, or a StatefulSet) through the partitions of
// spec.steps, checking Prometheus between steps, and promotes or aborts by
// itself.
//
// A reconcile has the same shape every time:
//
//  1. Get the Rollout; one deferred function summarizes the conditions and
//     patches the status (optimistic lock, so a stale cached read can never
//     write an old step back), then records Events and metrics.
//  2. Stop, stalled, when an older Rollout drives the same workload (the
//     oldest by creation, then name, drives it); otherwise observe the
//     workload through its adapter (package workload).
//  3. Gather the step decision's input (resolved steps, the status, the
//     workload, the analysis verdict kept in status, the request annotations,
//     the version policy) and let step.Decide, which is pure, decide.
//  4. Act: apply the decided partition with server-side apply (field manager
//     "stepwise-rollout"), looking for other writers of it only when the
//     workload does not hold what was set; then run the analysis, at most one
//     measurement per metric per reconcile, when due. After an abort, on a
//     workload that does not move Pods back when the partition rises (a
//     StatefulSet, an OpenKruise CloneSet without CloneSetPartitionRollback),
//     delete the canary Pods the pure rollback.Decide picks, within the
//     workload's budget, so that it recreates them on the stable revision.
//  5. Requeue at the earliest time-driven event (a pause ending, the next
//     measurement, a progress deadline); everything else arrives by watch.
//
// The step, the analysis tallies and the handled requests live in the
// Rollout's status, so a restarted controller resumes the same step without
// redoing an analysis that passed. Besides the informer caches, what the
// controller keeps in memory is listed in one place, memory
// (rollout_memory.go), each item with what losing it on a restart costs.
package rollout
