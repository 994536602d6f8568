package rollout_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// waitPods waits until the workload's Pods are n, all ready and on revision.
func waitPods(t *testing.T, ns string, labels map[string]string, n int, revision string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		var err error
		pods, err = podsOf(testContext(t), ns, labels)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(n))
		for i := range pods {
			g.Expect(pods[i].DeletionTimestamp).To(BeNil(), "pod %s", pods[i].Name)
			g.Expect(isReady(&pods[i])).To(BeTrue(), "pod %s ready", pods[i].Name)
			g.Expect(pods[i].Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(revision), "pod %s revision", pods[i].Name)
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return pods
}

func revisions(t *testing.T, ns string, labels map[string]string) map[string]string {
	t.Helper()
	pods, err := podsOf(testContext(t), ns, labels)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i := range pods {
		out[pods[i].Name] = pods[i].Labels[appsv1.ControllerRevisionHashLabelKey]
	}
	return out
}

// An abort raises a StatefulSet's partition, which moves no Pod back. The
// Rollout deletes the canary Pods, highest ordinal first, one at a time
// (maxUnavailable 1), each only once the one before is back and ready, so
// that the StatefulSet recreates them on the stable revision; its status
// says what it waits for. A controller restarted in the middle carries on
// without deleting any Pod twice.
func TestAnAbortRollsStatefulSetCanariesBackOneAtATime(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	labels := map[string]string{"app": "db"}
	pilotedStatefulSet(t, ns, "db", 4, "1.0.0")
	ctrl := startController(t, ns)
	canariesAwaitingPromotion(t, ns)
	if got := revisions(t, ns, labels); fmt.Sprint(got) != fmt.Sprint(map[string]string{"db-0": "db-1-0-0", "db-1": "db-1-0-0", "db-2": "db-2-0-0-bad", "db-3": "db-2-0-0-bad"}) {
		t.Fatalf("Pods before the abort: %v, want db-2 and db-3 on the canary", got)
	}
	watch := watchRollback(t, ns, "db", labels, 4)

	annotate(t, ns, "db", stepwisev1.AbortAtAnnotation)
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		c := condition(ro, stepwisev1.CanaryRollbackCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(HavePrefix("rolling back 1 canary Pod to revision db-1-0-0: waiting for db-3 to be"))
	})
	// The controller stops while db-3 comes back; nothing else moves.
	ctrl.Stop()
	NewWithT(t).Eventually(func() string { return revisions(t, ns, labels)["db-3"] }).WithTimeout(timeout).WithPolling(poll).Should(Equal("db-1-0-0"))
	waitPodsReadyCount(t, ns, labels, 4)
	time.Sleep(300 * time.Millisecond)
	if rev := revisions(t, ns, labels)["db-2"]; rev != "db-2-0-0-bad" {
		t.Fatalf("db-2 is on %s while no controller runs, want it left on the canary", rev)
	}
	startController(t, ns)

	ro := eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusStalled(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		c := condition(ro, stepwisev1.CanaryRollbackCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(string(c.Status)).To(Equal("False"))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonCanaryPodsRolledBack))
		g.Expect(c.Message).To(MatchRegexp(`^every Pod is back on revision db-1-0-0, (under 1s|[0-9]+s) after the rollback began$`))
	})
	for _, p := range waitPods(t, ns, labels, 4, "db-1-0-0") {
		if img := p.Spec.Containers[0].Image; img != image("1.0.0") {
			t.Errorf("pod %s runs %s, want the stable image", p.Name, img)
		}
	}
	if p := getStatefulSet(t, ns, "db").Spec.UpdateStrategy.RollingUpdate.Partition; *p != 4 {
		t.Errorf("partition = %d, want 4", *p)
	}
	if !strings.Contains(ro.Status.Message, "aborted at step 1/2") {
		t.Errorf("message %q lost the abort's reason", ro.Status.Message)
	}

	maxUnavailable, messages := watch.seen()
	if maxUnavailable > 1 {
		t.Errorf("%d Pods unavailable at once, want at most 1 (maxUnavailable)", maxUnavailable)
	}
	for _, want := range []string{
		"rolling back 2 canary Pods to revision db-1-0-0: db-3 deleted, waiting for it to be ready",
		"rolling back 1 canary Pod to revision db-1-0-0: db-2 deleted, waiting for it to be ready",
		"canary Pods deleted, coming back on revision db-1-0-0: waiting for db-2 to be ready",
	} {
		if !slices.Contains(messages, want) {
			t.Errorf("CanaryRollback messages %q, want one to be %q", messages, want)
		}
	}
	deleted := waitForEvents(t, ns, "db", stepwisev1.EventCanaryPodDeleted, 2)
	for i, name := range []string{"db-3", "db-2"} {
		want := fmt.Sprintf("deleted canary Pod %s (revision db-2-0-0-bad) so that StatefulSet db recreates it on stable revision db-1-0-0", name)
		if deleted[i] != want {
			t.Errorf("CanaryPodDeleted Event %d = %q, want %q", i, deleted[i], want)
		}
	}
	waitForEvent(t, ns, "db", stepwisev1.EventCanaryRollbackCompleted, "every Pod is back on revision db-1-0-0")
}

