// Package promrunner runs a real Prometheus (Debian's package, 2.42) on
// 127.0.0.1 for tests and the demo. It scrapes static host:port targets and
// returns only once every target has been scraped, so a caller's first query
// already sees data.
//
// The binary is Options.Binary, else $STEPWISE_PROMETHEUS_BIN, else
// /usr/bin/prometheus.
package promrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stepwise-dev/stepwise/internal/testsupport/syncbuf"
)

const (
	// DefaultBinary is where the Debian package installs Prometheus.
	DefaultBinary = "/usr/bin/prometheus"
	// BinaryEnv overrides DefaultBinary.
	BinaryEnv = "STEPWISE_PROMETHEUS_BIN"
	// InstallHint tells a human how to get the binary.
	InstallHint = "install Debian's prometheus package: apt-get install -y prometheus"

	// DefaultScrapeInterval is short so that callers see new counter values
	// within seconds.
	DefaultScrapeInterval = time.Second

	// readyTimeout bounds one start attempt: process up, /-/ready, and every
	// target scraped. Prometheus 2.42 applies static targets only on its
	// scrape manager's 5 s reload tick, so the first scrape can come ~6 s
	// after start; on a loaded 2-core machine allow much more.
	readyTimeout = 90 * time.Second
	startRetries = 3
	pollEvery    = 200 * time.Millisecond
)

// Options configures Start. The zero value is valid.
type Options struct {
	// ScrapeInterval is the global scrape (and evaluation) interval; 0 means
	// DefaultScrapeInterval.
	ScrapeInterval time.Duration
	// Binary is the prometheus executable; empty means $STEPWISE_PROMETHEUS_BIN,
	// else DefaultBinary.
	Binary string
	// Logf receives progress messages (t.Logf fits); nil discards them.
	Logf func(format string, args ...any)
	// ListenHost is the address Prometheus serves on; empty means
	// 127.0.0.1. The real-node tests use the Pods' gateway, so that the
	// manager, running in a Pod, can query it.
	ListenHost string
	// TargetLabels adds labels to the samples of a target (host:port), as
	// service discovery would (namespace, pod).
	TargetLabels map[string]map[string]string
}

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// Prometheus is a running Prometheus process.
type Prometheus struct {
	url    string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	output *syncbuf.Buffer

	stopOnce sync.Once
}

// Available returns the Prometheus binary Start would run, or an error that
// says why it cannot (with InstallHint).
func Available(opts Options) (string, error) {
	binary := opts.Binary
	if binary == "" {
		binary = os.Getenv(BinaryEnv)
	}
	if binary == "" {
		binary = DefaultBinary
	}
	path, err := exec.LookPath(binary)
	if err != nil {
		return "", fmt.Errorf("prometheus binary %s not usable (%w); %s, or point %s at a prometheus binary", binary, err, InstallHint, BinaryEnv)
	}
	return path, nil
}

