package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/gitmanifests"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

// gitOpsManager plays the GitOps tool that applies the team's manifests.
const gitOpsManager = "kustomize-controller"

// A Rollout with traffic routing over a CloneSet on a kwok cluster, whose
// controller manager keeps real EndpointSlices: a release steps through a
// header match, then weights, and is promoted; a second release is
// aborted. At each step the canary Service's EndpointSlices hold exactly
// the ready canary Pods and the stable Service's exactly the ready stable
// Pods; the route's extra rule and filter survive the whole rollout and
// the abort; at rest the stable Service is git's; during the abort, on
// every observation, the stable backend's weight is at most the stable
// Pods' share of ready Pods. No request is sent anywhere: kwok's Pod IPs
// are fake, and only the objects are checked.
func TestTrafficRouting(t *testing.T) {
	t.Parallel()
	b := newBedWithoutManager(t, 1)
	if err := kwokcluster.InstallGatewayAPI(t.Context(), b.cluster); err != nil {
		t.Fatal(err)
	}
	b.startManager(t)
	t.Cleanup(b.stopManager)
	ns := b.namespace(t, "traffic")
	ctx := t.Context()
	g := NewWithT(t)

	const replicas = 4
	applyAsManager(t, b.client, gitOpsManager, trafficService(ns))
	applyAsManager(t, b.client, gitOpsManager, trafficRoute(ns))
	git := &gatewayv1.HTTPRoute{} // as the API server stores (defaults) it
	g.Expect(b.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, git)).To(Succeed())

	cs := cloneSet(ns, "web", replicas, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.Template.Spec.Containers[0].Image = webImage("1.0.0")
	// A canary Pod rolling back stays out of endpoints for 2 s: long enough
	// for the abort to be observed many times on its way.
	cs.Spec.Template.Annotations = map[string]string{kwokcluster.AnnotationRestartDelay: "2s"}
	g.Expect(b.client.Create(ctx, cs)).To(Succeed())
	v1 := b.waitSettled(t, ns, "web", replicas, replicas, settleTimeout).Status.UpdateRevision

	header := stepwisev1.TrafficMatch{Header: &stepwisev1.StringMatch{Name: "x-canary", Value: "1"}}
	ro := &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: stepwisev1.RolloutSpec{
		WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"},
		TrafficRouting: &stepwisev1.TrafficRouting{
			StableService: "web",
			CanaryService: stepwisev1.CanaryService{Name: "web-canary", Create: true},
			HTTPRoutes:    []stepwisev1.HTTPRouteReference{{Name: "web", RuleName: "app"}},
		},
		Steps: []stepwisev1.RolloutStep{
			{Partition: intstr.FromString("75%"), Traffic: ptr.To[int32](0), Matches: []stepwisev1.TrafficMatch{header}, Pause: &stepwisev1.StepPause{}},
			{Partition: intstr.FromString("50%"), Traffic: ptr.To[int32](50), Pause: &stepwisev1.StepPause{}},
			{Partition: intstr.FromInt32(0), Traffic: ptr.To[int32](100)},
		},
	}}
	g.Expect(b.client.Create(ctx, ro)).To(Succeed())
	tr := &trafficStory{t: t, b: b, ns: ns, git: git}

	tr.wait("at rest: the Rollout adopts v1, Services and route are git's", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(v1))
		tr.expectAtRest(g)
		tr.expectEndpoints(g, "web", "", replicas)
	})

	// Release v2: testers first, then half the requests, then all.
	v2 := tr.commit("2.0.0")
	tr.wait("step 1: one canary, testers only", func(g Gomega, ro *stepwisev1.Rollout) {
		tr.expectStep(g, ro, 0, stepwisev1.ReasonAwaitingPromotion)
		g.Expect(tr.weight(g)).To(BeEquivalentTo(0))
		g.Expect(tr.canaryMatches(g)).To(ConsistOf("x-canary"))
		g.Expect(tr.selector(g, "web")).To(HaveKeyWithValue(stepwisev1.RevisionHashLabel, stepwisev1.RevisionHash(v1)))
		canary := &corev1.Service{}
		g.Expect(b.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-canary"}, canary)).To(Succeed())
		g.Expect(canary.Labels).To(Equal(map[string]string{"app": "web"}), "no GitOps tracking label copied to the canary Service")
		tr.expectEndpoints(g, "web-canary", v2, 1)
		tr.expectEndpoints(g, "web", v1, replicas-1)
	})
	tr.request(stepwisev1.PromoteAtAnnotation)
	tr.wait("step 2: half the Pods, half the requests", func(g Gomega, ro *stepwisev1.Rollout) {
		tr.expectStep(g, ro, 1, stepwisev1.ReasonAwaitingPromotion)
		g.Expect(tr.weight(g)).To(BeEquivalentTo(50))
		g.Expect(tr.canaryRouteExists(g)).To(BeFalse(), "step 2 has no matches")
		tr.expectEndpoints(g, "web-canary", v2, 2)
		tr.expectEndpoints(g, "web", v1, replicas-2)
	})
	tr.request(stepwisev1.PromoteAtAnnotation)
	tr.wait("promoted: every Pod on v2, everything git's again", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy), describeRollout(ro))
		g.Expect(ro.Status.StableRevision).To(Equal(v2))
		tr.expectAtRest(g)
		tr.expectEndpoints(g, "web", v2, replicas)
	})

	// Release v3, aborted at its second step, 50% on half the Pods.
	v3 := tr.commit("3.0.0")
	tr.wait("step 1 of v3", func(g Gomega, ro *stepwisev1.Rollout) {
		tr.expectStep(g, ro, 0, stepwisev1.ReasonAwaitingPromotion)
		tr.expectEndpoints(g, "web-canary", v3, 1)
	})
	tr.request(stepwisev1.PromoteAtAnnotation)
	tr.wait("step 2 of v3", func(g Gomega, ro *stepwisev1.Rollout) {
		tr.expectStep(g, ro, 1, stepwisev1.ReasonAwaitingPromotion)
		g.Expect(tr.weight(g)).To(BeEquivalentTo(50))
		tr.expectEndpoints(g, "web-canary", v3, 2)
		tr.expectEndpoints(g, "web", v2, replicas-2)
	})
	tr.request(stepwisev1.AbortAtAnnotation)
	observations, midway := 0, 0
	var overloads []string
	NewWithT(t).Eventually(func(g Gomega) {
		// The route first, then the Pods: the Pods read are at least as
		// far in the rollback as those the weight was decided on, and in
		// an abort the stable share of ready Pods only grows.
		route := tr.route(g)
		pods := b.pods(g, ns)
		observations++
		stableWeight := 100 - canaryWeightOf(route)
		var stableReady, ready int
		for i := range pods {
			if podCondition(&pods[i], corev1.PodReady) != corev1.ConditionTrue {
				continue
			}
			ready++
			if pods[i].Labels[appsv1.ControllerRevisionHashLabelKey] == v2 {
				stableReady++
			}
		}
		if ready > 0 && int(stableWeight)*ready > 100*stableReady {
			// Not retried away: one such observation fails the test.
			overloads = append(overloads, fmt.Sprintf("weight %d with %d of %d ready Pods stable", stableWeight, stableReady, ready))
		}
		tr.expectRouteKeepsGit(g, route)
		ro := tr.rollout(g)
		if ro.Status.Phase == stepwisev1.RolloutAborted && stableReady < replicas {
			midway++
		}
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted), describeRollout(ro))
		g.Expect(stableReady).To(Equal(replicas), "every Pod back on v2 and ready")
		tr.expectAtRest(g)
	}, rolloutTimeout, 50*time.Millisecond).Should(Succeed())
	t.Logf("abort: %d observations of weights and ready Pods, %d while Pods rolled back", observations, midway)
	if midway == 0 {
		t.Fatal("the abort was never observed while canary Pods rolled back: the check above proved nothing")
	}
	if len(overloads) > 0 {
		t.Fatalf("during the abort the stable backend got more than the stable Pods' share of ready Pods: %v", overloads)
	}
	tr.wait("after the abort: every endpoint on v2, no conflict ever raised", func(g Gomega, ro *stepwisev1.Rollout) {
		tr.expectEndpoints(g, "web", v2, replicas)
		g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, stepwisev1.TrafficConflictCondition)).To(BeNil())
	})
}

