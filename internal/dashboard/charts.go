package dashboard

import (
	"math"
	"slices"
	"strconv"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Charts draws one chart per metric, in the order the metrics were first
// measured. The band is the metric's thresholdRange in the step of its
// latest measurement (a step may override the metrics).
func Charts(r *stepwisev1.Rollout, history []stepwisev1.Measurement) []Chart {
	// Never nil: the page reads the JSON's lists without checking for null.
	out := []Chart{}
	index := map[string]int{}
	latestStep := map[string]int{}
	for _, m := range history {
		i, ok := index[m.Metric]
		if !ok {
			i = len(out)
			index[m.Metric] = i
			out = append(out, Chart{Metric: m.Metric, Points: []Point{}})
		}
		p := Point{Time: m.Time.UTC(), Step: int(m.Step) + 1, Text: m.Value, Phase: string(m.Phase), Message: m.Message}
		if v, err := strconv.ParseFloat(m.Value, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			p.Value = &v
		}
		out[i].Points = append(out[i].Points, p)
		latestStep[m.Metric] = int(m.Step)
	}
	for i := range out {
		spec, ok := r.Spec.AnalysisForStep(latestStep[out[i].Metric])
		if !ok {
			continue
		}
		for _, m := range spec.Metrics {
			if m.Name != out[i].Metric {
				continue
			}
			if v, err := m.ThresholdRange.Min.Float64(); m.ThresholdRange.Min != "" && err == nil {
				out[i].Min = &v
			}
			if v, err := m.ThresholdRange.Max.Float64(); m.ThresholdRange.Max != "" && err == nil {
				out[i].Max = &v
			}
		}
	}
	return out
}

// MaxHistory bounds the measurements kept per Rollout: at one a second,
// about an hour and a half.
const MaxHistory = 5000

// MergeMeasurements adds what status.measurements holds to the history seen
// so far. The status keeps only the last stepwise.dev MaxMeasurements, so
// the dashboard keeps its own record to draw a whole release. A measurement
// is identified by metric, step and time; the result is sorted by time and
// bounded by MaxHistory (the oldest go). A Rollout that restarted (a new
// canary revision) keeps its old points: they are the previous attempt.
func MergeMeasurements(history, status []stepwisev1.Measurement) []stepwisev1.Measurement {
	type key struct {
		metric string
		step   int32
		time   int64
	}
	seen := make(map[key]bool, len(history))
	for _, m := range history {
		seen[key{m.Metric, m.Step, m.Time.Unix()}] = true
	}
	out := slices.Clone(history)
	added := false
	for _, m := range status {
		k := key{m.Metric, m.Step, m.Time.Unix()}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, m)
		added = true
	}
	if added {
		slices.SortStableFunc(out, func(a, b stepwisev1.Measurement) int { return a.Time.Compare(b.Time.Time) })
	}
	if len(out) > MaxHistory {
		out = out[len(out)-MaxHistory:]
	}
	return out
}
