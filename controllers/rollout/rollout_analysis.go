package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/stepanalysis"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

// ProviderFactory builds the provider that runs one metric's query, from
// the metric's Prometheus settings, what the reconciler read from the
// Secrets and ConfigMaps they reference, and the limits the manager sets
// on every provider. A provider is built per measurement: measurements are
// an interval apart, and a Rollout's settings may change between them.
type ProviderFactory func(metric v1alpha1.PrometheusMetric, refs ResolvedRefs, limits ProviderLimits) (analysis.Provider, error)

// ProviderLimits is what the manager imposes on every provider, whatever
// the Rollout says.
type ProviderLimits struct {
	// Allow is the manager's AnalysisAddressesFlag: where a provider may
	// connect, and which link-local IPs its dialer lets through.
	Allow prometheus.AllowList
	// Budget bounds the memory of the answers all providers read at once.
	Budget *prometheus.Budget
}

// ResolvedRefs holds what a metric's references name, read in the Rollout's
// namespace.
type ResolvedRefs struct {
	// BearerToken is the value of bearerTokenSecretRef; "" when unset.
	BearerToken string
	// CACert is the PEM bundle of tls.caRef; nil when unset.
	CACert []byte
}

// AnalysisAddressesFlag is the manager flag that fills
// Reconciler.AnalysisAddresses; refused measurements name it.
const AnalysisAddressesFlag = "analysis-allowed-addresses"

// DefaultProviderFactory queries Prometheus through pkg/analysis/prometheus.
func DefaultProviderFactory(m v1alpha1.PrometheusMetric, refs ResolvedRefs, limits ProviderLimits) (analysis.Provider, error) {
	cfg := prometheus.Config{
		Address:            m.Address,
		InsecureSkipVerify: m.InsecureSkipVerify,
		BearerToken:        refs.BearerToken,
		CACert:             refs.CACert,
		Allow:              limits.Allow,
		Budget:             limits.Budget,
	}
	if len(m.Headers) > 0 {
		cfg.Headers = make(map[string]string, len(m.Headers))
		for name, value := range m.Headers {
			cfg.Headers[name] = string(value)
		}
	}
	if m.Timeout != nil {
		cfg.Timeout = m.Timeout.Duration
	}
	return prometheus.New(cfg)
}

// setupAnalysis checks the allow-list, makes the memory budget unless one
// was given, and shares the workers among namespaces.
func (r *Reconciler) setupAnalysis(workers int) error {
	// A typo in the allow-list must stop the manager, not turn every
	// measurement into an Error.
	if _, err := prometheus.ParseAllowList(r.AnalysisAddresses); err != nil {
		return fmt.Errorf("--%s: %w", AnalysisAddressesFlag, err)
	}
	if r.AnalysisBudget == nil {
		r.AnalysisBudget = prometheus.NewBudget(prometheus.DefaultBudget)
	}
	r.Metrics.watchBudget(r.AnalysisBudget)
	r.mem.shares = stepanalysis.NewShares(workers)
	return nil
}

// runAnalysis does what the step decision asks of status.analysis: clear
// it, keep it, or run the step's analysis one round (stepanalysis.Run)
// and write what that returns.
func (r *Reconciler) runAnalysis(ctx context.Context, rd *round) (time.Duration, error) {
	wl, obs := rd.wl, rd.obs
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
	if err := r.resolveAnalysis(ctx, rd.ro, &spec, fmt.Sprintf("the analysis of step %d", i+1)); err != nil {
		return 0, err
	}
	var partition *int32
	if int(i) < len(rd.ro.Spec.Steps) {
		if p, err := step.ResolvePartition(rd.ro.Spec.Steps[i].Partition, obs.Replicas); err == nil {
			partition = &p
		}
	}
	res, err := stepanalysis.Run(ctx, stepanalysis.Input{
		Now:           rd.now,
		Rollout:       rd.ro.Name,
		Spec:          spec,
		Status:        st.Analysis,
		Start:         rd.decision.Analysis == step.AnalysisStart,
		StepIndex:     i,
		Steps:         len(rd.ro.Spec.Steps),
		Revision:      st.CanaryRevision,
		StartedAt:     rd.decision.Status.AnalysisStartedAt,
		CanaryReadyAt: canaryReadyAt(st),
		Replicas:      obs.Replicas,
		Partition:     partition,
	}, &measurer{r: r, ro: rd.ro, args: spec.LiteralArgs(), wl: wl, obs: obs, now: rd.now})
	if err != nil {
		return 0, err
	}
	st.Analysis = &res.Status
	return r.recordRun(rd, res), nil
}

