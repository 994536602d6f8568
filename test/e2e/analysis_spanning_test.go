package e2e

import (
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// errorRateTemplate is the stories' error-rate metric as an
// AnalysisTemplate, for the analyses that take templates only.
func errorRateTemplate(address string) stepwisev1.AnalysisTemplate {
	a := errorRateAnalysis(address)
	return stepwisev1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: errorRateMetric},
		Spec:       stepwisev1.AnalysisTemplateSpec{Metrics: a.Metrics},
	}
}

// spanningAnalysis measures every second, the first failure failing, with
// no metric of the steps' own.
func spanningAnalysis() *stepwisev1.AnalysisSpec {
	return &stepwisev1.AnalysisSpec{
		Interval:     &metav1.Duration{Duration: time.Second},
		FailureLimit: ptr.To[int32](0),
		ScrapeMargin: &metav1.Duration{Duration: 2 * time.Second},
	}
}

var errorRateTemplateRef = []stepwisev1.AnalysisTemplateRef{{Name: errorRateMetric}}

// rolledBackInPlace matches CanaryRollback's message at the end of an
// in-place rollback and captures how long it took.
func rolledBackInPlace(stable string) *regexp.Regexp {
	return regexp.MustCompile(`^every Pod is back on revision ` + regexp.QuoteMeta(stable) + ` in place, (under 1s|[0-9]+s) after the rollback began$`)
}

// waitRolledBackInPlace waits for every Pod to be back on the stable image
// under its old name and UID, and for the Rollout to say so, and returns
// how long the Rollout says the rollback took.
func (s *story) waitRolledBackInPlace(g Gomega) string {
	s.t.Helper()
	done := rolledBackInPlace(s.stable)
	ro := s.waitRollout("every Pod back on the stable revision, in place", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		status, reason, message := condition(ro, stepwisev1.CanaryRollbackCondition)
		g.Expect([]string{string(status), reason}).To(Equal([]string{"False", stepwisev1.ReasonCanaryPodsRolledBack}), message)
		g.Expect(message).To(MatchRegexp(done.String()))
	})
	_, _, message := condition(ro, stepwisev1.CanaryRollbackCondition)
	g.Eventually(func(g Gomega) {
		cs := s.e.get(g, s.ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		g.Expect(cs.Status.UpdatedReplicas).To(BeZero())
		g.Expect(cs.Status.CurrentRevision).To(Equal(s.stable), "the CloneSet never made the canary current")
		s.expectKeptPods(g, webImage("1.0.0"))
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	s.waitEvent(stepwisev1.EventCanaryRollbackCompleted, "every Pod is back on revision "+s.stable+" in place")
	return done.FindStringSubmatch(message)[1]
}

// Background analysis keeps measuring while a step waits for a person: a
// canary that degrades during the pause is aborted without anyone acting,
// and its Pods go back in place.
func testBackgroundAbortsDuringPause(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	analysis := spanningAnalysis()
	analysis.Background = &stepwisev1.BackgroundAnalysis{Templates: errorRateTemplateRef}
	s := e.newStory(t, "bgpause", storyOptions{replicas: 4,
		templates: []stepwisev1.AnalysisTemplate{errorRateTemplate(e.prom.URL())},
		spec: stepwisev1.RolloutSpec{
			Steps:    []stepwisev1.RolloutStep{step("50%", 0), step("0", noPause)},
			Analysis: analysis,
		}})
	canary := s.commit("1.1.0")

	s.waitRollout("paused at step 1, the background analysis passing", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.CurrentStepIndex).To(HaveValue(BeEquivalentTo(0)))
		g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
		g.Expect(s.partition(g)).To(Equal("50%"))
		bg := ro.Status.BackgroundAnalysis
		g.Expect(bg).NotTo(BeNil())
		g.Expect(bg.Metrics).To(HaveLen(1))
		g.Expect(bg.Metrics[0].Successful).To(BeNumerically(">=", 3))
	})
	// The canary degrades while nobody looks.
	e.rates.set(s.ns, 0.2)

	ro := s.waitRollout("aborted by the background analysis", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
	})
	g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonBackgroundAnalysisFailed), ro.Status.Message)
	g.Expect(ro.Status.StableRevision).To(Equal(s.stable))
	g.Expect(ro.Status.BackgroundAnalysis.Phase).To(Equal(stepwisev1.AnalysisFailed))
	took := s.waitRolledBackInPlace(g)
	t.Logf("background abort: 2 canaries back in place %s after the abort", took)

	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("50%", "100%"), "never past step 1")
	ms := s.rec.measurements(g)
	g.Expect(ms).NotTo(BeEmpty())
	for _, m := range ms {
		g.Expect(m.Analysis).To(Equal(stepwisev1.MeasurementOfBackground), "measurement %+v", m)
	}
	g.Expect(phasesOf(ms)[0]).To(Equal(stepwisev1.MeasurementSuccessful))
	g.Expect(ms[len(ms)-1].Phase).To(Equal(stepwisev1.MeasurementFailed))
	var restarts []int32
	for _, n := range s.restarts(g) {
		restarts = append(restarts, n)
	}
	g.Expect(restarts).To(ConsistOf(int32(0), int32(0), int32(2), int32(2)),
		"the 2 canaries restarted forward and back, the 2 stable Pods never")
	s.waitEvent(stepwisev1.EventRolloutAborted, "background analysis failed")
}

