package traffic

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/gitmanifests"
)

// The scenes below are one Rollout, shop/web, over Services shop/web and
// shop/web-canary, with route web in namespace edge (a platform team's)
// unless a scene says otherwise.

func sceneRollout(routeNS string, create bool) *v1alpha1.Rollout {
	ro := &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "ro-uid"}}
	ro.Spec.TrafficRouting = &v1alpha1.TrafficRouting{
		StableService: "web",
		CanaryService: v1alpha1.CanaryService{Name: "web-canary", Create: create},
		HTTPRoutes:    []v1alpha1.HTTPRouteReference{{Name: "web", Namespace: routeNS}},
	}
	return ro
}

func sceneTarget(ro *v1alpha1.Rollout, written *v1alpha1.TrafficWritten) Target {
	return Target{Rollout: ro, LabelKey: v1alpha1.RevisionHashLabel, LabelValue: v1alpha1.RevisionHash, Written: written}
}

// sceneRoute is git's route web in ns, its app rule sending to Service
// shop/web (named with its namespace when ns is not shop), and backends
// refs instead when given.
func sceneRoute(ns string, refs ...gatewayv1.HTTPBackendRef) *gatewayv1.HTTPRoute {
	r := gitmanifests.Route(ns)
	r.ResourceVersion = "7"
	if ns != "shop" {
		r.Spec.Rules[1].BackendRefs[0].Namespace = ptr.To(gatewayv1.Namespace("shop"))
	}
	if len(refs) > 0 {
		r.Spec.Rules[1].BackendRefs = refs
	}
	return r
}

// ref is a backendRef to Service ns/name (no namespace when ns is "") with
// weight w (none when w < 0).
func ref(ns, name string, w int32) gatewayv1.HTTPBackendRef {
	b := backend(name, 80)
	if ns != "" {
		b.Namespace = ptr.To(gatewayv1.Namespace(ns))
	}
	if w >= 0 {
		b.Weight = ptr.To(w)
	}
	return b
}

// managedBy marks obj's spec.selector (a Service) or spec.rules (a route)
// as written by manager.
func managedBy(obj client.Object, manager, field string) {
	obj.SetManagedFields(append(obj.GetManagedFields(), metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:` + field + `":{}}}`),
	}))
}

func sceneService(name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
}

func consent(rolloutNS string, routes ...string) gatewayv1.ReferenceGrant {
	from := gatewayv1.ReferenceGrantFrom{Group: gatewayv1.Group(v1alpha1.GroupVersion.Group), Kind: "Rollout", Namespace: gatewayv1.Namespace(rolloutNS)}
	var to []gatewayv1.ReferenceGrantTo
	for _, r := range routes {
		t := gatewayv1.ReferenceGrantTo{Group: gatewayv1.GroupName, Kind: "HTTPRoute"}
		if r != "" {
			t.Name = ptr.To(gatewayv1.ObjectName(r))
		}
		to = append(to, t)
	}
	return grant(from, to...)
}

var routesFromEdge = grant(gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "edge"}, gatewayv1.ReferenceGrantTo{Kind: "Service"})

// world builds what a round reads: git's Services (the canary one from
// git unless canary is given), the routes by namespace/name, and grants.
func world(stable, canary *corev1.Service, routes map[string]RouteView, serviceGrants []gatewayv1.ReferenceGrant, routeGrants map[string][]gatewayv1.ReferenceGrant) *World {
	w := &World{Services: map[string]*corev1.Service{"web": stable, "web-canary": canary}, Routes: map[types.NamespacedName]RouteView{},
		Gateways: map[client.ObjectKey]bool{}, ServiceGrants: serviceGrants, RouteGrants: routeGrants}
	for k, v := range routes {
		ns, name, _ := strings.Cut(k, "/")
		w.Routes[types.NamespacedName{Namespace: ns, Name: name}] = v
	}
	return w
}

