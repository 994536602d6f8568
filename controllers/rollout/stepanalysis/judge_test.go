package stepanalysis

import (
	"strings"
	"testing"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

func TestAssessScoresComparedMetrics(t *testing.T) {
	v := func(p analysis.VerdictPhase, msg string) analysis.Verdict {
		return analysis.Verdict{Phase: p, Message: msg}
	}
	cmp := func(name string, p analysis.VerdictPhase, weight int, critical bool) Judged {
		return Judged{Name: name, Verdict: v(p, name+" said so"), Compared: true, Weight: weight, Critical: critical}
	}
	thr := func(name string, p analysis.VerdictPhase) Judged {
		return Judged{Name: name, Verdict: v(p, name+" said so")}
	}
	const (
		passed       = analysis.VerdictPassed
		failed       = analysis.VerdictFailed
		inconclusive = analysis.VerdictInconclusive
		running      = analysis.VerdictRunning
	)
	tests := []struct {
		name         string
		metrics      []Judged
		pass, margin int
		want         analysis.VerdictPhase
		wantScored   bool
		wantScore    int
		wantMessage  string
	}{
		{name: "every compared metric passes: promote with 100",
			metrics: []Judged{cmp("errors", passed, 2, true), cmp("latency", passed, 1, false)},
			want:    passed, wantScored: true, wantScore: 100, wantMessage: "score 100 >= pass 90"},
		{name: "a critical metric that fails aborts at once, while others still run",
			metrics: []Judged{cmp("errors", failed, 2, true), cmp("latency", running, 1, false)},
			want:    failed, wantScored: true, wantScore: 0, wantMessage: `critical metric "errors" failed; metric errors: errors said so`},
		{name: "a non-critical failure waits for the others before scoring",
			metrics: []Judged{cmp("errors", passed, 2, false), cmp("latency", failed, 1, false), cmp("cpu", running, 1, false)},
			want:    running, wantMessage: "waiting for cpu"},
		{name: "a failure of a light metric leaves the score at pass: promote",
			metrics: []Judged{cmp("errors", passed, 9, false), cmp("latency", failed, 1, false)},
			want:    passed, wantScored: true, wantScore: 90},
		{name: "between marginal and pass: inconclusive, the policy applies",
			metrics: []Judged{cmp("errors", passed, 4, false), cmp("latency", failed, 1, false)},
			want:    inconclusive, wantScored: true, wantScore: 80, wantMessage: "score 80 is marginal (75 <= score < 90); metric latency: latency said so"},
		{name: "failures below marginal abort",
			metrics: []Judged{cmp("errors", passed, 1, false), cmp("latency", failed, 1, false)},
			want:    failed, wantScored: true, wantScore: 50, wantMessage: "score 50 < marginal 75"},
		{name: "too few samples everywhere is inconclusive, never a pass",
			metrics: []Judged{cmp("errors", inconclusive, 1, true), cmp("latency", inconclusive, 1, false)},
			want:    inconclusive, wantScored: true, wantScore: 0},
		{name: "the thresholds are the rollout's",
			metrics: []Judged{cmp("errors", passed, 1, false), cmp("latency", failed, 1, false)},
			pass:    50, margin: 25, want: passed, wantScored: true, wantScore: 50},
		{name: "a dryRun compared metric never counts",
			metrics: []Judged{cmp("errors", passed, 1, false), {Name: "new", Verdict: v(failed, ""), Compared: true, Critical: true, DryRun: true}},
			want:    passed, wantScored: true, wantScore: 100},
		{name: "a threshold metric failing fails the step, whatever the score",
			metrics: []Judged{thr("saturation", failed), cmp("errors", passed, 1, false)},
			want:    failed, wantScored: true, wantScore: 100, wantMessage: "metric saturation: saturation said so"},
		{name: "a passing score waits for the threshold metrics",
			metrics: []Judged{thr("saturation", running), cmp("errors", passed, 1, false)},
			want:    running, wantScored: true, wantScore: 100},
		{name: "threshold metrics alone decide as before, unscored",
			metrics: []Judged{thr("saturation", passed), thr("errors", passed)},
			want:    passed, wantMessage: "all 2 metrics passed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pass, margin := tt.pass, tt.margin
			if pass == 0 {
				pass, margin = judge.DefaultPass, judge.DefaultMarginal
			}
			got := Assess(tt.metrics, pass, margin)
			if got.Phase != tt.want || got.Scored != tt.wantScored || (tt.wantScored && got.Outcome.Score != tt.wantScore) {
				t.Errorf("Assess = %s scored %v score %d (%s), want %s scored %v score %d",
					got.Phase, got.Scored, got.Outcome.Score, got.Message, tt.want, tt.wantScored, tt.wantScore)
			}
			if !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("message %q, want it to contain %q", got.Message, tt.wantMessage)
			}
		})
	}
}

