package traffic

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/gitmanifests"
)

func backend(name string, port int32) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(name), Port: ptr.To(gatewayv1.PortNumber(port)),
	}}}
}

// userRoute is what a team commits: a redirect rule of its own, and the
// app's rule with a path match and a header filter, sending to Service web.
func userRoute() *gatewayv1.HTTPRoute { return gitmanifests.Route("shop") }

// web and webCanary are the Rollout's Services, in namespace shop.
var web, webCanary = Backend{"shop", "web"}, Backend{"shop", "web-canary"}

func TestSelectRule(t *testing.T) {
	route := userRoute()
	cases := []struct {
		name string
		ref  v1alpha1.HTTPRouteReference
		want int
		err  string
	}{
		{"the only rule that sends to the stable Service", v1alpha1.HTTPRouteReference{Name: "web"}, 1, ""},
		{"by name", v1alpha1.HTTPRouteReference{Name: "web", RuleName: "legacy"}, 0, ""},
		{"by index", v1alpha1.HTTPRouteReference{Name: "web", RuleIndex: ptr.To[int32](1)}, 1, ""},
		{"index out of range", v1alpha1.HTTPRouteReference{Name: "web", RuleIndex: ptr.To[int32](2)}, 0, "has 2 rules, no ruleIndex 2"},
		{"unknown name", v1alpha1.HTTPRouteReference{Name: "web", RuleName: "api"}, 0, `no rule named "api"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SelectRule(route, tc.ref, web)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("SelectRule = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	two := userRoute()
	two.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{backend("web", 80)}
	if _, err := SelectRule(two, v1alpha1.HTTPRouteReference{Name: "web"}, web); err == nil || !strings.Contains(err.Error(), "set ruleIndex or ruleName") {
		t.Fatalf("two candidate rules: err = %v", err)
	}
}

func TestWeightedRules(t *testing.T) {
	route := userRoute()
	orig := userRoute()
	shifted, err := WeightedRules(route.Spec.Rules, "shop", 1, web, webCanary, 20)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(route, orig) {
		t.Fatal("WeightedRules changed its input")
	}
	if !equality.Semantic.DeepEqual(shifted[0], orig.Spec.Rules[0]) {
		t.Fatal("the user's other rule changed")
	}
	app := shifted[1]
	if !equality.Semantic.DeepEqual(app.Filters, orig.Spec.Rules[1].Filters) || !equality.Semantic.DeepEqual(app.Matches, orig.Spec.Rules[1].Matches) {
		t.Fatal("the rule's filters or matches changed")
	}
	if len(app.BackendRefs) != 2 || app.BackendRefs[0].Name != "web" || *app.BackendRefs[0].Weight != 80 ||
		app.BackendRefs[1].Name != "web-canary" || *app.BackendRefs[1].Weight != 20 || *app.BackendRefs[1].Port != 80 {
		t.Fatalf("backendRefs = %+v", app.BackendRefs)
	}
	if got := CanaryWeightOf(shifted, "shop", 1, webCanary); got != 20 {
		t.Fatalf("CanaryWeightOf = %d, want 20", got)
	}

	// Shifting again from the shifted rules, then back to 0: the rule is
	// as git wrote it.
	again, err := WeightedRules(shifted, "shop", 1, web, webCanary, 100)
	if err != nil || *again[1].BackendRefs[0].Weight != 0 || *again[1].BackendRefs[1].Weight != 100 {
		t.Fatalf("at 100: %+v, %v", again[1].BackendRefs, err)
	}
	back, err := WeightedRules(again, "shop", 1, web, webCanary, 0)
	if err != nil || !equality.Semantic.DeepEqual(back, orig.Spec.Rules) {
		t.Fatalf("at 0 the rules are not git's again: %+v, %v", back, err)
	}
	if got := CanaryWeightOf(back, "shop", 1, webCanary); got != 0 {
		t.Fatalf("CanaryWeightOf = %d, want 0", got)
	}

	foreign := userRoute()
	foreign.Spec.Rules[1].BackendRefs = append(foreign.Spec.Rules[1].BackendRefs, backend("other", 80))
	if _, err := WeightedRules(foreign.Spec.Rules, "shop", 1, web, webCanary, 10); err == nil || !strings.Contains(err.Error(), "also sends to Service other") {
		t.Fatalf("foreign backend: err = %v", err)
	}
	if _, err := WeightedRules(route.Spec.Rules, "shop", 0, web, webCanary, 10); err == nil {
		t.Fatal("a rule without the stable Service was accepted")
	}
}

func TestCanaryRoute(t *testing.T) {
	user := userRoute()
	if r, err := CanaryRoute(user, 1, web, webCanary, nil); r != nil || err != nil {
		t.Fatalf("no matches: %v, %v; want no route", r, err)
	}
	header := v1alpha1.TrafficMatch{Header: &v1alpha1.StringMatch{Name: "x-canary", Value: "1"}}
	query := v1alpha1.TrafficMatch{QueryParam: &v1alpha1.StringMatch{Name: "canary", Value: "^y", Type: v1alpha1.StringMatchRegularExpression}}
	r, err := CanaryRoute(user, 1, web, webCanary, []v1alpha1.TrafficMatch{header, query})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "web-stepwise-canary" || r.Namespace != "shop" || !equality.Semantic.DeepEqual(r.Spec.ParentRefs, user.Spec.ParentRefs) || !equality.Semantic.DeepEqual(r.Spec.Hostnames, user.Spec.Hostnames) {
		t.Fatalf("route %s/%s parents %v hostnames %v", r.Namespace, r.Name, r.Spec.ParentRefs, r.Spec.Hostnames)
	}
	rule := r.Spec.Rules[0]
	if len(rule.Matches) != 2 || *rule.Matches[0].Path.Value != "/" || rule.Matches[0].Headers[0].Name != "x-canary" || *rule.Matches[0].Headers[0].Type != gatewayv1.HeaderMatchExact ||
		rule.Matches[1].QueryParams[0].Name != "canary" || *rule.Matches[1].QueryParams[0].Type != gatewayv1.QueryParamMatchRegularExpression || *rule.Matches[1].Path.Value != "/" {
		t.Fatalf("matches = %+v", rule.Matches)
	}
	if !equality.Semantic.DeepEqual(rule.Filters, user.Spec.Rules[1].Filters) {
		t.Fatal("the user's filters were not copied")
	}
	if len(rule.BackendRefs) != 1 || rule.BackendRefs[0].Name != "web-canary" || rule.BackendRefs[0].Weight != nil || *rule.BackendRefs[0].Port != 80 {
		t.Fatalf("backendRefs = %+v", rule.BackendRefs)
	}
	if !equality.Semantic.DeepEqual(user, userRoute()) {
		t.Fatal("CanaryRoute changed the user's route")
	}
	if got := CanaryRouteName(strings.Repeat("a", 253)); len(got) != 253 || !strings.HasSuffix(got, "-stepwise-canary") {
		t.Fatalf("long name = %d chars", len(got))
	}
}
