package cloneset

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the CloneSet controller's own Prometheus series. They are
// registered by the caller (the manager registers them with
// controller-runtime's registry) so tests can use a private registry.
type Metrics struct {
	InPlaceUpdatesStarted   *prometheus.CounterVec
	InPlaceUpdatesSucceeded *prometheus.CounterVec
	InPlaceUpdatesFailed    *prometheus.CounterVec
	InPlaceUpdateDuration   *prometheus.HistogramVec
	PodsRecreated           *prometheus.CounterVec
	RoundsHandedOver        *prometheus.CounterVec
}

// NewMetrics builds the metric vectors, labelled by CloneSet namespace and name.
func NewMetrics() *Metrics {
	labels := []string{"namespace", "cloneset"}
	return &Metrics{
		InPlaceUpdatesStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stepwise_inplace_updates_started_total",
			Help: "In-place Pod updates started (images or metadata patched).",
		}, labels),
		InPlaceUpdatesSucceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stepwise_inplace_updates_succeeded_total",
			Help: "In-place Pod updates whose containers all restarted on the new image and InPlaceUpdateReady became True.",
		}, labels),
		InPlaceUpdatesFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stepwise_inplace_updates_failed_total",
			Help: "In-place Pod updates refused or failed (API errors, InPlaceOnly with a change that needs recreation).",
		}, labels),
		InPlaceUpdateDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stepwise_inplace_update_duration_seconds",
			Help:    "Time from the start of an in-place update to InPlaceUpdateReady=True.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 12),
		}, labels),
		PodsRecreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stepwise_pods_recreated_total",
			Help: "Pods deleted to be recreated on another revision because the change could not be made in place.",
		}, labels),
		RoundsHandedOver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stepwise_cloneset_rounds_handed_over_total",
			Help: "Rounds of this CloneSet, which no Rollout governs, that ended before their Pod write limit to hand their worker to a governed CloneSet whose Pod turned ready.",
		}, labels),
	}
}

// Collectors lists every metric, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.InPlaceUpdatesStarted, m.InPlaceUpdatesSucceeded, m.InPlaceUpdatesFailed, m.InPlaceUpdateDuration, m.PodsRecreated, m.RoundsHandedOver}
}

// forget drops a deleted CloneSet's series, so that a cluster that creates
// and deletes CloneSets does not grow the manager's memory and the scrape
// with series of CloneSets that are gone.
func (m *Metrics) forget(ns, name string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": ns, "cloneset": name}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.InPlaceUpdatesStarted, m.InPlaceUpdatesSucceeded, m.InPlaceUpdatesFailed, m.InPlaceUpdateDuration, m.PodsRecreated, m.RoundsHandedOver} {
		v.DeletePartialMatch(l)
	}
}
