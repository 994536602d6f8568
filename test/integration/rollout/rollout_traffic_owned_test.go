package rollout_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// tenantRelease sets up a CloneSet web of 4 Pods at v1 in ns, piloted, and
// a Rollout web over it routing through route web (in routeNS, "" for ns)
// with a first step at 50% of Pods and weight 50, waiting for a promote.
func tenantRelease(t *testing.T, ns, routeNS string) *stepwisev1.Rollout {
	t.Helper()
	createCloneSet(t, newCloneSet(ns, "web", 4, "v1"))
	autopilot(t, ns, "web")
	podPilot(t, ns, "web")
	ro := newRollout(ns, "web", cloneSetRef("web"),
		stepAt(pct("50%"), pauseForPromote(), func(s *stepwisev1.RolloutStep) { s.Traffic = ptr.To[int32](50) }),
		stepAt(num(0)))
	ro.Spec.TrafficRouting = webRouting(routeNS)
	return ro
}

// Whatever the spec says by then, Stepwise takes out of a route exactly
// what it wrote: here the canary Service is renamed mid-release (the
// route of another namespace still carries the old one), then the release
// is aborted; the route ends as its owner wrote it.
func TestStepwiseTakesOutOfARouteExactlyWhatItWrote(t *testing.T) {
	t.Parallel()
	ns, edge, git := crossNamespace(t)
	createObject(t, routeConsent(ns, edge))
	createRollout(t, tenantRelease(t, ns, edge))
	startController(t, ns, withNamespaces(edge))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "v2")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion), describe(ro))
		w, _ := routeState(g, edge, git)
		g.Expect(w).To(BeEquivalentTo(50))
	})

	updateRollout(t, ns, "web", func(ro *stepwisev1.Rollout) { ro.Spec.TrafficRouting.CanaryService.Name = "web-canary2" })
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(condition(ro, meta.ReadyCondition).Reason).NotTo(Equal(stepwisev1.ReasonInvalidSpec), describe(ro))
		refs := backendsOf(g, edge)
		g.Expect(refs).To(ConsistOf("web", "web-canary2"), "the old canary backend must go when the new one comes")
	})

	annotate(t, ns, "web", stepwisev1.AbortAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted), describe(ro))
		r := &gatewayv1.HTTPRoute{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: edge, Name: "web"}, r)).To(Succeed())
		g.Expect(equality.Semantic.DeepEqual(r.Spec.Rules, git.Spec.Rules)).To(BeTrue(), "after the abort the route is not its owner's: %+v", r.Spec.Rules)
		g.Expect(ro.Status.Traffic.Written).To(BeNil(), "nothing is left to take out")
	})
}

// backendsOf names the backends of rule "app" of route web in ns.
func backendsOf(g Gomega, ns string) []string {
	r := &gatewayv1.HTTPRoute{}
	g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, r)).To(Succeed())
	var names []string
	for _, ref := range r.Spec.Rules[1].BackendRefs {
		names = append(names, string(ref.Name))
	}
	return names
}

// canaryService.create never takes over a Service that someone else made:
// the Rollout refuses, naming the Service, moves no Pod, and the Service
// keeps its selector, ports, labels and owners; a route named like
// Stepwise's canary route is not taken either.
func TestCreatingTheCanaryServiceNeverTakesOverAnother(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	git := applyGitWeb(t, ns)
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tn-other", Labels: map[string]string{"team": "other"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "other"},
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 9000, TargetPort: intstr.FromInt32(9000), Protocol: corev1.ProtocolTCP}}},
	}
	createObject(t, theirs)
	mustGet(t, ns, "tn-other", theirs)
	ro := tenantRelease(t, ns, "")
	ro.Spec.TrafficRouting.CanaryService = stepwisev1.CanaryService{Name: "tn-other", Create: true}
	createRollout(t, ro)
	startController(t, ns)

	refused := func(g Gomega, ro *stepwisev1.Rollout) {
		c := condition(ro, meta.ReadyCondition)
		g.Expect(c).NotTo(BeNil(), describe(ro))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonObjectNotOwned), describe(ro))
		g.Expect(c.Message).To(And(ContainSubstring("Service "+ns+"/tn-other"), ContainSubstring("did not create it")))
		g.Expect(ro.Status.StableRevision).To(Equal("web-v1"))
	}
	eventually(t, ns, "web", refused)
	waitForEvent(t, ns, "web", stepwisev1.EventObjectNotOwned, "Service "+ns+"/tn-other")
	commit(t, ns, "web", "v2")
	waitUpdateRevision(t, ns, "web", "web-v2")
	waitUpdateRevision(t, ns, "web", "web-v2")
	consistently(t, ns, "web", 3*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		refused(g, ro)
		now := &corev1.Service{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "tn-other"}, now)).To(Succeed())
		g.Expect(now.Spec.Selector).To(Equal(theirs.Spec.Selector))
		g.Expect(now.Spec.Ports).To(Equal(theirs.Spec.Ports))
		g.Expect(now.Labels).To(Equal(theirs.Labels))
		g.Expect(now.OwnerReferences).To(BeEmpty())
		g.Expect(untouchedBy(now)).To(BeTrue())
		noPodMoved(g, ns)
		w, _ := routeState(g, ns, git)
		g.Expect(w).To(BeZero())
	})

	// Deleting the Rollout leaves the Service alone.
	if err := env.client.Delete(testContext(t), getRollout(t, ns, "web")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, "web")
	mustGet(t, ns, "tn-other", theirs)
	if !untouchedBy(theirs) || len(theirs.OwnerReferences) > 0 {
		t.Fatalf("Service tn-other after the Rollout's deletion: owners %v managed fields %v", theirs.OwnerReferences, theirs.ManagedFields)
	}
}

