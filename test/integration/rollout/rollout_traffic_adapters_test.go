package rollout_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// For a StatefulSet and an OpenKruise CloneSet, traffic routing selects a
// revision by the controller-revision-hash label those controllers write
// (Stepwise's own label exists only on its CloneSet): at a step, the
// canary Service selects exactly the Pods on the canary revision and the
// stable Service exactly the others, and the route carries the step's
// weight; after promotion every Pod is on the new revision and the route
// sends nothing to the canary Service.
func TestTrafficRoutingSelectsByTheWorkloadsOwnRevisionLabel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind   string
		create func(t *testing.T, ns string)
		commit func(t *testing.T, ns string)
		ref    stepwisev1.WorkloadReference
	}{
		{
			kind: "StatefulSet",
			create: func(t *testing.T, ns string) {
				if err := env.client.Create(testContext(t), newStatefulSet(ns, "web", 4, "1.0.0")); err != nil {
					t.Fatalf("creating StatefulSet: %v", err)
				}
				statefulSetPilot(t, ns, "web")
			},
			commit: func(t *testing.T, ns string) { commitStatefulSet(t, ns, "web", "1.1.0") },
			ref:    stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web"},
		},
		{
			kind: "KruiseCloneSet",
			create: func(t *testing.T, ns string) {
				if err := env.client.Create(testContext(t), newKruiseCloneSet(ns, "web", 4, "1.0.0", nil)); err != nil {
					t.Fatalf("creating Kruise CloneSet: %v", err)
				}
				kruisePilot(t, ns, "web", false)
			},
			commit: func(t *testing.T, ns string) { commitKruise(t, ns, "web", "1.1.0") },
			ref:    stepwisev1.WorkloadReference{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet", Name: "web"},
		},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t)
			git := applyGitWeb(t, ns)
			tc.create(t, ns)

			ro := newRollout(ns, "web", tc.ref,
				stepAt(pct("50%"), pauseForPromote(), func(s *stepwisev1.RolloutStep) { s.Traffic = ptr.To[int32](30) }),
				stepAt(num(0), func(s *stepwisev1.RolloutStep) { s.Traffic = ptr.To[int32](100) }))
			ro.Spec.TrafficRouting = webRouting("")
			createRollout(t, ro)
			startController(t, ns)
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
				g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy), describe(ro))
			})

			stable, canary := "web-1-0-0", "web-1-1-0" // revisionOf, as the pilots name revisions
			tc.commit(t, ns)
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
				stepIs(g, ro, 0)
				g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion), describe(ro))
				g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
				w, _ := routeState(g, ns, git)
				g.Expect(w).To(BeEquivalentTo(30))
				g.Expect(selectorOf(g, ns, "web-canary")).To(HaveKeyWithValue(appsv1.ControllerRevisionHashLabelKey, canary))
				g.Expect(selectorOf(g, ns, "web")).To(HaveKeyWithValue(appsv1.ControllerRevisionHashLabelKey, stable))
				g.Expect(selectorOf(g, ns, "web")).NotTo(HaveKey(stepwisev1.RevisionHashLabel), "only Stepwise's CloneSet writes that label")
				g.Expect(revisionsSelected(g, ns, "web-canary")).To(Equal(map[string]int{canary: 2}))
				g.Expect(revisionsSelected(g, ns, "web")).To(Equal(map[string]int{stable: 2}))
			})

			annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
				g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy), describe(ro))
				g.Expect(ro.Status.StableRevision).To(Equal(canary))
				w, atRest := routeState(g, ns, git)
				g.Expect(w).To(BeZero())
				g.Expect(atRest).To(BeTrue(), "the route is git's again")
				g.Expect(revisionsSelected(g, ns, "web")).To(Equal(map[string]int{canary: 4}))
			})
		})
	}
}

// revisionsSelected counts, by controller-revision-hash, the Pods that a
// Service's selector picks: what the EndpointSlice controller would put
// behind it.
func revisionsSelected(g Gomega, ns, service string) map[string]int {
	var pods corev1.PodList
	g.Expect(env.client.List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(selectorOf(g, ns, service))})).To(Succeed())
	count := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			count[p.Labels[appsv1.ControllerRevisionHashLabelKey]]++
		}
	}
	return count
}
