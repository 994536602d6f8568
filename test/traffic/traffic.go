// Package traffic simulates HTTP traffic to the Pods of a (kwok) cluster for
// tests and the demo. kwok Pods run nothing, so the simulator plays both the
// clients and the instrumented servers: every tick it counts requests for
// each Running and Ready Pod into http_requests_total{namespace,pod,code},
// served on /metrics for Prometheus to scrape.
//
// It is deterministic: a Pod's request and error counts are exact running
// totals of RequestsPerSecond*Interval and ErrorRate, with fractions carried
// over to the next tick instead of drawn at random, so a test knows what
// rate() Prometheus will compute.
//
// For the judge (pkg/analysis/judge), which compares canary Pods with
// stable Pods, PerImage gives each image tag its own error rate (or
// latency) with a per-Pod, seeded noise, and Options.Latency makes every
// counted request also observe a latency into the histogram
// http_request_duration_seconds{namespace,pod}, drawn from a seeded
// log-normal distribution around the Pod's median.
package traffic

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// DefaultRequestsPerSecond is the per-Pod load when Options leaves it 0.
	DefaultRequestsPerSecond = 20
	// DefaultInterval is the tick when Options leaves it 0.
	DefaultInterval = 500 * time.Millisecond
	// BadErrorRate is the share of failing requests DefaultErrorRate gives a
	// Pod whose image tag ends in BadTagSuffix.
	BadErrorRate = 0.2
	// BadTagSuffix marks an image tag as a bad release for DefaultErrorRate.
	BadTagSuffix = "-bad"

	// MetricName is the counter the simulator serves.
	MetricName = "http_requests_total"
	// LatencyMetricName is the histogram Options.Latency fills.
	LatencyMetricName = "http_request_duration_seconds"
	// LatencySigma is the log-normal spread of one request's latency
	// around its Pod's median: the p95 is the median times
	// exp(1.645*LatencySigma), about 1.64.
	LatencySigma = 0.3
)

// LatencyBuckets are the histogram's upper bounds, 5 ms to about 19 s in
// steps of 1.25, fine enough for histogram_quantile to tell a p95 x1.5.
var LatencyBuckets = prometheus.ExponentialBuckets(0.005, 1.25, 38)

// Options configures Start.
type Options struct {
	// Client reads Pods; a cached client (a manager's) is fine and cheaper.
	Client client.Client
	// Namespace holds the Pods that receive traffic.
	Namespace string
	// Selector picks the Pods that receive traffic; nil means all in
	// Namespace.
	Selector labels.Selector
	// RequestsPerSecond is the load per Pod; 0 means DefaultRequestsPerSecond.
	RequestsPerSecond float64
	// Interval is the tick; 0 means DefaultInterval.
	Interval time.Duration
	// ErrorRate is the share (0..1) of a Pod's requests that fail with 500;
	// nil means DefaultErrorRate.
	ErrorRate func(pod *corev1.Pod) float64
	// Latency is the median latency in seconds of a Pod's requests; nil or
	// 0 observes none (no histogram series).
	Latency func(pod *corev1.Pod) float64
	// Seed makes the latency draws reproducible.
	Seed uint64
	// Logf receives errors listing Pods (t.Logf fits); nil discards them.
	Logf func(format string, args ...any)
}

// DefaultErrorRate is BadErrorRate for a Pod whose first container's image
// tag ends in BadTagSuffix ("example.com/web:v3-bad"), else 0.
func DefaultErrorRate(pod *corev1.Pod) float64 {
	if len(pod.Spec.Containers) == 0 {
		return 0
	}
	if strings.HasSuffix(imageTag(pod.Spec.Containers[0].Image), BadTagSuffix) {
		return BadErrorRate
	}
	return 0
}

// imageTag is the tag of an image reference, "" when it has none. A digest
// or a registry port is not a tag.
func imageTag(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndexByte(image, '/')
	colon := strings.LastIndexByte(image, ':')
	if colon <= slash {
		return ""
	}
	return image[colon+1:]
}

