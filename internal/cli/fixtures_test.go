package cli

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// testNow is the fixed clock of every rendering test.
var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time {
	return &metav1.Time{Time: testNow.Add(-d)}
}

// newTestRollout is the contract's example: three steps, the first with a
// timed pause, the second waiting for a promote, and an error-rate analysis.
func newTestRollout() *stepwisev1.Rollout {
	return &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 2},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web"},
			Steps: []stepwisev1.RolloutStep{
				{Partition: intstr.FromString("90%"), Pause: &stepwisev1.StepPause{Duration: &metav1.Duration{Duration: time.Minute}}},
				{Partition: intstr.FromString("50%"), Pause: &stepwisev1.StepPause{}},
				{Partition: intstr.FromInt32(0)},
			},
			Analysis: &stepwisev1.AnalysisSpec{Metrics: []stepwisev1.Metric{{
				Name:           "error-rate",
				Prometheus:     &stepwisev1.PrometheusMetric{Address: "http://prometheus.monitoring:9090", Query: "vector(0)"},
				ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.01"},
			}}},
		},
		Status: stepwisev1.RolloutStatus{
			ObservedGeneration: 2,
			StableRevision:     "web-5f6b4",
			CanaryRevision:     "web-7c9d8",
		},
	}
}

func newTestWorkload(replicas, updatedReady int32, partition string) *Workload {
	p := intstr.Parse(partition)
	return &Workload{
		APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web", ResourceVersion: "7",
		Generation: 5, ObservedGeneration: 5, Replicas: replicas, Partition: &p,
		UpdatedReplicas: updatedReady, UpdatedReadyReplicas: &updatedReady, ReadyReplicas: replicas,
		UpdateRevision: "web-7c9d8", CurrentRevision: "web-5f6b4",
	}
}