// Post-promotion analysis: a release that passes its steps but fails once
// every Pod runs it is never made stable, and every Pod goes back to the
// stable revision in place; the Rollout says how long that took.
func testPostPromotionRollsBackInPlace(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	analysis := spanningAnalysis()
	analysis.PostPromotion = &stepwisev1.PostPromotionAnalysis{Window: metav1.Duration{Duration: 5 * time.Minute}, Templates: errorRateTemplateRef}
	s := e.newStory(t, "postpromo", storyOptions{replicas: 4,
		templates: []stepwisev1.AnalysisTemplate{errorRateTemplate(e.prom.URL())},
		spec: stepwisev1.RolloutSpec{
			// The steps measure nothing: the bad release reaches 100%.
			Steps:    []stepwisev1.RolloutStep{step("50%", noPause), step("0", noPause)},
			Analysis: analysis,
		}})
	bad := webImage("1.1.0-bad")
	canary := s.commit("1.1.0-bad")

	s.waitRollout("every Pod on the canary, in the post-promotion window", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonPostPromotionAnalysis))
		g.Expect(ro.Status.StableRevision).To(Equal(s.stable))
		g.Expect(s.podsByImage(g)).To(Equal(map[string]int{bad: 4}))
	})
	ro := s.waitRollout("aborted by the post-promotion analysis", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
	})
	g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonPostPromotionAnalysisFailed), ro.Status.Message)
	g.Expect(ro.Status.StableRevision).To(Equal(s.stable), "a failed window never promotes")
	g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
	took := s.waitRolledBackInPlace(g)
	t.Logf("post-promotion abort: all 4 Pods back in place %s after the abort", took)

	for name, n := range s.restarts(g) {
		g.Expect(n).To(BeEquivalentTo(2), "pod %s: forward to the bad image, back to the stable one", name)
	}
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("50%", "0", "100%"))
	ms := s.rec.measurements(g)
	g.Expect(ms).NotTo(BeEmpty())
	for _, m := range ms {
		g.Expect(m.Analysis).To(Equal(stepwisev1.MeasurementOfPostPromotion), "the steps measure nothing: %+v", m)
	}
	g.Expect(ms[len(ms)-1].Phase).To(Equal(stepwisev1.MeasurementFailed))
	s.waitEvent(stepwisev1.EventRolloutAborted, "post-promotion analysis failed")
}