func appliedRules(t *testing.T, out Outcome, key string) []gatewayv1.HTTPRouteRule {
	t.Helper()
	for _, w := range out.Writes {
		if w.Op == ApplyRules && w.Object.GetNamespace()+"/"+w.Object.GetName() == key {
			var spec gatewayv1.HTTPRouteSpec
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(w.Object.(*unstructured.Unstructured).Object["spec"].(map[string]any), &spec); err != nil {
				t.Fatal(err)
			}
			if w.Object.GetResourceVersion() == "" {
				t.Fatalf("the rules of %s are applied without the resourceVersion they were computed from", key)
			}
			return spec.Rules
		}
	}
	return nil
}

func hasProblem(out Outcome, reason string, parts ...string) bool {
	for _, p := range out.Problems {
		if p.Reason != reason {
			continue
		}
		all := true
		for _, part := range parts {
			all = all && strings.Contains(p.Message, part)
		}
		if all {
			return true
		}
	}
	return false
}

func writesTo(out Outcome, ns, name string) []Write {
	var ws []Write
	for _, w := range out.Writes {
		if w.Object.GetNamespace() == ns && w.Object.GetName() == name {
			ws = append(ws, w)
		}
	}
	return ws
}

var step50 = Plan{CanaryWeight: 50, StableSelects: "web-aaa", CanarySelects: "web-bbb"}

