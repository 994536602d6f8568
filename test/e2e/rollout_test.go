package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
	t.Run("GoodReleaseWalksEveryStep", func(t *testing.T) { testGoodRelease(t, e) })
	t.Run("BadReleaseAbortsAndRollsBackInPlace", func(t *testing.T) { testBadRelease(t, e) })
	t.Run("NoDataPausesUntilPromoted", func(t *testing.T) { testNoData(t, e) })
	t.Run("UnreachablePrometheusNeverPromotes", func(t *testing.T) { testUnreachablePrometheus(t, e) })
	t.Run("IndefinitePauseWaitsForPromote", func(t *testing.T) { testIndefinitePause(t, e) })
	t.Run("RetryAfterAbortRollsOutAgain", func(t *testing.T) { testRetryAfterAbort(t, e) })
	t.Run("NewRevisionMidRolloutRestarts", func(t *testing.T) { testNewRevisionMidRollout(t, e) })
	t.Run("RevertToStableSkipsAnalysis", func(t *testing.T) { testRevertToStable(t, e) })
	t.Run("UndoMidRolloutRollsBackInPlace", func(t *testing.T) { testUndoMidRollout(t, e) })
	t.Run("ScaleMidStepKeepsPercentPartition", func(t *testing.T) { testScaleMidStep(t, e) })
	t.Run("ManagerRestartMidAnalysisResumes", func(t *testing.T) { testManagerRestartMidAnalysis(t, e) })
	t.Run("VersionPolicyHoldsRollout", func(t *testing.T) { testVersionPolicy(t, e) })
	t.Run("StatefulSetAbortRollsCanariesBack", func(t *testing.T) { testStatefulSetAbortRollsCanariesBack(t, e) })
	t.Run("BackgroundAbortsDuringPause", func(t *testing.T) { testBackgroundAbortsDuringPause(t, e) })
	t.Run("PostPromotionRollsBackInPlace", func(t *testing.T) { testPostPromotionRollsBackInPlace(t, e) })
	t.Run("JudgeAbortsWhatAThresholdPasses", func(t *testing.T) { testJudgeAbortsWhatAThresholdPasses(t, e) })
	t.Run("AnalysisWindows", func(t *testing.T) { testAnalysisWindows(t, e) })
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
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("60%", "20%", "0")))
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

	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("60%", "100%")))
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
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("50%", "0")))
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
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("60%")))
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
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("50%", "0")))
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
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("60%", "100%", "60%", "0")))
	g.Expect(s.rec.analysisRuns(g)).To(HaveLen(3), "step 1 failed, step 1 again, step 2")
	ms := s.rec.measurements(g)
	g.Expect(ms[len(ms)-4:]).To(HaveEach(HaveField("Phase", stepwisev1.MeasurementSuccessful)), "the retry's two analyses pass: %+v", ms)
	g.Expect(stepsOf(ms[len(ms)-4:])).To(Equal(map[int32]int{0: 2, 1: 2}))
}

