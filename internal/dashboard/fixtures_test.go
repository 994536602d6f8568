package dashboard

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.Time{Time: testNow.Add(d)} }

// newTestRollout has three steps (a timed pause, a pause until promote, the
// last) and an error-rate analysis, with a canary in flight.
func newTestRollout() *stepwisev1.Rollout {
	return &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 2},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web"},
			Steps: []stepwisev1.RolloutStep{
				{Partition: intstr.FromString("90%"), Pause: &stepwisev1.StepPause{Duration: &metav1.Duration{Duration: time.Minute}}},
				{Partition: intstr.FromString("50%"), Pause: &stepwisev1.StepPause{}},
				{Partition: intstr.FromInt32(0), Analysis: &stepwisev1.StepAnalysis{Skip: true}},
			},
			Analysis: &stepwisev1.AnalysisSpec{Count: new(int32(3)), Metrics: []stepwisev1.Metric{{
				Name:           "error-rate",
				Prometheus:     &stepwisev1.PrometheusMetric{Address: "http://prometheus.monitoring:9090", Query: "vector(0)"},
				ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.01"},
			}}},
		},
		Status: stepwisev1.RolloutStatus{
			ObservedGeneration: 2,
			Phase:              stepwisev1.RolloutProgressing,
			StableRevision:     "web-5f6b4",
			CanaryRevision:     "web-7c9d8",
		},
	}
}

func newTestWorkload(replicas, updated, updatedReady, ready int32) *cli.Workload {
	p := intstr.FromString("50%")
	return &cli.Workload{
		APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web", ResourceVersion: "7",
		Generation: 5, ObservedGeneration: 5, Replicas: replicas, Partition: &p,
		UpdatedReplicas: updated, UpdatedReadyReplicas: &updatedReady, ReadyReplicas: ready,
		UpdateRevision: "web-7c9d8", CurrentRevision: "web-5f6b4",
	}
}
