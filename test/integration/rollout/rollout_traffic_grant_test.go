package rollout_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/traffic"
)

// edgeRoute applies git's route web to namespace edge, a platform team's,
// sending to Service web of namespace ns, and returns it as stored.
func edgeRoute(t *testing.T, ns, edge string) *gatewayv1.HTTPRoute {
	t.Helper()
	route := gitRoute(edge)
	route.Spec.Rules[1].BackendRefs[0].Namespace = ptr.To(gatewayv1.Namespace(ns))
	applyAs(t, gitManager, route)
	stored := &gatewayv1.HTTPRoute{}
	mustGet(t, edge, "web", stored)
	return stored
}

// crossNamespace sets up a tenant namespace with git's Service web and a
// platform team's namespace edge with git's route web sending to it, and
// the tenant's grant for the route to send there; it returns both
// namespaces and the route as stored.
func crossNamespace(t *testing.T) (ns, edge string, git *gatewayv1.HTTPRoute) {
	t.Helper()
	ns, edge = newNamespace(t), newNamespace(t)
	applyAs(t, gitManager, gitService(ns))
	git = edgeRoute(t, ns, edge)
	servicesGrant(t, ns, edge)
	return ns, edge, git
}

// noPodMoved checks that CloneSet web of ns has moved no Pod to its
// update revision.
func noPodMoved(g Gomega, ns string) {
	cs := &stepwisev1.CloneSet{}
	g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, cs)).To(Succeed())
	g.Expect(cs.Status.UpdatedReplicas).To(BeZero(), "a Pod moved to %s", cs.Status.UpdateRevision)
}

// waitGone waits until Rollout name of ns is deleted, its finalizer done.
func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &stepwisev1.Rollout{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the finalizer is still there: %v", err)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// servicesGrant is the grant in ns (the tenant's own) that lets HTTPRoutes
// of edge send to its Services: what the data plane needs.
func servicesGrant(t *testing.T, ns, edge string) {
	t.Helper()
	createObject(t, &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "routes-from-edge"}, Spec: gatewayv1.ReferenceGrantSpec{
		From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(edge)}},
		To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
	}})
}

// routeConsent is the route owner's consent, in edge, that Rollouts of ns
// write its HTTPRoutes named routes (every route when none is named).
func routeConsent(ns, edge string, routes ...string) *gatewayv1.ReferenceGrant {
	g := &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: edge, Name: "rollouts-from-" + ns}, Spec: gatewayv1.ReferenceGrantSpec{
		From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.Group(stepwisev1.GroupVersion.Group), Kind: "Rollout", Namespace: gatewayv1.Namespace(ns)}},
	}}
	for _, r := range routes {
		g.Spec.To = append(g.Spec.To, gatewayv1.ReferenceGrantTo{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Name: ptr.To(gatewayv1.ObjectName(r))})
	}
	if len(routes) == 0 {
		g.Spec.To = []gatewayv1.ReferenceGrantTo{{Group: gatewayv1.GroupName, Kind: "HTTPRoute"}}
	}
	return g
}

func createObject(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.client.Create(testContext(t), obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

// untouchedBy reports whether obj carries nothing Stepwise wrote: no entry
// of its traffic field manager.
func untouchedBy(obj client.Object) bool {
	return !slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == traffic.FieldManager })
}

// withNamespaces lets the manager watch more namespaces than the test's.
func withNamespaces(nss ...string) func(*managerSetup) {
	return func(o *managerSetup) { o.Namespaces = append(o.Namespaces, nss...) }
}

