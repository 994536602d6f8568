package rollout_test

import (
	"testing"

	. "github.com/onsi/gomega"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// The controller stops in the middle of a step's analysis and starts again:
// it resumes the same step and the same analysis, and neither repeats the
// step that already passed nor restarts the tally of the running one. All
// state is in the Rollout's status.
func TestRestartDuringAnalysisResumesTheSameStep(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createCloneSet(t, newCloneSet(ns, "web", 10, "1.0.0"))
	autopilot(t, ns, "web")
	env.prom.set(ns, answer{value: 0.001})
	first := startController(t, ns)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(pct("20%")), stepAt(num(0), skipAnalysis()))
	ro.Spec.Analysis = errorRate(3)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	before := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 1)
		g.Expect(ro.Status.Analysis).NotTo(BeNil())
		g.Expect(ro.Status.Analysis.StepIndex).To(BeEquivalentTo(1))
		g.Expect(ro.Status.Analysis.Metrics).NotTo(BeEmpty())
		g.Expect(ro.Status.Analysis.Metrics[0].Count).To(BeNumerically(">=", 1))
	})
	first.Stop()
	stopped := getRollout(t, ns, "web")
	if stopped.Status.CurrentStepIndex == nil || *stopped.Status.CurrentStepIndex != 1 {
		t.Fatalf("controller stopped at step %v, want 1", stopped.Status.CurrentStepIndex)
	}
	taken := stopped.Status.Analysis.Metrics[0].Count
	t.Logf("stopped in step 2/3 with %d of 3 measurements taken (%d when first seen)", taken, before.Status.Analysis.Metrics[0].Count)

	startController(t, ns)
	done := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	got := measurementsOf(done)
	if got[0] != 3 {
		t.Errorf("step 1 has %d measurements, want its 3: a passed step is not analysed again", got[0])
	}
	if got[1] != 3 {
		t.Errorf("step 2 has %d measurements, want 3: the running analysis resumes its tally (%d taken before the restart)", got[1], taken)
	}
	// Events are recorded asynchronously, and a stopping manager may drop
	// the last ones; what must not happen is a second occurrence.
	if n := occurrences(events(t, ns, "web", stepwisev1.EventRolloutStarted)); n > 1 {
		t.Errorf("RolloutStarted recorded %d times, want once", n)
	}
	for _, s := range []string{"step 1/3", "step 2/3"} {
		if n := occurrences(withNote(events(t, ns, "web", stepwisev1.EventAnalysisStarted), s)); n > 1 {
			t.Errorf("AnalysisStarted recorded %d times for %s, want once", n, s)
		}
	}
}