func compareMetric(name string, critical bool) v1alpha1.Metric {
	return v1alpha1.Metric{Name: name, Critical: critical,
		Prometheus: &v1alpha1.PrometheusMetric{Address: "http://prom:9090",
			Query: `sum by (pod) (rate(errors{pod=~"{{ .Pods }}"}[{{ .CanaryAge }}]))`},
		Compare: &v1alpha1.CompareSpec{Direction: v1alpha1.CompareIncrease, Tolerance: "0.25", Confidence: "0.98"}}
}

var (
	stableErrors = []float64{0.010, 0.011, 0.009, 0.012, 0.010}
	worseErrors  = []float64{0.040, 0.041, 0.039, 0.042, 0.040}
)

// A compared metric is measured both sides at once with the canary's Pods
// in .Pods, its figures land in the metric's status with an Event, and the
// score decides: a canary four times worse aborts on its critical metric,
// an equal one passes with 100.
func TestRunJudgesComparedMetricsAndScores(t *testing.T) {
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(0); a.Count = new(int32(2)) },
		compareMetric("errors", true))

	worse := &fakeMeasurer{samples: func(string, int) ([]float64, []float64) { return worseErrors, stableErrors }}
	res := rounds(t, input(s), worse, 1)
	got := res[0]
	if got.Status.Phase != v1alpha1.AnalysisFailed {
		t.Fatalf("phase %s (%s), want Failed on the first comparison of a critical metric", got.Status.Phase, got.Status.Message)
	}
	if len(worse.queries) != 1 || worse.queries[0] != "compare errors pods web-0|web-1" {
		t.Errorf("measured %q, want one comparison with the canary's Pods in .Pods", worse.queries)
	}
	ms := got.Status.Metrics[0]
	if ms.Verdict != "Fail" || ms.CanaryMedian != "0.04" || ms.StableMedian != "0.01" || ms.Effect != "3" || ms.PValue == "" {
		t.Errorf("metric status %+v, want the comparison's figures", ms)
	}
	if got.Status.Score != "0" || !strings.Contains(got.Status.Message, `critical metric "errors" failed`) {
		t.Errorf("score %q message %q", got.Status.Score, got.Status.Message)
	}
	if len(got.Measurements) != 1 || got.Measurements[0].Phase != v1alpha1.MeasurementFailed || got.Measurements[0].Value != "3" {
		t.Errorf("measurements %+v, want one Failed whose value is the effect", got.Measurements)
	}
	compared, scored := eventsOf(got, v1alpha1.EventMetricCompared), eventsOf(got, v1alpha1.EventAnalysisScored)
	if len(compared) != 1 || compared[0].Type != "Warning" || !strings.Contains(compared[0].Message, "metric errors: canary 0.04 vs stable 0.01 (n=5/5), effect +300") {
		t.Errorf("MetricCompared events %+v", compared)
	}
	if len(scored) != 1 || scored[0].Type != "Warning" || !strings.Contains(scored[0].Message, "score 0 (pass 90, marginal 75)") {
		t.Errorf("AnalysisScored events %+v", scored)
	}

	equal := &fakeMeasurer{samples: func(string, int) ([]float64, []float64) { return stableErrors, stableErrors }}
	res = rounds(t, input(s), equal, 1, 12)
	last := res[len(res)-1]
	if last.Status.Phase != v1alpha1.AnalysisPassed || last.Status.Score != "100" || last.Status.Metrics[0].Verdict != "Pass" {
		t.Fatalf("equal sides: phase %s score %q verdict %q (%s), want Passed with 100", last.Status.Phase, last.Status.Score,
			last.Status.Metrics[0].Verdict, last.Status.Message)
	}
	if len(equal.queries) != 2 {
		t.Errorf("compared %d times, want count 2", len(equal.queries))
	}
	if scored := eventsOf(last, v1alpha1.EventAnalysisScored); len(scored) != 1 || scored[0].Type != "Normal" {
		t.Errorf("AnalysisScored events %+v, want one Normal", scored)
	}
	if res[0].Status.Score != "" {
		t.Errorf("score %q while running, want none until decided", res[0].Status.Score)
	}
}