// Deleting a Rollout that was refused as a duplicate does not touch the
// traffic of the Rollout that holds the workload.
func TestDeletingADuplicateRolloutLeavesTheHoldersTraffic(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	git := applyGitWeb(t, ns)
	createRollout(t, tenantRelease(t, ns, ""))
	startController(t, ns)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	commit(t, ns, "web", "v2")
	atStep := func(g Gomega) {
		w, _ := routeState(g, ns, git)
		g.Expect(w).To(BeEquivalentTo(50))
		g.Expect(selectorOf(g, ns, "web")).To(Equal(map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "v1"}))
		g.Expect(selectorOf(g, ns, "web-canary")).To(Equal(map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "v2"}))
	}
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		atStep(g)
	})

	dup := newRollout(ns, "web-dup", cloneSetRef("web"), stepAt(num(0)))
	dup.Spec.TrafficRouting = webRouting("")
	createRollout(t, dup)
	eventually(t, ns, "web-dup", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(condition(ro, meta.ReadyCondition)).NotTo(BeNil())
		g.Expect(condition(ro, meta.ReadyCondition).Reason).To(Equal(stepwisev1.ReasonDuplicateRollout))
		g.Expect(ro.Finalizers).To(ContainElement(stepwisev1.TrafficFinalizer))
	})
	if err := env.client.Delete(testContext(t), getRollout(t, ns, "web-dup")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ns, "web-dup")
	consistently(t, ns, "web", 2*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		atStep(g)
	})
}

// A Rollout whose Services and route are already gone finishes its
// finalizer, and so does one whose namespace is being deleted (where
// nothing may be created).
func TestATrafficFinalizerFinishesWhenItsObjectsAreGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		gone func(t *testing.T, ns string)
	}{
		{"Services and route deleted", func(t *testing.T, ns string) {
			for _, obj := range []client.Object{
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-canary"}},
				&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
			} {
				if err := env.client.Delete(testContext(t), obj); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"namespace terminating", func(t *testing.T, ns string) {
			// envtest runs no namespace controller: the namespace stays
			// Terminating, where the API server refuses any creation.
			if err := env.client.Delete(testContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t)
			git := applyGitWeb(t, ns)
			createRollout(t, tenantRelease(t, ns, ""))
			startController(t, ns)
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
			commit(t, ns, "web", "v2")
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
				stepIs(g, ro, 0)
				w, _ := routeState(g, ns, git)
				g.Expect(w).To(BeEquivalentTo(50))
			})
			tc.gone(t, ns)
			if err := env.client.Delete(testContext(t), getRollout(t, ns, "web")); err != nil {
				t.Fatal(err)
			}
			waitGone(t, ns, "web")
		})
	}
}

// Stepwise records what it is about to write in the Rollout's status
// before it writes it: while no status write that records traffic lands,
// the Services and the route stay as git wrote them, and no Pod moves.
func TestALostStatusWriteLeavesTrafficUnmoved(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	git := applyGitWeb(t, ns)
	createRollout(t, tenantRelease(t, ns, ""))
	var lose atomic.Bool
	startController(t, ns, func(o *managerSetup) {
		o.hooks.WrapRolloutClient = func(c client.Client) client.Client {
			return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if ro, ok := obj.(*stepwisev1.Rollout); ok && sub == "status" && lose.Load() && ro.Status.Traffic != nil && ro.Status.Traffic.Written != nil {
						return apierrors.NewServiceUnavailable("status write lost on purpose")
					}
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
		}
	})
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	lose.Store(true)
	commit(t, ns, "web", "v2")
	waitUpdateRevision(t, ns, "web", "web-v2")
	consistently(t, ns, "web", 3*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(selectorOf(g, ns, "web")).To(Equal(map[string]string{"app": "web"}), "the stable Service moved without a record")
		w, atRest := routeState(g, ns, git)
		g.Expect(w).To(BeZero())
		g.Expect(atRest).To(BeTrue(), "the route moved without a record")
		g.Expect(selectorOf(g, ns, "web-canary")).To(Equal(map[string]string{"app": "web"}), "the canary Service moved without a record")
		noPodMoved(g, ns)
	})
	lose.Store(false)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		w, _ := routeState(g, ns, git)
		g.Expect(w).To(BeEquivalentTo(50))
	})
}