// recordRun writes what one round of an analysis run measured, and returns
// when to measure next.
func (r *Reconciler) recordRun(rd *round, res stepanalysis.Result) time.Duration {
	st := &rd.ro.Status
	for _, m := range res.Measurements {
		appendMeasurement(st, m)
	}
	for _, t := range res.Taken {
		rd.measured = append(rd.measured, measured{metric: t.Metric, m: t.Measurement})
	}
	rd.events = append(rd.events, res.Events...)
	if res.Waiting != "" {
		st.Message += ": " + res.Waiting
	}
	return res.RequeueAfter
}

// canaryReadyAt is when the step's canary Pods were all ready on the
// canary revision, at the latest: the step's gate passed at stepReadyAt,
// which the workload's status only reports once every Pod it counts is
// ready. Status keeps that time to the second, rounded down, so one second
// is added. This holds for every adapter, whose canaries all keep their
// names: in place, or recreated under the same StatefulSet ordinal.
func canaryReadyAt(st *v1alpha1.RolloutStatus) time.Time {
	if st.StepReadyAt == nil {
		return time.Time{}
	}
	return st.StepReadyAt.Add(time.Second)
}

// measured is one measurement taken this round, for the Prometheus metrics.
type measured struct {
	metric string
	m      analysis.Measurement
}

// appendMeasurement keeps the newest MaxMeasurements measurements.
func appendMeasurement(st *v1alpha1.RolloutStatus, m v1alpha1.Measurement) {
	st.Measurements = append(st.Measurements, m)
	if extra := len(st.Measurements) - v1alpha1.MaxMeasurements; extra > 0 {
		st.Measurements = append([]v1alpha1.Measurement(nil), st.Measurements[extra:]...)
	}
}

// measurer is stepanalysis.Measurer on the cluster and Prometheus.
type measurer struct {
	r    *Reconciler
	ro   *v1alpha1.Rollout
	args map[string]string
	wl   workload.Workload
	obs  workload.Observation
	now  time.Time
}

// Vars lists the canary and stable Pods from the cache, once per round
// however many metrics are due.
func (m *measurer) Vars(ctx context.Context) (analysis.Vars, error) {
	ro := m.ro
	canary, err := m.wl.PodNames(ctx, m.obs, ro.Status.CanaryRevision)
	if err != nil {
		return analysis.Vars{}, err
	}
	stable, err := m.wl.PodNames(ctx, m.obs, ro.Status.StableRevision)
	if err != nil {
		return analysis.Vars{}, err
	}
	vars := analysis.Vars{
		Namespace:      ro.Namespace,
		Workload:       ro.Spec.WorkloadRef.Name,
		StableRevision: ro.Status.StableRevision,
		CanaryRevision: ro.Status.CanaryRevision,
		CanaryPods:     analysis.PodRegex(canary),
		StablePods:     analysis.PodRegex(stable),
		// A threshold metric measures the canary; a compared one
		// overrides Pods per side (judge.Sides).
		Pods: analysis.PodRegex(canary),
		Args: m.args,
	}
	if tr := ro.Spec.TrafficRouting; tr != nil {
		vars.CanaryService, vars.StableService = tr.CanaryService.Name, tr.StableService
		vars.RevisionLabel, _ = revisionLabel(ro.Spec.WorkloadRef)
	}
	return vars, nil
}

