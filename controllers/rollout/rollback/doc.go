// Package rollback decides, without touching the API, which canary Pods a
// Rollout deletes after an abort so that their workload recreates them on
// the stable revision.
//
// Raising the partition does not move Pods back on every workload. A
// StatefulSet leaves a Pod that is already on the update revision where it
// is, and recreates a deleted Pod whose ordinal is below the partition on
// its current revision; OpenKruise's CloneSet does the same unless its
// CloneSetPartitionRollback feature gate is on. So once the partition keeps
// every Pod on the stable revision, the Rollout deletes the canary Pods one
// budget at a time and lets the workload bring each back. Decide is the
// whole decision: Pods, revisions, readiness and the budget in, the Pods to
// delete now out. Nothing is remembered between calls: the plan is made
// again from the Pods as they are, so a restarted controller carries on.
//
// A workload that moves its Pods back in place by itself (Stepwise's
// CloneSet, or OpenKruise's with the gate on) gets the same plan with
// nothing to delete: it says which canaries are left and which Pods are not
// ready yet, so that the Rollout reports the rollback and how long it took.
package rollback
