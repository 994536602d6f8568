package v1alpha1

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// ResolvePartition is what a partition means for a workload with replicas
// Pods: how many stay on the current revision. It is part of the API so the
// CloneSet controller and the Rollout controller can never disagree on it.
//
// A count is taken as is; a percent rounds up, except that a percent below
// 100% never keeps every Pod of a workload with more than one replica (99%
// of 5 is 4, not 5), so asking for less than everything always lets at least
// one Pod update. The result is clamped to [0, replicas]; nil means 0.
func ResolvePartition(partition *intstr.IntOrString, replicas int32) (int32, error) {
	r := max(int(replicas), 0)
	if partition == nil {
		return 0, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(partition, r, true)
	if err != nil {
		return 0, fmt.Errorf("partition %q: %w", partition.String(), err)
	}
	if partition.Type == intstr.String && r > 1 && n >= r {
		if pct, err := strconv.Atoi(strings.TrimSuffix(partition.StrVal, "%")); err == nil && pct < 100 {
			n = r - 1
		}
	}
	return int32(min(max(n, 0), r)), nil
}
