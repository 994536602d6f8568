package rollout_test

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// setup creates a namespace with a 10-Pod CloneSet "web" at 1.0.0 and
// starts the controller. With auto, the autopilot plays the CloneSet
// controller; without, the test reports the CloneSet's status itself.
func setup(t *testing.T, auto bool) string {
	t.Helper()
	ns := newNamespace(t)
	createCloneSet(t, newCloneSet(ns, "web", 10, "1.0.0"))
	if auto {
		autopilot(t, ns, "web")
	} else {
		reportCloneSet(t, ns, "web", func(cs *stepwisev1.CloneSet) {
			cs.Status.UpdateRevision, cs.Status.CurrentRevision = "web-1-0-0", "web-1-0-0"
			cs.Status.UpdatedReadyReplicas, cs.Status.ReadyReplicas = 10, 10
		})
	}
	startController(t, ns)
	return ns
}

func TestIdleRolloutGrantsTheStableRevisionAndNeverWritesTheCloneSet(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	createRollout(t, newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0))))

	ro := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonStable))
		g.Expect(ro.Status.Message).To(Equal("revision web-1-0-0 is stable; a new revision waits for this Rollout"))
	})
	if c := condition(ro, meta.ReadyCondition); c.Reason != stepwisev1.ReasonStable {
		t.Errorf("Ready reason = %q, want %q", c.Reason, stepwisev1.ReasonStable)
	}
	if g := ro.Status.PartitionGrant; g == nil || g.Revision != "web-1-0-0" || g.Partition.String() != "0" {
		t.Fatalf("partitionGrant = %+v, want every Pod on web-1-0-0", g)
	}
	cs := getCloneSet(t, ns, "web")
	if p := cs.Spec.UpdateStrategy.Partition; p != nil {
		t.Errorf("spec.updateStrategy.partition = %s, want it left to git (unset)", p.String())
	}
	for _, m := range cs.ManagedFields {
		if m.Manager == workload.FieldManager && m.Subresource == "" {
			t.Errorf("the Rollout's field manager %q wrote the CloneSet's spec: %s", workload.FieldManager, m.FieldsV1.GetRawString())
		}
	}
}

// A new template starts a rollout at step 0; the step is reached only
// once the workload reports enough updated Pods ready for it; a pause with
// no duration then waits for a promote request.
func TestNewRevisionStartsStepZeroAndTheGateWaitsForUpdatedReadyPods(t *testing.T) {
	t.Parallel()
	ns := setup(t, false)
	createRollout(t, newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("80%"), pauseForPromote()), stepAt(num(0))))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	reportCloneSet(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Status.UpdateRevision, cs.Status.UpdatedReadyReplicas = "web-2-0-0", 0
	})
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusProgressing(g, ro)
		stepIs(g, ro, 0)
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-2-0-0"))
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutProgressing))
	})
	if p := partitionOf(t, ns, "web"); p != "80%" {
		t.Fatalf("partition = %s, want step 0's 80%%", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutStarted, "web-2-0-0")

	// The workload saw the partition, but only one of the two Pods it
	// must update is ready: the gate holds.
	reportCloneSet(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Status.UpdatedReadyReplicas = 1 })
	consistently(t, ns, "web", 1500*time.Millisecond, func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonWaitingForPods))
		g.Expect(ro.Status.StepReadyAt).To(BeNil())
	})

	reportCloneSet(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Status.UpdatedReadyReplicas = 2 })
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		kstatusProgressing(g, ro)
	})
	waitForEvent(t, ns, "web", stepwisev1.EventStepReady)
	consistently(t, ns, "web", time.Second, func(g Gomega, ro *stepwisev1.Rollout) { stepIs(g, ro, 0) })

	token := annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 1)
		g.Expect(ro.Status.LastHandledPromoteAt).To(Equal(token))
	})
	if p := partitionOf(t, ns, "web"); p != "0" {
		t.Fatalf("partition = %s, want step 1's 0", p)
	}
	reportCloneSet(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Status.UpdatedReadyReplicas, cs.Status.CurrentRevision = 10, "web-2-0-0"
	})
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
		g.Expect(ro.Status.CanaryRevision).To(BeEmpty())
		g.Expect(ro.Status.CurrentStepIndex).To(BeNil())
	})
	if p := partitionOf(t, ns, "web"); p != "0" {
		t.Fatalf("partition = %s, want the stable revision granted to every Pod (0)", p)
	}
}

