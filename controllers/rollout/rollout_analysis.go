package rollout

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

// ProviderFactory builds the provider that runs one metric's query, from
// the metric's Prometheus settings and its bearer token ("" when none), read
// from its Secret by the reconciler. A provider is built per measurement:
// measurements are an interval apart, and a Rollout's settings may change
// between them.
type ProviderFactory func(metric v1alpha1.PrometheusMetric, bearerToken string) (analysis.Provider, error)

// DefaultProviderFactory queries Prometheus through pkg/analysis/prometheus.
func DefaultProviderFactory(m v1alpha1.PrometheusMetric, bearerToken string) (analysis.Provider, error) {
	cfg := prometheus.Config{
		Address:            m.Address,
		InsecureSkipVerify: m.InsecureSkipVerify,
		Headers:            m.Headers,
		BearerToken:        bearerToken,
	}
	if m.Timeout != nil {
		cfg.Timeout = m.Timeout.Duration
	}
	return prometheus.New(cfg)
}

// settle is the requeue after a verdict is reached, so that the step
// decision reads it at once instead of at the next event.
const settle = time.Second

// measured is one measurement taken this round, for the Prometheus metrics.
type measured struct {
	metric string
	m      analysis.Measurement
}

// runAnalysis does what the decision asks of status.analysis. While the
// analysis runs it takes, per metric, at most one measurement per reconcile
// and only when one is due (an interval after the last), stores it, tallies
// it and assesses the verdict; it returns when to look again: the next due
// measurement, or at once when a verdict was reached. Nothing is polled.
func (r *Reconciler) runAnalysis(ctx context.Context, rd *round, wl workload.Workload, obs workload.Observation) (time.Duration, error) {
	st := &rd.ro.Status
	switch rd.decision.Analysis {
	case step.AnalysisClear:
		st.Analysis = nil
		return 0, nil
	case step.AnalysisKeep:
		return 0, nil
	}
	if st.CurrentStepIndex == nil {
		return 0, nil
	}
	i := *st.CurrentStepIndex
	spec, ok := rd.ro.Spec.AnalysisForStep(int(i))
	if !ok {
		return 0, nil
	}
	if rd.decision.Analysis == step.AnalysisStart || currentAnalysis(st) == nil {
		st.Analysis = &v1alpha1.AnalysisStatus{
			StepIndex: i,
			Revision:  st.CanaryRevision,
			StartedAt: metav1.NewTime(rd.decision.Status.AnalysisStartedAt).Rfc3339Copy(),
			Phase:     v1alpha1.AnalysisRunning,
		}
	}
	a := st.Analysis
	syncMetricStatuses(a, spec.Metrics)
	if a.Phase != v1alpha1.AnalysisRunning && a.Phase != "" {
		// Decided in an earlier round; the step decision acts on it next.
		return settle, nil
	}

	interval := spec.Interval.Duration
	limits := analysis.Limits{
		Count:                 int(*spec.Count),
		FailureLimit:          int(*spec.FailureLimit),
		ConsecutiveErrorLimit: new(int(*spec.ConsecutiveErrorLimit)),
	}
	var vars *analysis.Vars
	fresh := map[string]analysis.Verdict{}
	for k, m := range spec.Metrics {
		ms := &a.Metrics[k]
		if ms.Phase != v1alpha1.AnalysisRunning {
			continue
		}
		if rd.now.Before(analysis.NextMeasurementAt(lastMeasured(*ms), interval)) {
			continue
		}
		if vars == nil {
			v, err := r.queryVars(ctx, rd.ro, spec.Args, wl, obs)
			if err != nil {
				return 0, err
			}
			vars = &v
		}
		meas := r.measure(ctx, rd.ro, m, *vars)
		verdict := analysis.Assess(append(history(*ms, limits), meas), limits)
		tally(ms, meas, verdict, rd.now)
		appendMeasurement(st, v1alpha1.Measurement{
			Metric: m.Name, Step: i, Value: formatValue(meas.Value),
			Phase: v1alpha1.MeasurementPhase(meas.Phase), Message: meas.Message,
			Time: metav1.NewTime(rd.now).Rfc3339Copy(),
		})
		rd.measured = append(rd.measured, measured{metric: m.Name, m: meas})
		if meas.Phase == analysis.PhaseError {
			rd.events = append(rd.events, step.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.EventMeasurementError,
				Message: fmt.Sprintf("step %d/%d: metric %s: %s", i+1, len(rd.ro.Spec.Steps), m.Name, meas.Message)})
		}
		fresh[m.Name] = verdict
	}

	perMetric := make(map[string]analysis.Verdict, len(a.Metrics))
	for _, ms := range a.Metrics {
		if v, ok := fresh[ms.Name]; ok {
			perMetric[ms.Name] = v
			continue
		}
		perMetric[ms.Name] = analysis.Verdict{Phase: analysis.VerdictPhase(ms.Phase)}
	}
	total := analysis.AssessAll(perMetric)
	a.Phase = v1alpha1.AnalysisPhase(total.Phase)
	if total.Phase.Done() {
		a.Message = total.Message
		switch total.Phase {
		case analysis.VerdictPassed:
			rd.events = append(rd.events, step.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventAnalysisPassed,
				Message: fmt.Sprintf("step %d/%d: analysis passed: %s", i+1, len(rd.ro.Spec.Steps), total.Message)})
		case analysis.VerdictFailed:
			rd.events = append(rd.events, step.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.EventAnalysisFailed,
				Message: fmt.Sprintf("step %d/%d: analysis failed: %s", i+1, len(rd.ro.Spec.Steps), total.Message)})
		}
		return settle, nil
	}
	a.Message = ""
	return nextMeasurement(a, interval, rd.now), nil
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
		out = append(out, ms)
	}
	a.Metrics = out
}

