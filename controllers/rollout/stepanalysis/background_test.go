package stepanalysis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// TestBackgroundRunSpansSteps: a background run started at step 0 goes on
// at step 1 with its tally (a step's run would start afresh), records its
// measurements as background ones at the step they were taken in, and
// fails by its failureLimit, count or not.
func TestBackgroundRunSpansSteps(t *testing.T) {
	f := &fakeMeasurer{answer: func(_ string, n int) analysis.Measurement {
		if n >= 3 {
			return value(0.5)
		}
		return value(0)
	}}
	rs := v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{{}, {}, {}}, Analysis: &v1alpha1.AnalysisSpec{
		Interval: dur(10 * time.Second), ScrapeMargin: dur(time.Second), Count: new(int32(2)), FailureLimit: new(int32(1)),
		Background: &v1alpha1.BackgroundAnalysis{Templates: []v1alpha1.AnalysisTemplateRef{{Name: "errors"}}}}}
	bg, from, ok := rs.BackgroundAnalysis()
	if !ok || from != 0 {
		t.Fatalf("BackgroundAnalysis() = %v, %d", ok, from)
	}
	// resolveAnalysis puts the templates' metrics in place of the refs.
	bg.Templates, bg.Metrics = nil, []v1alpha1.Metric{metric("errors", `max(x{pod=~"{{ .CanaryPods }}"})`)}

	in := Input{Spec: bg, StepIndex: 0, Steps: 3, Revision: "web-2", StartedAt: at(0), CanaryReadyAt: at(0), Of: v1alpha1.MeasurementOfBackground, Start: true}
	var last Result
	for i, round := range []struct {
		second float64
		step   int32
	}{{0, 0}, {1, 0}, {12, 1}, {23, 1}, {34, 2}, {45, 2}} {
		in.Now, in.StepIndex = at(round.second), round.step
		res, err := Run(context.Background(), in, f)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if res.Status.StepIndex != 0 {
			t.Fatalf("round %d: status.stepIndex = %d, want 0 (the step it started at)", i, res.Status.StepIndex)
		}
		for _, m := range res.Measurements {
			if m.Analysis != v1alpha1.MeasurementOfBackground || m.Step != round.step {
				t.Errorf("round %d: measurement %+v, want background at step %d", i, m, round.step)
			}
		}
		in.Status, in.Start, last = res.Status.DeepCopy(), false, res
		if res.Status.Phase != v1alpha1.AnalysisRunning {
			break
		}
	}
	if len(f.queries) != 4 {
		t.Errorf("measured %d times, want 4 (two passes do not end it, count 2 or not; the second failure does): %v", len(f.queries), f.queries)
	}
	if last.Status.Phase != v1alpha1.AnalysisFailed {
		t.Fatalf("phase %s, want Failed after failureLimit", last.Status.Phase)
	}
	var failed bool
	for _, e := range last.Events {
		if e.Reason == v1alpha1.EventAnalysisFailed && strings.HasPrefix(e.Message, "background analysis (at step 3/3): ") {
			failed = true
		}
	}
	if !failed {
		t.Errorf("events %+v, want AnalysisFailed prefixed as background", last.Events)
	}
}
