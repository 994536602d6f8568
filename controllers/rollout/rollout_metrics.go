package rollout

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	analysisprom "github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

// Metrics are the Rollout controller's own Prometheus series. The caller
// registers them (the manager with controller-runtime's registry), so tests
// can use a private registry. A nil *Metrics records nothing.
type Metrics struct {
	// Phase is 1 for a Rollout's current phase and 0 for the others, so
	// that `max by (phase)` and alerts on Aborted read naturally.
	Phase *prometheus.GaugeVec
	// CurrentStep is the index of the step in progress, -1 when none is.
	CurrentStep *prometheus.GaugeVec
	// MeasurementValue is the last value a metric's query returned.
	MeasurementValue *prometheus.GaugeVec
	// Measurements counts measurements by outcome.
	Measurements *prometheus.CounterVec
	// StepDuration is the time from a step's partition being set to the
	// step ending (advanced, completed or aborted).
	StepDuration *prometheus.HistogramVec
	// RolloutDuration is the time from the canary revision's creation (the
	// template change) to the rollout completing or aborting.
	RolloutDuration *prometheus.HistogramVec
	// AnalysisBytesInFlight and AnalysisBytesLimit are the analysis
	// memory budget's reserved bytes and size (prometheus.Budget), read at
	// each scrape.
	AnalysisBytesInFlight prometheus.GaugeFunc
	AnalysisBytesLimit    prometheus.GaugeFunc
	// AnalysisDeferred counts analysis rounds whose due measurements were
	// deferred because their namespace had taken its share of the workers.
	AnalysisDeferred *prometheus.CounterVec

	// budget is the Reconciler's, once SetupWithManager has made it.
	budget atomic.Pointer[analysisprom.Budget]

	// NotificationsDropped counts transitions not posted to a webhook
	// because the notifier's bounds were reached, by reason: queue_full
	// (the webhook's destination has NotifierQueueSize transitions
	// waiting) or too_many_destinations (MaxNotifierDestinations, or
	// MaxNotifierDestinationsPerNamespace for the Rollout's namespace).
	NotificationsDropped *prometheus.CounterVec
}

var phases = []v1alpha1.RolloutPhase{v1alpha1.RolloutHealthy, v1alpha1.RolloutProgressing, v1alpha1.RolloutPaused, v1alpha1.RolloutAborted}

// NewMetrics builds the metric vectors, labelled by Rollout namespace and name.
func NewMetrics() *Metrics {
	labels := []string{"namespace", "rollout"}
	m := &Metrics{
		Phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stepwise_rollout_phase",
			Help: "1 for the Rollout's current phase (Healthy, Progressing, Paused, Aborted), 0 for the others.",
		}, slices.Concat(labels, []string{"phase"})),
		CurrentStep: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stepwise_rollout_current_step",
			Help: "Index of the step in progress; -1 when no step is.",
		}, labels),
		MeasurementValue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stepwise_rollout_analysis_measurement_value",
			Help: "Last value returned by an analysis metric's query.",
		}, slices.Concat(labels, []string{"metric"})),
		Measurements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stepwise_rollout_analysis_measurements_total",
			Help: "Analysis measurements by result: Successful, Failed, Inconclusive or Error.",
		}, slices.Concat(labels, []string{"metric", "result"})),
		StepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stepwise_rollout_step_duration_seconds",
			Help:    "Time from a step's partition being set to the step ending.",
			Buckets: prometheus.ExponentialBuckets(5, 2, 12),
		}, slices.Concat(labels, []string{"result"})),
		RolloutDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stepwise_rollout_duration_seconds",
			Help:    "Time from the canary revision's creation to the rollout completing or aborting.",
			Buckets: prometheus.ExponentialBuckets(30, 2, 12),
		}, slices.Concat(labels, []string{"result"})),
		AnalysisDeferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stepwise_rollout_analysis_deferred_total",
			Help: "Analysis rounds whose due measurements were deferred because their namespace already measured its share of the Rollout workers.",
		}, []string{"namespace"}),
		NotificationsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stepwise_rollout_notifications_dropped_total",
			Help: "Phase transitions not posted to a webhook because the notifier's bounds were reached, by reason: queue_full or too_many_destinations.",
		}, slices.Concat(labels, []string{"webhook", "reason"})),
	}
	m.AnalysisBytesInFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "stepwise_analysis_response_bytes_in_flight",
		Help: "Bytes of the analysis memory budget reserved by Prometheus answers being read and decoded.",
	}, func() float64 { return float64(m.budget.Load().InUse()) })
	m.AnalysisBytesLimit = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "stepwise_analysis_response_bytes_limit",
		Help: "Size in bytes of the analysis memory budget shared by every Prometheus answer being read.",
	}, func() float64 { return float64(m.budget.Load().Limit()) })
	return m
}

// Collectors lists every metric, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Phase, m.CurrentStep, m.MeasurementValue, m.Measurements, m.StepDuration, m.RolloutDuration,
		m.AnalysisBytesInFlight, m.AnalysisBytesLimit, m.AnalysisDeferred, m.NotificationsDropped}
}

// watchBudget makes the budget gauges read b.
func (m *Metrics) watchBudget(b *analysisprom.Budget) {
	if m == nil {
		return
	}
	m.budget.Store(b)
}

func (m *Metrics) deferred(ns string) {
	if m == nil {
		return
	}
	m.AnalysisDeferred.WithLabelValues(ns).Inc()
}

func (m *Metrics) setState(ns, name string, phase v1alpha1.RolloutPhase, step *int32) {
	if m == nil {
		return
	}
	for _, p := range phases {
		v := 0.0
		if p == phase {
			v = 1
		}
		m.Phase.WithLabelValues(ns, name, string(p)).Set(v)
	}
	current := -1.0
	if step != nil {
		current = float64(*step)
	}
	m.CurrentStep.WithLabelValues(ns, name).Set(current)
}

func (m *Metrics) measured(ns, name, metric, result string, value *float64) {
	if m == nil {
		return
	}
	m.Measurements.WithLabelValues(ns, name, metric, result).Inc()
	if value != nil {
		m.MeasurementValue.WithLabelValues(ns, name, metric).Set(*value)
	}
}

func (m *Metrics) stepEnded(ns, name, result string, d time.Duration) {
	if m == nil || d < 0 {
		return
	}
	m.StepDuration.WithLabelValues(ns, name, result).Observe(d.Seconds())
}

func (m *Metrics) rolloutEnded(ns, name, result string, d time.Duration) {
	if m == nil || d < 0 {
		return
	}
	m.RolloutDuration.WithLabelValues(ns, name, result).Observe(d.Seconds())
}

func (m *Metrics) notificationDropped(ns, name, webhook, reason string) {
	if m == nil {
		return
	}
	m.NotificationsDropped.WithLabelValues(ns, name, webhook, reason).Inc()
}

// forget drops a deleted Rollout's series.
func (m *Metrics) forget(ns, name string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": ns, "rollout": name}
	m.Phase.DeletePartialMatch(l)
	m.CurrentStep.DeletePartialMatch(l)
	m.MeasurementValue.DeletePartialMatch(l)
	m.Measurements.DeletePartialMatch(l)
	m.StepDuration.DeletePartialMatch(l)
	m.RolloutDuration.DeletePartialMatch(l)
	m.NotificationsDropped.DeletePartialMatch(l)
}
