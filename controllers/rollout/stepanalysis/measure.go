package stepanalysis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

// taken is one due metric's measurement, and the judge's comparison
// behind it for a compared metric.
type taken struct {
	m        analysis.Measurement
	compared *judge.Result
	// job is a job metric's outcome; not Done while its Job runs on.
	job *JobOutcome
}

// MaxQueryTime bounds a round's queries whatever their timeouts say: a
// Prometheus that never answers holds a reconcile worker at most this long
// (or an interval, if shorter), so other Rollouts go on with the others.
const MaxQueryTime = 30 * time.Second

// measureAll takes the due metrics' measurements at once, each in its own
// goroutine, under one deadline: the shortest of the analysis interval and
// MaxQueryTime. A query still running then is an Error measurement.
func measureAll(ctx context.Context, m Measurer, in Input, due []int, vars analysis.Vars, st *v1alpha1.AnalysisStatus, readyAt time.Time) []taken {
	spec, now, metrics := in.Spec, in.Now, st.Metrics
	deadline := min(spec.Interval.Duration, MaxQueryTime)
	roundCtx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	out := make([]taken, len(due))
	var wg sync.WaitGroup
	for i, k := range due {
		wg.Go(func() {
			if job := spec.Metrics[k].Job; job != nil {
				out[i] = measureJob(roundCtx, m, spec.Metrics[k], vars, JobKey{Rollout: in.Rollout, Revision: st.Revision,
					Step: st.StepIndex, StartedAt: st.StartedAt.Time, Metric: spec.Metrics[k].Name, Index: metrics[k].Count})
				return
			}
			out[i] = measure(roundCtx, m, spec.Metrics[k], vars, metrics[k].Lookback != "", readyAt, now)
			if mm := &out[i].m; mm.Phase == analysis.PhaseError && ctx.Err() == nil && roundCtx.Err() != nil {
				mm.Message = fmt.Sprintf("no answer within %s (the interval, at most %s): %s", analysis.FormatDuration(deadline), analysis.FormatDuration(MaxQueryTime), mm.Message)
			}
		})
	}
	wg.Wait()
	return out
}

// measure renders a due metric's query for now, checks that its window
// stays within the canary's time on the revision, and runs it.
func measure(ctx context.Context, m Measurer, metric v1alpha1.Metric, vars analysis.Vars, checkWindow bool, readyAt, now time.Time) taken {
	fail := func(format string, args ...any) taken {
		return taken{m: analysis.Measurement{Phase: analysis.PhaseError, Message: fmt.Sprintf(format, args...)}}
	}
	if w := metric.Web; w != nil {
		// The URL and body are rendered here; the rendered URL stands for
		// the query in messages, the body travels in a copy of the metric.
		u, err := analysis.Render(w.URL, vars)
		if err != nil {
			return fail("web.url: %v", err)
		}
		rendered := *metric.DeepCopy()
		if w.Body != "" {
			if rendered.Web.Body, err = analysis.Render(w.Body, vars); err != nil {
				return fail("web.body: %v", err)
			}
		}
		return taken{m: m.Measure(ctx, rendered, u)}
	}
	if metric.Prometheus == nil {
		return fail("metric %s has no provider this controller runs", metric.Name)
	}
	if metric.Compare != nil {
		// The window is checked on the canary's query; the stable one
		// differs only in its Pods.
		vars, _ = judge.Sides(vars)
	}
	query, err := analysis.Render(metric.Prometheus.Query, vars)
	if err != nil {
		return fail("%v", err)
	}
	if checkWindow {
		if w := analysis.CheckWindow(query, readyAt, now); w.Problem != "" {
			return fail("not measured: %s", w.Problem)
		}
	}
	if metric.Compare != nil {
		c, err := parseCompare(metric.Compare)
		if err != nil {
			return fail("%v", err)
		}
		r, meas := m.Compare(ctx, metric, vars, c)
		return taken{m: meas, compared: r}
	}
	return taken{m: m.Measure(ctx, metric, query)}
}

// measureJob renders a job metric's spec and hands its Job to the
// Measurer. A template that does not render is an Error measurement, as
// for a query.
func measureJob(ctx context.Context, m Measurer, metric v1alpha1.Metric, vars analysis.Vars, key JobKey) taken {
	spec, deadline, err := RenderJob(*metric.Job, vars)
	if err != nil {
		return taken{m: analysis.Measurement{Phase: analysis.PhaseError, Message: err.Error()}}
	}
	o := m.Job(ctx, metric, JobRun{Name: JobName(key), Spec: spec, Deadline: deadline})
	return taken{m: o.Measurement, job: &o}
}
