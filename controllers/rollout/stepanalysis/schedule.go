package stepanalysis

import (
	"fmt"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// When a metric is measured: its first measurement waits for the query's
// lookback (or initialDelay) after the canary became ready, and the next
// ones come an interval apart.

// plan is a metric's first measurement, and why it is then.
type plan struct {
	first time.Time
	// lookback is the query's lookback as a PromQL duration; empty when
	// the query does not parse as PromQL and initialDelay alone counts.
	lookback string
	why      string
}

// ageProbe stands in for .CanaryAge when the lookback is read: a window
// bound by the canary's age reaches back as far as the canary is old, never
// before its readiness, so it should count for (next to) nothing. PromQL
// refuses an empty range, so the smallest duration it takes is used, and
// the lookback is rounded down to the second.
const ageProbe = "1ms"

// renderProbe renders a query to read its shape, not to run it: no Pod
// names, and .CanaryAge as ageProbe.
func renderProbe(query string, args map[string]string) (string, error) {
	return analysis.Render(query, analysis.Vars{CanaryPods: "a^", StablePods: "a^", Pods: "a^", CanaryAge: ageProbe, Args: args})
}

// schedule computes a metric's first measurement: readyAt plus the longer
// of the query's lookback plus the scrape margin, and initialDelay. The
// time is rounded up to the second, as status keeps it, so that it is
// never early.
func schedule(m v1alpha1.Metric, spec v1alpha1.AnalysisSpec, readyAt time.Time) plan {
	margin, delay := spec.ScrapeMargin.Duration, spec.InitialDelay.Duration
	at := func(d time.Duration) time.Time { return v1alpha1.CeilSecond(readyAt.Add(d)) }
	if m.Job != nil {
		// A Job reads no window of its own: it only waits for the
		// canary's readiness, and initialDelay (a warm-up) if longer.
		if delay > margin {
			return plan{first: at(delay), why: fmt.Sprintf("initialDelay %s after the canary became ready", analysis.FormatDuration(delay))}
		}
		return plan{first: at(margin), why: fmt.Sprintf("a %s scrape margin after the canary became ready (a job metric)", analysis.FormatDuration(margin))}
	}
	var query string
	if m.Prometheus != nil {
		query = m.Prometheus.Query
	}
	rendered, err := renderProbe(query, ProbeArgs(&spec))
	if err != nil {
		// The measurement will say what is wrong with the template.
		return plan{first: at(max(margin, delay)), why: "the query template does not render"}
	}
	lookback, err := analysis.Lookback(rendered, readyAt)
	if err != nil {
		if delay > 0 {
			return plan{first: at(delay), why: fmt.Sprintf("initialDelay %s (the query does not parse as PromQL, so its lookback is unknown)", analysis.FormatDuration(delay))}
		}
		return plan{first: at(margin), why: "the query does not parse as PromQL"}
	}
	lookback = lookback.Truncate(time.Second)
	p := plan{lookback: analysis.FormatDuration(lookback)}
	switch {
	case delay > lookback+margin:
		p.first, p.why = at(delay), fmt.Sprintf("initialDelay %s after the canary became ready", analysis.FormatDuration(delay))
	case lookback == 0:
		p.first, p.why = at(margin), fmt.Sprintf("a %s scrape margin after the canary became ready (the query reads no further back than the canary's age)", analysis.FormatDuration(margin))
	default:
		p.first, p.why = at(lookback+margin), fmt.Sprintf("the query looks back %s, plus a %s scrape margin, after the canary became ready", p.lookback, analysis.FormatDuration(margin))
	}
	return p
}

// dueAt is when a metric's next measurement is due: its first measurement
// time, then an interval after the last.
func dueAt(ms v1alpha1.MetricStatus, interval time.Duration) time.Time {
	due := analysis.NextMeasurementAt(lastMeasured(ms), interval)
	if ms.FirstMeasurementAt != nil && due.Before(ms.FirstMeasurementAt.Time) {
		return ms.FirstMeasurementAt.Time
	}
	return due
}

// lastMeasured is when the metric was last measured, at the latest: status
// keeps times to the second, so a measurement taken at 10.9s reads back as
// 10s, and counting the interval from 10s would shorten it. Counting from
// the end of that second makes it never shorter than configured.
func lastMeasured(ms v1alpha1.MetricStatus) time.Time {
	if ms.LastMeasuredAt == nil {
		return time.Time{}
	}
	return ms.LastMeasuredAt.Add(time.Second)
}

// waiting describes the wait for the first measurement while nothing has
// been measured yet: the earliest metric due and why then.
func waiting(metrics []v1alpha1.MetricStatus, spec v1alpha1.AnalysisSpec, now time.Time) string {
	var next *v1alpha1.MetricStatus
	for i := range metrics {
		ms := &metrics[i]
		if ms.Count > 0 {
			return ""
		}
		if ms.Phase == v1alpha1.AnalysisRunning && ms.FirstMeasurementAt != nil && (next == nil || ms.FirstMeasurementAt.Before(next.FirstMeasurementAt)) {
			next = ms
		}
	}
	if next == nil || !now.Before(next.FirstMeasurementAt.Time) {
		return ""
	}
	why := fmt.Sprintf("metric %s looks back %s", next.Name, next.Lookback)
	if next.Lookback == "" {
		why = fmt.Sprintf("metric %s waits for initialDelay", next.Name)
	}
	return fmt.Sprintf("first measurement at %s (%s, scrape margin %s)", next.FirstMeasurementAt.UTC().Format(time.RFC3339), why,
		analysis.FormatDuration(spec.ScrapeMargin.Duration))
}

// nextDue is the wait until the earliest due measurement of a running
// metric. A metric whose Job runs on (pending) is due already, so it
// counts with its recheck instead: the watch on Jobs wakes the Rollout
// when the Job ends, and the recheck only bounds a missed event.
func nextDue(metrics []v1alpha1.MetricStatus, interval time.Duration, now time.Time, pending map[int]time.Duration) time.Duration {
	var next time.Duration
	for k, ms := range metrics {
		if ms.Phase != v1alpha1.AnalysisRunning {
			continue
		}
		wait := max(dueAt(ms, interval).Sub(now), time.Millisecond)
		if recheck, ok := pending[k]; ok {
			wait = max(recheck, time.Millisecond)
		}
		if next == 0 || wait < next {
			next = wait
		}
	}
	return next
}
