package stepanalysis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// TestValidationsRenderOncePerGeneration replays a Rollout's rounds: the
// spec is checked at its first round, not at the next ones of the same
// generation, again after a spec change (a new generation) or for a new
// Rollout of the same name (a new UID), and again once forgotten.
func TestValidationsRenderOncePerGeneration(t *testing.T) {
	calls := 0
	refused := errors.New("refused")
	v := &Validations{Check: func(*v1alpha1.RolloutSpec) error { calls++; return refused }}
	ro := &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-1", Generation: 1}}
	round := func(wantCalls int) {
		t.Helper()
		if err := v.Validate(ro); !errors.Is(err, refused) {
			t.Fatalf("Validate = %v, want the remembered verdict", err)
		}
		if calls != wantCalls {
			t.Fatalf("generation %d, UID %s: %d checks, want %d", ro.Generation, ro.UID, calls, wantCalls)
		}
	}
	round(1)
	round(1)
	round(1)
	ro.Generation = 2
	round(2)
	round(2)
	ro.UID = "uid-2"
	round(3)
	v.Forget(types.NamespacedName{Namespace: "shop", Name: "web"})
	if v.Len() != 0 {
		t.Fatalf("%d verdicts kept after Forget", v.Len())
	}
	round(4)
	round(4)
}

// TestValidationsAreBounded: past MaxValidations Rollouts, a new one
// replaces a verdict instead of adding one.
func TestValidationsAreBounded(t *testing.T) {
	v := &Validations{Check: func(*v1alpha1.RolloutSpec) error { return nil }}
	for i := range MaxValidations + 100 {
		ro := &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprint(i)), Generation: 1}}
		if err := v.Validate(ro); err != nil {
			t.Fatal(err)
		}
		if v.Len() > MaxValidations {
			t.Fatalf("%d verdicts kept after %d Rollouts, want at most %d", v.Len(), i+1, MaxValidations)
		}
	}
	if v.Len() != MaxValidations {
		t.Errorf("%d verdicts kept, want %d", v.Len(), MaxValidations)
	}
}

// TestValidationsRemembersTheRealVerdict: without Check, the verdict is
// Validate's, refusal included.
func TestValidationsRemembersTheRealVerdict(t *testing.T) {
	v := &Validations{}
	ro := &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u", Generation: 1}}
	ro.Spec.Steps = []v1alpha1.RolloutStep{{Partition: intstr.FromInt32(0)}}
	ro.Spec.Analysis = &v1alpha1.AnalysisSpec{Metrics: []v1alpha1.Metric{metric("errors", `{{ range 10 }}x{{ end }}`)}}
	for range 2 {
		if err := v.Validate(ro); err == nil || !strings.Contains(err.Error(), "{{range}} is not allowed") {
			t.Fatalf("Validate = %v, want the loop refused", err)
		}
	}
}

func TestValidateCompare(t *testing.T) {
	plain := v1alpha1.RolloutStep{Partition: intstr.FromInt32(1)}
	withCompare := func(c v1alpha1.CompareSpec) *v1alpha1.RolloutSpec {
		m := metric("errors", `sum by (pod) (rate(x{pod=~"{{ .Pods }}"}[1m]))`)
		m.ThresholdRange = nil
		m.Compare = &c
		return &v1alpha1.RolloutSpec{Analysis: &v1alpha1.AnalysisSpec{Metrics: []v1alpha1.Metric{m}}, Steps: []v1alpha1.RolloutStep{plain}}
	}
	if err := Validate(withCompare(v1alpha1.CompareSpec{Direction: v1alpha1.CompareIncrease, Tolerance: "0.25", Confidence: "0.98"})); err != nil {
		t.Fatalf("a valid compare (and .Pods) refused: %v", err)
	}
	err := Validate(withCompare(v1alpha1.CompareSpec{Direction: v1alpha1.CompareIncrease, Tolerance: "0.25", Confidence: "1"}))
	if err == nil || !strings.Contains(err.Error(), "spec.analysis.metrics[0] (metric errors): compare.confidence must be a number strictly between 0 and 1") {
		t.Fatalf("confidence 1 accepted or unnamed: %v", err)
	}
}
