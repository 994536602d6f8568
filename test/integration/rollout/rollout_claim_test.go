package rollout_test

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Two Rollouts on one workload share the field manager, so neither would
// see the other's partition writes as a conflict. The older drives it; the
// younger is refused (Stalled, a Warning Event naming the older), never
// decides and never writes the partition, also across a restart of the
// controller, and takes over as soon as the older is deleted.
func TestASecondRolloutOfAWorkloadIsRefusedUntilTheFirstIsDeleted(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createCloneSet(t, newCloneSet(ns, "web", 10, "1.0.0"))
	autopilot(t, ns, "web")
	ctrl := startController(t, ns)

	createRollout(t, newRollout(ns, "first", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0))))
	eventually(t, ns, "first", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	// A different plan: any write of it would show in the partition.
	createRollout(t, newRollout(ns, "second", cloneSetRef("web"), stepAt(pct("80%"), pauseForPromote()), stepAt(num(0))))

	refused := func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusStalled(g, ro)
		ready := condition(ro, meta.ReadyCondition)
		g.Expect(ready.Reason).To(Equal(stepwisev1.ReasonDuplicateRollout))
		g.Expect(ready.Message).To(ContainSubstring("CloneSet web is driven by Rollout first, created first"))
		g.Expect(ready.Message).To(ContainSubstring("this Rollout leaves its partition alone"))
		// It never took a decision: nothing adopted, no phase.
		g.Expect(ro.Status.Phase).To(BeEmpty())
		g.Expect(ro.Status.StableRevision).To(BeEmpty())
	}
	eventually(t, ns, "second", refused)
	waitForEvent(t, ns, "second", stepwisev1.EventDuplicateRollout, "Rollout first")

	// The first rolls out a release; the second leaves the partition alone.
	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "first", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
	consistently(t, ns, "second", 2*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		refused(g, ro)
		g.Expect(partitionOf(t, ns, "web")).To(Equal("50%"), "only the first Rollout's step")
	})

	// A restarted controller decides the same.
	ctrl.Stop()
	startController(t, ns)
	annotate(t, ns, "second", meta.ReconcileRequestAnnotation)
	eventually(t, ns, "second", func(g Gomega, ro *stepwisev1.Rollout) {
		refused(g, ro)
		g.Expect(ro.Status.LastHandledReconcileAt).NotTo(BeEmpty(), "reconciled after the restart")
	})
	consistently(t, ns, "second", time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		refused(g, ro)
		g.Expect(partitionOf(t, ns, "web")).To(Equal("50%"))
	})
	if n := occurrences(events(t, ns, "second", stepwisev1.EventDuplicateRollout)); n != 1 {
		t.Errorf("DuplicateRollout recorded %d times, want once: the refusal did not change", n)
	}

	// The first goes: the second takes the workload over at once (no other
	// event touches it) and rolls the release out with its own plan.
	if err := env.client.Delete(testContext(t), getRollout(t, ns, "first")); err != nil {
		t.Fatalf("deleting the first Rollout: %v", err)
	}
	eventually(t, ns, "second", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-2-0-0"))
		g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, meta.StalledCondition)).To(BeNil())
		g.Expect(condition(ro, stepwisev1.PartitionConflictCondition)).To(BeNil(), "taking over is no conflict")
	})
	NewWithT(t).Eventually(func() string { return partitionOf(t, ns, "web") }).WithTimeout(timeout).WithPolling(poll).Should(Equal("80%"))
}
