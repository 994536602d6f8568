// Package promtest runs a real Prometheus for tests, scraping an in-process
// exporter whose counters the test controls. Everything listens on
// 127.0.0.1 only. Starting Prometheus is promrunner's job; this package
// adds the testing.TB conventions (fail or skip, cleanup) and the exporter.
//
// The Prometheus binary is /usr/bin/prometheus (Debian package "prometheus")
// or $STEPWISE_PROMETHEUS_BIN. When it is missing the test fails, since CI
// installs it and a silent skip would hide that the provider went untested;
// set STEPWISE_SKIP_PROMETHEUS=1 to skip instead.
package promtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stepwise-dev/stepwise/internal/testsupport/promrunner"
)

const (
	// DefaultBinary is where the Debian package installs Prometheus.
	DefaultBinary = promrunner.DefaultBinary
	// BinaryEnv overrides DefaultBinary.
	BinaryEnv = promrunner.BinaryEnv
	// SkipEnv, set to 1, skips tests that need a real Prometheus.
	SkipEnv = "STEPWISE_SKIP_PROMETHEUS"

	// ScrapeInterval is short so that tests see new counter values within
	// seconds.
	ScrapeInterval = time.Second
)

// Exporter serves /metrics with an http_requests_total counter vector
// (labels namespace, pod, code) that the test increments.
type Exporter struct {
	// Target is host:port, for a scrape config.
	Target   string
	requests *prometheus.CounterVec
}

// NewExporter starts an exporter on 127.0.0.1 and stops it at cleanup. It
// uses its own registry, so parallel tests do not share counters.
func NewExporter(t testing.TB) *Exporter {
	t.Helper()
	registry := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total",
		Help: "HTTP requests served, by pod and status code (test data).",
	}, []string{"namespace", "pod", "code"})
	registry.MustRegister(requests)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	// httptest listens on 127.0.0.1:0.
	server := httptest.NewServer(mux)
	t.Cleanup(server.Close)
	return &Exporter{Target: server.Listener.Addr().String(), requests: requests}
}

// AddRequests adds n requests; n = 0 creates the series at zero, which rate()
// needs as a starting point.
func (e *Exporter) AddRequests(namespace, pod, code string, n float64) {
	e.requests.WithLabelValues(namespace, pod, code).Add(n)
}

// Server is a running Prometheus.
type Server struct {
	// URL is the base address, http://127.0.0.1:<port>.
	URL string
}

// Start runs Prometheus scraping the given host:port targets every
// ScrapeInterval, waits until it is ready and has scraped every target, and
// kills it at cleanup.
func Start(t testing.TB, targets ...string) *Server {
	t.Helper()
	Binary(t)
	p, err := promrunner.Start(context.Background(), targets, promrunner.Options{ScrapeInterval: ScrapeInterval, Logf: t.Logf})
	if err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus output:\n%s", p.Output())
		}
		p.Stop()
	})
	return &Server{URL: p.URL()}
}

// Binary returns the Prometheus binary, skips the test when SkipEnv=1 and
// fails it, with installation instructions, when the binary is missing.
func Binary(t testing.TB) string {
	t.Helper()
	if os.Getenv(SkipEnv) == "1" {
		t.Skipf("%s=1: skipping a test that needs a real Prometheus", SkipEnv)
	}
	binary, err := promrunner.Available(promrunner.Options{})
	if err != nil {
		t.Fatalf("this test needs a real Prometheus: %v.\n"+
			"(After apt-get install, stop the service it may start: service prometheus stop.) "+
			"Or set %s=1 to skip these tests.", err, SkipEnv)
	}
	return binary
}
