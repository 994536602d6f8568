package stepanalysis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
	// Of names an analysis that is not a step's
	// (v1alpha1.MeasurementOfBackground or MeasurementOfPostPromotion): its
	// run spans steps, so it resumes whatever StepIndex is (the step it
	// started at stays in status), and StepIndex only names the step in
	// messages and measurements. Empty for a step's analysis.
	Of string
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
			ms.FirstMeasurementAt = v1alpha1.StatusTime(s.first)
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
				Metric: metric.Name, Step: in.StepIndex, Analysis: in.Of, Value: formatValue(meas.Value),
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
	if !in.Start && in.Status != nil && (in.Of != "" || in.Status.StepIndex == in.StepIndex) && in.Status.Revision == in.Revision {
		a := *in.Status.DeepCopy()
		if a.CanaryReadyAt == nil {
			// A tally written before canaryReadyAt existed.
			a.CanaryReadyAt = v1alpha1.StatusTime(in.CanaryReadyAt)
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
		CanaryReadyAt: v1alpha1.StatusTime(in.CanaryReadyAt),
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
	ms.LastMeasuredAt = v1alpha1.StatusTime(now)
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

func (in Input) event(eventType, reason, format string, args ...any) step.Event {
	prefix := fmt.Sprintf("step %d/%d: ", in.StepIndex+1, in.Steps)
	switch in.Of {
	case v1alpha1.MeasurementOfBackground:
		prefix = fmt.Sprintf("background analysis (at step %d/%d): ", in.StepIndex+1, in.Steps)
	case v1alpha1.MeasurementOfPostPromotion:
		prefix = "post-promotion analysis: "
	}
	return step.Event{Type: eventType, Reason: reason, Message: prefix + fmt.Sprintf(format, args...)}
}

// formatValue writes a value as status keeps it; "" for none.
func formatValue(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
