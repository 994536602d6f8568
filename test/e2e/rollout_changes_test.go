package e2e

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

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
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("50%", "100%", "50%", "0"))
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
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("50%", "100%", "0"))
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
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("60%", "20%", "0"))
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
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("60%", "20%", "0"))
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
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("0"))
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
