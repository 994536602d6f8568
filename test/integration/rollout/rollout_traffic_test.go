package rollout_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// podPilot keeps the CloneSet's Pods as its status says they are (the
// autopilot writes the status): web-0.. web-N-1, the first updatedReplicas
// on the update revision and the rest on the current one, all ready, with
// the labels the CloneSet controller writes.
func podPilot(t *testing.T, ns, name string) {
	t.Helper()
	ctx := testContext(t)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_ = podPilotOnce(ctx, ns, name)
		}
	}()
}

func podPilotOnce(ctx context.Context, ns, name string) error {
	cs := &stepwisev1.CloneSet{}
	if err := env.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cs); err != nil {
		return err
	}
	st := cs.Status
	if st.UpdateRevision == "" || st.CurrentRevision == "" {
		return nil
	}
	for i := int32(0); i < *cs.Spec.Replicas; i++ {
		rev := st.CurrentRevision
		if i < st.UpdatedReplicas {
			rev = st.UpdateRevision
		}
		labels := map[string]string{"app": name, "controller-revision-hash": rev, stepwisev1.RevisionHashLabel: stepwisev1.RevisionHash(rev)}
		pod := &corev1.Pod{}
		err := env.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i)}, pod)
		switch {
		case apierrors.IsNotFound(err):
			pod = &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i), Labels: labels, OwnerReferences: []metav1.OwnerReference{{
					APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: name, UID: cs.UID, Controller: ptr.To(true),
				}}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/web"}}},
			}
			if err := env.client.Create(ctx, pod); err != nil {
				return err
			}
		case err != nil:
			return err
		case !equality.Semantic.DeepEqual(pod.Labels, labels):
			pod.Labels = labels
			if err := env.client.Update(ctx, pod); err != nil {
				return err
			}
		}
		if len(pod.Status.Conditions) == 0 {
			pod.Status.Phase = corev1.PodRunning
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			if err := env.client.Status().Update(ctx, pod); err != nil {
				return err
			}
		}
	}
	return nil
}

// routeWeight is the canary weight of rule "app" of route web, and whether
// the rule is exactly git's.
func routeState(g Gomega, ns string, git *gatewayv1.HTTPRoute) (int32, bool) {
	r := &gatewayv1.HTTPRoute{}
	g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, r)).To(Succeed())
	g.Expect(r.Spec.Rules).To(HaveLen(2))
	g.Expect(equality.Semantic.DeepEqual(r.Spec.Rules[0], git.Spec.Rules[0])).To(BeTrue(), "git's other rule changed")
	g.Expect(equality.Semantic.DeepEqual(r.Spec.Rules[1].Filters, git.Spec.Rules[1].Filters)).To(BeTrue(), "git's filter changed")
	var canary int32
	for _, ref := range r.Spec.Rules[1].BackendRefs {
		if ref.Name == "web-canary" {
			canary = *ref.Weight
		}
	}
	return canary, equality.Semantic.DeepEqual(r.Spec.Rules, git.Spec.Rules)
}

func canaryRouteExists(g Gomega, ns string) bool {
	err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-stepwise-canary"}, &gatewayv1.HTTPRoute{})
	g.Expect(err == nil || apierrors.IsNotFound(err)).To(BeTrue())
	return err == nil
}

func selectorOf(g Gomega, ns, name string) map[string]string {
	svc := &corev1.Service{}
	g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc)).To(Succeed())
	return svc.Spec.Selector
}

