package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

// analysis shows the step's analysis and the background analysis, each
// metric's tally in a table.
func (r *renderer) analysis(b *strings.Builder) {
	st := r.Rollout.Status
	if a := st.Analysis; a != nil {
		count := int32(0)
		if spec, ok := r.Rollout.Spec.AnalysisForStep(int(a.StepIndex)); ok && spec.Count != nil {
			count = *spec.Count
		}
		r.tally(b, "Analysis:", fmt.Sprintf("for step %d", a.StepIndex+1), a, count)
	}
	// These measure until promotion or for a window: no count to reach.
	if a := st.BackgroundAnalysis; a != nil {
		r.tally(b, "Background analysis:", fmt.Sprintf("from step %d", a.StepIndex+1), a, 0)
	}
	if a := st.PostPromotionAnalysis; a != nil {
		r.tally(b, "Post-promotion analysis:", "with every Pod on "+a.Revision, a, 0)
	}
}

// tally shows one analysis run; count is the measurements each metric
// needs, 0 for none.
func (r *renderer) tally(b *strings.Builder, title, scope string, a *stepwisev1.AnalysisStatus, count int32) {
	phase := string(a.Phase)
	if phase == "" {
		phase = "Pending"
	}
	fmt.Fprintf(b, "\n%s %s %s, started %s\n", r.p.paint(bold, title),
		r.p.paint(analysisColor(a.Phase), phase), scope, r.ago(a.StartedAt.Time))
	if a.Message != "" {
		fmt.Fprintf(b, "  %s\n", a.Message)
	}
	if a.Score != "" {
		fmt.Fprintf(b, "  score %s (judge)\n", a.Score)
	}
	rows := make([][]cell, 0, len(a.Metrics))
	for _, m := range a.Metrics {
		measured := fmt.Sprintf("%d measured", m.Count)
		if count > 0 {
			measured = fmt.Sprintf("%d/%d measured", m.Count, count)
		}
		tally := fmt.Sprintf("%d successful, %d failed, %d inconclusive, %d errors", m.Successful, m.Failed, m.Inconclusive, m.Errors)
		last := ""
		if m.LastValue != "" {
			last = "last " + m.LastValue
		}
		if m.Verdict != "" {
			// A compared metric: canary and stable side by side.
			last = judge.Summary{Verdict: judge.Verdict(m.Verdict), CanaryMedian: m.CanaryMedian,
				StableMedian: m.StableMedian, Effect: m.Effect, PValue: m.PValue}.Line()
		}
		if m.DryRun {
			last = strings.TrimSpace(last + " (dryRun)")
		}
		if wait := firstMeasurement(m, r.opts.Now); wait != "" {
			last = wait
		}
		rows = append(rows, []cell{{text: m.Name}, {text: orDash(string(m.Phase)), color: analysisColor(m.Phase)}, {text: measured}, {text: tally}, {text: last}})
	}
	writeTable(b, r.p, "  ", rows)
}

func (r *renderer) measurements(b *strings.Builder) {
	all := r.Rollout.Status.Measurements
	if len(all) == 0 {
		return
	}
	shown := all[max(0, len(all)-r.opts.Measurements):]
	title := fmt.Sprintf("Measurements (last %d of %d):", len(shown), len(all))
	if len(shown) == len(all) {
		title = fmt.Sprintf("Measurements (%d):", len(all))
	}
	fmt.Fprintf(b, "\n%s\n", r.p.paint(bold, title))
	rows := [][]cell{{{text: "TIME", color: faint}, {text: "STEP", color: faint}, {text: "METRIC", color: faint}, {text: "VALUE", color: faint}, {text: "PHASE", color: faint}}}
	for _, m := range shown {
		rows = append(rows, []cell{
			{text: r.ago(m.Time.Time)},
			{text: stepOf(m)},
			{text: m.Metric},
			{text: orDash(m.Value)},
			{text: string(m.Phase), color: measurementColor(m.Phase)},
			{text: m.Message},
		})
	}
	writeTable(b, r.p, "  ", rows)
}

// stepOf is the step a measurement was taken in, marked when it is the
// background or post-promotion analysis'.
func stepOf(m stepwisev1.Measurement) string {
	s := strconv.Itoa(int(m.Step) + 1)
	if m.Analysis != "" {
		s += " (" + m.Analysis + ")"
	}
	return s
}

// firstMeasurement says how long a metric that has not been measured yet
// waits, and why: its query looks back that far, and a window must hold
// the canary's own data only. Empty once measured or due.
func firstMeasurement(m stepwisev1.MetricStatus, now time.Time) string {
	if m.Count > 0 || m.Phase != stepwisev1.AnalysisRunning || m.FirstMeasurementAt == nil {
		return ""
	}
	left := m.FirstMeasurementAt.Sub(now).Round(time.Second)
	if left <= 0 {
		return ""
	}
	switch m.Lookback {
	case "":
		return fmt.Sprintf("first measurement in %s (initialDelay)", ShortDuration(left))
	case "0s":
		return fmt.Sprintf("first measurement in %s: the query's window grows with the canary", ShortDuration(left))
	}
	return fmt.Sprintf("first measurement in %s: the query looks back %s", ShortDuration(left), m.Lookback)
}