// Simulator is a running traffic simulator.
type Simulator struct {
	opts     Options
	listener net.Listener
	server   *http.Server
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	mu        sync.Mutex
	errorRate func(*corev1.Pod) float64
	latencyOf func(*corev1.Pod) float64
	rand      *rand.Rand
	// carry holds each Pod's not yet counted fractions of requests.
	carry map[types.UID]*fractions

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

type fractions struct {
	total, failed float64
}

// Start serves /metrics on addr ("127.0.0.1:0" picks a free port) and counts
// traffic every Interval until ctx is done or Stop is called.
func Start(ctx context.Context, addr string, opts Options) (*Simulator, error) {
	if opts.Client == nil {
		return nil, errors.New("traffic: Options.Client is required")
	}
	if opts.RequestsPerSecond <= 0 {
		opts.RequestsPerSecond = DefaultRequestsPerSecond
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Selector == nil {
		opts.Selector = labels.Everything()
	}
	errorRate := opts.ErrorRate
	if errorRate == nil {
		errorRate = DefaultErrorRate
	}

	// A private registry: several simulators (parallel tests) must not share
	// counters, and the Go runtime metrics would only be noise.
	registry := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricName,
		Help: "Simulated HTTP requests served, by Pod and status code.",
	}, []string{"namespace", "pod", "code"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    LatencyMetricName,
		Help:    "Simulated HTTP request latency, by Pod.",
		Buckets: LatencyBuckets,
	}, []string{"namespace", "pod"})
	registry.MustRegister(requests, latency)

	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("traffic: listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))

	runCtx, cancel := context.WithCancel(ctx)
	s := &Simulator{
		opts:      opts,
		listener:  listener,
		server:    &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		requests:  requests,
		latency:   latency,
		errorRate: errorRate,
		latencyOf: opts.Latency,
		rand:      rand.New(rand.NewPCG(opts.Seed, 0x57e9)),
		carry:     map[types.UID]*fractions{},
		cancel:    cancel,
		done:      make(chan struct{}),
	}
	go func() { _ = s.server.Serve(listener) }()
	go s.run(runCtx)
	return s, nil
}

// Addr is the host:port to scrape.
func (s *Simulator) Addr() string { return s.listener.Addr().String() }

// SetErrorRate replaces Options.ErrorRate from the next tick on; nil means
// DefaultErrorRate.
func (s *Simulator) SetErrorRate(fn func(*corev1.Pod) float64) {
	if fn == nil {
		fn = DefaultErrorRate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errorRate = fn
}

// SetLatency replaces Options.Latency from the next tick on; nil stops
// observing latencies.
func (s *Simulator) SetLatency(fn func(*corev1.Pod) float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencyOf = fn
}

// PerImage returns a per-Pod value (an ErrorRate, a Latency) from the tag
// of the Pod's first container's image: byTag[tag], 0 for a tag not in
// it, times 1+noise*N(0,1), a factor drawn once per Pod from seed and the
// Pod's name (and never below 0). Replicas of one image then differ as
// real ones do, the same Pod always gets the same factor, and two runs
// with the same seed see the same numbers.
func PerImage(byTag map[string]float64, noise float64, seed uint64) func(*corev1.Pod) float64 {
	return func(pod *corev1.Pod) float64 {
		if len(pod.Spec.Containers) == 0 {
			return 0
		}
		base := byTag[imageTag(pod.Spec.Containers[0].Image)]
		h := fnv.New64a()
		_, _ = h.Write([]byte(pod.Namespace + "/" + pod.Name))
		r := rand.New(rand.NewPCG(seed, h.Sum64()))
		return math.Max(base*(1+noise*r.NormFloat64()), 0)
	}
}

// Stop ends the ticks and the /metrics server and waits for them. Safe to
// call more than once.
func (s *Simulator) Stop() {
	s.stopOnce.Do(func() {
		s.cancel()
		<-s.done
		_ = s.server.Close()
	})
}

func (s *Simulator) run(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(s.opts.Interval)
	defer tick.Stop()
	// Count once right away so the series exist (at zero traffic or more)
	// before the first scrape; rate() needs a starting sample.
	s.tick(ctx, s.opts.Interval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.tick(ctx, s.opts.Interval)
		}
	}
}

// tick counts one interval's worth of traffic for every serving Pod.
func (s *Simulator) tick(ctx context.Context, interval time.Duration) {
	var pods corev1.PodList
	if err := s.opts.Client.List(ctx, &pods, client.InNamespace(s.opts.Namespace), client.MatchingLabelsSelector{Selector: s.opts.Selector}); err != nil {
		if ctx.Err() == nil && s.opts.Logf != nil {
			s.opts.Logf("traffic: listing Pods in %q: %v", s.opts.Namespace, err)
		}
		return
	}
	perTick := s.opts.RequestsPerSecond * interval.Seconds()

	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[types.UID]bool, len(pods.Items))
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !serving(pod) {
			continue
		}
		seen[pod.UID] = true
		c := s.carry[pod.UID]
		if c == nil {
			c = &fractions{}
			s.carry[pod.UID] = c
		}
		rate := math.Min(math.Max(s.errorRate(pod), 0), 1)
		c.total += perTick
		c.failed += perTick * rate
		total := math.Floor(c.total)
		failed := math.Min(math.Floor(c.failed), total)
		c.total -= total
		c.failed -= failed
		// Add both codes, even 0, so both series exist from the Pod's first
		// tick and an error ratio has a denominator and a numerator to
		// divide.
		s.requests.WithLabelValues(pod.Namespace, pod.Name, "200").Add(total - failed)
		s.requests.WithLabelValues(pod.Namespace, pod.Name, "500").Add(failed)
		if s.latencyOf != nil {
			if median := s.latencyOf(pod); median > 0 {
				h := s.latency.WithLabelValues(pod.Namespace, pod.Name)
				for range int(total) {
					h.Observe(median * math.Exp(LatencySigma*s.rand.NormFloat64()))
				}
			}
		}
	}
	// Forget the fractions of Pods that stopped serving; their series stay,
	// as a real exporter's would until it restarts.
	for uid := range s.carry {
		if !seen[uid] {
			delete(s.carry, uid)
		}
	}
}

// serving reports whether a Pod takes traffic: Running and Ready, the way an
// EndpointSlice would list it.
func serving(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
