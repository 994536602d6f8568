package e2e

import (
	"strconv"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TestRollout tells the Rollout's stories end to end: the real API server
// and CloneSet controller on a kwok cluster, a traffic simulator standing in
// for the Pods' clients and servers, and a real Prometheus scraping it every
// second, which the Rollout asks for the canary Pods' error rate. One cluster,
// one simulator and one Prometheus serve all subtests; each has its own
// namespace, and the simulator fails 20 % of the requests of any Pod whose
// image tag ends in "-bad" unless the story says otherwise.
func TestRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kwok cluster and Prometheus")
	}
	e := newRolloutEnv(t)
	// Stopping the manager stalls every story in flight, so this one runs
	// alone, before the others.
	t.Run("ManagerRestartMidAnalysisResumes", func(t *testing.T) { testManagerRestartMidAnalysis(t, e) })
	// The others run side by side, the longest first.
	runSideBySide(t, e, []sideStory[*rolloutEnv]{
		{"AnalysisWindows", testAnalysisWindows},
		{"GoodReleaseWalksEveryStep", testGoodRelease},
		{"RetryAfterAbortRollsOutAgain", testRetryAfterAbort},
		{"JudgeAbortsWhatAThresholdPasses", testJudgeAbortsWhatAThresholdPasses},
		{"NewRevisionMidRolloutRestarts", testNewRevisionMidRollout},
		{"UnreachablePrometheusNeverPromotes", testUnreachablePrometheus},
		{"BackgroundAbortsDuringPause", testBackgroundAbortsDuringPause},
		{"NoDataPausesUntilPromoted", testNoData},
		{"StatefulSetAbortRollsCanariesBack", testStatefulSetAbortRollsCanariesBack},
		{"BadReleaseAbortsAndRollsBackInPlace", testBadRelease},
		{"PostPromotionRollsBackInPlace", testPostPromotionRollsBackInPlace},
		{"ScaleMidStepKeepsPercentPartition", testScaleMidStep},
		{"VersionPolicyHoldsRollout", testVersionPolicy},
		{"IndefinitePauseWaitsForPromote", testIndefinitePause},
		{"UndoMidRolloutRollsBackInPlace", testUndoMidRollout},
		{"RevertToStableSkipsAnalysis", testRevertToStable},
	})
}

// A good release: every step is reached, analysed against Prometheus and
// passed, then the new revision is stable and every Pod runs it, updated in
// place.
func testGoodRelease(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "good", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("60%", stepPause), step("20%", noPause), step("0", noPause)},
		Analysis: errorRateAnalysis(e.prom.URL()),
	}})
	canary := s.commit("1.1.0")
	g.Expect(canary).NotTo(Equal(s.stable))

	s.waitHealthyAt(canary)
	e.waitSettled(t, s.ns, "web", 5, 5, settleTimeout)
	e.waitCurrentRevision(t, s.ns, "web", canary)
	s.expectKeptPods(g, webImage("1.1.0"))
	for name, n := range s.restarts(g) {
		g.Expect(n).To(BeEquivalentTo(1), "pod %s updated exactly once", name)
	}

	// What happened in between, from the watches.
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("60%", "20%", "0"))
	g.Expect(s.rec.steps(g)).To(Equal([]string{"-", stepAt(canary, 0), stepAt(canary, 1), stepAt(canary, 2), "-"}))
	ms := s.rec.measurements(g)
	g.Expect(stepsOf(ms)).To(Equal(map[int32]int{0: 2, 1: 2, 2: 2}), "two measurements per step, no more")
	for _, m := range ms {
		g.Expect(m.Metric).To(Equal(errorRateMetric))
		g.Expect(m.Phase).To(Equal(stepwisev1.MeasurementSuccessful), "measurement %+v", m)
		g.Expect(m.Value).To(Equal("0"), "a good canary serves no 500: %+v", m)
	}
	g.Expect(s.rec.analysisRuns(g)).To(HaveLen(3), "one analysis per step")
	g.Expect(s.rec.pauseBefore(g, 0)).To(BeNumerically(">=", stepPause), "step 1's pause ran before its analysis")
	g.Expect(s.rec.pauseBefore(g, 1)).To(BeNumerically("<", stepPause), "step 2 has no pause")

	s.waitEvents(stepwisev1.EventRolloutStarted, ConsistOf(ContainSubstring("rolling out revision "+canary+" over stable "+s.stable)))
	s.waitEvents(stepwisev1.EventStepAdvanced, ConsistOf("step 2/3: partition 20%", "step 3/3: partition 0"))
	s.waitEvents(stepwisev1.EventAnalysisPassed, ConsistOf(
		HavePrefix("step 1/3: analysis passed"), HavePrefix("step 2/3: analysis passed"), HavePrefix("step 3/3: analysis passed")))
	s.waitEvents(stepwisev1.EventRolloutCompleted, ConsistOf(ContainSubstring("revision "+canary+" is stable after 3 steps")))
}

