package rollout_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// The first measurement of a step waits until the query's window holds
// only what the canary served on its new revision: its lookback (a 6s
// range) plus the scrape margin (2s) after the canary Pods were all ready.
// Until then nothing is asked of Prometheus, and status says why.
func TestFirstMeasurementWaitsForTheQueryLookback(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.001})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0), skipAnalysis()))
	ro.Spec.Analysis = errorRate(1)
	ro.Spec.Analysis.ScrapeMargin = &metav1.Duration{Duration: 2 * time.Second}
	ro.Spec.Analysis.Metrics[0].Prometheus.Query = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code=~"5.."}[6s]))`
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	waiting := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Analysis).NotTo(BeNil())
		g.Expect(ro.Status.Analysis.Metrics).To(HaveLen(1))
		g.Expect(ro.Status.Analysis.Metrics[0].FirstMeasurementAt).NotTo(BeNil())
	})
	a, ms := waiting.Status.Analysis, waiting.Status.Analysis.Metrics[0]
	if got, want := a.CanaryReadyAt.Time, waiting.Status.StepReadyAt.Add(time.Second); !got.Equal(want) {
		t.Errorf("canaryReadyAt %s, want a second after stepReadyAt %s", got, waiting.Status.StepReadyAt)
	}
	if got, want := ms.FirstMeasurementAt.Time, a.CanaryReadyAt.Add(8*time.Second); ms.Lookback != "6s" || !got.Equal(want) {
		t.Errorf("lookback %q, first measurement %s; want 6s at %s", ms.Lookback, got, want)
	}
	if ms.Count == 0 && !strings.Contains(waiting.Status.Message, "first measurement at "+ms.FirstMeasurementAt.UTC().Format(time.RFC3339)+" (metric error-rate looks back 6s, scrape margin 2s)") {
		t.Errorf("message %q, want it to say when and why", waiting.Status.Message)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventMeasurementScheduled, "step 1/2: metric error-rate: first measurement at", "the query looks back 6s, plus a 2s scrape margin")

	// Nothing is measured before that time.
	if until := time.Until(ms.FirstMeasurementAt.Time) - 500*time.Millisecond; until > 0 {
		consistently(t, ns, "web", until, func(g Gomega, ro *stepwisev1.Rollout) {
			g.Expect(ro.Status.Measurements).To(BeEmpty())
		})
	}
	if n := env.prom.count(ns); n != 0 {
		t.Fatalf("%d queries before the first measurement was due", n)
	}
	done := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	if len(done.Status.Measurements) != 1 {
		t.Fatalf("measurements %+v, want one", done.Status.Measurements)
	}
	if m := done.Status.Measurements[0]; m.Time.Before(ms.FirstMeasurementAt) {
		t.Errorf("measured at %s, before the first measurement was due at %s", m.Time, ms.FirstMeasurementAt)
	}
}

// A query template a worker must not run stalls the Rollout at its first
// reconcile, naming the field; the workload is never touched by it.
func TestUnsafeQueryTemplateStallsNamingTheField(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(1)
	ro.Spec.Analysis.Metrics[0].Prometheus.Query = `{{ range 1000000000 }}{{ .CanaryPods }}{{ end }}`
	createRollout(t, ro)

	stalled := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusStalled(g, ro)
		g.Expect(condition(ro, "Stalled").Reason).To(Equal(stepwisev1.ReasonInvalidAnalysis))
	})
	want := "spec.analysis.metrics[0].prometheus.query (metric error-rate): query template: {{range}} is not allowed"
	if c := condition(stalled, "Ready"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, want) {
		t.Errorf("Ready = %+v, want False with %q", c, want)
	}
	waitForEvent(t, ns, "web", stepwisev1.ReasonInvalidAnalysis, want)
	if p := getCloneSet(t, ns, "web").Spec.UpdateStrategy.Partition; p != nil {
		t.Errorf("partition %s set by a stalled Rollout", p.String())
	}

	// Fixing the query lets it go on.
	updateRollout(t, ns, "web", func(ro *stepwisev1.Rollout) {
		ro.Spec.Analysis.Metrics[0].Prometheus.Query = `sum(x{namespace="{{ .Namespace }}"})`
	})
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
}