// A timed pause ends by itself: the controller requeues for its end, with
// no outside event.
func TestTimedPauseRequeuesAndContinues(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	createRollout(t, newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseFor(2*time.Second)), stepAt(num(0))))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	ro := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonStepPaused))
		kstatusProgressing(g, ro)
	})
	ready := ro.Status.StepReadyAt.Time
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	completed := waitForEvent(t, ns, "web", stepwisev1.EventRolloutCompleted, "web-2-0-0")
	if at := completed.EventTime.Time; at.Sub(ready) < 2*time.Second-time.Second/2 {
		t.Errorf("completed %s after the step was ready, before the 2s pause ended", at.Sub(ready))
	}
	if p := partitionOf(t, ns, "web"); p != "0" {
		t.Fatalf("partition = %s, want the stable revision granted to every Pod (0)", p)
	}
}

// A newer template during a rollout replaces the canary and starts again
// at step 0.
func TestNewRevisionMidRolloutRestartsAtStepZero(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	createRollout(t, newRollout(ns, "web", cloneSetRef("web"),
		stepAt(pct("50%"), pauseFor(time.Second)), stepAt(pct("20%"), pauseForPromote()), stepAt(num(0))))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 1)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
	commit(t, ns, "web", "3.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-3-0-0"))
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutRestarted, "web-3-0-0", "web-2-0-0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 1)
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-3-0-0"))
	})
}

// A template back at the stable revision returns every Pod to it at once:
// no steps, no analysis.
func TestRevertToStableTakesTheFastPath(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.001})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(2)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
	commit(t, ns, "web", "1.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
		g.Expect(ro.Status.CanaryRevision).To(BeEmpty())
	})
	waitForEvent(t, ns, "web", stepwisev1.EventRollingBack, "web-1-0-0")
	if n := env.prom.count(ns); n != 0 {
		t.Errorf("%d queries, want none: a rollback is not analysed", n)
	}
	if p := partitionOf(t, ns, "web"); p != "0" {
		t.Fatalf("partition = %s, want the stable revision granted to every Pod (0)", p)
	}
}

// The workload makes no progress: past progressDeadlineSeconds the rollout
// aborts and the partition goes back to 100%.
func TestProgressDeadlineAborts(t *testing.T) {
	t.Parallel()
	ns := setup(t, false)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.ProgressDeadlineSeconds = new(int32(2))
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	reportCloneSet(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Status.UpdateRevision, cs.Status.UpdatedReadyReplicas = "web-2-0-0", 0
	})
	eventually(t, ns, "web", func(g Gomega, _ *stepwisev1.Rollout) { g.Expect(partitionOf(t, ns, "web")).To(Equal("50%")) })
	// The workload saw the partition, and no Pod ever becomes ready.
	reportCloneSet(t, ns, "web", func(*stepwisev1.CloneSet) {})

	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonProgressDeadlineExceeded))
		g.Expect(ro.Status.Message).To(ContainSubstring("no progress for 2s"))
		kstatusStalled(g, ro)
	})
	if p := partitionOf(t, ns, "web"); p != "100%" {
		t.Fatalf("partition = %s, want 100%% after the abort", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutAborted, "no progress")
}

// A Rollout created before its workload waits for it, and takes it over
// when it appears: the workload's creation is watched.
func TestMissingWorkloadIsWaitedFor(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startController(t, ns)
	createRollout(t, newRollout(ns, "web", cloneSetRef("web"), stepAt(num(0))))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		ready := condition(ro, meta.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(stepwisev1.ReasonWorkloadNotFound))
		g.Expect(condition(ro, meta.StalledCondition)).To(BeNil())
	})
	createCloneSet(t, newCloneSet(ns, "web", 3, "1.0.0"))
	autopilot(t, ns, "web")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
}
