package judge

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// fakeProvider answers by the Pod regex in the query: a test double of the
// provider interface, not of Kubernetes.
type fakeProvider map[string][]float64

func (f fakeProvider) Query(_ context.Context, q string) (analysis.Result, error) {
	for pods, vals := range f {
		if strings.Contains(q, `pod=~"`+pods+`"`) {
			r := analysis.Result{Kind: analysis.KindVector, Type: "vector"}
			for _, v := range vals {
				r.Samples = append(r.Samples, analysis.Sample{Value: v})
			}
			return r, nil
		}
	}
	return analysis.Result{}, errors.New("connection refused")
}

func TestMeasure(t *testing.T) {
	const q = `sum by (pod) (rate(errors{pod=~"{{ .Pods }}"}[1m]))`
	vars := analysis.Vars{CanaryPods: "c", StablePods: "s"}
	rule := Compare{Direction: Increase, Tolerance: 0.25, Confidence: 0.98}
	cases := []struct {
		name     string
		provider fakeProvider
		want     analysis.Phase
		msg      string
	}{
		{"worse_canary_fails", fakeProvider{"c": seq(150, 1, 10), "s": seq(100, 1, 10)}, analysis.PhaseFailed, "tolerance"},
		{"equal_canary_succeeds", fakeProvider{"c": seq(100, 1, 10), "s": seq(100, 1, 10)}, analysis.PhaseSuccessful, ""},
		{"no_stable_pods_is_inconclusive", fakeProvider{"c": seq(100, 1, 10), "s": nil}, analysis.PhaseInconclusive, "stable 0"},
		{"stable_query_failing_is_an_error", fakeProvider{"c": seq(100, 1, 10)}, analysis.PhaseError, "stable query failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, m := Measure(context.Background(), c.provider, q, vars, rule)
			if m.Phase != c.want || !strings.Contains(m.Message, c.msg) {
				t.Fatalf("measurement %+v (result %+v), want %s saying %q", m, r, c.want, c.msg)
			}
			if m.Phase == analysis.PhaseSuccessful && (m.Value == nil || *m.Value != r.Effect) {
				t.Errorf("value %v, want the effect %v", m.Value, r.Effect)
			}
		})
	}
}

func TestMeasurementOfAnInfiniteEffectHasNoValue(t *testing.T) {
	m := Measurement(Judge([]float64{1, 1, 1, 1, 1}, []float64{0, 0, 0, 0, 0}, Compare{Confidence: 0.95}))
	if m.Phase != analysis.PhaseFailed || m.Value != nil {
		t.Fatalf("%+v", m)
	}
}
