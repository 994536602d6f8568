package stepanalysis

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func metric(name, query string) v1alpha1.Metric {
	return v1alpha1.Metric{Name: name, Prometheus: &v1alpha1.PrometheusMetric{Address: "http://prom:9090", Query: query},
		ThresholdRange: &v1alpha1.ThresholdRange{Max: "0.01"}}
}

// spec is a defaulted analysis, as AnalysisForStep returns it.
func spec(mutate func(*v1alpha1.AnalysisSpec), metrics ...v1alpha1.Metric) v1alpha1.AnalysisSpec {
	rs := v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{{}}, Analysis: &v1alpha1.AnalysisSpec{
		Interval: &metav1.Duration{Duration: 10 * time.Second}, Count: new(int32(3)), Metrics: metrics}}
	if mutate != nil {
		mutate(rs.Analysis)
	}
	a, _ := rs.AnalysisForStep(0)
	return a
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestSchedule(t *testing.T) {
	ready := at(0)
	tests := []struct {
		name         string
		query        string
		mutate       func(*v1alpha1.AnalysisSpec)
		wantFirst    time.Time
		wantLookback string
		wantWhy      string
	}{
		{name: "a fixed window waits for its range plus the scrape margin",
			query: `sum(rate(x{pod=~"{{ .CanaryPods }}"}[1m]))`, wantFirst: at(90), wantLookback: "1m", wantWhy: "looks back 1m, plus a 30s scrape margin"},
		{name: "the longest range of the query counts",
			query: `sum(rate(e[30s])) / sum(rate(t[5m]))`, wantFirst: at(330), wantLookback: "5m"},
		{name: "an offset adds to the range",
			query: `rate(x[1m] offset 2m)`, wantFirst: at(210), wantLookback: "3m"},
		{name: "a subquery adds its range and offset to the inner range",
			query: `max_over_time(rate(x[1m])[5m:10s] offset 1m)`, wantFirst: at(450), wantLookback: "7m"},
		{name: "an instant selector reads the newest sample: the scrape margin alone",
			query: `max(x{pod=~"{{ .CanaryPods }}"})`, wantFirst: at(30), wantLookback: "0s", wantWhy: "reads no further back than the canary's age"},
		{name: "a window bound by the canary's age counts for nothing",
			query: `sum(increase(x[{{ .CanaryAge }}])) or vector(0)`, wantFirst: at(30), wantLookback: "0s"},
		{name: "an args window is read after rendering",
			query: `rate(x[{{ .Args.window }}])`, mutate: func(a *v1alpha1.AnalysisSpec) { a.Args = v1alpha1.ArgsFromMap(map[string]string{"window": "2m"}) },
			wantFirst: at(150), wantLookback: "2m"},
		{name: "the scrape margin is a field",
			query: `rate(x[10s])`, mutate: func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(2 * time.Second) }, wantFirst: at(12), wantLookback: "10s"},
		{name: "a longer initialDelay wins",
			query: `rate(x[10s])`, mutate: func(a *v1alpha1.AnalysisSpec) { a.InitialDelay = dur(5 * time.Minute) }, wantFirst: at(300), wantLookback: "10s",
			wantWhy: "initialDelay 5m"},
		{name: "a shorter initialDelay does not shorten the wait",
			query: `rate(x[1m])`, mutate: func(a *v1alpha1.AnalysisSpec) { a.InitialDelay = dur(time.Second) }, wantFirst: at(90), wantLookback: "1m"},
		{name: "a query that is not PromQL waits for initialDelay",
			query: `rate(x[1m]) default 0`, mutate: func(a *v1alpha1.AnalysisSpec) { a.InitialDelay = dur(2 * time.Minute) }, wantFirst: at(120), wantLookback: "",
			wantWhy: "does not parse as PromQL"},
		{name: "a fraction of a second is rounded up, never early",
			query: `rate(x[10s])`, mutate: func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(1500 * time.Millisecond) }, wantFirst: at(12), wantLookback: "10s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec(tt.mutate, metric("m", tt.query))
			p := schedule(s.Metrics[0], s, ready)
			if !p.first.Equal(tt.wantFirst) || p.lookback != tt.wantLookback {
				t.Errorf("first %s lookback %q, want %s %q", p.first.Sub(ready), p.lookback, tt.wantFirst.Sub(ready), tt.wantLookback)
			}
			if !strings.Contains(p.why, tt.wantWhy) {
				t.Errorf("why %q, want it to contain %q", p.why, tt.wantWhy)
			}
		})
	}
}

