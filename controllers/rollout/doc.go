// Package rollout reconciles Rollouts: it walks one workload (a Stepwise or
// OpenKruise CloneSet, or a StatefulSet) through the partitions of
// spec.steps, checking Prometheus between steps, and promotes or aborts by
// itself.
//
// A reconcile has the same shape every time (the round, rollout_round.go):
//
//  1. Read: the Rollout, as it stands after this controller's last write
//     of it; then stop, stalled, when an older Rollout drives the same
//     workload (the oldest by creation, then name, drives it); otherwise
//     observe the workload through its adapter (package workload).
//  2. Decide, with pure functions: step.Decide (phase, step, partition)
//     from the resolved steps, the status, the workload, the analysis
//     verdict kept in status, the request annotations and the version
//     policy; after an abort, rollback.Decide picks the canary Pods to
//     delete on a workload that does not move Pods back when the partition
//     rises (a StatefulSet, an OpenKruise CloneSet without
//     CloneSetPartitionRollback); traffic.Decide the weights and matches,
//     traffic.Changes the route and Service writes that carry them; the
//     analysis takes at most one measurement per metric when due.
//  3. Write the status once (finish, rollout_finish.go: summarized
//     conditions, optimistic lock, so a stale read can never write an old
//     step back), then record the Events, metrics and notification.
//  4. Act, only once that write has landed: the traffic writes, the
//     partition (server-side apply, field manager "stepwise-rollout"), the
//     canary Pod deletions. Had the write been lost, nothing would record
//     the act, and the next round would undo or repeat it. For a governed
//     Stepwise CloneSet the partition is the grant in the status: the
//     write is the act.
//  5. Requeue at the earliest time-driven event (a pause ending, the next
//     measurement, a progress deadline); everything else arrives by watch.
//
// The step, the analysis tallies and the handled requests live in the
// Rollout's status, so a restarted controller resumes the same step without
// redoing an analysis that passed. Besides the informer caches, what the
// controller keeps in memory is listed in one place, memory
// (rollout_memory.go), each item with what losing it on a restart costs.
package rollout