func TestChangesNeedTheRouteOwnersConsent(t *testing.T) {
	gitCanary := sceneService("web-canary", map[string]string{"app": "web"})
	stable := sceneService("web", map[string]string{"app": "web"})
	route := sceneRoute("edge")
	routes := map[string]RouteView{"edge/web": {Route: route}}

	t.Run("without it nothing is written into the route, and the problem names the grant", func(t *testing.T) {
		out := Changes(world(stable, gitCanary, routes, []gatewayv1.ReferenceGrant{routesFromEdge}, nil), sceneTarget(sceneRollout("edge", false), nil), step50)
		if ws := writesTo(out, "edge", "web"); len(ws) > 0 {
			t.Fatalf("wrote into a route whose owner did not consent: %+v", ws)
		}
		if !hasProblem(out, v1alpha1.ReasonReferenceGrantMissing, "HTTPRoute edge/web", "ReferenceGrant in namespace edge", "kind: Rollout, namespace: shop", "kind: HTTPRoute, name: web") {
			t.Fatalf("problems = %+v", out.Problems)
		}
		if out.Reached || out.Written != nil && len(out.Written.Routes) > 0 {
			t.Fatalf("reached %v, record %+v", out.Reached, out.Written)
		}
	})
	t.Run("the grant for the Services alone is not the route owner's consent", func(t *testing.T) {
		// The tenant writes grants in its own namespace: it cannot consent
		// for the route's.
		out := Changes(world(stable, gitCanary, routes, []gatewayv1.ReferenceGrant{routesFromEdge, consent("shop", "")}, nil), sceneTarget(sceneRollout("edge", false), nil), step50)
		if len(writesTo(out, "edge", "web")) > 0 || !hasProblem(out, v1alpha1.ReasonReferenceGrantMissing, "HTTPRoute edge/web") {
			t.Fatalf("writes %+v problems %+v", out.Writes, out.Problems)
		}
	})
	t.Run("with it and the Services' grant, the route gets the weight", func(t *testing.T) {
		out := Changes(world(stable, gitCanary, routes, []gatewayv1.ReferenceGrant{routesFromEdge}, map[string][]gatewayv1.ReferenceGrant{"edge": {consent("shop", "web")}}), sceneTarget(sceneRollout("edge", false), nil), step50)
		rules := appliedRules(t, out, "edge/web")
		if len(out.Problems) > 0 || len(rules) != 2 || len(rules[1].BackendRefs) != 2 || *rules[1].BackendRefs[1].Weight != 50 || string(*rules[1].BackendRefs[1].Namespace) != "shop" {
			t.Fatalf("problems %+v rules %+v", out.Problems, rules)
		}
		want := v1alpha1.WrittenRoute{Namespace: "edge", Name: "web", StableService: "web", CanaryService: "web-canary"}
		if out.Written == nil || len(out.Written.Routes) != 1 || out.Written.Routes[0] != want {
			t.Fatalf("record = %+v, want %+v before the write", out.Written, want)
		}
	})
	t.Run("consent for another Rollout namespace or another route does not count", func(t *testing.T) {
		out := Changes(world(stable, gitCanary, routes, []gatewayv1.ReferenceGrant{routesFromEdge}, map[string][]gatewayv1.ReferenceGrant{"edge": {consent("other", ""), consent("shop", "api")}}), sceneTarget(sceneRollout("edge", false), nil), step50)
		if len(writesTo(out, "edge", "web")) > 0 {
			t.Fatal("wrote with a consent given to someone else")
		}
	})
	t.Run("the owner's consent without the Services' grant: both checked, the missing one named", func(t *testing.T) {
		out := Changes(world(stable, gitCanary, routes, nil, map[string][]gatewayv1.ReferenceGrant{"edge": {consent("shop", "")}}), sceneTarget(sceneRollout("edge", false), nil), step50)
		if len(writesTo(out, "edge", "web")) > 0 || !hasProblem(out, v1alpha1.ReasonReferenceGrantMissing, "may not send to Service web, web-canary", "no ReferenceGrant in namespace shop") ||
			hasProblem(out, v1alpha1.ReasonReferenceGrantMissing, "has not consented") {
			t.Fatalf("writes %+v problems %+v", out.Writes, out.Problems)
		}
	})
	t.Run("a route the manager may not reach is reported, never written", func(t *testing.T) {
		unreachable := map[string]RouteView{"edge/web": {Err: errors.New("HTTPRoute edge/web is in namespace edge, which the manager does not watch")}}
		out := Changes(world(stable, gitCanary, unreachable, []gatewayv1.ReferenceGrant{routesFromEdge}, nil), sceneTarget(sceneRollout("edge", false), nil), step50)
		if len(writesTo(out, "edge", "web")) > 0 || !hasProblem(out, v1alpha1.ReasonTrafficNotPermitted, "does not watch") || out.Reached {
			t.Fatalf("writes %+v problems %+v", out.Writes, out.Problems)
		}
	})
	t.Run("a consent by name does not cover Stepwise's route beside it", func(t *testing.T) {
		plan := step50
		plan.Matches = []v1alpha1.TrafficMatch{{Header: &v1alpha1.StringMatch{Name: "x-canary", Value: "1"}}}
		out := Changes(world(stable, gitCanary, routes, []gatewayv1.ReferenceGrant{routesFromEdge}, map[string][]gatewayv1.ReferenceGrant{"edge": {consent("shop", "web")}}), sceneTarget(sceneRollout("edge", false), nil), plan)
		if len(writesTo(out, "edge", "web-stepwise-canary")) > 0 || !hasProblem(out, v1alpha1.ReasonReferenceGrantMissing, "HTTPRoute edge/web-stepwise-canary") {
			t.Fatalf("writes %+v problems %+v", out.Writes, out.Problems)
		}
		out = Changes(world(stable, gitCanary, routes, []gatewayv1.ReferenceGrant{routesFromEdge}, map[string][]gatewayv1.ReferenceGrant{"edge": {consent("shop", "web", "web-stepwise-canary")}}), sceneTarget(sceneRollout("edge", false), nil), plan)
		if ws := writesTo(out, "edge", "web-stepwise-canary"); len(out.Problems) > 0 || len(ws) != 1 || ws[0].Op != Create || !CreatedFor(ws[0].Object, sceneRollout("edge", false)) {
			t.Fatalf("writes %+v problems %+v", ws, out.Problems)
		}
	})
}