// A new revision committed mid-rollout replaces the canary: the rollout
// restarts at step 1 with it, and the Pods of the abandoned revision move
// to the new one.
func testNewRevisionMidRollout(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "v3", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("50%", 0), step("0", noPause)},
		Analysis: errorRateAnalysis(e.prom.URL()),
	}})
	waitingOn := func(rev string) func(g Gomega, ro *stepwisev1.Rollout) {
		return func(g Gomega, ro *stepwisev1.Rollout) {
			g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
			g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
			g.Expect(ro.Status.CanaryRevision).To(Equal(rev))
			g.Expect(ro.Status.CurrentStepIndex).To(HaveValue(BeEquivalentTo(0)))
		}
	}
	v2 := s.commit("1.1.0")
	s.waitRollout("v2 at step 1", waitingOn(v2))
	e.waitSettled(t, s.ns, "web", 5, 2, settleTimeout)
	onV2 := map[string]bool{}
	for _, p := range e.pods(g, s.ns) {
		if imageOf(&p, "app") == webImage("1.1.0") {
			onV2[p.Name] = true
		}
	}
	g.Expect(onV2).To(HaveLen(2))

	v3 := s.commit("1.2.0")
	g.Expect(v3).NotTo(Equal(v2))
	s.waitRollout("v3 restarts at step 1", waitingOn(v3))
	s.waitEvent(stepwisev1.EventRolloutRestarted, "revision "+v3+" replaces canary "+v2+": restarting at step 1/2")
	e.waitSettled(t, s.ns, "web", 5, 2, settleTimeout)
	for _, p := range e.pods(g, s.ns) {
		want := webImage("1.0.0")
		if onV2[p.Name] {
			want = webImage("1.2.0") // the abandoned revision's Pods move first
		}
		g.Expect(imageOf(&p, "app")).To(Equal(want), "pod %s", p.Name)
	}

	s.request(stepwisev1.PromoteAtAnnotation)
	s.waitHealthyAt(v3)
	e.waitSettled(t, s.ns, "web", 5, 5, settleTimeout)
	s.expectKeptPods(g, webImage("1.2.0"))
	for name, n := range s.restarts(g) {
		want := 1
		if onV2[name] {
			want = 2
		}
		g.Expect(n).To(BeEquivalentTo(want), "pod %s", name)
	}
	g.Expect(s.rec.steps(g)).To(Equal([]string{"-", stepAt(v2, 0), stepAt(v3, 0), stepAt(v3, 1), "-"}))
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("50%", "100%", "50%", "0")))
	for _, run := range s.rec.analysisRuns(g) {
		g.Expect(run).To(ContainSubstring("/"+v3+"/"), "only v3 was analysed (v2 never left its pause)")
	}
	ms := s.rec.measurements(g)
	g.Expect(stepsOf(ms)).To(Equal(map[int32]int{0: 2, 1: 2}))
	g.Expect(phasesOf(ms)).To(HaveEach(stepwisev1.MeasurementSuccessful))
}

// Reverting the template to the stable revision mid-rollout needs no
// analysis: every Pod goes back at once and the Rollout is Healthy again.
func testRevertToStable(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "revert", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("50%", 0), step("0", noPause)},
		Analysis: errorRateAnalysis(e.prom.URL()),
	}})
	v2 := s.commit("1.1.0")
	s.waitRollout("v2 at step 1", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(ro.Status.CanaryRevision).To(Equal(v2))
	})
	e.waitSettled(t, s.ns, "web", 5, 2, settleTimeout)

	back := s.commit("1.0.0")
	g.Expect(back).To(Equal(s.stable), "the CloneSet reuses the stable revision")
	ro := s.waitHealthyAt(s.stable)
	g.Expect(ro.Status.Analysis).To(BeNil())
	g.Expect(ro.Status.Measurements).To(BeEmpty())
	s.waitEvent(stepwisev1.EventRollingBack, "template is back at stable revision "+s.stable, "without analysis")
	s.waitEvent(stepwisev1.EventRolloutCompleted, "every Pod runs revision "+s.stable+" (RollingBack)")
	e.waitSettled(t, s.ns, "web", 5, 5, settleTimeout)
	s.expectKeptPods(g, webImage("1.0.0"))
	restarts := map[int32]int{}
	for _, n := range s.restarts(g) {
		restarts[n]++
	}
	g.Expect(restarts).To(Equal(map[int32]int{0: 3, 2: 2}), "the 2 canaries went forward and back, the others never moved")

	g.Expect(s.rec.measurements(g)).To(BeEmpty(), "no measurement, ever")
	g.Expect(s.rec.analysisRuns(g)).To(BeEmpty())
	g.Expect(s.events(g, stepwisev1.EventAnalysisStarted)).To(BeEmpty())
	g.Expect(s.rec.phases(g)).To(ContainElement(string(stepwisev1.RolloutProgressing) + "/" + stepwisev1.ReasonRollingBack))
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("50%", "100%", "0")))
}