// A bad release: the first analysis sees the canaries' errors, the rollout
// aborts by itself, and the canaries go back to the stable image in place.
func testBadRelease(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "bad", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("60%", stepPause), step("0", noPause)},
		Analysis: errorRateAnalysis(e.prom.URL()),
	}})
	bad := webImage("1.1.0-bad")
	watcher := e.watchPods(t, s.ns, bad)
	canary := s.commit("1.1.0-bad")

	ro := s.waitRollout("aborted by the analysis", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisFailed))
	})
	g.Expect(ro.Status.StableRevision).To(Equal(s.stable))
	g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
	g.Expect(ro.Status.CurrentStepIndex).To(BeNil())
	g.Expect(ro.Status.Message).To(SatisfyAll(
		ContainSubstring("revision "+canary+" aborted at step 1/2: analysis failed: metric "+errorRateMetric+": measurement "),
		MatchRegexp(`failed: value [0-9.e-]+ above max 0\.01`)))
	status, reason, message := condition(ro, meta.StalledCondition)
	g.Expect(status).To(Equal(metav1.ConditionTrue))
	g.Expect(reason).To(Equal(stepwisev1.ReasonAnalysisFailed))
	g.Expect(message).To(Equal(ro.Status.Message))
	status, _, _ = condition(ro, meta.ReadyCondition)
	g.Expect(status).To(Equal(metav1.ConditionFalse))
	// The failing tally stays on show.
	g.Expect(ro.Status.Analysis).NotTo(BeNil())
	g.Expect(ro.Status.Analysis.StepIndex).To(BeEquivalentTo(0))
	g.Expect(ro.Status.Analysis.Phase).To(Equal(stepwisev1.AnalysisFailed))

	// The canaries roll back in place.
	g.Eventually(func(g Gomega) {
		cs := e.get(g, s.ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		g.Expect(cs.Status.UpdatedReplicas).To(BeZero())
		s.expectKeptPods(g, webImage("1.0.0"))
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	watcher.mu.Lock()
	canaries := map[string]bool{}
	for name := range watcher.imagePatchedAt {
		canaries[name] = true
	}
	watcher.mu.Unlock()
	g.Expect(canaries).To(HaveLen(2), "60%% of 5 keeps 3 Pods stable, so 2 canaries")
	for name, n := range s.restarts(g) {
		want := 0
		if canaries[name] {
			want = 2 // forward to the bad image, back to the stable one
		}
		g.Expect(n).To(BeEquivalentTo(want), "pod %s", name)
	}

	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("60%", "100%"))
	g.Expect(s.rec.steps(g)).To(Equal([]string{"-", stepAt(canary, 0), "-"}), "never past step 1")
	ms := s.rec.measurements(g)
	g.Expect(ms).NotTo(BeEmpty())
	g.Expect(stepsOf(ms)).To(HaveLen(1))
	g.Expect(stepsOf(ms)).To(HaveKey(int32(0)))
	last := ms[len(ms)-1]
	t.Logf("measurements of the bad canary: %+v", ms)
	g.Expect(last.Phase).To(Equal(stepwisev1.MeasurementFailed))
	v, err := strconv.ParseFloat(last.Value, 64)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(BeNumerically(">", 0.01))
	s.waitEvents(stepwisev1.EventAnalysisFailed, ConsistOf(ContainSubstring("step 1/2: analysis failed: metric "+errorRateMetric)))
	s.waitEvents(stepwisev1.EventRolloutAborted, ConsistOf(ContainSubstring("partition back to 100%")))

	// Aborted is final until git or a person acts.
	s.holdRollout("stays aborted", holdFor, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(s.partition(g)).To(Equal("100%"))
	})
}

