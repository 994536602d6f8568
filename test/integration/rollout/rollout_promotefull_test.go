package rollout_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// A promote-full request skips every pause and analysis left, the last
// step's included: the rollout goes to the last step at once and completes
// once its Pods are ready. Every analysis would fail here, so a completed
// rollout proves none ran. The request is recorded in status and in a
// Promoted Event; on an aborted rollout it is ignored, with an Event.
func TestPromoteFullSkipsToTheLastStepAndCompletes(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.5})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("90%"), pauseForPromote()), stepAt(pct("50%"), pauseFor(time.Hour)), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(3)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})

	token := annotate(t, ns, "web", stepwisev1.PromoteFullAtAnnotation)
	done := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
		g.Expect(ro.Status.LastHandledPromoteFullAt).To(Equal(token))
	})
	if done.Status.PromotedFull {
		t.Error("status.promotedFull is still true once the rollout completed")
	}
	if p := partitionOf(t, ns, "web"); p != "0" {
		t.Errorf("partition = %s, want every Pod on the new stable revision (0)", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventPromoted, "step 1/3: promoted in full by request", token, "on to step 3/3")
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutCompleted, "web-2-0-0 is stable promoted in full")
	if evs := events(t, ns, "web", stepwisev1.EventAnalysisStarted); len(evs) > 0 {
		t.Errorf("an analysis started: %s", evs[0].Note)
	}
	if len(done.Status.Measurements) > 0 {
		t.Errorf("measurements were taken: %+v", done.Status.Measurements)
	}

	// An aborted rollout is not promoted: retry it first.
	commit(t, ns, "web", "3.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
	annotate(t, ns, "web", stepwisev1.AbortAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
	})
	token = annotate(t, ns, "web", stepwisev1.PromoteFullAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.LastHandledPromoteFullAt).To(Equal(token))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventRequestIgnored, "promote-full request", token, "ignored while Aborted")
	consistently(t, ns, "web", time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-3-0-0"))
		g.Expect(ro.Status.PromotedFull).To(BeFalse())
	})
}