func TestChangesTakeOutExactlyWhatWasWritten(t *testing.T) {
	stable := sceneService("web", map[string]string{"app": "web", v1alpha1.RevisionHashLabel: "aaa"})
	managedBy(stable, FieldManager, "selector")
	gitCanary := sceneService("web-canary", map[string]string{"app": "web", v1alpha1.RevisionHashLabel: "bbb"})
	managedBy(gitCanary, FieldManager, "selector")
	written := &v1alpha1.TrafficWritten{SelectorKey: v1alpha1.RevisionHashLabel, Services: []string{"web", "web-canary"},
		Routes: []v1alpha1.WrittenRoute{{Namespace: "edge", Name: "web", StableService: "web", CanaryService: "web-canary"}}}
	shifted := sceneRoute("edge", ref("shop", "web", 50), ref("shop", "web-canary", 50))
	git := sceneRoute("edge").Spec.Rules

	t.Run("consent withdrawn mid-release: the weights come out, nothing is added", func(t *testing.T) {
		routes := map[string]RouteView{"edge/web": {Route: shifted}}
		out := Changes(world(stable, gitCanary, routes, []gatewayv1.ReferenceGrant{routesFromEdge}, nil), sceneTarget(sceneRollout("edge", false), written), step50)
		if rules := appliedRules(t, out, "edge/web"); !equality.Semantic.DeepEqual(rules, git) {
			t.Fatalf("rules = %+v, want git's %+v", rules, git)
		}
		if !hasProblem(out, v1alpha1.ReasonReferenceGrantMissing, "HTTPRoute edge/web") || out.Written == nil || len(out.Written.Routes) != 1 {
			t.Fatalf("problems %+v; the record must stay until the route is seen clean: %+v", out.Problems, out.Written)
		}
		// Once the route is git's again, the record lets go of it.
		routes["edge/web"] = RouteView{Route: sceneRoute("edge")}
		out = Changes(world(stable, gitCanary, routes, []gatewayv1.ReferenceGrant{routesFromEdge}, nil), sceneTarget(sceneRollout("edge", false), written), step50)
		if len(writesTo(out, "edge", "web")) > 0 || out.Written != nil && len(out.Written.Routes) > 0 {
			t.Fatalf("writes %+v record %+v", out.Writes, out.Written)
		}
	})
	t.Run("the canary Service renamed mid-release: the old backend goes with the new weights", func(t *testing.T) {
		ro := sceneRollout("edge", false)
		ro.Spec.TrafficRouting.CanaryService.Name = "web-canary2"
		canary2 := sceneService("web-canary2", map[string]string{"app": "web"})
		w := world(stable, gitCanary, map[string]RouteView{"edge/web": {Route: shifted}}, []gatewayv1.ReferenceGrant{routesFromEdge}, map[string][]gatewayv1.ReferenceGrant{"edge": {consent("shop", "")}})
		w.Services["web-canary2"] = canary2
		out := Changes(w, sceneTarget(ro, written), step50)
		rules := appliedRules(t, out, "edge/web")
		if len(out.Problems) > 0 || len(rules) != 2 || len(rules[1].BackendRefs) != 2 || rules[1].BackendRefs[1].Name != "web-canary2" {
			t.Fatalf("problems %+v rules %+v", out.Problems, rules)
		}
		if out.Written == nil || len(out.Written.Routes) != 2 {
			t.Fatalf("the record must hold the old backend until it is seen gone, and the new one: %+v", out.Written)
		}
		// The old canary Service gets git's selector back: it is no longer
		// the spec's, but the record says its key is Stepwise's.
		if ws := writesTo(out, "shop", "web-canary"); len(ws) != 2 || ws[0].Op != ApplySelector || ws[1].Op != ReleaseSelector {
			t.Fatalf("writes to the old canary Service = %+v", ws)
		}
	})
	t.Run("a release takes out what the record names, whatever the spec", func(t *testing.T) {
		ro := sceneRollout("other", false) // the spec moved on; the record did not
		mine := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: "web-stepwise-canary", UID: "c", ResourceVersion: "3",
			Annotations: map[string]string{v1alpha1.CreatedByAnnotation: "shop/web"}}}
		// Another Rollout's key on a Service this Rollout never wrote.
		otherSvc := sceneService("api", map[string]string{"app": "api", v1alpha1.RevisionHashLabel: "ccc"})
		managedBy(otherSvc, FieldManager, "selector")
		w := world(stable, gitCanary, map[string]RouteView{"edge/web": {Route: shifted, Canary: mine}}, nil, nil)
		w.Services["api"] = otherSvc
		target := sceneTarget(ro, written)
		target.Release = true
		out := Changes(w, target, Plan{})
		if rules := appliedRules(t, out, "edge/web"); !equality.Semantic.DeepEqual(rules, git) {
			t.Fatalf("rules = %+v, want git's", rules)
		}
		if ws := writesTo(out, "edge", "web-stepwise-canary"); len(ws) != 1 || ws[0].Op != Delete {
			t.Fatalf("Stepwise's route beside it: %+v", ws)
		}
		for _, svc := range []string{"web", "web-canary"} {
			ws := writesTo(out, "shop", svc)
			if len(ws) == 0 || ws[0].Op != ApplySelector {
				t.Fatalf("Service %s: %+v", svc, ws)
			}
			if sel := ws[0].Object.(*unstructured.Unstructured).Object["spec"].(map[string]any)["selector"].(map[string]any); sel[v1alpha1.RevisionHashLabel] != nil {
				t.Fatalf("Service %s keeps the revision key: %v", svc, sel)
			}
		}
		if len(writesTo(out, "shop", "api")) > 0 || len(out.Problems) > 0 {
			t.Fatalf("touched Service api, which it never wrote (%+v), or problems %+v", writesTo(out, "shop", "api"), out.Problems)
		}
		for _, w := range out.Writes {
			if w.Op == Create || w.Op == Apply {
				t.Fatalf("a release created or applied %s", w.What)
			}
		}
	})
	t.Run("a Rollout with no record (refused as a duplicate) releases nothing", func(t *testing.T) {
		target := sceneTarget(sceneRollout("edge", true), nil)
		target.Release = true
		w := world(stable, gitCanary, map[string]RouteView{"edge/web": {Route: shifted}}, nil, nil)
		if out := Changes(w, target, Plan{}); len(out.Writes) > 0 || out.Written != nil {
			t.Fatalf("writes %+v record %+v", out.Writes, out.Written)
		}
	})
	t.Run("at rest, a Service key the record does not name stays", func(t *testing.T) {
		// Another Rollout's release under the same field manager.
		routes := map[string]RouteView{"shop/web": {Route: sceneRoute("shop")}}
		out := Changes(world(stable, gitCanary, routes, nil, nil), sceneTarget(sceneRollout("", false), nil), Plan{})
		if len(out.Writes) > 0 {
			t.Fatalf("wrote %+v", out.Writes)
		}
	})
}

