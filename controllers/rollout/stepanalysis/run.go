package stepanalysis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

// Settle is the requeue once a verdict is reached, so that the step
// decision acts on it at once rather than at the next event: the verdict's
// status write has landed when the reconcile returns, and the next one
// reads the Rollout fresh. It is not zero only because a zero requeue means
// none. (It was a second, which alone made every analysis-gated step take
// over a second to move on: make bench-scale times it.) No loop can come of
// it: a decided verdict is acted on by the next decision, which never asks
// for the analysis to run again.
const Settle = 10 * time.Millisecond

// Input is what one round of a step's analysis reads.
type Input struct {
	// Now is the clock, injected.
	Now time.Time
	// Spec is the step's analysis with its defaults applied
	// (v1alpha1.RolloutSpec.AnalysisForStep).
	Spec v1alpha1.AnalysisSpec
	// Status is status.analysis as read; nil when there is none.
	Status *v1alpha1.AnalysisStatus
	// Start asks for a new run even if Status is for this step and revision
	// (the step decision started or retried the analysis).
	Start bool
	// Rollout is the Rollout's name, for its job metrics' Jobs.
	Rollout string
	// StepIndex and Steps name the step in messages ("step 1/3").
	StepIndex int32
	Steps     int
	// Revision is the canary revision judged.
	Revision string
	// StartedAt is when the analysis started (the step's pause ended).
	StartedAt time.Time
	// CanaryReadyAt is when the step's canary Pods were all ready on
	// Revision, at the latest. A run keeps the value it started with.
	CanaryReadyAt time.Time
	// Replicas and Partition (Pods kept on the stable revision) are the
	// workload's and the step's, to warn when compare metrics cannot
	// compare; nil Partition: unknown, no warning.
	Replicas  int32
	Partition *int32
}

// Measurer does what needs the cluster and the network.
type Measurer interface {
	// Vars returns the template values of this round (.CanaryAge is set by
	// Run). Called at most once per round, only when a metric is due.
	Vars(ctx context.Context) (analysis.Vars, error)
	// Measure runs a rendered query and judges its result.
	Measure(ctx context.Context, metric v1alpha1.Metric, query string) analysis.Measurement
	// Compare runs a compared metric's query for the canary's Pods and
	// for the stable Pods (judge.Sides, from vars) and judges the two
	// sides' samples. A query that fails is an Error measurement and no
	// Result.
	Compare(ctx context.Context, metric v1alpha1.Metric, vars analysis.Vars, c judge.Compare) (*judge.Result, analysis.Measurement)
	// Job takes a job metric's measurement or goes on with it: it creates
	// the Job run names unless it exists, and reads its outcome
	// (DecideJob). It never waits for the Job.
	Job(ctx context.Context, metric v1alpha1.Metric, run JobRun) JobOutcome
	// Admit asks, when metrics are due, whether this round may measure
	// now. It never waits: refused (with why, see Shares), the round
	// defers its due metrics; admitted, it calls done once they are taken.
	Admit() (done func(), refused string)
}

// Taken is one measurement of this round, for the Prometheus metrics.
type Taken struct {
	Metric      string
	Measurement analysis.Measurement
}

// Result is what the reconciler writes.
type Result struct {
	// Status is the new status.analysis.
	Status v1alpha1.AnalysisStatus
	// Measurements are this round's, for status.measurements.
	Measurements []v1alpha1.Measurement
	// Taken are this round's measurements, for the Prometheus metrics.
	Taken []Taken
	// Events to record once the status is written.
	Events []step.Event
	// Waiting says when the first measurement is due and why, while no
	// metric has been measured; empty otherwise.
	Waiting string
	// RequeueAfter is when the next measurement is due, or Settle once a
	// verdict is reached.
	RequeueAfter time.Duration
}