// No data is no verdict: Pods that get no traffic have no series, the
// analysis is inconclusive and the rollout waits for a person, who promotes.
func testNoData(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "nodata", storyOptions{
		replicas: 4,
		labels:   map[string]string{noTrafficLabel: "off"},
		spec: stepwisev1.RolloutSpec{
			Steps:    []stepwisev1.RolloutStep{step("50%", noPause), skipAnalysis(step("0", noPause))},
			Analysis: errorRateAnalysis(e.prom.URL()),
		},
	})
	canary := s.commit("1.1.0")

	paused := func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
		g.Expect(ro.Status.CurrentStepIndex).To(HaveValue(BeEquivalentTo(0)))
		g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
		g.Expect(s.partition(g)).To(Equal("50%"))
	}
	ro := s.waitRollout("paused on an inconclusive analysis", paused)
	// Two empty answers in a row are tolerated (inconclusiveLimit 2): a
	// canary not scraped yet is not a verdict; a third is.
	g.Expect(ro.Status.Message).To(ContainSubstring("analysis inconclusive: metric " + errorRateMetric +
		": measurement 3 inconclusive: query returned no series (empty vector): no data (3 in a row, inconclusiveLimit 2)"))
	g.Expect(ro.Status.Analysis.Phase).To(Equal(stepwisev1.AnalysisInconclusive))
	g.Expect(ro.Status.Measurements).To(HaveLen(3))
	for _, m := range ro.Status.Measurements {
		g.Expect(m.Phase).To(Equal(stepwisev1.MeasurementInconclusive))
		g.Expect(m.Value).To(BeEmpty())
	}
	status, reason, _ := condition(ro, meta.ReadyCondition)
	g.Expect(status).To(Equal(metav1.ConditionFalse))
	g.Expect(reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
	s.waitEvent(stepwisev1.EventAnalysisInconclusive, "step 1/2: analysis inconclusive", "promote, retry or abort")
	s.holdRollout("waits for a person, measuring nothing more", holdFor, func(g Gomega, ro *stepwisev1.Rollout) {
		paused(g, ro)
		g.Expect(ro.Status.Measurements).To(HaveLen(3))
	})
	g.Expect(s.podsByImage(g)).To(Equal(map[string]int{webImage("1.1.0"): 2, webImage("1.0.0"): 2}))

	token := s.request(stepwisev1.PromoteAtAnnotation)
	ro = s.waitHealthyAt(canary)
	g.Expect(ro.Status.LastHandledPromoteAt).To(Equal(token))
	s.waitEvent(stepwisev1.EventPromoted, "step 1/2: analysis skipped by a promote request")
	e.waitSettled(t, s.ns, "web", 4, 4, settleTimeout)
	s.expectKeptPods(g, webImage("1.1.0"))
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("50%", "0"))
	g.Expect(phasesOf(s.rec.measurements(g))).To(Equal([]stepwisev1.MeasurementPhase{
		stepwisev1.MeasurementInconclusive, stepwisev1.MeasurementInconclusive, stepwisev1.MeasurementInconclusive}),
		"three measurements, and no analysis on the skipped step")
}

// A Prometheus that cannot be reached is never a pass: the errors pile up,
// the analysis turns inconclusive after consecutiveErrorLimit, and the
// rollout holds its first step.
func testUnreachablePrometheus(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	address := unreachableAddress(t)
	s := e.newStory(t, "noprom", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("60%", noPause), step("0", noPause)},
		Analysis: errorRateAnalysis(address),
	}})
	canary := s.commit("1.1.0")

	atStep := func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).NotTo(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(s.stable))
		g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
		g.Expect(ro.Status.CurrentStepIndex).To(HaveValue(BeEquivalentTo(0)))
		g.Expect(s.partition(g)).To(Equal("60%"))
	}
	s.waitRollout("measuring, with errors", func(g Gomega, ro *stepwisev1.Rollout) {
		atStep(g, ro)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisRunning))
		g.Expect(ro.Status.Analysis).NotTo(BeNil())
		g.Expect(ro.Status.Analysis.Metrics).To(HaveLen(1))
		g.Expect(ro.Status.Analysis.Metrics[0].Errors).To(BeNumerically(">=", 1))
	})
	ro := s.waitRollout("inconclusive after too many errors", func(g Gomega, ro *stepwisev1.Rollout) {
		atStep(g, ro)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
	})
	g.Expect(ro.Status.Message).To(ContainSubstring("5 errors in a row (consecutiveErrorLimit 4)"))
	g.Expect(ro.Status.Message).To(ContainSubstring("could not connect"))
	g.Expect(ro.Status.Analysis.Metrics[0].Errors).To(BeEquivalentTo(5))
	g.Expect(ro.Status.Analysis.Metrics[0].Successful).To(BeZero())
	s.waitEvent(stepwisev1.EventMeasurementError, "step 1/2: metric "+errorRateMetric, "could not connect")
	s.holdRollout("holds step 1", holdFor, atStep)

	ms := s.rec.measurements(g)
	g.Expect(phasesOf(ms)).To(HaveEach(stepwisev1.MeasurementError))
	g.Expect(ms).To(HaveLen(5))
	g.Expect(s.rec.steps(g)).To(Equal([]string{"-", stepAt(canary, 0)}), "never past step 1")
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("60%"))
	phases := s.rec.phases(g)
	g.Expect(phases[len(phases)-1]).To(Equal(string(stepwisev1.RolloutPaused) + "/" + stepwisev1.ReasonAnalysisInconclusive))
	g.Expect(phases).To(ContainElement(string(stepwisev1.RolloutHealthy)+"/"+stepwisev1.ReasonStable), "Healthy before the commit")
	g.Expect(phases[indexOrEnd(phases, string(stepwisev1.RolloutProgressing)+"/"+stepwisev1.ReasonWaitingForPods):]).NotTo(
		ContainElement(HavePrefix(string(stepwisev1.RolloutHealthy))), "never Healthy once the rollout started: %v", phases)
	g.Expect(s.podsByImage(g)).To(Equal(map[string]int{webImage("1.1.0"): 2, webImage("1.0.0"): 3}))
}

