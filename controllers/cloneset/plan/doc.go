// Package plan is the CloneSet's update budget: one pure function,
// Calculate, that takes the spec numbers, the two revisions and the Pods as
// plain values and returns what to create, delete, update and roll back in
// this reconcile. It reads no client, no clock and no global; the
// reconciler builds the Input and applies the Plan.
//
// # The budget
//
// The floor is replicas - maxUnavailable available Pods. The budget of a
// round is the available Pods minus the floor; every action that takes an
// available Pod out of service (update, rollback, deletion) spends one, and
// actions on Pods that are unavailable anyway are free. So Pods already
// unavailable for any reason (broken probes, in-place updates in flight,
// missing Pods, terminating Pods) use up maxUnavailable, surge Pods add to
// it once available, and an update whose budget is eaten by Pods that are
// not ours reports Plan.Blocked instead of stalling silently.
//
// # Partition and rollback
//
// The partition is how many Pods stay on the current revision; the other
// replicas - partition go to the update revision. Unlike Kruise (which only
// does it behind an off-by-default feature gate) raising the partition
// during an update moves Pods on the update revision back to the current
// revision, under the same budget: a Rollout aborts by setting the
// partition to replicas. Rollbacks are ordered as the reverse of updates, so
// the Pods updated first are rolled back last.
//
// A template change in the middle of an update leaves Pods on a third
// revision. Kruise counts them as "old" and may keep them for good under a
// partition. Here they are wanted nowhere: they are moved forward first, or
// back to the current revision when the partition needs Pods there, and
// deleted first on scale-down.
//
// # Pods held by a lifecycle hook
//
// A Pod held in PreparingUpdate by its inPlaceUpdate hook (Pod.Held) waits
// for a move. Such a Pod on the update revision can only be picked by a
// rollback that may take update-revision Pods, one on the current revision
// only by an update that may take current-revision Pods; when no such move
// is wanted (the template went back to its revision, the partition was
// raised) it is named in Plan.Release, so that it does not wait out of
// service forever. The decision ignores paused, which delays a move without
// calling it off.
//
// # maxSurge, and maxSurge with in-place updates
//
// While Pods should move, up to maxSurge extra Pods are created in the
// direction of the move (update revision for an update, current revision
// for a rollback); surge is min(maxSurge, moves still wanted). As moves get
// done the surge shrinks, and the Pods above replicas + surge are deleted,
// taken only from a revision holding more than its share, so the Pods
// deleted are the ones still on the old side.
//
// Kruise's calculateDiffs does the same, and with InPlaceIfPossible the
// outcome is worth knowing: for replicas 5 and maxSurge 2, two new Pods are
// created, three old Pods are updated in place, and the last two old Pods
// are deleted rather than updated (deleting is cheaper than updating a Pod
// that is surplus anyway). So maxSurge Pods are in effect recreated and the
// rest updated in place; the peak is replicas + maxSurge. That is what
// maxSurge is for with in-place updates: capacity first, which is the only
// way to update with maxUnavailable 0. Kruise users have reported it as
// churn (openkruise/kruise#2369) when maxUnavailable alone would have done;
// such users should leave maxSurge at 0. The reconciler passes 0 for
// InPlaceOnly, where the API forbids surge.
//
// # Order
//
// Updates take Pods that are unavailable anyway first (free), then by
// priorityStrategy (heavier weight first; or the integer value of the
// orderPriority keys, largest value first as in Kruise, earlier keys first), then by name;
// scatterStrategy then spreads matching Pods evenly within each run of
// equal readiness and priority. Scale-down takes unscheduled, not ready,
// not yet available Pods first, then third-revision Pods, then the
// youngest, never taking a revision below its share.
package plan
