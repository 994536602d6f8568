package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

// story is one Rollout story in its own namespace: a CloneSet "web" and a
// Rollout "web" driving it, watched from the start.
type story struct {
	e   *rolloutEnv
	t   *testing.T
	ns  string
	rec *recorder
	// stable is the CloneSet's first revision, the one the Rollout adopts.
	stable string
	// original is every Pod as first created, to prove in-place updates.
	original map[string]podSnapshot
}

type storyOptions struct {
	replicas int32
	// labels are added to the Pod template (not to the selector).
	labels map[string]string
	spec   stepwisev1.RolloutSpec
	// templates are created in the story's namespace before the Rollout.
	templates []stepwisev1.AnalysisTemplate
}

// newStory creates a CloneSet on 1.0.0, waits for its Pods, then creates the
// Rollout and waits until it adopted that revision as stable and armed the
// partition at 100%.
func (e *rolloutEnv) newStory(t *testing.T, prefix string, o storyOptions) *story {
	t.Helper()
	g := NewWithT(t)
	ns := e.namespace(t, prefix)
	s := &story{e: e, t: t, ns: ns, rec: e.record(t, ns)}
	// Every story changes the CloneSet only as git would (the template, the
	// replicas) and leaves the partition to the Rollout: a conflict raised
	// at any moment would be a false alarm.
	t.Cleanup(func() {
		if seen := s.rec.conditionMessages(stepwisev1.PartitionConflictCondition); len(seen) > 0 {
			t.Errorf("%s raised though only the Rollout writes the partition: %q", stepwisev1.PartitionConflictCondition, seen)
		}
	})

	cs := cloneSet(ns, "web", o.replicas, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.Template.Spec.Containers[0].Image = webImage("1.0.0")
	// Restart at once: the stories are about steps, not restart delays.
	cs.Spec.Template.Annotations = map[string]string{kwokcluster.AnnotationRestartDelay: "0"}
	for k, v := range o.labels {
		cs.Spec.Template.Labels[k] = v
	}
	g.Expect(e.client.Create(t.Context(), cs)).To(Succeed())
	settled := e.waitSettled(t, ns, "web", o.replicas, o.replicas, settleTimeout)
	s.stable = settled.Status.UpdateRevision
	s.original = snapshot(e.pods(g, ns))

	if o.labels[noTrafficLabel] != "off" {
		s.waitRates(int(o.replicas))
	}

	for _, tmpl := range o.templates {
		tmpl.Namespace = ns
		g.Expect(e.client.Create(t.Context(), &tmpl)).To(Succeed())
	}
	o.spec.WorkloadRef = stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"}
	ro := &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: o.spec}
	g.Expect(e.client.Create(t.Context(), ro)).To(Succeed())
	s.waitRollout("adopts the running revision and governs the CloneSet", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(s.stable))
		g.Expect(s.partition(g)).To(Equal("0"), "every Pod may run the stable revision")
	})
	return s
}

// commit changes the app image, as a git commit applied by a GitOps tool
// would, and returns the CloneSet's new update revision.
func (s *story) commit(version string) string {
	s.t.Helper()
	return s.e.commitWeb(s.t, s.ns, version)
}

// request writes a request annotation (promote-at, retry-at, ...) with a
// timestamp token, as `kubectl stepwise` does, and returns the token.
func (s *story) request(annotation string) string {
	s.t.Helper()
	return s.e.requestWeb(s.t, s.ns, annotation)
}

func (s *story) rollout(g Gomega) *stepwisev1.Rollout { return s.e.rolloutWeb(g, s.ns) }

// partition is the partition the CloneSet applies ("60%", "0"), "" when unset.
func (s *story) partition(g Gomega) string {
	return appliedPartition(s.e.get(g, s.ns, "web"))
}

// waitRollout waits until check passes on the Rollout; a failure prints the
// last status read.
func (s *story) waitRollout(what string, check func(g Gomega, ro *stepwisev1.Rollout)) *stepwisev1.Rollout {
	s.t.Helper()
	return s.e.waitRolloutWeb(s.t, s.ns, what, rolloutTimeout, check)
}

// holdRollout checks that check keeps passing for d.
func (s *story) holdRollout(what string, d time.Duration, check func(g Gomega, ro *stepwisev1.Rollout)) {
	s.t.Helper()
	var last *stepwisev1.Rollout
	NewWithT(s.t).Consistently(func(g Gomega) {
		last = s.rollout(g)
		check(g, last)
	}, d, rolloutPoll).Should(Succeed(), func() string { return what + "\n" + describeRollout(last) })
}

func describeRollout(ro *stepwisev1.Rollout) string {
	if ro == nil {
		return "no Rollout read"
	}
	b, _ := json.MarshalIndent(ro.Status, "", "  ")
	return "Rollout status: " + string(b)
}

