package cli

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestParseWeights(t *testing.T) {
	for in, want := range map[string][]int{"0%,20%,100%": {0, 20, 100}, " 5% , 100% ": {5, 100}} {
		got, err := ParseWeights(in, len(want))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseWeights(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"20%,100%":      "2 weights for 3 steps: give one per step",
		"20,50%,100%":   `"20" is not a percent between 0% and 100%`,
		"20%,150%,100%": `"150%" is not a percent between 0% and 100%`,
		"20%,50%,90%":   "the last step sends 90%: it must send 100%",
	} {
		if _, err := ParseWeights(in, 3); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseWeights(%q) error = %v, want %q", in, err, want)
		}
	}
}

func TestParseMatch(t *testing.T) {
	good := map[string]stepwisev1.TrafficMatch{
		"header:x-canary=always": {Header: &stepwisev1.StringMatch{Name: "x-canary", Value: "always"}},
		"query:canary=1":         {QueryParam: &stepwisev1.StringMatch{Name: "canary", Value: "1"}},
		// The value may hold = itself; ~= before the first = is a regex.
		"header:Cookie~=(^|; )canary=1(;|$)": {Header: &stepwisev1.StringMatch{Name: "Cookie", Value: "(^|; )canary=1(;|$)", Type: stepwisev1.StringMatchRegularExpression}},
		"query:q=a=b":                        {QueryParam: &stepwisev1.StringMatch{Name: "q", Value: "a=b"}},
	}
	for in, want := range good {
		got, err := ParseMatch(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseMatch(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"x-canary=always":   "is neither header:NAME=VALUE nor query:NAME=VALUE",
		"header:x-canary":   "is neither header:NAME=VALUE nor query:NAME=VALUE",
		"header:=v":         "is neither header:NAME=VALUE nor query:NAME=VALUE",
		"header:x=":         "is neither header:NAME=VALUE nor query:NAME=VALUE",
		"cookie:canary=yes": `"cookie" is neither header nor query`,
	} {
		if _, err := ParseMatch(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMatch(%q) error = %v, want %q", in, err, want)
		}
	}
}

func TestParseRoute(t *testing.T) {
	good := map[string]stepwisev1.HTTPRouteReference{
		"web":            {Name: "web"},
		"edge/web":       {Namespace: "edge", Name: "web"},
		"web#app":        {Name: "web", RuleName: "app"},
		"edge/web.v2#1":  {Namespace: "edge", Name: "web.v2", RuleIndex: ptr.To[int32](1)},
		"web#0":          {Name: "web", RuleIndex: ptr.To[int32](0)},
		"web#rule-0-new": {Name: "web", RuleName: "rule-0-new"},
	}
	for in, want := range good {
		got, err := ParseRoute(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseRoute(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"Web":        `"Web" is not an object name`,
		"a.b/web":    `"a.b" is not a namespace name`,
		"web#":       "no rule after #",
		"edge/":      `"" is not an object name`,
		"edge/web/x": `"web/x" is not an object name`,
	} {
		if _, err := ParseRoute(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRoute(%q) error = %v, want %q", in, err, want)
		}
	}
}

func trafficPlanOptions() PlanOptions {
	return PlanOptions{
		Updated: []int{10, 50, 100},
		Pause:   &PlanPause{Manual: true},
		Traffic: &PlanTraffic{
			StableService: "web", CreateCanary: true,
			Routes:  []stepwisev1.HTTPRouteReference{{Name: "web"}, {Namespace: "edge", Name: "web-internal", RuleName: "app"}},
			Weights: []int{0, 20, 100},
			Matches: []stepwisev1.TrafficMatch{{Header: &stepwisev1.StringMatch{Name: "x-canary", Value: "always"}}},
		},
	}
}

// TestBuildPlanTrafficYAML: traffic routing goes into the manifest (the
// canary Service named after the stable one and created, matches on every
// step but the last) and each step's comment says what the routes carry,
// from the TrafficPlan the caller computed with the controller's decision.
func TestBuildPlanTrafficYAML(t *testing.T) {
	r, err := BuildPlan(testCloneSet("app"), trafficPlanOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidatePlan(context.Background(), r); err != nil {
		t.Fatalf("the planned Rollout is refused: %v", err)
	}
	m := r.Spec.Steps[0].Matches
	var out bytes.Buffer
	tp := &TrafficPlan{Replicas: 4, Steps: []StepTraffic{
		{Weight: 0, Matches: m, Why: "the step's traffic"},
		{Weight: 20, Matches: m, Why: "the step's traffic"},
		{Weight: 100, Why: "the step's traffic; no ready stable Pod"},
	}}
	if err := WritePlan(&out, r, "yaml", tp); err != nil {
		t.Fatal(err)
	}
	want := `# Planned by kubectl stepwise plan. A step's partition is the pods kept on
# the stable revision; the controller owns the CloneSet's partition field.
# Each step says where requests go once it is reached, with 4 replicas;
# after the last step the stable Service selects the new revision and the
# routes send it everything, as your HTTPRoute in git does (docs/traffic.md).

apiVersion: stepwise.dev/v1alpha1
kind: Rollout
metadata:
  name: web
  namespace: shop
spec:
  workloadRef:
    apiVersion: stepwise.dev/v1alpha1
    kind: CloneSet
    name: web
  steps:
    - partition: 90% # 10% of pods updated; 0% of requests to web-canary (the step's traffic), and those matching its match
      pause: {}
      traffic: 0
      matches:
        - header:
            name: x-canary
            value: always
    - partition: 50% # 50% of pods updated; 20% of requests to web-canary (the step's traffic), and those matching its match
      pause: {}
      traffic: 20
      matches:
        - header:
            name: x-canary
            value: always
    - partition: 0 # every pod updated; 100% of requests to web-canary (the step's traffic; no ready stable Pod)
      traffic: 100
  trafficRouting:
    stableService: web
    canaryService:
      name: web-canary
      create: true
    httpRoutes:
      - name: web
      - name: web-internal
        namespace: edge
        ruleName: app
`
	assertText(t, out.String(), want)

	// Without a TrafficPlan (WriteManifest) the manifest is the same, with
	// the comments of a plan without traffic.
	var plain bytes.Buffer
	if err := WriteManifest(&plain, r, "yaml"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "requests") || !strings.Contains(plain.String(), "- partition: 90% # 10% of pods updated\n") {
		t.Errorf("WriteManifest shows traffic:\n%s", plain.String())
	}
}

func TestBuildPlanTrafficErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(*PlanTraffic)
		want string
	}{
		{"no stable service", func(p *PlanTraffic) { p.StableService = "" }, "--stable-service: required for traffic routing"},
		{"no route", func(p *PlanTraffic) { p.Routes = nil }, "--http-route: required with --stable-service"},
		{"weights for other steps", func(p *PlanTraffic) { p.Weights = []int{50, 100} }, "--traffic: 2 weights for 3 steps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := trafficPlanOptions()
			c.edit(o.Traffic)
			_, err := BuildPlan(testCloneSet("app"), o)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error = %v, want it to start with %q", err, c.want)
			}
		})
	}
}

// TestValidatePlanTraffic: what the CRD refuses in traffic routing is
// refused before it is printed, with the CRD's message naming the field.
func TestValidatePlanTraffic(t *testing.T) {
	cases := []struct {
		name string
		edit func(*PlanOptions)
		want string
	}{
		{"header name not a token", func(o *PlanOptions) {
			o.Traffic.Matches = []stepwisev1.TrafficMatch{{Header: &stepwisev1.StringMatch{Name: "x canary", Value: "1"}}}
		}, "spec.steps[].matches[].header.name and queryParam.name must be HTTP tokens"},
		{"stable service not a name", func(o *PlanOptions) { o.Traffic.StableService = "Web" },
			"spec.trafficRouting.stableService must be a Service name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := trafficPlanOptions()
			c.edit(&o)
			r, err := BuildPlan(testCloneSet("app"), o)
			if err != nil {
				t.Fatal(err)
			}
			err = ValidatePlan(context.Background(), r)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}
