package rollout_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// postPromotionAnalysis measures the errors template every second for
// window once every Pod runs the canary, its target arg the namespace.
func postPromotionAnalysis(ns string, window time.Duration) *stepwisev1.AnalysisSpec {
	return &stepwisev1.AnalysisSpec{
		Interval:     &metav1.Duration{Duration: time.Second},
		ScrapeMargin: &metav1.Duration{Duration: time.Second},
		Args:         []stepwisev1.AnalysisArg{{Name: "target", Value: &ns}},
		PostPromotion: &stepwisev1.PostPromotionAnalysis{Window: metav1.Duration{Duration: window},
			Templates: []stepwisev1.AnalysisTemplateRef{{Name: "errors"}}},
	}
}

// The revision is made stable only at the end of the window, measured
// all along with every Pod on it; Ready stays False until then.
func TestPostPromotionAnalysisPassesAtTheEndOfItsWindow(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.001})
	if err := env.client.Create(testContext(t), errorRateTemplate(ns, "errors")); err != nil {
		t.Fatal(err)
	}
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = postPromotionAnalysis(ns, 6*time.Second)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonPostPromotionAnalysis))
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"), "not stable before the window ends")
		g.Expect(condition(ro, "Ready").Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ro.Status.PostPromotionAnalysis).NotTo(BeNil())
	})
	if p := partitionOf(t, ns, "web"); p != "0" {
		t.Errorf("partition = %s during the window, want 0: every Pod on the canary", p)
	}
	done := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	if done.Status.PostPromotionAnalysis != nil {
		t.Errorf("status.postPromotionAnalysis = %+v once stable, want it gone", done.Status.PostPromotionAnalysis)
	}
	var post int
	for _, m := range done.Status.Measurements {
		if m.Analysis == stepwisev1.MeasurementOfPostPromotion {
			post++
			if m.Step != 1 || m.Phase != stepwisev1.MeasurementSuccessful {
				t.Errorf("measurement %+v, want a successful one at step 2", m)
			}
		}
	}
	if post < 2 {
		t.Errorf("%d post-promotion measurements, want at least 2 in a 6s window", post)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutCompleted, "post-promotion analysis")
}

// A failure in the window aborts with every Pod on the canary: the
// partition goes back to 100%, which takes every Pod back to the stable
// revision, and the revision never becomes stable.
func TestPostPromotionAnalysisFailureAbortsWithEveryPodUpdated(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.001})
	if err := env.client.Create(testContext(t), errorRateTemplate(ns, "errors")); err != nil {
		t.Fatal(err)
	}
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = postPromotionAnalysis(ns, time.Hour)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonPostPromotionAnalysis))
		pp := ro.Status.PostPromotionAnalysis
		g.Expect(pp).NotTo(BeNil())
		g.Expect(pp.Metrics).To(HaveLen(1))
		g.Expect(pp.Metrics[0].Successful).To(BeNumerically(">=", 2))
	})
	env.prom.set(ns, answer{value: 0.5})
	aborted := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonPostPromotionAnalysisFailed))
		g.Expect(ro.Status.Message).To(ContainSubstring("post-promotion analysis failed"))
		kstatusStalled(g, ro)
	})
	if aborted.Status.StableRevision != "web-1-0-0" {
		t.Errorf("stable revision %s, want web-1-0-0: a failed window never promotes", aborted.Status.StableRevision)
	}
	if pp := aborted.Status.PostPromotionAnalysis; pp == nil || pp.Phase != stepwisev1.AnalysisFailed {
		t.Errorf("status.postPromotionAnalysis = %+v, want the failed tally kept on show", pp)
	}
	if p := partitionOf(t, ns, "web"); p != "100%" {
		t.Fatalf("partition = %s, want 100%% after the abort", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutAborted, "post-promotion analysis failed")
}