// The whole cycle with traffic routing: weights and matches at each step,
// git's re-applies of the Service and the route during a paused step
// undone at once (both are watched), a step reached only once the routes
// carry it, promotion moving the
// stable Service before emptying the canary, an abort bringing the route
// back to git's form as the canary rolls back, and a Rollout deleted
// mid-rollout putting the route and Service back, with an Event.
func TestTrafficRoutingFollowsTheSteps(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	git := applyGitWeb(t, ns)
	createCloneSet(t, newCloneSet(ns, "web", 4, "v1"))
	autopilot(t, ns, "web")
	podPilot(t, ns, "web")

	header := stepwisev1.TrafficMatch{Header: &stepwisev1.StringMatch{Name: "x-canary", Value: "1"}}
	ro := newRollout(ns, "web", cloneSetRef("web"),
		stepAt(pct("75%"), pauseForPromote(), func(s *stepwisev1.RolloutStep) {
			s.Traffic, s.Matches = ptr.To[int32](10), []stepwisev1.TrafficMatch{header}
		}),
		stepAt(pct("50%"), pauseForPromote(), func(s *stepwisev1.RolloutStep) { s.Traffic = ptr.To[int32](40) }),
		stepAt(num(0), func(s *stepwisev1.RolloutStep) { s.Traffic = ptr.To[int32](100) }))
	ro.Spec.TrafficRouting = webRouting("")
	createRollout(t, ro)
	startController(t, ns)

	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Finalizers).To(ContainElement(stepwisev1.TrafficFinalizer))
		g.Expect(selectorOf(g, ns, "web")).To(Equal(map[string]string{"app": "web"}), "at rest the stable Service is git's")
		w, atRest := routeState(g, ns, git)
		g.Expect(w).To(BeZero())
		g.Expect(atRest).To(BeTrue())
	})

	commit(t, ns, "web", "v2")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion), describe(ro))
		g.Expect(ro.Status.Traffic).NotTo(BeNil())
		g.Expect(ro.Status.Traffic.CanaryWeight).To(BeEquivalentTo(10))
		g.Expect(ro.Status.Traffic.Step).To(Equal(ptr.To[int32](0)))
		w, _ := routeState(g, ns, git)
		g.Expect(w).To(BeEquivalentTo(10))
		g.Expect(canaryRouteExists(g, ns)).To(BeTrue())
		g.Expect(selectorOf(g, ns, "web-canary")).To(Equal(map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "v2"}))
		g.Expect(selectorOf(g, ns, "web")).To(Equal(map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "v1"}))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventTrafficShifted, "10% to Service web-canary")

	// Git re-applies the stable Service mid-release (a Flux force apply or
	// an Argo CD server-side apply, here as another manager): the Service
	// watch brings the paused Rollout back at once, the key is back, and
	// TrafficConflict names the manager.
	const argo = "argocd-controller"
	applyAs(t, argo, gitService(ns))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(selectorOf(g, ns, "web")).To(Equal(map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "v1"}))
		c := condition(ro, stepwisev1.TrafficConflictCondition)
		g.Expect(c).NotTo(BeNil(), describe(ro))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(And(ContainSubstring("Service "+ns+"/web: spec.selector"), ContainSubstring(argo)))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventTrafficConflict, "Service "+ns+"/web", argo)

	// Git re-applies the route too, still during the paused step: the
	// route watch brings the Rollout back, the weight is Stepwise's again,
	// and TrafficConflict names the manager that took the rules.
	applyAs(t, argo, gitRoute(ns))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		w, _ := routeState(g, ns, git)
		g.Expect(w).To(BeEquivalentTo(10), "the route re-applied by git during a paused step keeps git's weights")
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion), describe(ro))
		c := condition(ro, stepwisev1.TrafficConflictCondition)
		g.Expect(c).NotTo(BeNil(), describe(ro))
		g.Expect(c.Message).To(And(ContainSubstring("HTTPRoute "+ns+"/web: spec.rules (weight 0, Stepwise set 10)"), ContainSubstring(argo)))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventTrafficConflict, "HTTPRoute "+ns+"/web", argo)

	annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 1)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion), describe(ro))
		w, _ := routeState(g, ns, git)
		g.Expect(w).To(BeEquivalentTo(40))
		g.Expect(canaryRouteExists(g, ns)).To(BeFalse(), "step 1 has no matches")
	})

	annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy), describe(ro))
		g.Expect(ro.Status.StableRevision).To(Equal("web-v2"))
		g.Expect(selectorOf(g, ns, "web")).To(Equal(map[string]string{"app": "web"}), "at rest the stable Service is git's")
		g.Expect(condition(ro, stepwisev1.TrafficConflictCondition)).To(BeNil())
		w, atRest := routeState(g, ns, git)
		g.Expect(w).To(BeZero())
		g.Expect(atRest).To(BeTrue(), "the route is git's again")
	})
	waitForEvent(t, ns, "web", stepwisev1.EventTrafficRestored)

	// An abort: the weight falls as the canary rolls back, and the route
	// is git's again.
	commit(t, ns, "web", "v3")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		w, _ := routeState(g, ns, git)
		g.Expect(w).To(BeEquivalentTo(10))
		g.Expect(selectorOf(g, ns, "web")).To(Equal(map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "v2"}), "during a release the stable Service selects the stable revision")
	})
	annotate(t, ns, "web", stepwisev1.AbortAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted), describe(ro))
		w, atRest := routeState(g, ns, git)
		g.Expect(w).To(BeZero())
		g.Expect(atRest).To(BeTrue())
		g.Expect(canaryRouteExists(g, ns)).To(BeFalse())
		g.Expect(selectorOf(g, ns, "web")).To(Equal(map[string]string{"app": "web"}), "after an abort the stable Service is git's")
	})

	// Deleted mid-rollout: the route and the stable Service go back to git's.
	commit(t, ns, "web", "v4")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		w, _ := routeState(g, ns, git)
		g.Expect(w).To(BeEquivalentTo(10))
	})
	if err := env.client.Delete(testContext(t), getRollout(t, ns, "web")); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &stepwisev1.Rollout{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the finalizer was not removed")
		w, atRest := routeState(g, ns, git)
		g.Expect(w).To(BeZero())
		g.Expect(atRest).To(BeTrue())
		g.Expect(canaryRouteExists(g, ns)).To(BeFalse())
		g.Expect(selectorOf(g, ns, "web")).To(Equal(map[string]string{"app": "web"}))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	waitForEvent(t, ns, "web", stepwisev1.EventTrafficReleased, "Rollout deleted", "HTTPRoute "+ns+"/web")
}