// A percent partition keeps its meaning when the CloneSet scales mid-step:
// 60% of 10 keeps 6 Pods stable where 60% of 5 kept 3.
func testScaleMidStep(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "scale", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps: []stepwisev1.RolloutStep{step("60%", 0), step("20%", 0), step("0", noPause)},
	}})
	canary := s.commit("1.1.0")
	waitingAt := func(i int32, partition string) func(g Gomega, ro *stepwisev1.Rollout) {
		return func(g Gomega, ro *stepwisev1.Rollout) {
			g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
			g.Expect(ro.Status.CurrentStepIndex).To(HaveValue(Equal(i)))
			g.Expect(s.partition(g)).To(Equal(partition), "the percent is stored as written")
		}
	}
	s.waitRollout("step 1 of 5 replicas", waitingAt(0, "60%"))
	e.waitSettled(t, s.ns, "web", 5, 2, settleTimeout)

	e.mutate(t, s.ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Replicas = ptr.To[int32](10) })
	e.waitSettled(t, s.ns, "web", 10, 4, settleTimeout)
	s.holdRollout("step 1 of 10 replicas", holdFor, func(g Gomega, ro *stepwisev1.Rollout) {
		waitingAt(0, "60%")(g, ro)
		g.Expect(s.podsByImage(g)).To(Equal(map[string]int{webImage("1.1.0"): 4, webImage("1.0.0"): 6}))
	})

	s.request(stepwisev1.PromoteAtAnnotation)
	s.waitRollout("step 2 of 10 replicas", waitingAt(1, "20%"))
	e.waitSettled(t, s.ns, "web", 10, 8, settleTimeout)
	g.Expect(s.podsByImage(g)).To(Equal(map[string]int{webImage("1.1.0"): 8, webImage("1.0.0"): 2}))

	s.request(stepwisev1.PromoteAtAnnotation)
	s.waitHealthyAt(canary)
	e.waitSettled(t, s.ns, "web", 10, 10, settleTimeout)
	g.Expect(s.podsByImage(g)).To(Equal(map[string]int{webImage("1.1.0"): 10}))
	kept := snapshot(e.pods(g, s.ns))
	for name, snap := range s.original {
		g.Expect(kept).To(HaveKeyWithValue(name, snap), "original pod %s updated in place", name)
	}
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("60%", "20%", "0")))
}

// The manager stops in the middle of an analysis and starts again: the
// Rollout resumes that analysis where its status left it, and no step that
// passed is taken or analysed again.
func testManagerRestartMidAnalysis(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	analysis := errorRateAnalysis(e.prom.URL())
	// Three measurements two seconds apart leave time to stop mid-way.
	analysis.Interval = &metav1.Duration{Duration: 2 * time.Second}
	analysis.Count = ptr.To[int32](3)
	s := e.newStory(t, "restart", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("60%", noPause), step("20%", noPause), skipAnalysis(step("0", noPause))},
		Analysis: analysis,
	}})
	canary := s.commit("1.1.0")
	before := s.waitRollout("step 2 analysis under way", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.CurrentStepIndex).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(ro.Status.Analysis).NotTo(BeNil())
		g.Expect(ro.Status.Analysis.StepIndex).To(BeEquivalentTo(1))
		g.Expect(ro.Status.Analysis.Phase).To(Equal(stepwisev1.AnalysisRunning))
		g.Expect(ro.Status.Analysis.Metrics).To(HaveLen(1))
		g.Expect(ro.Status.Analysis.Metrics[0].Count).To(BeNumerically(">=", 1))
	})
	e.stopManager()
	stopped := s.rollout(g)
	g.Expect(stopped.Status.Analysis.Phase).To(Equal(stepwisev1.AnalysisRunning), "stopped before the analysis ended")
	taken := stopped.Status.Analysis.Metrics[0].Count
	t.Logf("manager stopped after %d of step 2's 3 measurements", taken)
	// Nothing moves while no controller runs.
	s.holdRollout("frozen while the manager is down", holdFor, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status).To(Equal(stopped.Status))
	})
	e.startManager(t)

	s.waitHealthyAt(canary)
	e.waitSettled(t, s.ns, "web", 5, 5, settleTimeout)
	s.expectKeptPods(g, webImage("1.1.0"))
	for name, n := range s.restarts(g) {
		g.Expect(n).To(BeEquivalentTo(1), "pod %s updated exactly once", name)
	}
	runs := s.rec.analysisRuns(g)
	g.Expect(runs).To(HaveLen(2), "one analysis per analysed step: %v", runs)
	g.Expect(runs[1]).To(Equal(runName(before)), "step 2's analysis resumed, not restarted")
	ms := s.rec.measurements(g)
	g.Expect(stepsOf(ms)).To(Equal(map[int32]int{0: 3, 1: 3}), "%d of step 2's measurements were taken before the restart, the rest after: %+v", taken, ms)
	g.Expect(phasesOf(ms)).To(HaveEach(stepwisev1.MeasurementSuccessful))
	g.Expect(s.rec.steps(g)).To(Equal([]string{"-", stepAt(canary, 0), stepAt(canary, 1), stepAt(canary, 2), "-"}))
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("60%", "20%", "0")))
	s.waitEvents(stepwisev1.EventAnalysisStarted, ConsistOf("step 1/3: analysis started", "step 2/3: analysis started"))
}