// Run carries a step's analysis one round further: it starts or resumes
// the tally, schedules first measurements, takes those that are due,
// tallies them and assesses the step. A Measurer error (the cache could not
// list Pods) is returned for the reconcile to retry; everything that goes
// wrong with a query is an Error measurement instead.
func Run(ctx context.Context, in Input, m Measurer) (Result, error) {
	a, started := resume(in)
	syncMetricStatuses(&a, in.Spec.Metrics)
	res := Result{Status: a}
	st := &res.Status
	if started && in.Partition != nil {
		if why := SidesWarning(in.Spec.Metrics, int(in.Replicas), int(*in.Partition)); why != "" {
			res.Events = append(res.Events, in.event(corev1.EventTypeWarning, v1alpha1.EventComparisonImpossible, "%s", why))
		}
	}
	if st.Phase != v1alpha1.AnalysisRunning {
		// Decided in an earlier round; the step decision acts on it next.
		res.RequeueAfter = Settle
		return res, nil
	}

	readyAt := st.CanaryReadyAt.Time
	var due []int
	for k, metric := range in.Spec.Metrics {
		ms := &st.Metrics[k]
		if ms.Phase != v1alpha1.AnalysisRunning {
			continue
		}
		if ms.FirstMeasurementAt == nil {
			s := schedule(metric, in.Spec, readyAt)
			ms.FirstMeasurementAt = timePtr(s.first)
			ms.Lookback = s.lookback
			res.Events = append(res.Events, in.event(corev1.EventTypeNormal, v1alpha1.EventMeasurementScheduled,
				"metric %s: first measurement at %s: %s", metric.Name, s.first.UTC().Format(time.RFC3339), s.why))
		}
		if !in.Now.Before(dueAt(*ms, in.Spec.Interval.Duration)) {
			due = append(due, k)
		}
	}

	fresh := map[string]analysis.Verdict{}
	// pending are the job metrics whose Job runs on, with when to look
	// again at the latest; notes say what became of their Jobs.
	pending := map[int]time.Duration{}
	var notes []string
	if len(due) > 0 {
		done, refused := m.Admit()
		if refused != "" {
			return deferred(in, res, due, refused), nil
		}
		vars, err := m.Vars(ctx)
		if err != nil {
			done()
			return Result{}, err
		}
		vars.CanaryAge = analysis.CanaryAge(readyAt, in.Now)
		taken := measureAll(ctx, m, in, due, vars, st, readyAt)
		done()
		for i, k := range due {
			metric, ms, meas := in.Spec.Metrics[k], &st.Metrics[k], taken[i].m
			if j := taken[i].job; j != nil && !j.Done {
				// The Job runs on: nothing to tally until it ends.
				pending[k] = j.RecheckAfter
				if j.Note != "" {
					notes = append(notes, fmt.Sprintf("metric %s: %s", metric.Name, j.Note))
				}
				if j.Event != "" {
					res.Events = append(res.Events, in.event(corev1.EventTypeNormal, v1alpha1.EventAnalysisJob, "metric %s: %s", metric.Name, j.Event))
				}
				continue
			}
			if r := taken[i].compared; r != nil {
				recordComparison(ms, *r)
				kind := corev1.EventTypeNormal
				if r.Verdict == judge.Fail {
					kind = corev1.EventTypeWarning
				}
				res.Events = append(res.Events, in.event(kind, v1alpha1.EventMetricCompared,
					"metric %s: %s", metric.Name, judge.Summarize(*r).Line()))
			}
			fresh[metric.Name] = tally(ms, meas, limitsOf(in.Spec, metric), in.Now)
			rec := v1alpha1.Measurement{
				Metric: metric.Name, Step: in.StepIndex, Value: formatValue(meas.Value),
				Phase: v1alpha1.MeasurementPhase(meas.Phase), Message: meas.Message,
				Time: metav1.NewTime(in.Now).Rfc3339Copy(),
			}
			res.Measurements = append(res.Measurements, rec)
			record(ms, rec, in.Spec.Retention())
			res.Taken = append(res.Taken, Taken{Metric: metric.Name, Measurement: meas})
			if meas.Phase == analysis.PhaseError {
				res.Events = append(res.Events, in.event(corev1.EventTypeWarning, v1alpha1.EventMeasurementError,
					"metric %s: %s", metric.Name, meas.Message))
			}
		}
	}

	thresholds := in.Spec.JudgeOrDefault()
	total := Assess(judgedMetrics(in.Spec.Metrics, st.Metrics, fresh), int(thresholds.Pass), int(thresholds.Marginal))
	st.Phase = v1alpha1.AnalysisPhase(total.Phase)
	if total.Phase.Done() {
		st.Message = total.Message
		if total.Scored {
			st.Score = strconv.Itoa(total.Outcome.Score)
			kind := corev1.EventTypeWarning
			if total.Outcome.Decision == judge.Promote {
				kind = corev1.EventTypeNormal
			}
			res.Events = append(res.Events, in.event(kind, v1alpha1.EventAnalysisScored, "score %d (pass %d, marginal %d): %s",
				total.Outcome.Score, thresholds.Pass, thresholds.Marginal, total.Outcome.Message))
		}
		switch total.Phase {
		case analysis.VerdictPassed:
			res.Events = append(res.Events, in.event(corev1.EventTypeNormal, v1alpha1.EventAnalysisPassed, "analysis passed: %s", total.Message))
		case analysis.VerdictFailed:
			res.Events = append(res.Events, in.event(corev1.EventTypeWarning, v1alpha1.EventAnalysisFailed, "analysis failed: %s", total.Message))
		}
		res.RequeueAfter = Settle
		return res, nil
	}
	st.Message = ""
	res.Waiting = waiting(st.Metrics, in.Spec, in.Now)
	if len(notes) > 0 {
		res.Waiting = strings.Join(append(notes, res.Waiting), "; ")
		res.Waiting = strings.TrimSuffix(res.Waiting, "; ")
	}
	res.RequeueAfter = nextDue(st.Metrics, in.Spec.Interval.Duration, in.Now, pending)
	return res, nil
}