// waitPodsReadyCount waits until n Pods exist, all ready.
func waitPodsReadyCount(t *testing.T, ns string, labels map[string]string, n int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		pods, err := podsOf(testContext(t), ns, labels)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(n))
		for i := range pods {
			g.Expect(isReady(&pods[i])).To(BeTrue())
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// waitForEvents waits for exactly n occurrences of reason on the Rollout
// and returns their notes, oldest first.
func waitForEvents(t *testing.T, ns, name, reason string, n int) []string {
	t.Helper()
	var notes []string
	NewWithT(t).Eventually(func(g Gomega) {
		evs := events(t, ns, name, reason)
		g.Expect(occurrences(evs)).To(Equal(n))
		notes = notes[:0]
		for _, e := range sortedByTime(evs) {
			notes = append(notes, e.Note)
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	// No more come later.
	time.Sleep(500 * time.Millisecond)
	if got := occurrences(events(t, ns, name, reason)); got != n {
		t.Errorf("%d %s Events, want %d", got, reason, n)
	}
	return notes
}

// commitKruise changes the Kruise CloneSet's image as git would.
func commitKruise(t *testing.T, ns, name, version string) {
	t.Helper()
	u := getKruise(t, ns, name)
	body := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, image(version))
	if err := env.client.Patch(testContext(t), u, client.RawPatch(types.MergePatchType, []byte(body)), client.FieldOwner("git")); err != nil {
		t.Fatalf("committing %s: %v", version, err)
	}
}

// kruiseToAbort runs an OpenKruise CloneSet of 4 with the update budget
// maxUnavailable through a bad release aborted at its first step
// (partition 50%), and returns the watch started just before the abort and
// the UIDs of the Pods at that moment.
func kruiseToAbort(t *testing.T, ns string, partitionRollback bool, maxUnavailable string) (*podWatch, map[string]string) {
	t.Helper()
	labels := map[string]string{"app": "web"}
	annotations := map[string]any{}
	if partitionRollback {
		annotations[stepwisev1.KruisePartitionRollbackAnnotation] = "true"
	}
	cs := newKruiseCloneSet(ns, "web", 4, "1.0.0", annotations)
	if err := unstructured.SetNestedField(cs.Object, maxUnavailable, "spec", "updateStrategy", "maxUnavailable"); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Create(testContext(t), cs); err != nil {
		t.Fatalf("creating Kruise CloneSet: %v", err)
	}
	kruisePilot(t, ns, "web", partitionRollback)
	waitPods(t, ns, labels, 4, "web-1-0-0")
	startController(t, ns)
	ref := stepwisev1.WorkloadReference{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet", Name: "web"}
	createRollout(t, newRollout(ns, "web", ref, stepAt(pct("50%"), pauseForPromote()), stepAt(num(0))))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commitKruise(t, ns, "web", "2.0.0-bad")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
	pods, err := podsOf(testContext(t), ns, labels)
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	for i := range pods {
		uids[pods[i].Name] = string(pods[i].UID)
	}
	watch := watchRollback(t, ns, "web", labels, 4)
	annotate(t, ns, "web", stepwisev1.AbortAtAnnotation)
	return watch, uids
}

// OpenKruise without its CloneSetPartitionRollback gate leaves updated Pods
// alone when the partition rises: the Rollout deletes the canaries one at a
// time (maxUnavailable 25% of 4) and Kruise recreates them on the current
// revision.
func TestAnAbortRollsKruiseCanariesBackWithoutThePartitionRollbackGate(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	watch, before := kruiseToAbort(t, ns, false, "25%")

	pods := waitKruiseRolledBack(t, ns)
	kept := 0
	for _, p := range pods {
		if before[p.Name] == string(p.UID) {
			kept++
		}
		if img := p.Spec.Containers[0].Image; img != image("1.0.0") {
			t.Errorf("pod %s runs %s, want the stable image", p.Name, img)
		}
	}
	if kept != 2 {
		t.Errorf("%d of the Pods before the abort are left, want the 2 stable ones (the 2 canaries replaced)", kept)
	}
	maxUnavailable, messages := watch.seen()
	if maxUnavailable > 1 {
		t.Errorf("%d Pods unavailable at once, want at most 1", maxUnavailable)
	}
	if !slices.ContainsFunc(messages, func(m string) bool {
		return strings.HasPrefix(m, "rolling back 2 canary Pods to revision web-1-0-0: web-") && strings.HasSuffix(m, " deleted, waiting for it to be ready")
	}) {
		t.Errorf("CanaryRollback messages %q, want the first deletion of 2 canaries announced", messages)
	}
	waitForEvents(t, ns, "web", stepwisev1.EventCanaryPodDeleted, 2)
}

// With a budget of 2 (maxUnavailable 50% of 4), one round deletes both
// canaries, and its one CanaryPodDeleted Event names the two: the
// recorder folds a second Event of the same reason on the same Rollout
// version into the first one's series, and the second Pod's name would be
// lost to a count.
func TestAnAbortRoundThatDeletesTwoCanariesNamesBothInOneEvent(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	_, before := kruiseToAbort(t, ns, false, "50%")

	kept := map[string]bool{}
	for _, p := range waitKruiseRolledBack(t, ns) {
		kept[p.Name+"/"+string(p.UID)] = true
	}
	var replaced []string
	for name, uid := range before {
		if !kept[name+"/"+uid] {
			replaced = append(replaced, name)
		}
	}
	if len(replaced) != 2 {
		t.Fatalf("Pods replaced %v, want the 2 canaries", replaced)
	}
	deleted := waitForEvents(t, ns, "web", stepwisev1.EventCanaryPodDeleted, 1)
	note := deleted[0]
	if !strings.HasPrefix(note, "deleted 2 canary Pods (") ||
		!strings.HasSuffix(note, ") (revision web-2-0-0-bad) so that CloneSet web recreates them on stable revision web-1-0-0") {
		t.Errorf("CanaryPodDeleted Event %q, want one naming 2 canary Pods of revision web-2-0-0-bad", note)
	}
	for _, name := range replaced {
		if !strings.Contains(note, name) {
			t.Errorf("CanaryPodDeleted Event %q does not name %s", note, name)
		}
	}
}

// waitKruiseRolledBack waits for kruiseToAbort's Rollout to say its
// canaries are rolled back, and for the CloneSet's 4 Pods to be ready on
// the stable revision, which it returns.
func waitKruiseRolledBack(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		c := condition(ro, stepwisev1.CanaryRollbackCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonCanaryPodsRolledBack))
	})
	return waitPods(t, ns, map[string]string{"app": "web"}, 4, "web-1-0-0")
}

// With the gate declared on the CloneSet, Kruise moves the canaries back in
// place itself: the Rollout deletes nothing and only follows the rollback
// in CanaryRollback, to its end and how long it took.
func TestAnAbortLeavesTheRollbackToKruiseWithThePartitionRollbackGate(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	watch, before := kruiseToAbort(t, ns, true, "25%")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
	})
	pods := waitPods(t, ns, map[string]string{"app": "web"}, 4, "web-1-0-0")
	for _, p := range pods {
		if before[p.Name] != string(p.UID) {
			t.Errorf("pod %s was replaced, want every Pod moved back in place", p.Name)
		}
	}
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		c := condition(ro, stepwisev1.CanaryRollbackCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonCanaryPodsRolledBack))
		g.Expect(c.Message).To(MatchRegexp(`^every Pod is back on revision web-1-0-0 in place, (under 1s|[0-9]+s) after the rollback began$`))
	})
	_, messages := watch.seen()
	if len(messages) == 0 {
		t.Error("CanaryRollback never said the rollback was going on")
	}
	for _, m := range messages {
		if !strings.Contains(m, " in place") {
			t.Errorf("CanaryRollback message %q, want every one to say in place", m)
		}
	}
	if n := len(events(t, ns, "web", stepwisev1.EventCanaryPodDeleted)); n != 0 {
		t.Errorf("%d CanaryPodDeleted Events, want none", n)
	}
}

// sortedByTime orders Events by when they were first recorded.
func sortedByTime(evs []eventsv1.Event) []eventsv1.Event {
	out := slices.Clone(evs)
	slices.SortStableFunc(out, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	return out
}

// canariesAwaitingPromotion walks StatefulSet db of ns (4 Pods on 1.0.0)
// to a bad release whose first step, 2 canaries (db-2, db-3), waits for a
// promotion: the moment an abort is tested from.
func canariesAwaitingPromotion(t *testing.T, ns string) {
	t.Helper()
	ref := stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	createRollout(t, newRollout(ns, "db", ref, stepAt(num(2), pauseForPromote()), stepAt(num(0))))
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	commitStatefulSet(t, ns, "db", "2.0.0-bad")
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
}