// trafficStory reads what one TestTrafficRouting namespace holds.
type trafficStory struct {
	t   *testing.T
	b   *bed
	ns  string
	git *gatewayv1.HTTPRoute
}

func (s *trafficStory) rollout(g Gomega) *stepwisev1.Rollout { return s.b.rolloutWeb(g, s.ns) }

func (s *trafficStory) wait(what string, check func(g Gomega, ro *stepwisev1.Rollout)) {
	s.t.Helper()
	s.b.waitRolloutWeb(s.t, s.ns, what, rolloutTimeout, check)
}

// commit changes the app image as git would and returns the new revision.
func (s *trafficStory) commit(version string) string {
	s.t.Helper()
	return s.b.commitWeb(s.t, s.ns, version)
}

func (s *trafficStory) request(annotation string) {
	s.t.Helper()
	s.b.requestWeb(s.t, s.ns, annotation)
}

// expectStep: step i reached (its Pods ready and the routes carrying it),
// in state reason.
func (s *trafficStory) expectStep(g Gomega, ro *stepwisev1.Rollout, i int32, reason string) {
	g.Expect(ro.Status.CurrentStepIndex).To(Equal(ptr.To(i)), describeRollout(ro))
	g.Expect(ro.Status.Reason).To(Equal(reason), describeRollout(ro))
	g.Expect(ro.Status.Traffic).NotTo(BeNil())
	g.Expect(ro.Status.Traffic.Step).To(Equal(ptr.To(i)))
	s.expectRouteKeepsGit(g, s.route(g))
}