// podsOn lists, sorted, the live Pods labelled with revision.
func (s *story) podsOn(g Gomega, revision string) []string {
	var names []string
	for _, p := range s.e.pods(g, s.ns) {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] == revision {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// podsByImage counts the live Pods per app image.
func (s *story) podsByImage(g Gomega) map[string]int {
	out := map[string]int{}
	for _, p := range s.e.pods(g, s.ns) {
		out[imageOf(&p, "app")]++
	}
	return out
}

// restarts maps each Pod name to its app container's restart count.
func (s *story) restarts(g Gomega) map[string]int32 {
	out := map[string]int32{}
	for _, p := range s.e.pods(g, s.ns) {
		cs := containerStatus(&p, "app")
		g.Expect(cs).NotTo(BeNil(), "pod %s has a status for app", p.Name)
		out[p.Name] = cs.RestartCount
	}
	return out
}

// expectKeptPods asserts that every original Pod is still there (same
// name, UID, IP, node) and runs image, in spec and in its status.
func (s *story) expectKeptPods(g Gomega, image string) {
	pods := s.e.pods(g, s.ns)
	g.Expect(snapshot(pods)).To(Equal(s.original), "every Pod kept its name, UID, IP and node")
	for _, p := range pods {
		g.Expect(imageOf(&p, "app")).To(Equal(image), "pod %s spec", p.Name)
		g.Expect(containerStatus(&p, "app").Image).To(Equal(image), "pod %s status", p.Name)
		g.Expect(podCondition(&p, corev1.PodReady)).To(Equal(corev1.ConditionTrue), "pod %s ready", p.Name)
	}
}

// events returns the notes of the Rollout's Events with reason. The events
// recorder folds repeats into a series only when they are about the same
// resourceVersion of the Rollout, and every decision writes the status, so
// each occurrence is its own Event.
func (s *story) events(g Gomega, reason string) []string {
	var list eventsv1.EventList
	g.Expect(s.e.client.List(context.Background(), &list, client.InNamespace(s.ns))).To(Succeed())
	var notes []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "Rollout" && ev.Regarding.Name == "web" && ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// waitEvents waits until the notes of the Rollout's Events with reason
// match m: Events are sent after the status is written, asynchronously.
func (s *story) waitEvents(reason string, m OmegaMatcher) {
	s.t.Helper()
	NewWithT(s.t).Eventually(func(g Gomega) {
		g.Expect(s.events(g, reason)).To(m, "%s Events", reason)
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
}

// waitEvent waits for an Event with reason whose note holds every part.
func (s *story) waitEvent(reason string, parts ...string) {
	s.t.Helper()
	s.waitEvents(reason, ContainElement(SatisfyAll(containsAll(parts)...)))
}

func containsAll(parts []string) []OmegaMatcher {
	ms := []OmegaMatcher{Not(BeEmpty())}
	for _, p := range parts {
		ms = append(ms, ContainSubstring(p))
	}
	return ms
}

// condition returns a condition's status and message ("" when absent).
func condition(ro *stepwisev1.Rollout, typ string) (metav1.ConditionStatus, string, string) {
	c := apimeta.FindStatusCondition(ro.Status.Conditions, typ)
	if c == nil {
		return "", "", ""
	}
	return c.Status, c.Reason, c.Message
}

// waitHealthyAt waits for the end of a completed rollout: Healthy on
// revision, Ready, not Stalled, partition re-armed.
func (s *story) waitHealthyAt(revision string) *stepwisev1.Rollout {
	s.t.Helper()
	return s.waitRollout("Healthy on "+revision, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(revision))
		g.Expect(ro.Status.CanaryRevision).To(BeEmpty())
		g.Expect(ro.Status.CurrentStepIndex).To(BeNil())
		status, reason, _ := condition(ro, meta.ReadyCondition)
		g.Expect(status).To(Equal(metav1.ConditionTrue))
		g.Expect(reason).To(Equal(stepwisev1.ReasonStable))
		status, _, _ = condition(ro, meta.StalledCondition)
		g.Expect(status).To(BeEmpty(), "no Stalled condition")
		g.Expect(s.partition(g)).To(Equal("0"), "every Pod may run the new stable revision")
	})
}

// waitRates waits until Prometheus has a rate for both codes of n Pods of
// the namespace. rate() needs two samples in its window, so a Pod's first
// second or two of traffic yield no series: an analysis of a brand-new Pod
// is inconclusive, as it should be (see testNoData). A real release comes
// to an app that has been serving for a while; the stories start there.
func (s *story) waitRates(n int) {
	s.t.Helper()
	q := fmt.Sprintf(`count(rate(http_requests_total{namespace=%q}[10s]))`, s.ns)
	NewWithT(s.t).Eventually(func(g Gomega) {
		v, _, _, err := s.e.promAPI.Query(context.Background(), q, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		vec, ok := v.(model.Vector)
		g.Expect(ok).To(BeTrue(), "vector result, got %s", v.Type())
		g.Expect(vec).To(HaveLen(1), "the namespace has rates")
		g.Expect(float64(vec[0].Value)).To(BeEquivalentTo(2*n), "a 200 and a 500 rate per Pod")
	}, rolloutTimeout, 250*time.Millisecond).Should(Succeed())
}
