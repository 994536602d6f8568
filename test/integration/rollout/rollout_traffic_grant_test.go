package rollout_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// An HTTPRoute in another namespace than the Services needs a
// ReferenceGrant in the Services' namespace. Without one the Rollout says
// so (Ready=False, reason ReferenceGrantMissing, and a Warning Event, both
// naming the route, the Services and where the grant must be) and moves no
// Pod to a new revision; once the grant exists the release goes on.
func TestTrafficRoutingReportsAMissingReferenceGrant(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	edge := newNamespace(t)
	applyAs(t, gitManager, gitService(ns))
	route := gitRoute(edge)
	route.Spec.Rules[1].BackendRefs[0].Namespace = ptr.To(gatewayv1.Namespace(ns))
	applyAs(t, gitManager, route)
	createCloneSet(t, newCloneSet(ns, "web", 4, "v1"))
	autopilot(t, ns, "web")
	podPilot(t, ns, "web")

	ro := newRollout(ns, "web", cloneSetRef("web"),
		stepAt(pct("50%"), pauseForPromote(), func(s *stepwisev1.RolloutStep) { s.Traffic = ptr.To[int32](20) }),
		stepAt(num(0)))
	ro.Spec.TrafficRouting = webRouting(edge)
	createRollout(t, ro)
	startController(t, ns)

	missing := func(g Gomega, ro *stepwisev1.Rollout) {
		c := condition(ro, meta.ReadyCondition)
		g.Expect(c).NotTo(BeNil(), describe(ro))
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonReferenceGrantMissing), describe(ro))
		g.Expect(c.Message).To(And(ContainSubstring("HTTPRoute "+edge+"/web"), ContainSubstring("Service web, web-canary"), ContainSubstring("no ReferenceGrant in namespace "+ns)))
	}
	eventually(t, ns, "web", missing)
	waitForEvent(t, ns, "web", stepwisev1.EventReferenceGrantMissing, "HTTPRoute "+edge+"/web", "namespace "+ns)

	// A release while the grant is missing moves no Pod.
	commit(t, ns, "web", "v2")
	NewWithT(t).Eventually(func(g Gomega) {
		cs := &stepwisev1.CloneSet{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, cs)).To(Succeed())
		g.Expect(cs.Status.UpdateRevision).To(Equal("web-v2"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	consistently(t, ns, "web", 3*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		missing(g, ro)
		cs := &stepwisev1.CloneSet{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, cs)).To(Succeed())
		g.Expect(cs.Status.UpdatedReplicas).To(BeZero(), "a Pod moved to v2 without the grant")
	})

	grant := &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "routes-from-edge"}, Spec: gatewayv1.ReferenceGrantSpec{
		From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(edge)}},
		To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
	}}
	if err := env.client.Create(testContext(t), grant); err != nil {
		t.Fatal(err)
	}
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion), describe(ro))
		g.Expect(condition(ro, meta.ReadyCondition).Reason).NotTo(Equal(stepwisev1.ReasonReferenceGrantMissing))
		r := &gatewayv1.HTTPRoute{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: edge, Name: "web"}, r)).To(Succeed())
		refs := r.Spec.Rules[1].BackendRefs
		g.Expect(refs).To(HaveLen(2))
		g.Expect(string(refs[1].Name)).To(Equal("web-canary"))
		g.Expect(refs[1].Namespace).To(Equal(ptr.To(gatewayv1.Namespace(ns))))
		g.Expect(*refs[1].Weight).To(BeEquivalentTo(20))
	})
}
