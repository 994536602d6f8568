package stepanalysis

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestValidate(t *testing.T) {
	withQuery := func(q string) *v1alpha1.AnalysisSpec {
		return &v1alpha1.AnalysisSpec{Metrics: []v1alpha1.Metric{metric("errors", q)}}
	}
	steps := func(s ...v1alpha1.RolloutStep) []v1alpha1.RolloutStep { return s }
	plain := v1alpha1.RolloutStep{Partition: intstr.FromInt32(0)}
	tests := []struct {
		name     string
		analysis *v1alpha1.AnalysisSpec
		steps    []v1alpha1.RolloutStep
		wantErr  string
	}{
		{name: "a PromQL query", analysis: withQuery(`sum(rate(x{pod=~"{{ .CanaryPods }}"}[{{ .CanaryAge }}]))`), steps: steps(plain)},
		{name: "no analysis", steps: steps(plain)},
		{name: "a loop is refused naming the field", analysis: withQuery(`{{ range 10 }}x{{ end }}`), steps: steps(plain),
			wantErr: "spec.analysis.metrics[0].prometheus.query (metric errors): query template: {{range}} is not allowed"},
		{name: "an unknown key is refused", analysis: withQuery(`x{a="{{ .Args.nope }}"}`), steps: steps(plain),
			wantErr: `spec.analysis.metrics[0].prometheus.query (metric errors, step 1): render query template`},
		{name: "not PromQL without initialDelay", analysis: withQuery(`rate(x[1m]) default 0`), steps: steps(plain),
			wantErr: "set analysis.initialDelay to at least its longest window plus the scrape margin"},
		{name: "not PromQL with initialDelay", steps: steps(plain),
			analysis: func() *v1alpha1.AnalysisSpec {
				a := withQuery(`rate(x[1m]) default 0`)
				a.InitialDelay = dur(2 * time.Minute)
				return a
			}()},
		{name: "a step's own metrics are named by the step", steps: steps(v1alpha1.RolloutStep{Partition: intstr.FromString("50%"),
			Analysis: &v1alpha1.StepAnalysis{AnalysisSpec: *withQuery(`{{ printf "%d" 1 }}`)}}, plain),
			wantErr: `spec.steps[0].analysis.metrics[0].prometheus.query (metric errors): query template: function "printf" is not allowed`},
		{name: "a skipped step is not checked", steps: steps(v1alpha1.RolloutStep{Partition: intstr.FromInt32(0), Analysis: &v1alpha1.StepAnalysis{Skip: true}}),
			analysis: withQuery(`{{ with .Args }}{{ end }}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(&v1alpha1.RolloutSpec{Analysis: tt.analysis, Steps: tt.steps})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate: %v, want %q", err, tt.wantErr)
			}
		})
	}
}