// fakeMeasurer answers each query with the next value of its script and
// records when it was asked and what.
type fakeMeasurer struct {
	answer func(query string, n int) analysis.Measurement
	// samples answers a compared metric's measurement: the canary's and
	// the stable Pods' values; nil canary is a query error.
	samples func(metric string, n int) (canary, stable []float64)
	mu      sync.Mutex
	queries []string
	varsErr error
	// jobs are the outcomes of Jobs by name; runs, the Jobs asked for.
	jobs map[string]JobOutcome
	runs []JobRun
}

func (f *fakeMeasurer) Vars(context.Context) (analysis.Vars, error) {
	return analysis.Vars{Namespace: "shop", CanaryPods: "web-0|web-1"}, f.varsErr
}

func (f *fakeMeasurer) Measure(_ context.Context, _ v1alpha1.Metric, query string) analysis.Measurement {
	f.mu.Lock()
	f.queries = append(f.queries, query)
	n := len(f.queries)
	f.mu.Unlock()
	return f.answer(query, n)
}

func (f *fakeMeasurer) Compare(_ context.Context, metric v1alpha1.Metric, vars analysis.Vars, c judge.Compare) (*judge.Result, analysis.Measurement) {
	f.mu.Lock()
	f.queries = append(f.queries, "compare "+metric.Name+" pods "+vars.Pods)
	n := len(f.queries)
	f.mu.Unlock()
	canary, stable := f.samples(metric.Name, n)
	if canary == nil {
		return nil, analysis.Measurement{Phase: analysis.PhaseError, Message: "connection refused"}
	}
	r := judge.Judge(canary, stable, c)
	return &r, judge.Measurement(r)
}

func (f *fakeMeasurer) Admit() (func(), string) { return func() {}, "" }

// Job answers a job metric from f.jobs, by Job name: a Job not in it
// runs on. Every Job asked for is recorded in f.queries as "job NAME".
func (f *fakeMeasurer) Job(_ context.Context, _ v1alpha1.Metric, run JobRun) JobOutcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, "job "+run.Name)
	f.runs = append(f.runs, run)
	if o, ok := f.jobs[run.Name]; ok {
		return o
	}
	return JobOutcome{RecheckAfter: time.Minute, Note: "job " + run.Name + " running"}
}

func value(v float64) analysis.Measurement {
	phase := analysis.PhaseSuccessful
	if v > 0.01 {
		phase = analysis.PhaseFailed
	}
	return analysis.Measurement{Phase: phase, Value: &v, Message: "value"}
}

// rounds replays a reconciler: a round at each given second, status carried
// from one to the next as the API server would (through a deep copy).
func rounds(t *testing.T, in Input, m Measurer, seconds ...float64) []Result {
	t.Helper()
	var out []Result
	for i, s := range seconds {
		in.Now = at(s)
		in.Start = i == 0
		res, err := Run(context.Background(), in, m)
		if err != nil {
			t.Fatalf("round at %gs: %v", s, err)
		}
		in.Status = res.Status.DeepCopy()
		out = append(out, res)
	}
	return out
}

func input(s v1alpha1.AnalysisSpec) Input {
	return Input{Spec: s, StepIndex: 0, Steps: 3, Revision: "web-2", StartedAt: at(0), CanaryReadyAt: at(0)}
}

