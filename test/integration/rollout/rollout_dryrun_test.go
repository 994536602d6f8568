package rollout_test

import (
	"testing"

	. "github.com/onsi/gomega"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// A dryRun metric that fails is measured, recorded and shown, and changes
// nothing: the rollout is promoted on the other metric alone.
func TestDryRunMetricFailingChangesNothing(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.001})
	env.prom.set(ns+"-dry", answer{value: 0.5})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(2)
	dry := *ro.Spec.Analysis.Metrics[0].DeepCopy()
	dry.Name, dry.DryRun = "dry-errors", true
	dry.Prometheus.Query = `sum(rate(http_requests_total{namespace="` + ns + `-dry",pod=~"{{ .CanaryPods }}"}[{{ .CanaryAge }}]))`
	ro.Spec.Analysis.Metrics = append(ro.Spec.Analysis.Metrics, dry)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	shown := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Analysis).NotTo(BeNil())
		g.Expect(ro.Status.Analysis.Metrics).To(HaveLen(2))
		d := ro.Status.Analysis.Metrics[1]
		g.Expect(d.Name).To(Equal("dry-errors"))
		g.Expect(d.DryRun).To(BeTrue())
		g.Expect(d.Phase).To(Equal(stepwisev1.AnalysisFailed))
		g.Expect(d.Measurements).NotTo(BeEmpty())
	})
	if m := shown.Status.Analysis.Metrics[1].Measurements[0]; m.Phase != stepwisev1.MeasurementFailed || m.Value != "0.5" {
		t.Errorf("dry-run measurement %+v, want Failed at 0.5", m)
	}
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	if p := partitionOf(t, ns, "web"); p != "0" {
		t.Fatalf("partition = %s, want 0: the dry-run failure must not abort", p)
	}
	if ev := events(t, ns, "web", stepwisev1.EventAnalysisFailed); len(ev) != 0 {
		t.Errorf("AnalysisFailed events %v, want none", ev)
	}
	if ev := events(t, ns, "web", stepwisev1.EventRolloutAborted); len(ev) != 0 {
		t.Errorf("RolloutAborted events %v, want none", ev)
	}
}