// Too few samples (no stable Pods on the last step) is inconclusive, never
// a pass; a failed query keeps no figures.
func TestRunComparedWithoutSamplesIsInconclusive(t *testing.T) {
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(0) }, compareMetric("errors", false))
	none := &fakeMeasurer{samples: func(_ string, n int) ([]float64, []float64) {
		if n == 1 {
			return nil, nil
		}
		return stableErrors, []float64{}
	}}
	res := rounds(t, input(s), none, 1, 12, 23, 34)
	if ms := res[0].Status.Metrics[0]; ms.Verdict != "" || ms.Errors != 1 {
		t.Errorf("after a query error: %+v, want no verdict and one error", ms)
	}
	last := res[len(res)-1]
	if last.Status.Phase != v1alpha1.AnalysisInconclusive || last.Status.Metrics[0].Verdict != "Inconclusive" {
		t.Fatalf("phase %s verdict %q (%s), want Inconclusive", last.Status.Phase, last.Status.Metrics[0].Verdict, last.Status.Message)
	}
	if !strings.Contains(last.Status.Message, "too few samples") {
		t.Errorf("message %q, want why", last.Status.Message)
	}
}

func eventsOf(r Result, reason string) []struct{ Type, Message string } {
	var out []struct{ Type, Message string }
	for _, e := range r.Events {
		if e.Reason == reason {
			out = append(out, struct{ Type, Message string }{e.Type, e.Message})
		}
	}
	return out
}

func TestSidesWarning(t *testing.T) {
	thresholdOnly := []v1alpha1.Metric{metric("saturation", `max(x)`)}
	compared := []v1alpha1.Metric{metric("saturation", `max(x)`), compareMetric("errors", true), compareMetric("latency", false)}
	tests := []struct {
		name                string
		metrics             []v1alpha1.Metric
		replicas, partition int
		want                string
	}{
		{"both sides have Pods", compared, 10, 5, ""},
		{"partition 0 leaves no stable Pod", compared, 10, 0,
			"metric errors, latency compares canary with stable, but partition 0 leaves no stable Pod to compare the canary with"},
		{"a partition of every replica leaves no canary", compared, 10, 10, "partition 10 of 10 replicas leaves no canary Pod"},
		{"no compare metric, nothing to warn of", thresholdOnly, 10, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SidesWarning(tt.metrics, tt.replicas, tt.partition)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("SidesWarning = %q, want %q", got, tt.want)
			}
		})
	}
}

// A step whose partition leaves nothing to compare warns once, when its
// analysis starts.
func TestRunWarnsOnceWhenTheStepCannotCompare(t *testing.T) {
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(0) }, compareMetric("errors", false))
	in := input(s)
	in.Replicas, in.Partition = 10, new(int32(0))
	f := &fakeMeasurer{samples: func(string, int) ([]float64, []float64) { return stableErrors, nil }}
	res := rounds(t, in, f, 1, 12)
	if w := eventsOf(res[0], v1alpha1.EventComparisonImpossible); len(w) != 1 || w[0].Type != "Warning" ||
		!strings.Contains(w[0].Message, "step 1/3: metric errors compares canary with stable, but partition 0 leaves no stable Pod") {
		t.Errorf("first round's ComparisonImpossible events %+v, want one Warning", w)
	}
	if w := eventsOf(res[1], v1alpha1.EventComparisonImpossible); len(w) != 0 {
		t.Errorf("second round warned again: %+v", w)
	}
	in.Partition = new(int32(5))
	if w := eventsOf(rounds(t, in, f, 1)[0], v1alpha1.EventComparisonImpossible); len(w) != 0 {
		t.Errorf("a step with both sides warned: %+v", w)
	}
}