func TestRunWaitsForTheQueryLookbackBeforeTheFirstMeasurement(t *testing.T) {
	f := &fakeMeasurer{answer: func(string, int) analysis.Measurement { return value(0) }}
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(5 * time.Second) }, metric("error-rate", `sum(rate(x{pod=~"{{ .CanaryPods }}"}[30s]))`))
	res := rounds(t, input(s), f, 0, 20, 34.9, 35, 40, 46, 57)

	if len(f.queries) != 3 {
		t.Fatalf("measured %d times, want 3 (at 35s, 46s, 57s: an interval after the second each was stored at): %v", len(f.queries), f.queries)
	}
	first := res[0]
	if got := first.RequeueAfter; got != 35*time.Second {
		t.Errorf("first round requeues after %s, want 35s (30s lookback + 5s margin)", got)
	}
	ms := first.Status.Metrics[0]
	if ms.Lookback != "30s" || !ms.FirstMeasurementAt.Time.Equal(at(35)) {
		t.Errorf("metric status lookback %q first %v, want 30s at +35s", ms.Lookback, ms.FirstMeasurementAt)
	}
	if !strings.Contains(first.Waiting, "first measurement at 2026-12-01T10:00:35Z (metric error-rate looks back 30s, scrape margin 5s)") {
		t.Errorf("waiting = %q", first.Waiting)
	}
	if len(first.Events) != 1 || first.Events[0].Reason != v1alpha1.EventMeasurementScheduled ||
		!strings.Contains(first.Events[0].Message, "step 1/3: metric error-rate: first measurement at 2026-12-01T10:00:35Z: the query looks back 30s, plus a 5s scrape margin") {
		t.Errorf("events of the first round = %+v, want one MeasurementScheduled", first.Events)
	}
	if len(res[1].Events) != 0 {
		t.Errorf("the schedule is announced once, got %+v", res[1].Events)
	}
	if res[3].Waiting != "" {
		t.Errorf("waiting = %q once measured, want empty", res[3].Waiting)
	}
	last := res[len(res)-1]
	if last.Status.Phase != v1alpha1.AnalysisPassed || last.RequeueAfter != Settle {
		t.Errorf("after three good measurements: %s, requeue %s", last.Status.Phase, last.RequeueAfter)
	}
}

func TestRunRendersCanaryAgeSoTheWindowStartsAtReadiness(t *testing.T) {
	f := &fakeMeasurer{answer: func(string, int) analysis.Measurement { return value(0) }}
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(10 * time.Second); a.Count = new(int32(4)) },
		metric("errors", `sum(increase(x{pod=~"{{ .CanaryPods }}"}[{{ .CanaryAge }}]))`))
	rounds(t, input(s), f, 0, 10.7, 21.7, 32.7, 3600)
	want := []string{
		`sum(increase(x{pod=~"web-0|web-1"}[10s]))`,
		`sum(increase(x{pod=~"web-0|web-1"}[21s]))`,
		`sum(increase(x{pod=~"web-0|web-1"}[32s]))`,
		`sum(increase(x{pod=~"web-0|web-1"}[10m]))`,
	}
	if strings.Join(f.queries, "\n") != strings.Join(want, "\n") {
		t.Errorf("queries:\n%s\nwant:\n%s", strings.Join(f.queries, "\n"), strings.Join(want, "\n"))
	}
}

func TestRunRefusesAWindowThatStillReachesBeforeTheCanary(t *testing.T) {
	f := &fakeMeasurer{answer: func(string, int) analysis.Measurement { return value(0) }}
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(5 * time.Second) },
		metric("errors", `sum(rate(x[{{ .CanaryAge }}] offset 1m))`))
	res := rounds(t, input(s), f, 0, 65)
	if len(f.queries) != 0 {
		t.Fatalf("queried %v, want nothing sent", f.queries)
	}
	m := res[1].Measurements
	if len(m) != 1 || m[0].Phase != v1alpha1.MeasurementError ||
		!strings.Contains(m[0].Message, "not measured: the query reads 2m5s back but the canary has been ready for 1m5s only") {
		t.Fatalf("measurements = %+v, want one Error naming the window", m)
	}
	if ev := res[1].Events; len(ev) != 1 || ev[0].Reason != v1alpha1.EventMeasurementError {
		t.Errorf("events = %+v, want a MeasurementError", ev)
	}
}

