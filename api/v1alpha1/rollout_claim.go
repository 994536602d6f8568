package v1alpha1

// Two Rollouts naming one workload would share the field manager, so
// neither would see the other as a conflicting writer, and they would move
// the partition back and forth. One drives it: the oldest. Its age is read
// from the API server's objects, so every controller (and every restart of
// one) picks the same, and the others never write the workload.

// Claimant returns the Rollout that drives a workload among the Rollouts
// naming it: the oldest by creationTimestamp, the name breaking ties, since
// timestamps have a one-second precision. Rollouts being deleted do not
// count. Nil when none is left.
func Claimant(rollouts []Rollout) *Rollout {
	var first *Rollout
	for i := range rollouts {
		ro := &rollouts[i]
		if !ro.DeletionTimestamp.IsZero() {
			continue
		}
		if first == nil || older(ro, first) {
			first = ro
		}
	}
	return first
}

func older(a, b *Rollout) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}