// A Rollout writes an HTTPRoute of another namespace only with that
// namespace's consent: a ReferenceGrant there from Rollouts of the
// Rollout's namespace to the route. The grant the tenant writes in its own
// namespace (for the route to send to its Services) is not consent.
// Without it: nothing is written into the route, the Rollout says which
// grant is missing where, and no Pod moves. Consent withdrawn mid-release:
// what Stepwise wrote comes out of the route, and nothing more goes in.
func TestARouteInAnotherNamespaceNeedsItsOwnersConsent(t *testing.T) {
	t.Parallel()
	ns, edge, git := crossNamespace(t)
	createRollout(t, tenantRelease(t, ns, edge))
	startController(t, ns, withNamespaces(edge))

	refused := func(g Gomega, ro *stepwisev1.Rollout) {
		c := condition(ro, meta.ReadyCondition)
		g.Expect(c).NotTo(BeNil(), describe(ro))
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonReferenceGrantMissing), describe(ro))
		g.Expect(c.Message).To(And(ContainSubstring("HTTPRoute "+edge+"/web"), ContainSubstring("has not consented to Rollouts of namespace "+ns),
			ContainSubstring("ReferenceGrant in namespace "+edge), ContainSubstring("kind: Rollout, namespace: "+ns)))
		g.Expect(c.Message).NotTo(ContainSubstring("may not send to Service"), "the Services' grant exists")
	}
	routeIsGits := func(g Gomega) {
		r := &gatewayv1.HTTPRoute{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: edge, Name: "web"}, r)).To(Succeed())
		g.Expect(equality.Semantic.DeepEqual(r.Spec.Rules, git.Spec.Rules)).To(BeTrue(), "the route is not git's: %+v", r.Spec.Rules)
	}
	eventually(t, ns, "web", refused)
	waitForEvent(t, ns, "web", stepwisev1.EventReferenceGrantMissing, "HTTPRoute "+edge+"/web", "has not consented")

	// A release without consent writes nothing into the route and moves no Pod.
	commit(t, ns, "web", "v2")
	waitUpdateRevision(t, ns, "web", "web-v2")
	consistently(t, ns, "web", 3*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		refused(g, ro)
		routeIsGits(g)
		r := &gatewayv1.HTTPRoute{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: edge, Name: "web"}, r)).To(Succeed())
		g.Expect(untouchedBy(r)).To(BeTrue(), "Stepwise wrote into the route: %v", r.ManagedFields)
		noPodMoved(g, ns)
	})

	// The route's owner consents to this route: the release goes on.
	consent := routeConsent(ns, edge, "web")
	createObject(t, consent)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion), describe(ro))
		w, _ := routeState(g, edge, git)
		g.Expect(w).To(BeEquivalentTo(50))
		g.Expect(ro.Status.Traffic.Written).NotTo(BeNil())
		g.Expect(ro.Status.Traffic.Written.Routes).To(ContainElement(stepwisev1.WrittenRoute{Namespace: edge, Name: "web", StableService: "web", CanaryService: "web-canary"}))
	})

	// Consent withdrawn mid-release: the route is git's again, the Rollout
	// says why, and Stepwise writes nothing more into it.
	if err := env.client.Delete(testContext(t), consent); err != nil {
		t.Fatal(err)
	}
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		refused(g, ro)
		routeIsGits(g)
		g.Expect(ro.Status.Traffic.Written == nil || len(ro.Status.Traffic.Written.Routes) == 0).To(BeTrue(), "the record still holds the route: %+v", ro.Status.Traffic.Written)
	})
	consistently(t, ns, "web", 2*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		refused(g, ro)
		routeIsGits(g)
	})
}

// waitUpdateRevision waits for CloneSet name to report rev as its update
// revision (and so its updated Pods as those on rev).
func waitUpdateRevision(t *testing.T, ns, name, rev string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cs := &stepwisev1.CloneSet{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cs)).To(Succeed())
		g.Expect(cs.Status.UpdateRevision).To(Equal(rev))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// A manager that watches only some namespaces neither reads nor writes a
// route in another, even with every grant in place: the Rollout says
// which namespace it does not watch, and no Pod moves.
func TestARouteInANamespaceTheManagerDoesNotWatchIsRefused(t *testing.T) {
	t.Parallel()
	ns, edge, git := crossNamespace(t)
	createObject(t, routeConsent(ns, edge))
	createRollout(t, tenantRelease(t, ns, edge))
	startController(t, ns)

	refused := func(g Gomega, ro *stepwisev1.Rollout) {
		c := condition(ro, meta.ReadyCondition)
		g.Expect(c).NotTo(BeNil(), describe(ro))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonTrafficNotPermitted), describe(ro))
		g.Expect(c.Message).To(ContainSubstring("HTTPRoute " + edge + "/web is in namespace " + edge + ", which the manager does not watch"))
	}
	eventually(t, ns, "web", refused)
	commit(t, ns, "web", "v2")
	waitUpdateRevision(t, ns, "web", "web-v2")
	consistently(t, ns, "web", 2*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		refused(g, ro)
		r := &gatewayv1.HTTPRoute{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: edge, Name: "web"}, r)).To(Succeed())
		g.Expect(equality.Semantic.DeepEqual(r.Spec.Rules, git.Spec.Rules)).To(BeTrue())
		noPodMoved(g, ns)
	})
}