// A revision whose version breaks spec.versionPolicy is not rolled out at
// all, with a condition that says why; a compliant one then goes through.
func testVersionPolicy(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "semver", storyOptions{replicas: 3, spec: stepwisev1.RolloutSpec{
		Steps:         []stepwisev1.RolloutStep{step("0", noPause)},
		VersionPolicy: &stepwisev1.VersionPolicy{Container: "app", Constraint: ">=1.0.0 <2.0.0"},
	}})
	major := s.commit("2.0.0")

	rejected := func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonVersionPolicyViolation))
		g.Expect(ro.Status.CanaryRevision).To(Equal(major))
		g.Expect(ro.Status.StableRevision).To(Equal(s.stable))
		g.Expect(ro.Status.CurrentStepIndex).To(BeNil())
		g.Expect(s.partition(g)).To(Equal("100%"))
	}
	ro := s.waitRollout("rejected by the version policy", rejected)
	want := "revision " + major + ` breaks spec.versionPolicy: container "app" runs version 2.0.0, outside constraint ">=1.0.0 <2.0.0"`
	g.Expect(ro.Status.Message).To(Equal(want))
	status, reason, message := condition(ro, meta.StalledCondition)
	g.Expect([]string{string(status), reason, message}).To(Equal([]string{"True", stepwisev1.ReasonVersionPolicyViolation, want}))
	status, reason, _ = condition(ro, meta.ReadyCondition)
	g.Expect([]string{string(status), reason}).To(Equal([]string{"False", stepwisev1.ReasonVersionPolicyViolation}))
	s.waitEvent(stepwisev1.EventVersionPolicyViolation, want, "no Pod is moved to it")
	s.holdRollout("no Pod moves", holdFor, func(g Gomega, ro *stepwisev1.Rollout) {
		rejected(g, ro)
		s.expectKeptPods(g, webImage("1.0.0"))
		for name, n := range s.restarts(g) {
			g.Expect(n).To(BeZero(), "pod %s", name)
		}
	})

	minor := s.commit("1.1.0")
	s.waitHealthyAt(minor)
	e.waitSettled(t, s.ns, "web", 3, 3, settleTimeout)
	s.expectKeptPods(g, webImage("1.1.0"))
	g.Expect(s.rec.steps(g)).NotTo(ContainElement(HavePrefix(major+"@")), "2.0.0 never reached a step")
	g.Expect(s.rec.partitionHistory(g)).To(Equal(afterCommit("0")))
}

// indexOrEnd is the index of v in s, or len(s) when absent (so that
// s[indexOrEnd(s, v):] is empty).
func indexOrEnd(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return len(s)
}
