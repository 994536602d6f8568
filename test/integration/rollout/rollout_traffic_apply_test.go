package rollout_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/traffic"
	"github.com/stepwise-dev/stepwise/internal/testsupport/gitmanifests"
)

// gitManager plays a GitOps tool applying the team's manifests.
const gitManager = "kustomize-controller"

// gitRoute and gitService are what a team commits (gitmanifests).
var gitRoute, gitService = gitmanifests.Route, gitmanifests.Service

// applyAs server-side applies obj whole as manager, with force, as Flux does.
func applyAs(t *testing.T, manager string, obj client.Object) {
	t.Helper()
	if err := gitmanifests.Apply(testContext(t), env.client, manager, obj, true); err != nil {
		t.Fatal(err)
	}
}

// applyGitWeb applies git's Service and route web to ns, as a GitOps tool
// does, and returns the route as the API server stores (defaults) it.
func applyGitWeb(t *testing.T, ns string) *gatewayv1.HTTPRoute {
	t.Helper()
	applyAs(t, gitManager, gitService(ns))
	applyAs(t, gitManager, gitRoute(ns))
	git := &gatewayv1.HTTPRoute{}
	mustGet(t, ns, "web", git)
	return git
}

// webRouting routes through route web (in routeNS; "" for the Rollout's
// namespace) from Service web to Service web-canary, which Stepwise creates.
func webRouting(routeNS string) *stepwisev1.TrafficRouting {
	return &stepwisev1.TrafficRouting{
		StableService: "web",
		CanaryService: stepwisev1.CanaryService{Name: "web-canary", Create: true},
		HTTPRoutes:    []stepwisev1.HTTPRouteReference{{Name: "web", Namespace: routeNS}},
	}
}

func trafficRollout(ns string) *stepwisev1.Rollout {
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), func(s *stepwisev1.RolloutStep) { s.Traffic = ptr.To[int32](20) }), stepAt(num(0)))
	ro.Spec.TrafficRouting = webRouting("")
	return ro
}

// trafficRound is one round of a Rollout's traffic as the reconciler runs
// it: read, decide, record (in target, as the status would be), write.
func trafficRound(t *testing.T, a *traffic.Applier, target *traffic.Target, plan traffic.Plan) traffic.Outcome {
	t.Helper()
	ctx := testContext(t)
	w, err := a.Observe(ctx, *target)
	if err != nil {
		t.Fatal(err)
	}
	out := traffic.Changes(w, *target, plan)
	target.Written = out.Written
	target.LastWeight, target.LastStable, target.LastCanary = plan.CanaryWeight, plan.StableSelects, plan.CanarySelects
	if err := a.Write(ctx, out.Writes); err != nil {
		t.Fatal(err)
	}
	return out
}

// settle runs rounds until one has nothing to write, and returns it.
func settle(t *testing.T, a *traffic.Applier, target *traffic.Target, plan traffic.Plan) traffic.Outcome {
	t.Helper()
	for range 5 {
		if out := trafficRound(t, a, target, plan); len(out.Writes) == 0 {
			return out
		}
	}
	t.Fatalf("plan %+v: still writing after 5 rounds", plan)
	return traffic.Outcome{}
}

