package e2e

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/dynamic"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// `kubectl stepwise undo` mid-rollout sets the CloneSet's template back to
// the stable revision's, read from its ControllerRevision: the CloneSet
// finds that revision again, and the Rollout takes the same fast path as a
// revert in git, in place and without analysis.
func testUndoMidRollout(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "undo", storyOptions{replicas: 5, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("50%", 0), step("0", noPause)},
		Analysis: errorRateAnalysis(e.prom.URL()),
	}})
	v2 := s.commit("1.1.0")
	s.waitRollout("v2 at step 1", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(ro.Status.CanaryRevision).To(Equal(v2))
	})
	e.waitSettled(t, s.ns, "web", 5, 2, settleTimeout)

	dyn, err := dynamic.NewForConfig(e.cluster.RESTConfig)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := cli.Undo(t.Context(), dyn, s.ns, "web", false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(cli.UndoResult{CloneSet: "web", Revision: s.stable, Stable: true}))

	ro := s.waitHealthyAt(s.stable)
	g.Expect(ro.Status.Analysis).To(BeNil())
	s.waitEvent(stepwisev1.EventRollingBack, "template is back at stable revision "+s.stable, "without analysis")
	cs := e.waitSettled(t, s.ns, "web", 5, 5, settleTimeout)
	g.Expect(cs.Status.UpdateRevision).To(Equal(s.stable), "the CloneSet found the stable revision again")
	s.expectKeptPods(g, webImage("1.0.0"))
	restarts := map[int32]int{}
	for _, n := range s.restarts(g) {
		restarts[n]++
	}
	g.Expect(restarts).To(Equal(map[int32]int{0: 3, 2: 2}), "the 2 canaries went forward and back in place, the others never moved")
	g.Expect(s.rec.measurements(g)).To(BeEmpty(), "no measurement, ever")
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("50%", "100%", "0"))
}
