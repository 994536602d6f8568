package step

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestResolvePartition(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        intstr.IntOrString
		replicas int32
		want     int32
		err      bool
	}{
		{name: "count_as_is", p: num(3), replicas: 10, want: 3},
		{name: "count_clamped_to_replicas", p: num(30), replicas: 10, want: 10},
		{name: "percent_rounds_up", p: pct("70%"), replicas: 5, want: 4},
		// 90% of 5 rounds up to 5, but below 100% one Pod must still move:
		// the CloneSet keeps 4, so the gate must expect 1 updated Pod.
		{name: "percent_below_100_always_moves_one_pod_like_the_workload", p: pct("90%"), replicas: 5, want: 4},
		{name: "percent_below_100_of_one_replica_keeps_it", p: pct("90%"), replicas: 1, want: 1},
		{name: "percent_of_ten", p: pct("50%"), replicas: 10, want: 5},
		{name: "zero_percent", p: pct("0%"), replicas: 10, want: 0},
		{name: "hundred_percent_is_every_pod", p: pct("100%"), replicas: 7, want: 7},
		{name: "no_replicas", p: pct("50%"), replicas: 0, want: 0},
		{name: "not_a_percent", p: pct("half"), replicas: 10, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolvePartition(tc.p, tc.replicas)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("ResolvePartition(%s, %d) = %d, %v; want %d, error %v", tc.p.String(), tc.replicas, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestResolveSteps(t *testing.T) {
	metric := v1alpha1.Metric{Name: "errors", Prometheus: &v1alpha1.PrometheusMetric{Address: "http://p", Query: "q"}, ThresholdRange: &v1alpha1.ThresholdRange{Max: "0.01"}}
	spec := &v1alpha1.RolloutSpec{
		Steps: []v1alpha1.RolloutStep{
			{Partition: pct("90%"), Pause: &v1alpha1.StepPause{Duration: &metav1.Duration{Duration: time.Minute}}},
			{Partition: pct("50%"), Pause: &v1alpha1.StepPause{}, Analysis: &v1alpha1.StepAnalysis{AnalysisSpec: v1alpha1.AnalysisSpec{Inconclusive: v1alpha1.InconclusiveAbort}}},
			{Partition: num(0), Analysis: &v1alpha1.StepAnalysis{Skip: true}},
		},
		Analysis: &v1alpha1.AnalysisSpec{Metrics: []v1alpha1.Metric{metric}},
	}
	got, err := ResolveSteps(spec, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Partition: pct("90%"), Pods: 9, Pause: true, PauseDuration: time.Minute, Analysis: true, Inconclusive: v1alpha1.InconclusivePause},
		{Partition: pct("50%"), Pods: 5, Pause: true, Analysis: true, Inconclusive: v1alpha1.InconclusiveAbort},
		{Partition: num(0), Pods: 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d steps, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	spec.Analysis = nil
	got, _ = ResolveSteps(spec, 10)
	if got[0].Analysis || got[1].Analysis {
		t.Errorf("without metrics no step should be analysed: %+v", got)
	}
}

func TestRequestsFromAnnotations(t *testing.T) {
	got := RequestsFromAnnotations(map[string]string{
		v1alpha1.PromoteAtAnnotation: "p", v1alpha1.AbortAtAnnotation: "a", v1alpha1.RetryAtAnnotation: "r",
		v1alpha1.PauseAtAnnotation: "s", v1alpha1.ResumeAtAnnotation: "u", "other": "x",
	})
	if want := (Requests{Promote: "p", Abort: "a", Retry: "r", Pause: "s", Resume: "u"}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
