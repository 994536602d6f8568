package rollout_test

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// The CRD refuses bad traffic routing with a message naming the field,
// before any controller sees it.
func TestTrafficRoutingValidationNamesTheField(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	routing := func() *stepwisev1.TrafficRouting {
		return &stepwisev1.TrafficRouting{
			StableService: "web",
			CanaryService: stepwisev1.CanaryService{Name: "web-canary", Create: true},
			HTTPRoutes:    []stepwisev1.HTTPRouteReference{{Name: "web"}},
		}
	}
	withRouting := func(mutate func(*stepwisev1.TrafficRouting)) func(*stepwisev1.Rollout) {
		return func(ro *stepwisev1.Rollout) {
			ro.Spec.TrafficRouting = routing()
			mutate(ro.Spec.TrafficRouting)
		}
	}
	steps := func(tr *stepwisev1.TrafficRouting, s ...stepwisev1.RolloutStep) func(*stepwisev1.Rollout) {
		return func(ro *stepwisev1.Rollout) { ro.Spec.TrafficRouting, ro.Spec.Steps = tr, s }
	}
	traffic := func(w int32, matches ...stepwisev1.TrafficMatch) stepOpt {
		return func(s *stepwisev1.RolloutStep) { s.Traffic, s.Matches = ptr.To(w), matches }
	}
	header := func(name, value string, typ stepwisev1.StringMatchType) stepwisev1.TrafficMatch {
		return stepwisev1.TrafficMatch{Header: &stepwisev1.StringMatch{Name: name, Value: value, Type: typ}}
	}
	cases := []struct {
		name   string
		mutate func(*stepwisev1.Rollout)
		want   string // empty: accepted
	}{
		{"traffic without trafficRouting", steps(nil, stepAt(pct("50%"), traffic(10)), stepAt(num(0))), "spec.steps[].traffic and spec.steps[].matches need spec.trafficRouting"},
		{"matches without trafficRouting", func(ro *stepwisev1.Rollout) {
			ro.Spec.Steps = []stepwisev1.RolloutStep{{Partition: pct("50%"), Matches: []stepwisev1.TrafficMatch{header("x-canary", "1", "")}}, stepAt(num(0))}
		}, "spec.steps[].traffic and spec.steps[].matches need spec.trafficRouting"},
		{"traffic above 100", steps(routing(), stepAt(pct("50%"), traffic(101)), stepAt(num(0))), "spec.steps[0].traffic: Invalid value"},
		{"negative traffic", steps(routing(), stepAt(pct("50%"), traffic(-1)), stepAt(num(0))), "spec.steps[0].traffic: Invalid value"},
		{"last step short of 100", steps(routing(), stepAt(pct("50%"), traffic(10)), stepAt(num(0), traffic(90))), "spec.steps: the last step's traffic must be 100"},
		{"a match with header and query parameter", steps(routing(), stepAt(pct("50%"), traffic(0, stepwisev1.TrafficMatch{
			Header: &stepwisev1.StringMatch{Name: "x-canary", Value: "1"}, QueryParam: &stepwisev1.StringMatch{Name: "canary", Value: "1"},
		})), stepAt(num(0))), "spec.steps[].matches[] must set exactly one of header and queryParam"},
		{"an empty match", steps(routing(), stepAt(pct("50%"), traffic(0, stepwisev1.TrafficMatch{})), stepAt(num(0))), "spec.steps[].matches[] must set exactly one of header and queryParam"},
		{"a header name with a colon", steps(routing(), stepAt(pct("50%"), traffic(0, header("x-canary:", "1", ""))), stepAt(num(0))), "spec.steps[].matches[].header.name and queryParam.name must be HTTP tokens"},
		{"an unknown match type", steps(routing(), stepAt(pct("50%"), traffic(0, header("x-canary", "1", "Prefix"))), stepAt(num(0))), "spec.steps[0].matches[0].header.type: Unsupported value"},
		{"same Service twice", withRouting(func(tr *stepwisev1.TrafficRouting) { tr.CanaryService.Name = "web" }), "spec.trafficRouting.canaryService.name must differ from spec.trafficRouting.stableService"},
		{"a stable Service name with a dot", withRouting(func(tr *stepwisev1.TrafficRouting) { tr.StableService = "web.shop" }), "spec.trafficRouting.stableService must be a Service name"},
		{"a canary Service name in capitals", withRouting(func(tr *stepwisev1.TrafficRouting) { tr.CanaryService.Name = "Web" }), "spec.trafficRouting.canaryService.name must be a Service name"},
		{"no route", withRouting(func(tr *stepwisev1.TrafficRouting) { tr.HTTPRoutes = nil }), "spec.trafficRouting.httpRoutes: Required value"},
		{"a route name with a slash", withRouting(func(tr *stepwisev1.TrafficRouting) { tr.HTTPRoutes[0].Name = "shop/web" }), "spec.trafficRouting.httpRoutes[].name must be an object name"},
		{"a route namespace with a dot", withRouting(func(tr *stepwisev1.TrafficRouting) { tr.HTTPRoutes[0].Namespace = "a.b" }), "spec.trafficRouting.httpRoutes[].namespace must be a namespace name"},
		{"rule index and name", withRouting(func(tr *stepwisev1.TrafficRouting) {
			tr.HTTPRoutes[0].RuleIndex, tr.HTTPRoutes[0].RuleName = ptr.To[int32](0), "api"
		}), "spec.trafficRouting.httpRoutes[]: set ruleIndex or ruleName, not both"},
		{"a negative rule index", withRouting(func(tr *stepwisev1.TrafficRouting) { tr.HTTPRoutes[0].RuleIndex = ptr.To[int32](-1) }), "spec.trafficRouting.httpRoutes[0].ruleIndex: Invalid value"},
		{"routing without weights is accepted", withRouting(func(*stepwisev1.TrafficRouting) {}), ""},
		{"the same route name in two namespaces is accepted", withRouting(func(tr *stepwisev1.TrafficRouting) {
			tr.HTTPRoutes = []stepwisev1.HTTPRouteReference{{Name: "web"}, {Name: "web", Namespace: "edge", RuleName: "api"}}
		}), ""},
		{"weights, a header, a cookie and a query parameter are accepted", steps(routing(),
			stepAt(pct("90%"), traffic(0, header("x-canary", "always", stepwisev1.StringMatchExact))),
			stepAt(pct("50%"), traffic(20, header("Cookie", "(^|; )canary=1(;|$)", stepwisev1.StringMatchRegularExpression),
				stepwisev1.TrafficMatch{QueryParam: &stepwisev1.StringMatch{Name: "canary", Value: "1"}})),
			stepAt(num(0), traffic(100))), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ro := newRollout(ns, "invalid", cloneSetRef("web"), stepAt(num(0)))
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