// A pause without a duration holds the step until a promote request.
func testIndefinitePause(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "pause", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps: []stepwisev1.RolloutStep{step("50%", 0), step("0", noPause)},
	}})
	canary := s.commit("1.1.0")

	waiting := func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(ro.Status.CurrentStepIndex).To(HaveValue(BeEquivalentTo(0)))
		g.Expect(ro.Status.Message).To(Equal("step 1/2 (partition 50%): waiting for a promote request"))
		g.Expect(s.partition(g)).To(Equal("50%"))
	}
	s.waitRollout("waiting for a promote", waiting)
	e.waitSettled(t, s.ns, "web", 5, 2, settleTimeout)
	s.holdRollout("still waiting", holdFor, func(g Gomega, ro *stepwisev1.Rollout) {
		waiting(g, ro)
		g.Expect(s.podsByImage(g)).To(Equal(map[string]int{webImage("1.1.0"): 2, webImage("1.0.0"): 3}))
	})

	token := s.request(stepwisev1.PromoteAtAnnotation)
	ro := s.waitHealthyAt(canary)
	g.Expect(ro.Status.LastHandledPromoteAt).To(Equal(token))
	s.waitEvent(stepwisev1.EventPromoted, "step 1/2: pause skipped by a promote request")
	e.waitSettled(t, s.ns, "web", 5, 5, settleTimeout)
	s.expectKeptPods(g, webImage("1.1.0"))
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("50%", "0"))
}

// After an abort, a retry request rolls the same revision out again from
// step 1; this time (the error rate fixed outside the release) it passes.
func testRetryAfterAbort(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "retry", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("60%", stepPause), step("0", noPause)},
		Analysis: errorRateAnalysis(e.prom.URL()),
	}})
	bad := webImage("1.1.0-bad")
	watcher := e.watchPods(t, s.ns, bad)
	canary := s.commit("1.1.0-bad")
	s.waitRollout("aborted by the analysis", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisFailed))
	})
	// Whatever made the canary fail is fixed (a dependency, a config
	// outside the template): the same revision now serves no errors.
	e.rates.set(s.ns, 0)
	g.Eventually(func(g Gomega) {
		g.Expect(s.podsByImage(g)).To(Equal(map[string]int{webImage("1.0.0"): 5}))
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	watcher.mu.Lock()
	firstCanaries := map[string]bool{}
	for name := range watcher.imagePatchedAt {
		firstCanaries[name] = true
	}
	watcher.mu.Unlock()
	g.Expect(firstCanaries).To(HaveLen(2))
	// The retry's canaries are these Pods again, and Prometheus still holds
	// their errors: the retry is judged on its own traffic all the same.

	token := s.request(stepwisev1.RetryAtAnnotation)
	s.waitEvent(stepwisev1.EventRetried, "retrying revision "+canary+" from step 1")
	ro := s.waitHealthyAt(canary)
	g.Expect(ro.Status.LastHandledRetryAt).To(Equal(token))
	e.waitSettled(t, s.ns, "web", 5, 5, settleTimeout)
	s.expectKeptPods(g, bad)
	for name, n := range s.restarts(g) {
		want := 1
		if firstCanaries[name] {
			want = 3 // forward, back on the abort, forward on the retry
		}
		g.Expect(n).To(BeEquivalentTo(want), "pod %s", name)
	}

	g.Expect(s.rec.steps(g)).To(Equal([]string{"-", stepAt(canary, 0), "-", stepAt(canary, 0), stepAt(canary, 1), "-"}))
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("60%", "100%", "60%", "0"))
	g.Expect(s.rec.analysisRuns(g)).To(HaveLen(3), "step 1 failed, step 1 again, step 2")
	ms := s.rec.measurements(g)
	g.Expect(ms[len(ms)-4:]).To(HaveEach(HaveField("Phase", stepwisev1.MeasurementSuccessful)), "the retry's two analyses pass: %+v", ms)
	g.Expect(stepsOf(ms[len(ms)-4:])).To(Equal(map[int32]int{0: 2, 1: 2}))
}
