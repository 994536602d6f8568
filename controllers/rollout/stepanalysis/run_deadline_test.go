package stepanalysis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

func TestNextDueIsTheEarliest(t *testing.T) {
	now := at(10)
	a := []v1alpha1.MetricStatus{
		{Name: "a", Phase: v1alpha1.AnalysisRunning, LastMeasuredAt: v1alpha1.StatusTime(at(5))},
		{Name: "b", Phase: v1alpha1.AnalysisRunning, LastMeasuredAt: v1alpha1.StatusTime(at(-10))},
		{Name: "c", Phase: v1alpha1.AnalysisPassed, LastMeasuredAt: v1alpha1.StatusTime(at(-19))},
		{Name: "d", Phase: v1alpha1.AnalysisRunning, FirstMeasurementAt: v1alpha1.StatusTime(at(100))},
	}
	// b, measured 20s ago in a second stored to its start, is due 11s from
	// now; passed metric c is not measured again; d waits for its first.
	if got := nextDue(a, 30*time.Second, now, nil); got != 11*time.Second {
		t.Errorf("next = %s, want 11s", got)
	}
	// a whose Job runs on (due already) waits for its recheck, not 1ms.
	a[0].LastMeasuredAt = nil
	if got := nextDue(a, 30*time.Second, now, map[int]time.Duration{0: 7 * time.Second}); got != 7*time.Second {
		t.Errorf("next with a running Job = %s, want its 7s recheck", got)
	}
}

// slowMeasurer answers after delay, or when the round's deadline cuts it.
type slowMeasurer struct{ delay map[string]time.Duration }

func (s slowMeasurer) Vars(context.Context) (analysis.Vars, error) { return analysis.Vars{}, nil }

func (s slowMeasurer) Job(context.Context, v1alpha1.Metric, JobRun) JobOutcome { return JobOutcome{} }

func (s slowMeasurer) Admit() (func(), string) { return func() {}, "" }

func (s slowMeasurer) Compare(context.Context, v1alpha1.Metric, analysis.Vars, judge.Compare) (*judge.Result, analysis.Measurement) {
	return nil, analysis.Measurement{Phase: analysis.PhaseError, Message: "not compared here"}
}

func (s slowMeasurer) Measure(ctx context.Context, metric v1alpha1.Metric, _ string) analysis.Measurement {
	select {
	case <-time.After(s.delay[metric.Name]):
		return value(0)
	case <-ctx.Done():
		return analysis.Measurement{Phase: analysis.PhaseError, Message: "query prometheus: " + ctx.Err().Error()}
	}
}

// A Prometheus that never answers holds the round no longer than the
// interval, and the other metrics are measured alongside, not after it.
func TestRunMeasuresDueMetricsTogetherUnderOneDeadline(t *testing.T) {
	s := spec(func(a *v1alpha1.AnalysisSpec) {
		a.ScrapeMargin = dur(time.Second)
		a.Interval = dur(300 * time.Millisecond)
	},
		metric("a", `sum(a)`), metric("b", `sum(b)`), metric("silent", `sum(c)`))
	m := slowMeasurer{delay: map[string]time.Duration{"a": 100 * time.Millisecond, "b": 100 * time.Millisecond, "silent": time.Hour}}
	in := input(s)
	in.Now = at(5)
	start := time.Now()
	res, err := Run(context.Background(), in, m)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took > 2*time.Second {
		t.Errorf("the round took %s, want about the 300ms interval", took)
	}
	phases := map[string]v1alpha1.MeasurementPhase{}
	for _, m := range res.Measurements {
		phases[m.Metric] = m.Phase
		if m.Metric == "silent" && !strings.Contains(m.Message, "no answer within 300ms (the interval, at most 30s)") {
			t.Errorf("silent metric message %q", m.Message)
		}
	}
	want := map[string]v1alpha1.MeasurementPhase{"a": v1alpha1.MeasurementSuccessful, "b": v1alpha1.MeasurementSuccessful, "silent": v1alpha1.MeasurementError}
	if fmt.Sprint(phases) != fmt.Sprint(want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
}
