package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBuildPlanWithTemplates(t *testing.T) {
	var tpl PlanTemplates
	steps, err := ParseTemplateRef("error-rate")
	if err != nil {
		t.Fatal(err)
	}
	bg, err := ParseTemplateRef("cluster:latency-p99")
	if err != nil {
		t.Fatal(err)
	}
	arg, err := ParseArg("service=checkout")
	if err != nil {
		t.Fatal(err)
	}
	tpl.Steps, tpl.Background, tpl.Args = append(tpl.Steps, steps), append(tpl.Background, bg), append(tpl.Args, arg)
	r, err := BuildPlan(testCloneSet("app"), PlanOptions{Updated: []int{10, 100}, Pause: &PlanPause{Manual: true}, Templates: &tpl})
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidatePlan(context.Background(), r); err != nil {
		t.Fatalf("the planned Rollout is refused: %v", err)
	}
	var out bytes.Buffer
	if err := WriteManifest(&out, r, "yaml"); err != nil {
		t.Fatal(err)
	}
	want := `  analysis:
    args:
      - name: service
        value: checkout
    templates:
      - name: error-rate
    background:
      templates:
        - name: latency-p99
          clusterScope: true
`
	if !strings.Contains(out.String(), want) {
		t.Errorf("manifest lacks\n%s\ngot:\n%s", want, out.String())
	}
}

func TestPlanTemplateErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Error_Rate", `"Error_Rate" is not NAME or cluster:NAME with a valid object name`},
		{"cluster:", `"cluster:" is not NAME or cluster:NAME`},
	} {
		if _, err := ParseTemplateRef(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTemplateRef(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"service", `"service" is not NAME=VALUE`},
		{"=x", "the name must have 1 to 63 characters"},
	} {
		if _, err := ParseArg(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseArg(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
	var argOnly, dupRefs PlanTemplates
	arg, _ := ParseArg("service=checkout")
	argOnly.Args = append(argOnly.Args, arg)
	_, err := BuildPlan(testCloneSet("app"), PlanOptions{Updated: []int{100}, Templates: &argOnly})
	if err == nil || !strings.Contains(err.Error(), "--analysis-arg: args are for templates") {
		t.Errorf("args without a template: err = %v", err)
	}
	dup, _ := ParseTemplateRef("error-rate")
	dupRefs.Steps = append(dupRefs.Steps, dup, dup)
	r, err := BuildPlan(testCloneSet("app"), PlanOptions{Updated: []int{100}, Templates: &dupRefs})
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidatePlan(context.Background(), r); err == nil || !strings.Contains(err.Error(), "analysis.templates must not name the same template twice") {
		t.Errorf("a template named twice: err = %v", err)
	}
}
