package rollout_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// A compared metric against the fake Prometheus, which answers per Pod:
// the canary's Pods and the stable Pods are measured side by side. A
// canary whose error rate equals stable's (with per-Pod noise) is
// promoted; a canary four times worse, which a fixed threshold of 0.05
// would pass, is aborted by its critical metric, with the judge's figures
// in status and Events. The last step (partition 0) has no stable Pod: it
// warns, its metric is Inconclusive, and the inconclusive policy
// (Promote here) applies.
func TestJudgePromotesAnEqualCanaryAndAbortsAWorseOne(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	podPilot(t, ns, "web")

	// The error rate of each revision; each Pod adds noise by its ordinal
	// so that the samples are not all tied.
	var mu sync.Mutex
	rate := map[string]float64{"web-1-0-0": 0.01, "web-2-0-0": 0.01, "web-3-0-0": 0.04}
	asked := map[string]bool{}
	env.prom.set(ns, answer{perPod: func(name string) (float64, bool) {
		pod := &corev1.Pod{}
		if err := env.client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
			return 0, false
		}
		rev := pod.Labels["controller-revision-hash"]
		i, _ := strconv.Atoi(name[strings.LastIndex(name, "-")+1:])
		mu.Lock()
		defer mu.Unlock()
		asked[rev] = true
		base, ok := rate[rev]
		return base * (1 + 0.02*float64(i%5)), ok
	}})

	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(2)
	ro.Spec.Analysis.Inconclusive = stepwisev1.InconclusivePromote
	ro.Spec.Analysis.Metrics[0] = stepwisev1.Metric{
		Name: "errors",
		Prometheus: &stepwisev1.PrometheusMetric{
			Address: promAddress,
			Query:   `sum by (pod) (rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}",code=~"5.."}[{{ .CanaryAge }}]))`,
		},
		Compare:  &stepwisev1.CompareSpec{Direction: stepwisev1.CompareIncrease, Tolerance: "0.25", Confidence: "0.98"},
		Critical: true,
	}
	done := releasePromoted(t, ro, "2.0.0", "web-2-0-0")
	if got := measurementsOf(done); got[0] != 2 {
		t.Errorf("measurements by step = %v, want 2 in step 0", got)
	}
	for _, m := range done.Status.Measurements {
		if want := map[int32]stepwisev1.MeasurementPhase{0: stepwisev1.MeasurementSuccessful, 1: stepwisev1.MeasurementInconclusive}[m.Step]; m.Phase != want {
			t.Errorf("measurement %+v, want %s (no false abort in step 0, no stable Pod in step 1)", m, want)
		}
	}
	mu.Lock()
	if !asked["web-1-0-0"] || !asked["web-2-0-0"] {
		t.Errorf("revisions whose Pods were queried: %v, want the stable's and the canary's", asked)
	}
	mu.Unlock()
	waitForEvent(t, ns, "web", stepwisev1.EventMetricCompared, "step 1/2: metric errors: canary 0.0104 vs stable 0.0104 (n=5/5)", ": Pass")
	waitForEvent(t, ns, "web", stepwisev1.EventAnalysisScored, "step 1/2: score 100 (pass 90, marginal 75)")
	waitForEvent(t, ns, "web", stepwisev1.EventComparisonImpossible, "step 2/2: metric errors compares canary with stable, but partition 0 leaves no stable Pod")
	waitForEvent(t, ns, "web", stepwisev1.EventAnalysisScored, "step 2/2: score 0", "because of inconclusive metrics")

	commit(t, ns, "web", "3.0.0")
	aborted := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisFailed))
		g.Expect(ro.Status.Message).To(ContainSubstring(`critical metric "errors" failed`))
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	a := aborted.Status.Analysis
	if a == nil || a.Score != "0" || len(a.Metrics) != 1 {
		t.Fatalf("status.analysis = %+v, want the failed tally with score 0", a)
	}
	if ms := a.Metrics[0]; ms.Verdict != "Fail" || ms.CanaryMedian != "0.0416" || ms.StableMedian != "0.0104" || ms.Effect != "3" || ms.PValue == "" {
		t.Errorf("metric status %+v, want canary 0.0416 vs stable 0.0104, effect 3, Fail", ms)
	}
	if p := partitionOf(t, ns, "web"); p != "100%" {
		t.Errorf("partition = %s, want every Pod back on the stable revision", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventAnalysisScored, "step 1/2: score 0", `critical metric "errors" failed`)
}
