package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Flux's runtime helpers (conditions, patch) take these interfaces.
var (
	_ meta.ObjectWithConditions       = &Rollout{}
	_ meta.ObjectWithConditionsSetter = &Rollout{}
)

func metric(name string) Metric {
	return Metric{Name: name, Prometheus: &PrometheusMetric{Address: "http://p:9090", Query: "q"}, ThresholdRange: &ThresholdRange{Max: "0.01"}}
}

func TestAnalysisForStep(t *testing.T) {
	spec := RolloutSpec{
		Analysis: &AnalysisSpec{
			Count:   new(int32(10)),
			Args:    ArgsFromMap(map[string]string{"a": "1", "b": "2"}),
			Metrics: []Metric{metric("errors")},
		},
		Steps: []RolloutStep{
			{Partition: intstr.FromString("90%")},
			{Partition: intstr.FromString("50%"), Analysis: &StepAnalysis{AnalysisSpec: AnalysisSpec{
				Interval: &metav1.Duration{Duration: time.Minute}, Inconclusive: InconclusiveAbort,
				Args: ArgsFromMap(map[string]string{"b": "3"}), Metrics: []Metric{metric("latency")},
			}}},
			{Partition: intstr.FromInt32(0), Analysis: &StepAnalysis{Skip: true}},
		},
	}
	before := spec.DeepCopy()

	t.Run("inherits_spec_analysis_with_defaults", func(t *testing.T) {
		a, ok := spec.AnalysisForStep(0)
		if !ok {
			t.Fatal("step 0 should be analysed")
		}
		if a.Interval.Duration != DefaultAnalysisInterval || *a.Count != 10 || *a.FailureLimit != DefaultFailureLimit ||
			a.Inconclusive != InconclusivePause || *a.ConsecutiveErrorLimit != DefaultConsecutiveErrorLimit ||
			a.Metrics[0].Prometheus.Timeout.Duration != DefaultPrometheusTimeout {
			t.Fatalf("defaults not applied: %+v", a)
		}
	})
	t.Run("override_replaces_fields_merges_args_and_replaces_metrics", func(t *testing.T) {
		a, ok := spec.AnalysisForStep(1)
		if !ok {
			t.Fatal("step 1 should be analysed")
		}
		if a.Interval.Duration != time.Minute || *a.Count != 10 || a.Inconclusive != InconclusiveAbort {
			t.Fatalf("override not applied: %+v", a)
		}
		if !reflect.DeepEqual(a.LiteralArgs(), map[string]string{"a": "1", "b": "3"}) {
			t.Fatalf("args = %v", a.Args)
		}
		if len(a.Metrics) != 1 || a.Metrics[0].Name != "latency" {
			t.Fatalf("metrics = %+v", a.Metrics)
		}
	})
	t.Run("skip_runs_nothing", func(t *testing.T) {
		if _, ok := spec.AnalysisForStep(2); ok {
			t.Fatal("step 2 skips its analysis")
		}
	})
	t.Run("no_metrics_runs_nothing", func(t *testing.T) {
		s := RolloutSpec{Steps: []RolloutStep{{Partition: intstr.FromInt32(0)}}}
		if _, ok := s.AnalysisForStep(0); ok {
			t.Fatal("no metric, no analysis")
		}
	})
	t.Run("spec_is_not_modified", func(t *testing.T) {
		if !reflect.DeepEqual(before, &spec) {
			t.Fatal("AnalysisForStep changed the spec")
		}
	})
}

func TestThresholdRangeJSON(t *testing.T) {
	var r ThresholdRange
	if err := json.Unmarshal([]byte(`{"min":-1e-3,"max":250}`), &r); err != nil {
		t.Fatal(err)
	}
	lo, hi, err := r.Bounds()
	if err != nil || *lo != -0.001 || *hi != 250 {
		t.Fatalf("Bounds() = %v, %v, %v", lo, hi, err)
	}
	out, err := json.Marshal(&ThresholdRange{Max: "0.01"})
	if err != nil || string(out) != `{"max":0.01}` {
		t.Fatalf("Marshal = %s, %v", out, err)
	}
	for _, bad := range []string{`{"max":"0.01"}`, `{"max":true}`} {
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("Unmarshal(%s) should fail: the CRD takes numbers only", bad)
		}
	}
	for _, bad := range []Decimal{"NaN", "Inf", "0x10", " 1", "1e999"} {
		if _, err := bad.Float64(); err == nil {
			t.Errorf("Decimal(%q).Float64() should fail", string(bad))
		}
	}
	if lo, hi, err := (&ThresholdRange{}).Bounds(); lo != nil || hi != nil || err != nil {
		t.Errorf("empty range: %v %v %v", lo, hi, err)
	}
}
