// Package promtest runs a real Prometheus for tests, scraping an in-process
// exporter whose counters the test controls. Everything listens on
// 127.0.0.1 only.
//
// The Prometheus binary is /usr/bin/prometheus (Debian package "prometheus")
// or $STEPWISE_PROMETHEUS_BIN. When it is missing the test fails, since CI
// installs it and a silent skip would hide that the provider went untested;
// set STEPWISE_SKIP_PROMETHEUS=1 to skip instead.
package promtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const (
	// DefaultBinary is where the Debian package installs Prometheus.
	DefaultBinary = "/usr/bin/prometheus"
	// BinaryEnv overrides DefaultBinary.
	BinaryEnv = "STEPWISE_PROMETHEUS_BIN"
	// SkipEnv, set to 1, skips tests that need a real Prometheus.
	SkipEnv = "STEPWISE_SKIP_PROMETHEUS"

	// ScrapeInterval is short so that tests see new counter values within
	// seconds.
	ScrapeInterval = time.Second

	readyTimeout = 60 * time.Second
	startRetries = 3
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
// ScrapeInterval, waits until it is ready and kills it at cleanup.
func Start(t testing.TB, targets ...string) *Server {
	t.Helper()
	binary := Binary(t)

	dir := t.TempDir()
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config(targets)), 0o600); err != nil {
		t.Fatalf("write prometheus config: %v", err)
	}

	// The free port is found by listening and closing, so another process
	// may take it before Prometheus binds; Prometheus then exits, and we try
	// again with a new port.
	var lastErr error
	for attempt := 1; attempt <= startRetries; attempt++ {
		s, err := start(t, binary, configPath, filepath.Join(dir, "data"+strconv.Itoa(attempt)))
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("start prometheus: %v", lastErr)
	return nil
}

// Binary returns the Prometheus binary, skips the test when SkipEnv=1 and
// fails it, with installation instructions, when the binary is missing.
func Binary(t testing.TB) string {
	t.Helper()
	if os.Getenv(SkipEnv) == "1" {
		t.Skipf("%s=1: skipping a test that needs a real Prometheus", SkipEnv)
	}
	binary := os.Getenv(BinaryEnv)
	if binary == "" {
		binary = DefaultBinary
	}
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("this test needs a real Prometheus, but %s is missing (%v).\n"+
			"Install it with: apt-get update && apt-get install -y prometheus (then stop the service it may start: service prometheus stop),\n"+
			"or point %s at a prometheus binary, or set %s=1 to skip these tests.", binary, err, BinaryEnv, SkipEnv)
	}
	return binary
}

func config(targets []string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n", ScrapeInterval, ScrapeInterval, ScrapeInterval)
	b.WriteString("scrape_configs:\n  - job_name: exporter\n    static_configs:\n      - targets: [")
	for i, target := range targets {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", target)
	}
	b.WriteString("]\n")
	return b.String()
}

func start(t testing.TB, binary, configPath, dataDir string) (*Server, error) {
	t.Helper()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	output := &syncBuffer{}
	cmd := exec.Command(binary,
		"--config.file="+configPath,
		"--storage.tsdb.path="+dataDir,
		"--web.listen-address="+address,
	)
	cmd.Stdout = output
	cmd.Stderr = output
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", binary, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	url := "http://" + address
	if err := waitReady(url, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%w; prometheus output:\n%s", err, output.String())
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", output.String())
		}
	})
	return &Server{URL: url}, nil
}

func waitReady(url string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/-/ready", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("prometheus exited before it was ready at %s", url)
		case <-ctx.Done():
			return fmt.Errorf("prometheus not ready at %s within %s", url, readyTimeout)
		case <-tick.C:
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer collects the output of a process written from two pipes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
