package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// A Rollout naming a CloneSet governs how far its Pods move, through the
// grant in its status (both controllers run here; no kubelet, so no Pod
// becomes ready and the Rollout never passes a step's gate). git's
// partition (0 here) is ignored while governed; a new template that the
// Rollout has not acknowledged (it is stalled on a bad query) moves no Pod
// and keeps the CloneSet Reconciling; deleting the Rollout gives the
// spec's partition back.
func TestCloneSetGovernedByARollout(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 4)
	cs.Spec.UpdateStrategy.Partition = intOrStr("0")
	cs.Spec.UpdateStrategy.MaxUnavailable = intOrStr("100%")
	g.Expect(env.client.Create(ctx, cs)).To(Succeed())
	var r1 string
	g.Eventually(func(g Gomega) {
		got := getCloneSet(g, ns, "web")
		g.Expect(listPods(g, ns)).To(HaveLen(4))
		g.Expect(got.Status.UpdateRevision).NotTo(BeEmpty())
		r1 = got.Status.UpdateRevision
	}, timeout).Should(Succeed())

	ro := &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"},
			Steps:       []stepwisev1.RolloutStep{{Partition: intstr.FromString("50%")}, {Partition: intstr.FromInt32(0)}},
		},
	}
	g.Expect(env.client.Create(ctx, ro)).To(Succeed())
	governed := func(g Gomega, rev, partition string) *stepwisev1.CloneSet {
		got := getCloneSet(g, ns, "web")
		g.Expect(got.Status.Rollout).NotTo(BeNil())
		g.Expect(*got.Status.Rollout).To(Equal(stepwisev1.CloneSetGovernor{Name: "web", Revision: rev, Partition: intstr.Parse(partition)}))
		c := apimeta.FindStatusCondition(got.Status.Conditions, stepwisev1.GovernedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("spec.updateStrategy.partition (0) is ignored"))
		return got
	}

	// The Rollout adopts r1 and lets every Pod run it.
	g.Eventually(func(g Gomega) { governed(g, r1, "0") }, timeout).Should(Succeed())
	waitForCloneSetEvent(t, ns, "web", stepwisev1.EventGoverned, "Rollout web now decides how far Pods move")

	// The Rollout stalls (a query a worker must not run), then a new
	// template comes: not acknowledged, it moves no Pod whatever git's
	// partition 0 says, and the CloneSet says so in Reconciling.
	updateRollout(t, ns, "web", func(ro *stepwisev1.Rollout) {
		ro.Spec.Analysis = &stepwisev1.AnalysisSpec{Metrics: []stepwisev1.Metric{{Name: "m",
			Prometheus:     &stepwisev1.PrometheusMetric{Address: "http://prometheus:9090", Query: `{{ range 3 }}x{{ end }}`},
			ThresholdRange: &stepwisev1.ThresholdRange{Max: "1"}}}}
	})
	g.Eventually(func(g Gomega) {
		cur := &stepwisev1.Rollout{}
		g.Expect(env.client.Get(ctx, client.ObjectKeyFromObject(ro), cur)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(cur.Status.Conditions, "Stalled")).To(BeTrue())
	}, timeout).Should(Succeed())
	mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = "example.com/app:v2" })
	var r2 string
	g.Eventually(func(g Gomega) {
		got := governed(g, r1, "100%")
		r2 = got.Status.UpdateRevision
		g.Expect(r2).NotTo(Equal(r1))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		c := apimeta.FindStatusCondition(got.Status.Conditions, "Reconciling")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonAwaitingRollout))
		g.Expect(c.Message).To(Equal("revision " + r2 + " waits for Rollout web to acknowledge it: no Pod moves to it before"))
	}, timeout).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(revisionsOf(g, ns)).To(Equal(map[string]int{r1: 4}))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	// The query fixed, the Rollout starts at 50%: two Pods move.
	updateRollout(t, ns, "web", func(ro *stepwisev1.Rollout) { ro.Spec.Analysis = nil })
	g.Eventually(func(g Gomega) {
		governed(g, r2, "50%")
		g.Expect(revisionsOf(g, ns)).To(Equal(map[string]int{r1: 2, r2: 2}))
	}, timeout).Should(Succeed())

	// Deleting the Rollout gives the spec's partition (0) back.
	g.Expect(env.client.Delete(ctx, ro)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getCloneSet(g, ns, "web")
		g.Expect(got.Status.Rollout).To(BeNil())
		c := apimeta.FindStatusCondition(got.Status.Conditions, stepwisev1.GovernedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonRolloutGone))
		g.Expect(c.Message).To(Equal("Rollout web no longer governs this CloneSet (it was deleted): spec.updateStrategy.partition (0) applies"))
		g.Expect(revisionsOf(g, ns)).To(Equal(map[string]int{r2: 4}))
	}, timeout).Should(Succeed())
	waitForCloneSetEvent(t, ns, "web", stepwisev1.EventReleased, "Rollout web no longer governs this CloneSet")
}

