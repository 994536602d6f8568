package judge

import (
	"fmt"
	"math"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// Sides returns the template variables of the canary query and of the
// stable query of a compared metric: the same variables, with .Pods set to
// the canary's Pods (v.CanaryPods) and to the stable Pods (v.StablePods).
// Both queries are run at the same instant, so they read the same window.
func Sides(v analysis.Vars) (canary, stable analysis.Vars) {
	canary, stable = v, v
	canary.Pods, stable.Pods = v.CanaryPods, v.StablePods
	return canary, stable
}

// Samples are the values one measurement of one side contributes: one per
// series of an instant vector, which a query grouped `by (pod)` makes one
// per Pod. Why per-Pod values of instant queries rather than the points of
// a range query: points of one series a few seconds apart are strongly
// correlated (each rate() window overlaps the last), and the U test
// assumes independent samples; Pods are independent replicas, which is
// exactly the comparison the partition gives. For the same reason each
// measurement is judged on its own samples and measurements are not
// pooled: one Pod measured twice is not two independent samples (a Pod
// that is a little slower stays so), and pooling would overstate the
// confidence. The query's window says how much time a measurement covers.
//
// A scalar gives one value. NaN and ±Inf are dropped (a Pod with no
// traffic has no ratio). A result whose provider kept only the first of
// several series is an error: judging one Pod as if it were all of them
// would be a false reading.
func Samples(r analysis.Result) ([]float64, error) {
	switch r.Kind {
	case analysis.KindScalar, analysis.KindVector:
	default:
		return nil, fmt.Errorf("a compared metric needs an instant vector grouped by pod, the query returned %s", r.Type)
	}
	if r.Series > len(r.Samples) {
		return nil, fmt.Errorf("the provider kept %d of %d series; a compared metric needs every Pod's value", len(r.Samples), r.Series)
	}
	out := make([]float64, 0, len(r.Samples))
	for _, s := range r.Samples {
		if !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
			out = append(out, s.Value)
		}
	}
	return out, nil
}

// CheckSides says why a step cannot compare canary with stable, or "" when
// it can. replicas is the workload's, partition the step's in Pods (Pods
// kept on the stable revision): partition 0 leaves no stable Pod, a
// partition of every replica leaves no canary. Validation reports it as a
// warning: such a step's compared metrics are Inconclusive by definition.
func CheckSides(replicas, partition int) string {
	switch {
	case replicas <= 0:
		return "the workload has no replicas: nothing to compare"
	case partition <= 0:
		return "partition 0 leaves no stable Pod to compare the canary with"
	case partition >= replicas:
		return fmt.Sprintf("partition %d of %d replicas leaves no canary Pod", partition, replicas)
	}
	return ""
}
