package plan

import (
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// defaultMaxUnavailable is spec.updateStrategy.maxUnavailable when unset.
const defaultMaxUnavailable = "20%"

// limits are the spec numbers resolved against replicas.
type limits struct {
	replicas  int
	partition int
	// maxUnavailable is how far below replicas the available Pods may fall.
	maxUnavailable int
	// maxSurge is how many Pods above replicas an update may use; 0 while
	// paused.
	maxSurge int
	// specMaxSurge is maxSurge ignoring paused, to name deletions only.
	specMaxSurge int
	// scaleMaxUnavailable limits creation when scaleLimited is set.
	scaleMaxUnavailable int
	scaleLimited        bool
}

func resolveLimits(in Input) limits {
	l := limits{replicas: max(int(in.Replicas), 0)}
	l.partition = int(PartitionCount(int32(l.replicas), in.Partition))

	// An invalid maxSurge (the CRD rejects them) surges nothing: the
	// conservative reading.
	l.specMaxSurge, _ = scaled(in.MaxSurge, l.replicas, true)
	if !in.Paused {
		l.maxSurge = l.specMaxSurge
	}

	mu := in.MaxUnavailable
	if mu == nil {
		d := intstr.FromString(defaultMaxUnavailable)
		mu = &d
	}
	// An invalid value reads as 0, which the rule below makes 1 without
	// surge: the slowest rollout that still moves.
	l.maxUnavailable, _ = scaled(mu, l.replicas, false)
	// Like Deployments: with neither unavailability nor surge allowed no Pod
	// could ever move, so allow one. This covers 0, 0% and a percent that
	// rounds down to 0 (20% of 4).
	if l.maxUnavailable == 0 && l.maxSurge == 0 {
		l.maxUnavailable = 1
	}

	if in.ScaleMaxUnavailable != nil {
		l.scaleLimited = true
		l.scaleMaxUnavailable, _ = scaled(in.ScaleMaxUnavailable, l.replicas, true)
		// 0 would forbid creating any Pod for good, since every new Pod
		// starts unavailable; read it as "one at a time".
		l.scaleMaxUnavailable = max(l.scaleMaxUnavailable, 1)
	}
	return l
}

// PartitionCount resolves spec.updateStrategy.partition against replicas
// with the API's rule (v1alpha1.ResolvePartition). An invalid value (the CRD
// rejects them) keeps every Pod: when unsure, update nothing.
func PartitionCount(replicas int32, partition *intstr.IntOrString) int32 {
	n, err := v1alpha1.ResolvePartition(partition, replicas)
	if err != nil {
		return max(replicas, 0)
	}
	return n
}

// scaled resolves an int or percent against total. Negative results become
// 0. ok is false when the value is not an int or "N%".
func scaled(v *intstr.IntOrString, total int, roundUp bool) (int, bool) {
	if v == nil {
		return 0, true
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, roundUp)
	if err != nil {
		return 0, false
	}
	return max(n, 0), true
}