// Measure takes one measurement of a rendered query. Every failure to run
// it (a bad threshold, a missing Secret, an unreachable Prometheus) is an
// Error measurement rather than a reconcile error: errors are counted
// against consecutiveErrorLimit and end in an Inconclusive verdict, never a
// pass.
func (m *measurer) Measure(ctx context.Context, metric v1alpha1.Metric, query string) analysis.Measurement {
	fail := func(format string, args ...any) analysis.Measurement {
		return analysis.Measurement{Phase: analysis.PhaseError, Message: fmt.Sprintf(format, args...)}
	}
	if metric.ThresholdRange == nil {
		// A compare metric is measured by Compare: without a range no
		// value may pass here.
		return fail("metric %s has no thresholdRange", metric.Name)
	}
	lo, hi, err := metric.ThresholdRange.Bounds()
	if err != nil {
		return fail("%v", err)
	}
	// Before any Secret is read: a refused address gets no credential.
	allowed, err := prometheus.ParseAllowList(m.r.AnalysisAddresses)
	if err != nil {
		return fail("--%s: %v", AnalysisAddressesFlag, err)
	}
	if metric.Web != nil {
		return m.measureWeb(ctx, *metric.Web, query, allowed, analysis.Threshold{Min: lo, Max: hi})
	}
	if metric.Prometheus == nil {
		return fail("metric %s has no provider this controller runs", metric.Name)
	}
	provider, done, err := m.prometheus(ctx, *metric.Prometheus, allowed)
	if err != nil {
		return fail("%v", err)
	}
	defer done()
	return analysis.Measure(ctx, provider, query, analysis.Threshold{Min: lo, Max: hi})
}

// Compare takes one measurement of a compared metric: its query rendered
// for the canary's Pods and for the stable Pods, both run through one
// provider, and the samples judged (judge.Measure). Every failure to run
// it is an Error measurement without a Result, as in Measure.
func (m *measurer) Compare(ctx context.Context, metric v1alpha1.Metric, vars analysis.Vars, c judge.Compare) (*judge.Result, analysis.Measurement) {
	fail := func(format string, args ...any) (*judge.Result, analysis.Measurement) {
		return nil, analysis.Measurement{Phase: analysis.PhaseError, Message: fmt.Sprintf(format, args...)}
	}
	if metric.Prometheus == nil {
		return fail("metric %s: compare needs the prometheus provider", metric.Name)
	}
	allowed, err := prometheus.ParseAllowList(m.r.AnalysisAddresses)
	if err != nil {
		return fail("--%s: %v", AnalysisAddressesFlag, err)
	}
	provider, done, err := m.prometheus(ctx, *metric.Prometheus, allowed)
	if err != nil {
		return fail("%v", err)
	}
	defer done()
	r, meas := judge.Measure(ctx, provider, metric.Prometheus.Query, vars, c)
	if meas.Phase == analysis.PhaseError {
		return nil, meas
	}
	return &r, meas
}

// prometheus builds the provider of a Prometheus metric: the address
// checked against the allow-list before any Secret is read (a refused
// address gets no credential), then its token and CA read. done releases
// its connections: one provider per measurement.
func (m *measurer) prometheus(ctx context.Context, p v1alpha1.PrometheusMetric, allowed prometheus.AllowList) (analysis.Provider, func(), error) {
	if err := checkAddress(allowed, "prometheus.address", p.Address); err != nil {
		return nil, nil, err
	}
	token, err := m.r.bearerToken(ctx, m.ro.Namespace, p.BearerTokenSecretRef)
	if err != nil {
		return nil, nil, err
	}
	var caCert []byte
	if tls := p.TLS; tls != nil && tls.CARef != nil {
		if caCert, err = m.r.caCert(ctx, m.ro.Namespace, *tls.CARef); err != nil {
			return nil, nil, err
		}
	}
	factory := m.r.ProviderFactory
	if factory == nil {
		factory = DefaultProviderFactory
	}
	provider, err := factory(p, ResolvedRefs{BearerToken: token, CACert: caCert},
		ProviderLimits{Allow: allowed, Budget: m.r.AnalysisBudget})
	if err != nil {
		return nil, nil, err
	}
	done := func() {}
	if c, ok := provider.(interface{ CloseIdleConnections() }); ok {
		done = c.CloseIdleConnections
	}
	return provider, done, nil
}