// deferred is a round whose due metrics are not measured now: they stay
// due, and the round looks again in DeferRetry. The wait is told in
// status.message and in an Event, which the events API folds into one
// series for as long as the deferrals go on.
func deferred(in Input, res Result, due []int, refused string) Result {
	names := make([]string, len(due))
	for i, k := range due {
		names[i] = in.Spec.Metrics[k].Name
	}
	why := "measurement deferred: " + refused
	res.Status.Message = ""
	res.Waiting = why
	res.Events = append(res.Events, in.event(corev1.EventTypeNormal, v1alpha1.EventMeasurementDeferred, "metric %s: %s", strings.Join(names, ", "), why))
	res.RequeueAfter = DeferRetry
	return res
}

// resume returns the run to carry on: the one in status when it is this
// step's and revision's and no new run was asked for, else a new one
// (started).
func resume(in Input) (_ v1alpha1.AnalysisStatus, started bool) {
	if !in.Start && in.Status != nil && in.Status.StepIndex == in.StepIndex && in.Status.Revision == in.Revision {
		a := *in.Status.DeepCopy()
		if a.CanaryReadyAt == nil {
			// A tally written before canaryReadyAt existed.
			a.CanaryReadyAt = timePtr(in.CanaryReadyAt)
		}
		if a.Phase == "" {
			a.Phase = v1alpha1.AnalysisRunning
		}
		return a, false
	}
	return v1alpha1.AnalysisStatus{
		StepIndex:     in.StepIndex,
		Revision:      in.Revision,
		StartedAt:     metav1.NewTime(in.StartedAt).Rfc3339Copy(),
		CanaryReadyAt: timePtr(in.CanaryReadyAt),
		Phase:         v1alpha1.AnalysisRunning,
	}, true
}