func updateRollout(t *testing.T, ns, name string, f func(*stepwisev1.Rollout)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		ro := &stepwisev1.Rollout{}
		g.Expect(env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ro)).To(Succeed())
		f(ro)
		g.Expect(env.client.Update(context.Background(), ro)).To(Succeed())
	}, timeout).Should(Succeed())
}

// revisionsOf counts the live Pods per revision label.
func revisionsOf(g Gomega, ns string) map[string]int {
	out := map[string]int{}
	for _, p := range listPods(g, ns) {
		out[p.Labels[appsv1.ControllerRevisionHashLabelKey]]++
	}
	return out
}

func mutate(t *testing.T, ns, name string, f func(*stepwisev1.CloneSet)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cs := getCloneSet(g, ns, name)
		f(cs)
		g.Expect(env.client.Update(context.Background(), cs)).To(Succeed())
	}, timeout).Should(Succeed())
}

func waitForCloneSetEvent(t *testing.T, ns, name, reason, part string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(cloneSetEventNotes(g, ns, name, reason)).To(ContainElement(ContainSubstring(part)))
	}, timeout).Should(Succeed())
}

// cloneSetEventNotes lists the notes of the Events of one reason about a
// CloneSet.
func cloneSetEventNotes(g Gomega, ns, name, reason string) []string {
	var list eventsv1.EventList
	g.Expect(env.client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "CloneSet" && ev.Regarding.Name == name && ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// Another writer touching the CloneSet's metadata (an annotation every few
// milliseconds, as a GitOps tool or a policy controller might) while the
// Rollout adopts it makes the CloneSet controller read versions a write
// behind its own status write. The transition is still told once: one
// Governed Event, not one per version read.
func TestCloneSetGovernedEventOnceUnderConcurrentWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 4)
	g.Expect(env.client.Create(ctx, cs)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getCloneSet(g, ns, "web").Status.UpdateRevision).NotTo(BeEmpty())
	}, timeout).Should(Succeed())

	stop := make(chan struct{})
	writes := make(chan int, 1)
	go func() {
		n := 0
		defer func() { writes <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			patch := []byte(`{"metadata":{"annotations":{"example.com/touched":"` + strconv.Itoa(i) + `"}}}`)
			if env.client.Patch(ctx, &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
				client.RawPatch(types.MergePatchType, patch)) == nil {
				n++
			}
			time.Sleep(time.Millisecond)
		}
	}()
	ro := &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"},
			Steps:       []stepwisev1.RolloutStep{{Partition: intstr.FromString("50%")}, {Partition: intstr.FromInt32(0)}},
		},
	}
	g.Expect(env.client.Create(ctx, ro)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getCloneSet(g, ns, "web").Status.Rollout).NotTo(BeNil())
	}, timeout).Should(Succeed())
	// The writer goes on a while after the transition: stale reads of the
	// version before it are what would tell it again.
	time.Sleep(2 * time.Second)
	close(stop)
	t.Logf("%d metadata writes by the other writer", <-writes)
	waitForCloneSetEvent(t, ns, "web", stepwisev1.EventGoverned, "Rollout web now decides how far Pods move")
	g.Consistently(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(env.client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		governed := 0
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "CloneSet" && ev.Reason == stepwisev1.EventGoverned {
				governed++
			}
		}
		g.Expect(governed).To(Equal(1), "one Governed Event for one transition")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}
