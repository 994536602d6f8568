package rollout_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// backgroundAnalysis measures the errors template every second from the
// first step until promotion, its target arg the namespace.
func backgroundAnalysis(ns string) *stepwisev1.AnalysisSpec {
	return &stepwisev1.AnalysisSpec{
		Interval:     &metav1.Duration{Duration: time.Second},
		ScrapeMargin: &metav1.Duration{Duration: time.Second},
		Args:         []stepwisev1.AnalysisArg{{Name: "target", Value: &ns}},
		Background:   &stepwisev1.BackgroundAnalysis{Templates: []stepwisev1.AnalysisTemplateRef{{Name: "errors"}}},
	}
}

// A release that degrades during an hour's pause is aborted by the
// background analysis then, not at the end of the pause: partition back
// to 100%, Aborted and Stalled, with the failing tally on show.
func TestBackgroundAnalysisAbortsARolloutThatDegradesDuringAPause(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.001})
	if err := env.client.Create(testContext(t), errorRateTemplate(ns, "errors")); err != nil {
		t.Fatal(err)
	}
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseFor(time.Hour)), stepAt(num(0)))
	ro.Spec.Analysis = backgroundAnalysis(ns)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonStepPaused))
		bg := ro.Status.BackgroundAnalysis
		g.Expect(bg).NotTo(BeNil())
		g.Expect(bg.Revision).To(Equal("web-2-0-0"))
		g.Expect(bg.Phase).To(Equal(stepwisev1.AnalysisRunning))
		g.Expect(bg.Metrics).To(HaveLen(1))
		g.Expect(bg.Metrics[0].Successful).To(BeNumerically(">=", 2))
	})

	env.prom.set(ns, answer{value: 0.5})
	aborted := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonBackgroundAnalysisFailed))
		g.Expect(ro.Status.Message).To(ContainSubstring("background analysis failed"))
		g.Expect(ro.Status.Message).To(ContainSubstring("value 0.5 above max 0.01"))
		kstatusStalled(g, ro)
	})
	if bg := aborted.Status.BackgroundAnalysis; bg == nil || bg.Phase != stepwisev1.AnalysisFailed {
		t.Errorf("status.backgroundAnalysis = %+v, want the failed tally kept on show", bg)
	}
	var background int
	for _, m := range aborted.Status.Measurements {
		if m.Analysis == stepwisev1.MeasurementOfBackground {
			background++
		}
	}
	if background < 3 {
		t.Errorf("%d background measurements in status.measurements, want at least 3", background)
	}
	if p := partitionOf(t, ns, "web"); p != "100%" {
		t.Fatalf("partition = %s, want 100%% after the abort", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventAnalysisFailed, "background analysis (at step 1/2)")
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutAborted, "background analysis failed")
}

// A background template that goes missing mid-release holds the rollout
// where it is, Stalled and naming it, past the end of the step's pause:
// the release never steps on unwatched.
func TestBackgroundAnalysisWithoutItsTemplateHoldsTheRollout(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.001})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseFor(time.Second)), stepAt(num(0)))
	ro.Spec.Analysis = backgroundAnalysis(ns)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		c := condition(ro, "Stalled")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonAnalysisTemplateMissing))
		g.Expect(c.Message).To(ContainSubstring("AnalysisTemplate errors not found"))
		stepIs(g, ro, 0)
	})
	consistently(t, ns, "web", 2500*time.Millisecond, func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
	})
	if n := env.prom.count(ns); n != 0 {
		t.Errorf("%d queries, want none without the template", n)
	}
}