// A bad canary is judged on its own errors from the first measurement, and
// a good one right after a bad one is not judged on the bad one's: the
// fake answers with what the window the query asks for holds, in a
// timeline where the previous revision served errors until the update.
func TestRunJudgesOnlyTheCanarysOwnData(t *testing.T) {
	// window answers the error rate of [now-lookback, now] given that the
	// Pods served errRate before readiness and canaryRate after it.
	window := func(before, after float64) func(string, int) analysis.Measurement {
		return func(q string, n int) analysis.Measurement {
			now := at(float64(35 + 11*(n-1)))
			lookback, err := analysis.Lookback(q, now)
			if err != nil {
				t.Fatalf("lookback of %q: %v", q, err)
			}
			start := now.Add(-lookback)
			if start.Before(at(0)) {
				old := at(0).Sub(start).Seconds()
				return value((before*old + after*(lookback.Seconds()-old)) / lookback.Seconds())
			}
			return value(after)
		}
	}
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(5 * time.Second) }, metric("errors", `sum(rate(e[30s])) / sum(rate(t[30s]))`))
	for _, tt := range []struct {
		name          string
		before, after float64
		want          v1alpha1.AnalysisPhase
	}{
		{"bad canary after a good revision fails", 0, 0.2, v1alpha1.AnalysisFailed},
		{"good canary after a bad revision passes", 0.2, 0, v1alpha1.AnalysisPassed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeMeasurer{answer: window(tt.before, tt.after)}
			res := rounds(t, input(s), f, 0, 35, 46, 57)
			if got := res[len(res)-1].Status.Phase; got != tt.want {
				t.Errorf("verdict %s, want %s (%s)", got, tt.want, res[len(res)-1].Status.Message)
			}
		})
	}
}

func TestRunToleratesEarlyInconclusiveButNeverPassesWithoutData(t *testing.T) {
	empty := analysis.Measurement{Phase: analysis.PhaseInconclusive, Message: "query returned no series (empty vector): no data"}
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(time.Second); a.Count = new(int32(2)) }, metric("m", `sum(x)`))

	t.Run("one empty answer then data passes", func(t *testing.T) {
		f := &fakeMeasurer{answer: func(_ string, n int) analysis.Measurement {
			if n == 1 {
				return empty
			}
			return value(0)
		}}
		res := rounds(t, input(s), f, 0, 1, 12, 23)
		if got := res[3].Status; got.Phase != v1alpha1.AnalysisPassed || got.Metrics[0].Inconclusive != 1 {
			t.Errorf("status %+v, want Passed with 1 inconclusive tolerated", got)
		}
	})
	t.Run("nothing but empty answers is inconclusive after the limit", func(t *testing.T) {
		f := &fakeMeasurer{answer: func(string, int) analysis.Measurement { return empty }}
		res := rounds(t, input(s), f, 0, 1, 12, 23)
		got := res[3].Status
		if got.Phase != v1alpha1.AnalysisInconclusive || !strings.Contains(got.Message, "measurement 3 inconclusive") || !strings.Contains(got.Message, "3 in a row, inconclusiveLimit 2") {
			t.Errorf("status %s %q, want Inconclusive at the third", got.Phase, got.Message)
		}
	})
	t.Run("a metric's own limit wins", func(t *testing.T) {
		strict := s.DeepCopy()
		strict.Metrics[0].InconclusiveLimit = new(int32(0))
		f := &fakeMeasurer{answer: func(string, int) analysis.Measurement { return empty }}
		res := rounds(t, input(*strict), f, 0, 1)
		if got := res[1].Status.Phase; got != v1alpha1.AnalysisInconclusive {
			t.Errorf("phase %s, want Inconclusive at once", got)
		}
	})
}