// Stepwise sets weights in the user's rule and matches in a route of its
// own, keeps every other rule and filter of git's route, reports a git
// apply that takes the weights back as a conflict naming the manager,
// waits for a present Gateway to accept the route, and leaves the route as
// git wrote it once the rollout is over.
func TestTrafficApplierOwnsOnlyWhatItSets(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ns := newNamespace(t)
	git := applyGitWeb(t, ns)
	ro := trafficRollout(ns)
	createRollout(t, ro)

	a := &traffic.Applier{Client: env.client, Reader: env.client}
	target := &traffic.Target{Rollout: ro, LabelKey: stepwisev1.RevisionHashLabel, LabelValue: stepwisev1.RevisionHash}
	header := stepwisev1.TrafficMatch{Header: &stepwisev1.StringMatch{Name: "x-canary", Value: "1"}}
	shift := traffic.Plan{CanaryWeight: 20, Matches: []stepwisev1.TrafficMatch{header}, StableSelects: "web-aaa", CanarySelects: "web-bbb"}

	first := trafficRound(t, a, target, shift)
	if first.ServicesReady || first.Reached || len(first.Writes) == 0 {
		t.Fatalf("first round = %+v, want writes, Services not ready yet", first)
	}
	res := settle(t, a, target, shift)
	if res.Weight != 20 || !res.Reached || !res.Accepted || len(res.Conflicts) != 0 || len(res.Problems) != 0 {
		t.Fatalf("result = %+v, want weight 20 reached, accepted (no Gateway), no conflict", res)
	}
	stable := &corev1.Service{}
	mustGet(t, ns, "web", stable)
	if want := map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "aaa"}; !equality.Semantic.DeepEqual(stable.Spec.Selector, want) {
		t.Fatalf("stable selector = %v, want %v", stable.Spec.Selector, want)
	}
	canary := &corev1.Service{}
	mustGet(t, ns, "web-canary", canary)
	if want := map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "bbb"}; !equality.Semantic.DeepEqual(canary.Spec.Selector, want) {
		t.Fatalf("canary selector = %v, want %v", canary.Spec.Selector, want)
	}
	if len(canary.Spec.Ports) != 1 || canary.Spec.Ports[0].TargetPort != intstr.FromInt32(8080) || !metav1.IsControlledBy(canary, ro) || !traffic.CreatedFor(canary, ro) {
		t.Fatalf("canary Service ports %v owners %v annotations %v", canary.Spec.Ports, canary.OwnerReferences, canary.Annotations)
	}
	if want := map[string]string{"app": "web"}; !equality.Semantic.DeepEqual(canary.Labels, want) {
		t.Fatalf("canary Service labels = %v, want %v (no GitOps tracking label copied)", canary.Labels, want)
	}
	route := &gatewayv1.HTTPRoute{}
	mustGet(t, ns, "web", route)
	if !equality.Semantic.DeepEqual(route.Spec.Rules[0], git.Spec.Rules[0]) || !equality.Semantic.DeepEqual(route.Spec.Rules[1].Filters, git.Spec.Rules[1].Filters) ||
		!equality.Semantic.DeepEqual(route.Spec.ParentRefs, git.Spec.ParentRefs) || !equality.Semantic.DeepEqual(route.Spec.Hostnames, git.Spec.Hostnames) {
		t.Fatalf("git's rules, filters, parents or hostnames changed: %+v", route.Spec)
	}
	refs := route.Spec.Rules[1].BackendRefs
	if len(refs) != 2 || refs[0].Name != "web" || *refs[0].Weight != 80 || refs[1].Name != "web-canary" || *refs[1].Weight != 20 {
		t.Fatalf("backendRefs = %+v", refs)
	}
	matchRoute := &gatewayv1.HTTPRoute{}
	mustGet(t, ns, "web-stepwise-canary", matchRoute)
	if m := matchRoute.Spec.Rules[0].Matches; len(m) != 1 || len(m[0].Headers) != 1 || m[0].Headers[0].Name != "x-canary" || *m[0].Path.Value != "/" {
		t.Fatalf("canary route matches = %+v", m)
	}
	if !metav1.IsControlledBy(matchRoute, ro) || !traffic.CreatedFor(matchRoute, ro) || matchRoute.Spec.ParentRefs[0].Name != "edge" {
		t.Fatalf("canary route owners %v parents %v", matchRoute.OwnerReferences, matchRoute.Spec.ParentRefs)
	}
	if w := target.Written; w == nil || !slices.Equal(w.Services, []string{"web"}) || len(w.Routes) != 1 || w.Routes[0].CanaryService != "web-canary" {
		t.Fatalf("record = %+v, want Service web and route web", w)
	}

	// Steady: nothing to write, and five reads: the two Services, the
	// route, Stepwise's canary route, and their one parent Gateway (absent
	// here) once for both.
	counted := &countingReader{Reader: env.client}
	a.Reader = counted
	if res = trafficRound(t, a, target, shift); len(res.Writes) != 0 {
		t.Fatalf("a steady round wrote %+v", res.Writes)
	}
	if counted.gets != 5 {
		t.Fatalf("a steady round read %d objects, want 5", counted.gets)
	}
	a.Reader = env.client

	// Git applies its Service again mid-release (Argo CD's server-side
	// apply): the revision key is gone, and the next round names who took
	// it and puts it back.
	applyAs(t, "argocd-controller", gitService(ns))
	res = trafficRound(t, a, target, shift)
	if len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0], "Service "+ns+"/web: spec.selector") || !strings.Contains(res.Conflicts[0], "argocd-controller") || res.ServicesReady {
		t.Fatalf("after git's apply of the Service: %+v, want one conflict naming argocd-controller", res)
	}
	mustGet(t, ns, "web", stable)
	if want := map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "aaa"}; !equality.Semantic.DeepEqual(stable.Spec.Selector, want) {
		t.Fatalf("stable selector after git's apply and Stepwise's = %v, want %v", stable.Spec.Selector, want)
	}

	// Git applies its route again (Flux forces): the weights are gone, and
	// the next round names who took them.
	applyAs(t, gitManager, gitRoute(ns))
	res = trafficRound(t, a, target, shift)
	if len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0], gitManager) || !strings.Contains(res.Conflicts[0], "HTTPRoute "+ns+"/web") || res.Reached {
		t.Fatalf("after git's apply: %+v, want one conflict naming %s", res, gitManager)
	}
	if res = settle(t, a, target, shift); res.Weight != 20 {
		t.Fatalf("the weight is not back: %+v", res)
	}

	// A Gateway is present: the route waits for its status.
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: "test", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
	}}
	if err := env.client.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	if res = trafficRound(t, a, target, shift); res.Accepted || res.Reached || !strings.Contains(res.Waiting, "Gateway "+ns+"/edge") {
		t.Fatalf("with a Gateway and no route status: %+v; want not accepted", res)
	}
	for _, name := range []string{"web", "web-stepwise-canary"} {
		r := &gatewayv1.HTTPRoute{}
		mustGet(t, ns, name, r)
		r.Status.Parents = []gatewayv1.RouteParentStatus{{
			ParentRef: gatewayv1.ParentReference{Name: "edge"}, ControllerName: "example.com/gateway",
			Conditions: []metav1.Condition{{Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now()}},
		}}
		if err := env.client.Status().Update(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if res = trafficRound(t, a, target, shift); !res.Accepted || !res.Reached {
		t.Fatalf("with the Gateway's Accepted status: %+v", res)
	}

	// Promoted: the stable Service is git's again (it selects every Pod,
	// all on the new revision) and Stepwise no longer owns its selector,
	// the weights go, the canary route is deleted, and the route is git's
	// again; the record is empty.
	if res = settle(t, a, target, traffic.Plan{}); res.Weight != 0 || target.Written != nil {
		t.Fatalf("promoted: %+v, record %+v", res, target.Written)
	}
	mustGet(t, ns, "web", stable)
	if want := gitService(ns).Spec.Selector; !equality.Semantic.DeepEqual(stable.Spec.Selector, want) {
		t.Fatalf("stable selector at rest = %v, want git's %v", stable.Spec.Selector, want)
	}
	if owners := selectorOwners(stable); slices.Contains(owners, traffic.FieldManager) {
		t.Fatalf("at rest %s still owns the stable Service's selector (owners %v)", traffic.FieldManager, owners)
	}
	// Git's Service at rest applies without force and without a conflict.
	applyNoForce(t, gitManager, gitService(ns))
	mustGet(t, ns, "web", route)
	if !equality.Semantic.DeepEqual(route.Spec.Rules, git.Spec.Rules) {
		t.Fatalf("route after promotion is not git's: %+v", route.Spec.Rules)
	}
	if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-stepwise-canary"}, matchRoute); !apierrors.IsNotFound(err) {
		t.Fatalf("canary route still there: %v", err)
	}
	// Git's later applies of the same route are no conflict.
	applyAs(t, gitManager, gitRoute(ns))
	if res = trafficRound(t, a, target, traffic.Plan{}); len(res.Conflicts) != 0 || len(res.Writes) != 0 {
		t.Fatalf("git re-applying at rest: %+v", res)
	}
	mustGet(t, ns, "web", stable)
	if owners := selectorOwners(stable); !slices.Equal(owners, []string{gitManager}) {
		t.Fatalf("stable selector owners at rest = %v, want git's %s alone", owners, gitManager)
	}
}

// countingReader counts the objects read through it.
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// selectorOwners lists the managers that own a Service's spec.selector.
func selectorOwners(svc *corev1.Service) []string {
	var owners []string
	for _, e := range svc.ManagedFields {
		if e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), `"f:selector"`) {
			owners = append(owners, e.Manager)
		}
	}
	return owners
}

// applyNoForce server-side applies obj whole as manager without force, as
// kubectl apply --server-side does: it fails on a conflict.
func applyNoForce(t *testing.T, manager string, obj client.Object) {
	t.Helper()
	if err := gitmanifests.Apply(testContext(t), env.client, manager, obj, false); err != nil {
		t.Fatal(err)
	}
}

func mustGet(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	if err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("getting %s: %v", name, err)
	}
}