// nextMeasurement is the wait until the earliest due measurement of a
// running metric.
func nextMeasurement(a *v1alpha1.AnalysisStatus, interval time.Duration, now time.Time) time.Duration {
	var next time.Duration
	for _, ms := range a.Metrics {
		if ms.Phase != v1alpha1.AnalysisRunning {
			continue
		}
		wait := max(analysis.NextMeasurementAt(lastMeasured(ms), interval).Sub(now), time.Millisecond)
		if next == 0 || wait < next {
			next = wait
		}
	}
	return next
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

// history rebuilds, from a metric's tally, a measurement history that
// analysis.Assess judges as the real one was judged: the status keeps
// counters rather than every measurement (status.measurements is bounded),
// so that a verdict survives a controller restart however many were taken.
//
// The tally is that of a Running metric, so no limit was broken: failures
// are within failureLimit, inconclusive ones within the (zero) inconclusive
// limit, and error streaks within consecutiveErrorLimit. Earlier errors are
// laid out in streaks no longer than that limit, each closed by a measurement
// with a result, and the current streak (ConsecutiveErrors) goes last, so the
// next measurement is judged against the right streak and numbered right.
func history(ms v1alpha1.MetricStatus, limits analysis.Limits) []analysis.Measurement {
	streak := analysis.DefaultConsecutiveErrorLimit
	if limits.ConsecutiveErrorLimit != nil {
		streak = *limits.ConsecutiveErrorLimit
	}
	streak = max(streak, 1)
	results := make([]analysis.Phase, 0, ms.Successful+ms.Failed+ms.Inconclusive)
	for _, n := range []struct {
		phase analysis.Phase
		count int32
	}{{analysis.PhaseSuccessful, ms.Successful}, {analysis.PhaseFailed, ms.Failed}, {analysis.PhaseInconclusive, ms.Inconclusive}} {
		for range n.count {
			results = append(results, n.phase)
		}
	}
	out := make([]analysis.Measurement, 0, ms.Successful+ms.Failed+ms.Inconclusive+ms.Errors)
	add := func(p analysis.Phase) { out = append(out, analysis.Measurement{Phase: p}) }
	earlier := int(max(ms.Errors-ms.ConsecutiveErrors, 0))
	for earlier > 0 && len(results) > 0 {
		for range min(streak, earlier) {
			add(analysis.PhaseError)
		}
		earlier -= min(streak, earlier)
		add(results[0])
		results = results[1:]
	}
	for range earlier {
		add(analysis.PhaseError)
	}
	for _, p := range results {
		add(p)
	}
	for range ms.ConsecutiveErrors {
		add(analysis.PhaseError)
	}
	return out
}

// tally counts a new measurement into its metric's status.
func tally(ms *v1alpha1.MetricStatus, m analysis.Measurement, v analysis.Verdict, now time.Time) {
	ms.Count++
	switch m.Phase {
	case analysis.PhaseSuccessful:
		ms.Successful++
		ms.ConsecutiveErrors = 0
	case analysis.PhaseFailed:
		ms.Failed++
		ms.ConsecutiveErrors = 0
	case analysis.PhaseInconclusive:
		ms.Inconclusive++
		ms.ConsecutiveErrors = 0
	default:
		ms.Errors++
		ms.ConsecutiveErrors++
	}
	if m.Value != nil {
		ms.LastValue = formatValue(m.Value)
	}
	ms.LastMeasuredAt = timePtr(now)
	ms.Phase = v1alpha1.AnalysisPhase(v.Phase)
}

// appendMeasurement keeps the newest MaxMeasurements measurements.
func appendMeasurement(st *v1alpha1.RolloutStatus, m v1alpha1.Measurement) {
	st.Measurements = append(st.Measurements, m)
	if extra := len(st.Measurements) - v1alpha1.MaxMeasurements; extra > 0 {
		st.Measurements = append([]v1alpha1.Measurement(nil), st.Measurements[extra:]...)
	}
}

// formatValue writes a value as status keeps it; "" for none.
func formatValue(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

// queryVars are the template values of this round's queries. Pods come
// from the cache, listed once per round however many metrics are due.
func (r *Reconciler) queryVars(ctx context.Context, ro *v1alpha1.Rollout, args map[string]string, wl workload.Workload, obs workload.Observation) (analysis.Vars, error) {
	canary, err := wl.PodNames(ctx, obs, ro.Status.CanaryRevision)
	if err != nil {
		return analysis.Vars{}, err
	}
	stable, err := wl.PodNames(ctx, obs, ro.Status.StableRevision)
	if err != nil {
		return analysis.Vars{}, err
	}
	return analysis.Vars{
		Namespace:      ro.Namespace,
		Workload:       ro.Spec.WorkloadRef.Name,
		StableRevision: ro.Status.StableRevision,
		CanaryRevision: ro.Status.CanaryRevision,
		CanaryPods:     analysis.PodRegex(canary),
		StablePods:     analysis.PodRegex(stable),
		Args:           args,
	}, nil
}

// measure takes one measurement. Every failure to run the query (a bad
// threshold or template, a missing Secret, an unreachable Prometheus) is an
// Error measurement rather than a reconcile error: errors are counted
// against consecutiveErrorLimit and end in an Inconclusive verdict, never a
// pass.
func (r *Reconciler) measure(ctx context.Context, ro *v1alpha1.Rollout, m v1alpha1.Metric, vars analysis.Vars) analysis.Measurement {
	fail := func(format string, args ...any) analysis.Measurement {
		return analysis.Measurement{Phase: analysis.PhaseError, Message: fmt.Sprintf(format, args...)}
	}
	if m.Prometheus == nil {
		return fail("metric %s has no provider: set prometheus", m.Name)
	}
	lo, hi, err := m.ThresholdRange.Bounds()
	if err != nil {
		return fail("%v", err)
	}
	query, err := analysis.Render(m.Prometheus.Query, vars)
	if err != nil {
		return fail("%v", err)
	}
	token, err := r.bearerToken(ctx, ro.Namespace, m.Prometheus.BearerTokenSecretRef)
	if err != nil {
		return fail("%v", err)
	}
	factory := r.ProviderFactory
	if factory == nil {
		factory = DefaultProviderFactory
	}
	provider, err := factory(*m.Prometheus, token)
	if err != nil {
		return fail("%v", err)
	}
	if c, ok := provider.(interface{ CloseIdleConnections() }); ok {
		// One provider per measurement: release its connection with it.
		defer c.CloseIdleConnections()
	}
	return analysis.Measure(ctx, provider, query, analysis.Threshold{Min: lo, Max: hi})
}

// bearerToken reads a metric's token around the cache: the manager does not
// cache Secrets, which would take list and watch on every Secret.
func (r *Reconciler) bearerToken(ctx context.Context, namespace string, ref *v1alpha1.SecretKeyReference) (string, error) {
	if ref == nil {
		return "", nil
	}
	var secret corev1.Secret
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, &secret); err != nil {
		return "", fmt.Errorf("reading bearer token Secret %s: %w", ref.Name, err)
	}
	token, ok := secret.Data[ref.Key]
	if !ok {
		return "", fmt.Errorf("bearer token Secret %s has no key %q", ref.Name, ref.Key)
	}
	return string(token), nil
}