// Start runs Prometheus scraping targets (host:port, path /metrics) and
// returns once it is ready and has scraped every target successfully
// (up == 1). ctx bounds the start only; the process runs until Stop. On error
// nothing is left running.
func Start(ctx context.Context, targets []string, opts Options) (*Prometheus, error) {
	binary, err := Available(opts)
	if err != nil {
		return nil, err
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = DefaultScrapeInterval
	}
	dir, err := os.MkdirTemp("", "stepwise-prometheus-")
	if err != nil {
		return nil, fmt.Errorf("creating prometheus directory: %w", err)
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, config(targets, opts.ScrapeInterval, opts.TargetLabels), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("writing prometheus config: %w", err)
	}

	// The free port is found by listening and closing, so another process
	// may take it before Prometheus binds; Prometheus then exits and we try
	// again with a new port and a fresh data directory.
	var errs []error
	for attempt := 1; attempt <= startRetries; attempt++ {
		p, err := start(ctx, binary, configPath, dir, filepath.Join(dir, "data"+strconv.Itoa(attempt)), targets, opts)
		if err == nil {
			return p, nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if ctx.Err() != nil {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("starting prometheus: %w", errors.Join(errs...))
}

func start(ctx context.Context, binary, configPath, dir, dataDir string, targets []string, opts Options) (*Prometheus, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := opts.ListenHost
	if host == "" {
		host = "127.0.0.1"
	}
	address := net.JoinHostPort(host, strconv.Itoa(port))
	p := &Prometheus{
		url:    "http://" + address,
		dir:    dir,
		exited: make(chan struct{}),
		output: &syncbuf.Buffer{},
	}
	// Not exec.CommandContext: ctx bounds the start, not the process.
	p.cmd = exec.Command(binary,
		"--config.file="+configPath,
		"--storage.tsdb.path="+dataDir,
		"--web.listen-address="+address,
	)
	p.cmd.Stdout = p.output
	p.cmd.Stderr = p.output
	setDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("running %s: %w", binary, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	began := time.Now()

	waitCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := p.waitReady(waitCtx); err != nil {
		p.kill()
		return nil, fmt.Errorf("%w; prometheus output (last lines):\n%s", err, tail(p.output.String(), 15))
	}
	opts.logf("promrunner: prometheus ready at %s (pid %d) in %s", p.url, p.cmd.Process.Pid, time.Since(began).Round(time.Millisecond))
	if err := p.waitScraped(waitCtx, targets); err != nil {
		p.kill()
		return nil, fmt.Errorf("%w; prometheus output (last lines):\n%s", err, tail(p.output.String(), 15))
	}
	opts.logf("promrunner: prometheus at %s scraped %d target(s) after %s", p.url, len(targets), time.Since(began).Round(time.Millisecond))
	return p, nil
}

// URL is the base address, http://127.0.0.1:PORT (or Options.ListenHost).
func (p *Prometheus) URL() string { return p.url }

// Output is what Prometheus logged so far, for diagnosing a failed test.
func (p *Prometheus) Output() string { return p.output.String() }

// Stop kills Prometheus, waits for it and removes its directory. Safe to
// call more than once.
func (p *Prometheus) Stop() {
	p.stopOnce.Do(func() {
		p.kill()
		_ = os.RemoveAll(p.dir)
	})
}

// kill ends the process and waits for it; SIGKILL because nothing it stores
// is worth a graceful shutdown.
func (p *Prometheus) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func (p *Prometheus) waitReady(ctx context.Context) error {
	return p.poll(ctx, "ready", func(ctx context.Context) (bool, error) {
		status, _, err := get(ctx, p.url+"/-/ready")
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		return status == http.StatusOK, nil
	})
}

// waitScraped waits until the up series of every target is 1, which proves
// a scrape succeeded and its samples are queryable.
func (p *Prometheus) waitScraped(ctx context.Context, targets []string) error {
	want := make(map[string]bool, len(targets))
	for _, target := range targets {
		want[target] = true
	}
	if len(want) == 0 {
		return nil
	}
	return p.poll(ctx, fmt.Sprintf("scraping %s", strings.Join(targets, ", ")), func(ctx context.Context) (bool, error) {
		status, body, err := get(ctx, p.url+"/api/v1/query?query="+url.QueryEscape("up == 1"))
		if err != nil || status != http.StatusOK {
			return false, nil //nolint:nilerr // transient while starting
		}
		var resp struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			return false, fmt.Errorf("decoding query response %q: %w", body, err)
		}
		seen := 0
		for _, r := range resp.Data.Result {
			if want[r.Metric["instance"]] {
				seen++
			}
		}
		return seen == len(want), nil
	})
}

func (p *Prometheus) poll(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		done, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("prometheus at %s exited while waiting for %s", p.url, what)
		case <-ctx.Done():
			return fmt.Errorf("prometheus at %s: waiting for %s: %w", p.url, what, ctx.Err())
		case <-tick.C:
		}
	}
}

func get(ctx context.Context, u string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// config renders a prometheus.yml; the scrape timeout equals the interval
// because Prometheus rejects a longer one. Targets with labels get a static
// group each.
func config(targets []string, interval time.Duration, labels map[string]map[string]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n", interval, interval, interval)
	b.WriteString("scrape_configs:\n  - job_name: stepwise\n    static_configs:\n")
	var plain []string
	for _, target := range targets {
		if len(labels[target]) == 0 {
			plain = append(plain, target)
			continue
		}
		fmt.Fprintf(&b, "      - targets: [%q]\n        labels:\n", target)
		keys := make([]string, 0, len(labels[target]))
		for k := range labels[target] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "          %s: %q\n", k, labels[target][k])
		}
	}
	if len(plain) > 0 || len(targets) == 0 {
		b.WriteString("      - targets: [")
		for i, target := range plain {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", target)
		}
		b.WriteString("]\n")
	}
	return b.Bytes()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