// The tally in status is all a restarted controller has: each measurement
// taken one round at a time, through a status copy, must be judged as the
// whole history is.
func TestTallyJudgesLikeTheWholeHistory(t *testing.T) {
	letters := map[byte]analysis.Measurement{
		'S': value(0), 'F': value(0.5),
		'I': {Phase: analysis.PhaseInconclusive, Message: "no data"},
		'E': {Phase: analysis.PhaseError, Message: "connection refused"},
	}
	for _, seq := range []string{"SSSSS", "SSF", "SFSFSSS", "SSIII", "SIISIIS", "IEIEI", "EESEESEESEES", "EESEEEEE", "EEFEEF", "FFF"} {
		t.Run(seq, func(t *testing.T) {
			limits := analysis.Limits{Count: 5, FailureLimit: 2, InconclusiveLimit: new(2), ConsecutiveErrorLimit: new(3)}
			var ms v1alpha1.MetricStatus
			var full []analysis.Measurement
			for i := range len(seq) {
				m := letters[seq[i]]
				full = append(full, m)
				got := tally(&ms, m, limits, at(float64(i)))
				want := analysis.Assess(full, limits)
				if got.Phase != want.Phase || got.Message != want.Message {
					t.Fatalf("after %s: %s %q, whole history %s %q", seq[:i+1], got.Phase, got.Message, want.Phase, want.Message)
				}
				if got.Phase.Done() {
					break
				}
			}
		})
	}
}

func TestRunResumesTheRunInStatus(t *testing.T) {
	f := &fakeMeasurer{answer: func(string, int) analysis.Measurement { return value(0) }}
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(time.Second) }, metric("m", `sum(x)`))
	in := input(s)
	res := rounds(t, in, f, 0, 1)

	// A restart: the same status read back, the readiness reported later
	// (the run keeps its own), no new start.
	in.Status, in.Now, in.CanaryReadyAt = res[1].Status.DeepCopy(), at(12), at(9)
	again, err := Run(context.Background(), in, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Status.Metrics[0].Count; got != 2 {
		t.Errorf("count %d after the restart, want the tally carried on to 2", got)
	}
	if !again.Status.CanaryReadyAt.Time.Equal(at(0)) {
		t.Errorf("canaryReadyAt %v, want the run's own", again.Status.CanaryReadyAt)
	}

	// Another step, or another revision, starts afresh.
	in.StepIndex = 1
	other, _ := Run(context.Background(), in, f)
	if other.Status.StepIndex != 1 || other.Status.Metrics[0].Count != 1 || !other.Status.Metrics[0].FirstMeasurementAt.Time.Equal(at(10)) {
		t.Errorf("status %+v, want a fresh run for step 2 from the new readiness", other.Status)
	}
}

func TestRunReturnsAVarsErrorForTheReconcileToRetry(t *testing.T) {
	f := &fakeMeasurer{varsErr: errors.New("cache not synced")}
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.ScrapeMargin = dur(time.Second) }, metric("m", `sum(x)`))
	in := input(s)
	in.Now = at(5)
	if _, err := Run(context.Background(), in, f); err == nil {
		t.Fatal("want the error")
	}
}

func TestSyncMetricStatusesFollowsTheSpec(t *testing.T) {
	a := &v1alpha1.AnalysisStatus{Metrics: []v1alpha1.MetricStatus{
		{Name: "removed", Count: 3, Phase: v1alpha1.AnalysisRunning},
		{Name: "latency", Count: 2, Phase: v1alpha1.AnalysisPassed},
	}}
	syncMetricStatuses(a, []v1alpha1.Metric{{Name: "error-rate"}, {Name: "latency"}})
	if len(a.Metrics) != 2 || a.Metrics[0].Name != "error-rate" || a.Metrics[1].Name != "latency" {
		t.Fatalf("metrics = %+v, want error-rate then latency", a.Metrics)
	}
	if a.Metrics[0].Phase != v1alpha1.AnalysisRunning || a.Metrics[0].Count != 0 {
		t.Errorf("new metric = %+v, want an empty running tally", a.Metrics[0])
	}
	if a.Metrics[1].Count != 2 || a.Metrics[1].Phase != v1alpha1.AnalysisPassed {
		t.Errorf("kept metric = %+v, want its tally kept", a.Metrics[1])
	}
}
