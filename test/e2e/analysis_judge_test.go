package e2e

import (
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/traffic"
)

const (
	// perPodErrorQuery is each Pod's error ratio, the judge's samples.
	perPodErrorQuery = `sum by (pod) (rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}",code="500"}[30s]))
/ sum by (pod) (rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}"}[30s]))`
	// canaryErrorQuery is the canary's whole error ratio over the same
	// window, the way a fixed threshold reads it.
	canaryErrorQuery = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code="500"}[30s]))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[30s]))`
)

// The judge on the kwok bed, through the whole chain: the CloneSet's Pods
// on kwok, the simulator serving each at its image's error rate (with a
// per-Pod spread), Prometheus scraping them, and the Rollout comparing its
// canary Pods with the stable Pods beside them. A canary at 4 % errors
// beside a stable at 1 % is what a fixed max of 0.05 lets through (the dry
// run threshold metric shows it passing) and what the judge aborts.
func testJudgeAbortsWhatAThresholdPasses(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	s := e.newStory(t, "judge", storyOptions{replicas: 10, spec: stepwisev1.RolloutSpec{
		Steps: []stepwisev1.RolloutStep{step("50%", noPause), step("0", noPause)},
		Analysis: &stepwisev1.AnalysisSpec{
			Interval:     &metav1.Duration{Duration: time.Second},
			Count:        ptr.To[int32](2),
			ScrapeMargin: &metav1.Duration{Duration: 2 * time.Second},
			Metrics: []stepwisev1.Metric{
				{
					Name:       "errors",
					Prometheus: &stepwisev1.PrometheusMetric{Address: e.prom.URL(), Query: perPodErrorQuery, Timeout: &metav1.Duration{Duration: 2 * time.Second}},
					Compare:    &stepwisev1.CompareSpec{Direction: stepwisev1.CompareIncrease, Tolerance: "0.25", Confidence: "0.98"},
					Critical:   true,
				},
				{
					Name:           "threshold",
					Prometheus:     &stepwisev1.PrometheusMetric{Address: e.prom.URL(), Query: canaryErrorQuery, Timeout: &metav1.Duration{Duration: 2 * time.Second}},
					ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.05"},
					DryRun:         true,
				},
			},
		},
	}})
	e.rates.setFunc(s.ns, traffic.PerImage(map[string]float64{"1.0.0": 0.01, "1.1.0": 0.04}, 0.2, 37))
	canary := s.commit("1.1.0")

	ro := s.waitRollout("aborted by the judge", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
	})
	g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisFailed), ro.Status.Message)
	g.Expect(ro.Status.Message).To(ContainSubstring(`critical metric "errors" failed`))
	g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
	a := ro.Status.Analysis
	g.Expect(a).NotTo(BeNil())
	g.Expect(a.Score).To(Equal("0"))
	byName := map[string]stepwisev1.MetricStatus{}
	for _, m := range a.Metrics {
		byName[m.Name] = m
	}
	errors := byName["errors"]
	t.Logf("judge: canary %s vs stable %s, effect %s, p %s: %s", errors.CanaryMedian, errors.StableMedian, errors.Effect, errors.PValue, errors.Verdict)
	g.Expect(errors.Verdict).To(Equal("Fail"))
	g.Expect(number(g, errors.CanaryMedian)).To(BeNumerically("~", 0.04, 0.015))
	g.Expect(number(g, errors.StableMedian)).To(BeNumerically("~", 0.01, 0.005))
	g.Expect(number(g, errors.Effect)).To(BeNumerically(">", 0.25))
	g.Expect(number(g, errors.PValue)).To(BeNumerically("<", 0.02))

	// The fixed threshold, run dry beside it, would have passed.
	g.Expect(byName["threshold"].DryRun).To(BeTrue())
	var thresholds int
	for _, m := range s.rec.measurements(g) {
		if m.Metric != "threshold" {
			continue
		}
		thresholds++
		g.Expect(m.Phase).To(Equal(stepwisev1.MeasurementSuccessful), "max 0.05 passes the canary: %+v", m)
		g.Expect(valueOf(g, m)).To(BeNumerically("~", 0.04, 0.01))
	}
	g.Expect(thresholds).To(BeNumerically(">=", 1))

	s.waitRolledBackInPlace(g)
	g.Expect(s.rec.partitionHistory(g)).To(afterCommit("50%", "100%"), "never past step 1")
	s.waitEvent(stepwisev1.EventMetricCompared, "step 1/2: metric errors: canary ", "(n=5/5)", ": Fail")
	s.waitEvent(stepwisev1.EventAnalysisScored, "step 1/2: score 0", `critical metric "errors" failed`)
}

func number(g Gomega, s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	g.Expect(err).NotTo(HaveOccurred(), "%q is no number", s)
	return v
}