// syncMetricStatuses keeps one tally per metric of the spec, in spec order:
// a metric added to the spec mid-analysis starts with an empty tally, a
// removed one is dropped.
func syncMetricStatuses(a *v1alpha1.AnalysisStatus, metrics []v1alpha1.Metric) {
	byName := make(map[string]v1alpha1.MetricStatus, len(a.Metrics))
	for _, ms := range a.Metrics {
		byName[ms.Name] = ms
	}
	out := make([]v1alpha1.MetricStatus, 0, len(metrics))
	for _, m := range metrics {
		ms, ok := byName[m.Name]
		if !ok {
			ms = v1alpha1.MetricStatus{Name: m.Name}
		}
		if ms.Phase == "" {
			ms.Phase = v1alpha1.AnalysisRunning
		}
		ms.DryRun = m.DryRun
		out = append(out, ms)
	}
	a.Metrics = out
}

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
	at := func(d time.Duration) time.Time { return ceilSecond(readyAt.Add(d)) }
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

// limitsOf is the analysis' limits, with the metric's own inconclusiveLimit.
func limitsOf(spec v1alpha1.AnalysisSpec, m v1alpha1.Metric) analysis.Limits {
	inconclusive := spec.InconclusiveLimit
	if m.InconclusiveLimit != nil {
		inconclusive = m.InconclusiveLimit
	}
	return analysis.Limits{
		Count:                 int(deref(spec.Count, v1alpha1.DefaultAnalysisCount)),
		FailureLimit:          int(deref(spec.FailureLimit, v1alpha1.DefaultFailureLimit)),
		InconclusiveLimit:     new(int(deref(inconclusive, v1alpha1.DefaultInconclusiveLimit))),
		ConsecutiveErrorLimit: new(int(deref(spec.ConsecutiveErrorLimit, v1alpha1.DefaultConsecutiveErrorLimit))),
	}
}

// tally counts a measurement into its metric's status and returns the
// metric's verdict. The counters are all analysis.Next needs, so the
// verdict after a restart is the one without it.
func tally(ms *v1alpha1.MetricStatus, m analysis.Measurement, limits analysis.Limits, now time.Time) analysis.Verdict {
	counts := analysis.Counts{
		Successful: int(ms.Successful), Failed: int(ms.Failed), Inconclusive: int(ms.Inconclusive), Error: int(ms.Errors),
		ConsecutiveErrors: int(ms.ConsecutiveErrors), ConsecutiveInconclusive: int(ms.ConsecutiveInconclusive),
	}
	counts, v := analysis.Next(counts, m, limits)
	ms.Count = int32(counts.Taken())
	ms.Successful, ms.Failed = int32(counts.Successful), int32(counts.Failed)
	ms.Inconclusive, ms.Errors = int32(counts.Inconclusive), int32(counts.Error)
	ms.ConsecutiveErrors, ms.ConsecutiveInconclusive = int32(counts.ConsecutiveErrors), int32(counts.ConsecutiveInconclusive)
	if m.Value != nil {
		ms.LastValue = formatValue(m.Value)
	}
	ms.LastMeasuredAt = timePtr(now)
	ms.Phase = v1alpha1.AnalysisPhase(v.Phase)
	return v
}

// record keeps a metric's newest measurements, at most retention.
func record(ms *v1alpha1.MetricStatus, m v1alpha1.Measurement, retention int) {
	ms.Measurements = append(ms.Measurements, m)
	if extra := len(ms.Measurements) - retention; extra > 0 {
		ms.Measurements = append([]v1alpha1.Measurement(nil), ms.Measurements[extra:]...)
	}
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

func (in Input) event(eventType, reason, format string, args ...any) step.Event {
	return step.Event{Type: eventType, Reason: reason,
		Message: fmt.Sprintf("step %d/%d: ", in.StepIndex+1, in.Steps) + fmt.Sprintf(format, args...)}
}

// formatValue writes a value as status keeps it; "" for none.
func formatValue(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t).Rfc3339Copy()
	return &mt
}

// ceilSecond rounds up to the second, so that a time status truncates is
// never earlier than meant.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