func (s *trafficStory) route(g Gomega) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{}
	g.Expect(s.b.client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "web"}, r)).To(Succeed())
	return r
}

// expectRouteKeepsGit: git's extra rule, the app rule's filter and
// matches, parents and hostnames are all there.
func (s *trafficStory) expectRouteKeepsGit(g Gomega, r *gatewayv1.HTTPRoute) {
	g.Expect(r.Spec.Rules).To(HaveLen(2))
	g.Expect(equality.Semantic.DeepEqual(r.Spec.Rules[0], s.git.Spec.Rules[0])).To(BeTrue(), "git's extra rule changed: %+v", r.Spec.Rules[0])
	g.Expect(equality.Semantic.DeepEqual(r.Spec.Rules[1].Filters, s.git.Spec.Rules[1].Filters)).To(BeTrue(), "git's filter changed: %+v", r.Spec.Rules[1].Filters)
	g.Expect(equality.Semantic.DeepEqual(r.Spec.Rules[1].Matches, s.git.Spec.Rules[1].Matches)).To(BeTrue(), "git's matches changed")
	g.Expect(equality.Semantic.DeepEqual(r.Spec.ParentRefs, s.git.Spec.ParentRefs)).To(BeTrue())
	g.Expect(equality.Semantic.DeepEqual(r.Spec.Hostnames, s.git.Spec.Hostnames)).To(BeTrue())
}

// weight is the canary weight the route's app rule carries.
func (s *trafficStory) weight(g Gomega) int32 { return canaryWeightOf(s.route(g)) }

func canaryWeightOf(r *gatewayv1.HTTPRoute) int32 {
	var total, canary int32
	for _, ref := range r.Spec.Rules[1].BackendRefs {
		w := ptr.Deref(ref.Weight, 1)
		total += w
		if ref.Name == "web-canary" {
			canary += w
		}
	}
	if total == 0 {
		return 0
	}
	return canary * 100 / total
}