func TestChangesNeverTakeOverWhatOthersMade(t *testing.T) {
	stable := sceneService("web", map[string]string{"app": "web"})
	routes := map[string]RouteView{"shop/web": {Route: sceneRoute("shop")}}
	ro := sceneRollout("", true)

	t.Run("an existing Service named as the canary to create is refused and left alone", func(t *testing.T) {
		theirs := sceneService("web-canary", map[string]string{"app": "other"})
		out := Changes(world(stable, theirs, routes, nil, nil), sceneTarget(ro, nil), step50)
		if len(writesTo(out, "shop", "web-canary")) > 0 || !hasProblem(out, v1alpha1.ReasonObjectNotOwned, "Service shop/web-canary", "did not create") {
			t.Fatalf("writes %+v problems %+v", writesTo(out, "shop", "web-canary"), out.Problems)
		}
	})
	t.Run("an absent canary Service is created, marked and owned", func(t *testing.T) {
		out := Changes(world(stable, nil, routes, nil, nil), sceneTarget(ro, nil), step50)
		ws := writesTo(out, "shop", "web-canary")
		if len(ws) != 1 || ws[0].Op != Create || !CreatedFor(ws[0].Object, ro) || !metav1.IsControlledBy(ws[0].Object, ro) || out.ServicesReady {
			t.Fatalf("writes %+v, services ready %v", ws, out.ServicesReady)
		}
	})
	t.Run("the canary Service Stepwise created is kept in step", func(t *testing.T) {
		mine := sceneService("web-canary", map[string]string{"app": "web"})
		mine.Annotations = map[string]string{v1alpha1.CreatedByAnnotation: "shop/web"}
		out := Changes(world(stable, mine, routes, nil, nil), sceneTarget(ro, nil), step50)
		if ws := writesTo(out, "shop", "web-canary"); len(ws) != 1 || ws[0].Op != Apply || len(out.Problems) > 0 {
			t.Fatalf("writes %+v problems %+v", ws, out.Problems)
		}
	})
	t.Run("a route named like Stepwise's canary route that someone else made", func(t *testing.T) {
		theirs := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-stepwise-canary"}}
		w := world(stable, nil, map[string]RouteView{"shop/web": {Route: sceneRoute("shop"), Canary: theirs}}, nil, nil)
		plan := step50
		plan.Matches = []v1alpha1.TrafficMatch{{Header: &v1alpha1.StringMatch{Name: "x-canary", Value: "1"}}}
		out := Changes(w, sceneTarget(ro, nil), plan)
		if len(writesTo(out, "shop", "web-stepwise-canary")) > 0 || !hasProblem(out, v1alpha1.ReasonObjectNotOwned, "HTTPRoute shop/web-stepwise-canary") {
			t.Fatalf("writes %+v problems %+v", out.Writes, out.Problems)
		}
		// Without matches it is not Stepwise's to delete.
		if out := Changes(w, sceneTarget(ro, nil), step50); len(writesTo(out, "shop", "web-stepwise-canary")) > 0 {
			t.Fatalf("deleted someone else's route: %+v", out.Writes)
		}
	})
	t.Run("a backend of the same name in another namespace is someone else's", func(t *testing.T) {
		// Route edge/web sends to edge's own Service web: not the Rollout's.
		w := world(stable, nil, map[string]RouteView{"edge/web": {Route: sceneRoute("edge", ref("", "web", -1))}}, []gatewayv1.ReferenceGrant{routesFromEdge},
			map[string][]gatewayv1.ReferenceGrant{"edge": {consent("shop", "")}})
		out := Changes(w, sceneTarget(sceneRollout("edge", true), nil), step50)
		if len(writesTo(out, "edge", "web")) > 0 || !hasProblem(out, v1alpha1.ReasonInvalidSpec, "no rule that sends to Service shop/web") {
			t.Fatalf("writes %+v problems %+v", out.Writes, out.Problems)
		}
	})
	t.Run("a rule shared with another team's Service is refused, not reweighted", func(t *testing.T) {
		w := world(stable, nil, map[string]RouteView{"edge/web": {Route: sceneRoute("edge", ref("shop", "web", 50), ref("team-b", "web-canary", 50))}},
			[]gatewayv1.ReferenceGrant{routesFromEdge}, map[string][]gatewayv1.ReferenceGrant{"edge": {consent("shop", "")}})
		out := Changes(w, sceneTarget(sceneRollout("edge", true), nil), step50)
		if len(writesTo(out, "edge", "web")) > 0 || !hasProblem(out, v1alpha1.ReasonInvalidSpec, "also sends to Service team-b/web-canary") {
			t.Fatalf("writes %+v problems %+v", out.Writes, out.Problems)
		}
	})
}

