package step

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// ResolvePartition turns a partition into Pods kept on the stable revision,
// with the same rule the CloneSet applies (v1alpha1.ResolvePartition).
func ResolvePartition(p intstr.IntOrString, replicas int32) (int32, error) {
	return v1alpha1.ResolvePartition(&p, replicas)
}

// ResolveSteps builds the Steps input from a Rollout spec for the
// workload's current replicas.
func ResolveSteps(spec *v1alpha1.RolloutSpec, replicas int32) ([]Step, error) {
	steps := make([]Step, 0, len(spec.Steps))
	for i, s := range spec.Steps {
		pods, err := ResolvePartition(s.Partition, replicas)
		if err != nil {
			return nil, fmt.Errorf("spec.steps[%d]: %w", i, err)
		}
		st := Step{Partition: s.Partition, Pods: pods}
		if s.Pause != nil {
			st.Pause = true
			if s.Pause.Duration != nil {
				st.PauseDuration = s.Pause.Duration.Duration
			}
		}
		if a, ok := spec.AnalysisForStep(i); ok {
			st.Analysis = true
			st.Inconclusive = a.Inconclusive
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// RequestsFromAnnotations reads the request tokens off a Rollout.
func RequestsFromAnnotations(annotations map[string]string) Requests {
	return Requests{
		Promote:     annotations[v1alpha1.PromoteAtAnnotation],
		PromoteFull: annotations[v1alpha1.PromoteFullAtAnnotation],
		Abort:       annotations[v1alpha1.AbortAtAnnotation],
		Retry:       annotations[v1alpha1.RetryAtAnnotation],
		Pause:       annotations[v1alpha1.PauseAtAnnotation],
		Resume:      annotations[v1alpha1.ResumeAtAnnotation],
	}
}