func (s *trafficStory) canaryRouteExists(g Gomega) bool {
	err := s.b.client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "web-stepwise-canary"}, &gatewayv1.HTTPRoute{})
	g.Expect(err == nil || apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	return err == nil
}

// canaryMatches names the headers the canary route matches on.
func (s *trafficStory) canaryMatches(g Gomega) []string {
	r := &gatewayv1.HTTPRoute{}
	g.Expect(s.b.client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "web-stepwise-canary"}, r)).To(Succeed())
	var names []string
	for _, rule := range r.Spec.Rules {
		g.Expect(rule.BackendRefs).To(HaveLen(1))
		g.Expect(string(rule.BackendRefs[0].Name)).To(Equal("web-canary"))
		for _, m := range rule.Matches {
			for _, h := range m.Headers {
				names = append(names, string(h.Name))
			}
		}
	}
	return names
}

func (s *trafficStory) selector(g Gomega, name string) map[string]string {
	svc := &corev1.Service{}
	g.Expect(s.b.client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: name}, svc)).To(Succeed())
	return svc.Spec.Selector
}

// expectAtRest: the route and the stable Service are exactly git's, and
// no weight or match is left.
func (s *trafficStory) expectAtRest(g Gomega) {
	r := s.route(g)
	g.Expect(equality.Semantic.DeepEqual(r.Spec.Rules, s.git.Spec.Rules)).To(BeTrue(), "the route is not git's: %+v", r.Spec.Rules)
	g.Expect(s.canaryRouteExists(g)).To(BeFalse())
	g.Expect(s.selector(g, "web")).To(Equal(trafficService(s.ns).Spec.Selector), "the stable Service's selector is not git's")
}

// expectEndpoints: the EndpointSlices of Service svc list exactly the
// ready Pods on revision ("" for any), want of them, all ready, and no
// other Pod.
func (s *trafficStory) expectEndpoints(g Gomega, svc, revision string, want int) {
	var eps discoveryv1.EndpointSliceList
	g.Expect(s.b.client.List(context.Background(), &eps, client.InNamespace(s.ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc})).To(Succeed())
	var ready, all []string
	for _, sl := range eps.Items {
		for _, ep := range sl.Endpoints {
			g.Expect(ep.TargetRef).NotTo(BeNil())
			all = append(all, ep.TargetRef.Name)
			if ptr.Deref(ep.Conditions.Ready, false) {
				ready = append(ready, ep.TargetRef.Name)
			}
		}
	}
	var readyPods, podsOn []string
	for _, p := range s.b.pods(g, s.ns) {
		if revision != "" && p.Labels[appsv1.ControllerRevisionHashLabelKey] != revision {
			continue
		}
		podsOn = append(podsOn, p.Name)
		if podCondition(&p, corev1.PodReady) == corev1.ConditionTrue {
			readyPods = append(readyPods, p.Name)
		}
	}
	slices.Sort(ready)
	slices.Sort(all)
	g.Expect(readyPods).To(HaveLen(want), "ready Pods on %q", revision)
	g.Expect(ready).To(Equal(readyPods), "ready endpoints of Service %s", svc)
	g.Expect(all).To(Equal(podsOn), "endpoints of Service %s", svc)
}

// trafficService and trafficRoute are git's Service and route
// (gitmanifests). The route's parent Gateway does not exist (no Gateway API
// implementation here), so no acceptance is waited for.
var trafficService, trafficRoute = gitmanifests.Service, gitmanifests.Route

// applyAsManager server-side applies obj whole as manager, with force, as
// Flux does.
func applyAsManager(t *testing.T, c client.Client, manager string, obj client.Object) {
	t.Helper()
	if err := gitmanifests.Apply(t.Context(), c, manager, obj, true); err != nil {
		t.Fatal(err)
	}
}