// Whatever a round writes into an object it does not own is on the
// record that the status stores before the write.
func TestChangesRecordBeforeTheyWrite(t *testing.T) {
	stable := sceneService("web", map[string]string{"app": "web"})
	gitCanary := sceneService("web-canary", map[string]string{"app": "web"})
	for _, plan := range []Plan{step50, {CanaryWeight: 0, StableSelects: "web-aaa", CanarySelects: "web-bbb",
		Matches: []v1alpha1.TrafficMatch{{Header: &v1alpha1.StringMatch{Name: "x", Value: "1"}}}}} {
		out := Changes(world(stable, gitCanary, map[string]RouteView{"shop/web": {Route: sceneRoute("shop")}}, nil, nil), sceneTarget(sceneRollout("", false), nil), plan)
		if out.Written == nil {
			t.Fatalf("plan %+v: nothing recorded for writes %+v", plan, out.Writes)
		}
		for _, w := range out.Writes {
			switch w.Op {
			case ApplySelector:
				if !contains(out.Written.Services, w.Object.GetName()) {
					t.Errorf("Service %s written, not recorded", w.Object.GetName())
				}
			case ApplyRules, Create:
				found := false
				for _, r := range out.Written.Routes {
					found = found || r.Namespace == w.Object.GetNamespace() && (r.Name == w.Object.GetName() || CanaryRouteName(r.Name) == w.Object.GetName())
				}
				if !found {
					t.Errorf("%s written, not recorded in %+v", w.What, out.Written.Routes)
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
