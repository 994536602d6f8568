package rollout_test

import (
	"fmt"
	"strings"
	"testing"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TestArgsValidationNamesTheField: the CRD bounds analysis.args, in
// spec.analysis and in a step's override, before any controller renders a
// query with them: a name of 1 to 63 characters, a value of at most 1024.
func TestArgsValidationNamesTheField(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	inSpec := func(args map[string]string) func(*stepwisev1.Rollout) {
		return func(ro *stepwisev1.Rollout) { ro.Spec.Analysis.Args = stepwisev1.ArgsFromMap(args) }
	}
	inStep := func(args map[string]string) func(*stepwisev1.Rollout) {
		return func(ro *stepwisev1.Rollout) {
			ro.Spec.Steps[0].Analysis = &stepwisev1.StepAnalysis{AnalysisSpec: stepwisev1.AnalysisSpec{Args: stepwisev1.ArgsFromMap(args)}}
		}
	}
	cases := []struct {
		name   string
		mutate func(*stepwisev1.Rollout)
		want   string // empty: accepted
	}{
		{"a value of 1 MiB", inSpec(map[string]string{"service": strings.Repeat("a", 1<<20)}),
			"spec.analysis.args[0].value: Too long: may not be more than 1024 bytes"},
		{"a value one past the bound", inSpec(map[string]string{"service": strings.Repeat("a", 1025)}),
			"args[0].value: Too long: may not be more than 1024 bytes"},
		{"a step's value past the bound", inStep(map[string]string{"window": strings.Repeat("5", 1025)}),
			"spec.steps[0].analysis.args[0].value: Too long: may not be more than 1024 bytes"},
		{"a name of 64 characters", inSpec(map[string]string{strings.Repeat("n", 64): "x"}),
			"spec.analysis.args[0].name: Too long: may not be more than 63 bytes"},
		{"an empty name", inSpec(map[string]string{"": "x"}), "spec.analysis.args[0].name in body should be at least 1 chars long"},
		{"33 args", inSpec(func() map[string]string {
			m := map[string]string{}
			for i := range 33 {
				m[strings.Repeat("a", i+1)] = "x"
			}
			return m
		}()), "spec.analysis.args: Too many: 33: must have at most 32 items"},
		{"the widest args are accepted", inSpec(func() map[string]string {
			m := map[string]string{}
			for i := range 32 {
				m[fmt.Sprintf("%02d", i)+strings.Repeat("n", 61)] = strings.Repeat("v", 1024)
			}
			return m
		}()), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ro := newRollout(ns, "invalid", cloneSetRef("web"), stepAt(num(0)))
			ro.Spec.Analysis = errorRate(1)
			tc.mutate(ro)
			ro.GenerateName, ro.Name = "v-", ""
			err := env.client.Create(testContext(t), ro)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid Rollout refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("the API server accepted the Rollout")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
}
