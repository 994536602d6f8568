package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/promrunner"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/traffic"
)

// Timings of the Rollout stories. A step costs the in-place update of its
// canaries (about a second with restart delay "0"), its pause, and an
// analysis of `count` measurements `interval` apart (the controller counts
// an interval from the end of the second the last one was stored in, so two
// measurements are 1-2 s apart).
const (
	// rolloutTimeout bounds one wait for a Rollout state; generous because
	// the machine has two cores shared with kwok, etcd and Prometheus.
	rolloutTimeout = 60 * time.Second
	rolloutPoll    = 200 * time.Millisecond
	// stepPause is the timed pause of the analysed steps.
	stepPause = 3 * time.Second
	// holdFor is how long "stays as it is" is checked.
	holdFor = 3 * time.Second

	errorRateMetric = "error-rate"
	// errorRateMax is the threshold: a good canary serves exactly no 500
	// (the simulator is deterministic), a bad one 20 %.
	errorRateMax = "0.01"
)

// errorRateQuery is the share of the canary Pods' requests that failed in
// the last 10 s. The simulator writes both code series of a Pod (at 0 or
// more) from its first tick, and keeps them while the Pod does not serve,
// so for any canary that has been scraped twice both sums exist: no `or
// vector(0)` is needed, and none is wanted, since it would turn "no data"
// (Pods that get no traffic) into a passing 0. The Rollout takes its first
// measurement 10 s (the window) plus the scrape margin after the canaries
// were ready, so the window holds their own traffic only.
const errorRateQuery = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code="500"}[10s]))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[10s]))`

// noTrafficLabel on a Pod template keeps the simulator away from its Pods:
// they serve, but nobody calls them, so Prometheus has no series for them.
const noTrafficLabel = "e2e.stepwise.dev/traffic"

// webImage is the app image at a version; a version ending in "-bad" makes
// the simulator fail 20 % of the Pod's requests (traffic.DefaultErrorRate).
func webImage(version string) string { return "example.com/web:" + version }

// rolloutEnv is what every Rollout story shares: one kwok cluster with the
// manager, one traffic simulator for every namespace, one Prometheus
// scraping it.
type rolloutEnv struct {
	*bed
	// watcher watches Rollouts and CloneSets for the recorders.
	watcher client.WithWatch
	sim     *traffic.Simulator
	prom    *promrunner.Prometheus
	promAPI promv1.API
	rates   *errorRates
}

func newRolloutEnv(t *testing.T) *rolloutEnv {
	t.Helper()
	// Fail rather than skip, as a missing kwok binary does: a skipped story
	// reads as a passed one in CI.
	if _, err := promrunner.Available(promrunner.Options{}); err != nil {
		t.Fatal(err)
	}
	return newRolloutEnvOn(t, newBed(t, 2))
}

// newRolloutEnvOn adds the traffic simulator and Prometheus to a bed.
func newRolloutEnvOn(t *testing.T, b *bed) *rolloutEnv {
	t.Helper()
	if _, err := promrunner.Available(promrunner.Options{}); err != nil {
		t.Fatal(err)
	}
	scheme, err := harness.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(b.cluster.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	rates := &errorRates{}
	noTraffic, err := labels.Parse(noTrafficLabel + "!=off")
	if err != nil {
		t.Fatal(err)
	}
	// Every namespace: each story has its own, and the query selects it.
	sim, err := traffic.Start(context.Background(), "127.0.0.1:0", traffic.Options{
		Client:    b.client,
		Selector:  noTraffic,
		ErrorRate: rates.rate,
		Logf:      t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Stop)
	startCtx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	prom, err := promrunner.Start(startCtx, []string{sim.Addr()}, promrunner.Options{ScrapeInterval: time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	pc, err := promapi.NewClient(promapi.Config{Address: prom.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return &rolloutEnv{bed: b, watcher: wc, sim: sim, prom: prom, promAPI: promv1.NewAPI(pc), rates: rates}
}

// errorRates lets a story override, for its namespace, the error rate the
// simulator gives Pods; others keep traffic.DefaultErrorRate.
type errorRates struct {
	// byNamespace holds a func(*corev1.Pod) float64 per namespace.
	byNamespace sync.Map
}

func (r *errorRates) rate(pod *corev1.Pod) float64 {
	if v, ok := r.byNamespace.Load(pod.Namespace); ok {
		return v.(func(*corev1.Pod) float64)(pod)
	}
	return traffic.DefaultErrorRate(pod)
}

// set gives every Pod of ns the error rate.
func (r *errorRates) set(ns string, rate float64) {
	r.setFunc(ns, func(*corev1.Pod) float64 { return rate })
}

// setFunc gives each Pod of ns the error rate f returns for it.
func (r *errorRates) setFunc(ns string, f func(*corev1.Pod) float64) { r.byNamespace.Store(ns, f) }

// unreachableAddress is an http URL on a 127.0.0.1 port just closed, so
// that connecting is refused at once.
func unreachableAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// errorRateAnalysis asks address for the canary error rate: two
// measurements a second apart, the first failed one fails the step.
func errorRateAnalysis(address string) *stepwisev1.AnalysisSpec {
	return &stepwisev1.AnalysisSpec{
		Interval:     &metav1.Duration{Duration: time.Second},
		Count:        ptr.To[int32](2),
		FailureLimit: ptr.To[int32](0),
		// Prometheus scrapes every second.
		ScrapeMargin: &metav1.Duration{Duration: 2 * time.Second},
		Metrics: []stepwisev1.Metric{{
			Name: errorRateMetric,
			Prometheus: &stepwisev1.PrometheusMetric{
				Address: address,
				Query:   errorRateQuery,
				Timeout: &metav1.Duration{Duration: 2 * time.Second},
			},
			ThresholdRange: &stepwisev1.ThresholdRange{Max: errorRateMax},
		}},
	}
}

// step builds a spec.steps entry; pause < 0 is no pause, 0 a pause without
// duration (wait for a promote).
func step(partition string, pause time.Duration) stepwisev1.RolloutStep {
	s := stepwisev1.RolloutStep{Partition: intstr.Parse(partition)}
	switch {
	case pause == 0:
		s.Pause = &stepwisev1.StepPause{}
	case pause > 0:
		s.Pause = &stepwisev1.StepPause{Duration: &metav1.Duration{Duration: pause}}
	}
	return s
}

const noPause = -1

// skipAnalysis marks a step that runs no analysis.
func skipAnalysis(s stepwisev1.RolloutStep) stepwisev1.RolloutStep {
	s.Analysis = &stepwisev1.StepAnalysis{Skip: true}
	return s
}

// commitWeb changes the image of CloneSet web in ns to webImage(version),
// as a git commit applied by a GitOps tool would, and returns the
// CloneSet's new update revision (read once the CloneSet has seen the new
// image, never a revision from before it).
func (b *bed) commitWeb(t *testing.T, ns, version string) string {
	t.Helper()
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = webImage(version) })
	var rev string
	NewWithT(t).Eventually(func(g Gomega) {
		cs := b.get(g, ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		g.Expect(cs.Spec.Template.Spec.Containers[0].Image).To(Equal(webImage(version)))
		rev = cs.Status.UpdateRevision
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	return rev
}

// requestWeb writes a request annotation (promote-at, retry-at, ...) on
// Rollout web in ns with a timestamp token, as `kubectl stepwise` does,
// and returns the token.
func (b *bed) requestWeb(t *testing.T, ns, annotation string) string {
	t.Helper()
	token := time.Now().UTC().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotation, token)
	ro := &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	if err := b.client.Patch(t.Context(), ro, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("requesting %s: %v", annotation, err)
	}
	return token
}

// rolloutWeb reads Rollout web in ns.
func (b *bed) rolloutWeb(g Gomega, ns string) *stepwisev1.Rollout {
	ro := &stepwisev1.Rollout{}
	g.Expect(b.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, ro)).To(Succeed())
	return ro
}

// waitRolloutWeb waits up to timeout until check passes on Rollout web in
// ns; a failure prints the last status read.
func (b *bed) waitRolloutWeb(t *testing.T, ns, what string, timeout time.Duration, check func(g Gomega, ro *stepwisev1.Rollout)) *stepwisev1.Rollout {
	t.Helper()
	var last *stepwisev1.Rollout
	NewWithT(t).Eventually(func(g Gomega) {
		last = b.rolloutWeb(g, ns)
		check(g, last)
	}, timeout, rolloutPoll).Should(Succeed(), func() string { return what + "\n" + describeRollout(last) })
	return last
}