// measureWeb runs a web metric whose URL (u) and body are rendered.
func (m *measurer) measureWeb(ctx context.Context, w v1alpha1.WebMetric, u string, allowed prometheus.AllowList, th analysis.Threshold) analysis.Measurement {
	fail := func(format string, args ...any) analysis.Measurement {
		return analysis.Measurement{Phase: analysis.PhaseError, Message: fmt.Sprintf(format, args...)}
	}
	if err := checkAddress(allowed, "web.url", u); err != nil {
		return fail("%v", err)
	}
	cfg := prometheus.WebConfig{URL: u, Method: w.Method, Body: w.Body, JSONPath: w.JSONPath,
		Allow: allowed, Budget: m.r.AnalysisBudget, Headers: map[string]string{}}
	if w.Timeout != nil {
		cfg.Timeout = w.Timeout.Duration
	}
	for _, h := range w.Headers {
		switch {
		case h.Value != nil:
			cfg.Headers[h.Name] = string(*h.Value)
		case h.SecretKeyRef != nil:
			v, err := m.r.bearerToken(ctx, m.ro.Namespace, h.SecretKeyRef)
			if err != nil {
				return fail("web.headers %s: %v", h.Name, err)
			}
			cfg.Headers[h.Name] = strings.TrimSpace(v)
		}
	}
	if tls := w.TLS; tls != nil && tls.CARef != nil {
		var err error
		if cfg.CACert, err = m.r.caCert(ctx, m.ro.Namespace, *tls.CARef); err != nil {
			return fail("%v", err)
		}
	}
	provider, err := prometheus.NewWeb(cfg)
	if err != nil {
		return fail("%v", err)
	}
	defer provider.CloseIdleConnections()
	return analysis.Measure(ctx, provider, u, th)
}

// Admit takes one of the namespace's shares of the workers for this
// round's measurements, or says why not (stepanalysis.Shares).
func (m *measurer) Admit() (func(), string) {
	done, refused := m.r.mem.shares.Take(m.ro.Namespace)
	if refused != "" {
		m.r.Metrics.deferred(m.ro.Namespace)
	}
	return done, refused
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

// caCert reads a metric's CA bundle around the cache, like the bearer
// token: caching ConfigMaps would take list and watch on every ConfigMap
// of the cluster for one read per measurement. Its content is never
// quoted in a message: a Secret named here may hold anything.
func (r *Reconciler) caCert(ctx context.Context, namespace string, ref v1alpha1.CAReference) ([]byte, error) {
	var (
		obj  client.Object
		data func() ([]byte, bool)
	)
	switch ref.Kind {
	case v1alpha1.CAReferenceConfigMap:
		var cm corev1.ConfigMap
		obj = &cm
		data = func() ([]byte, bool) {
			if v, ok := cm.Data[ref.Key]; ok {
				return []byte(v), true
			}
			v, ok := cm.BinaryData[ref.Key]
			return v, ok
		}
	case v1alpha1.CAReferenceSecret:
		var secret corev1.Secret
		obj = &secret
		data = func() ([]byte, bool) {
			v, ok := secret.Data[ref.Key]
			return v, ok
		}
	default:
		return nil, fmt.Errorf("prometheus.tls.caRef.kind %q: want ConfigMap or Secret", ref.Kind)
	}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		return nil, fmt.Errorf("reading CA %s %s: %w", ref.Kind, ref.Name, err)
	}
	pem, ok := data()
	if !ok {
		return nil, fmt.Errorf("CA %s %s has no key %q", ref.Kind, ref.Name, ref.Key)
	}
	if len(pem) == 0 {
		// An empty bundle would silently fall back to the system roots.
		return nil, fmt.Errorf("CA %s %s key %q is empty", ref.Kind, ref.Name, ref.Key)
	}
	return pem, nil
}

// checkAddress refuses, naming field, an address the manager's
// --analysis-allowed-addresses does not allow, or a link-local or cloud
// metadata address it does not name: the same rules for every provider.
func checkAddress(allowed prometheus.AllowList, field, address string) error {
	switch {
	case allowed.RefusesHost(address):
		return fmt.Errorf("%s %s is a link-local or cloud metadata address, which analysis never queries unless the manager's --%s names that IP",
			field, prometheus.Redact(address), AnalysisAddressesFlag)
	case !allowed.Allows(address):
		return fmt.Errorf("%s %s is not allowed by the manager's --%s", field, prometheus.Redact(address), AnalysisAddressesFlag)
	}
	return nil
}
