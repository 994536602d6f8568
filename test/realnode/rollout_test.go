package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/promrunner"
)

// errorRateQuery is the share of the canary Pods' requests answered with a
// 500 over the last 10 s, from the demo app's own /metrics. The app writes
// both code series from its start, so both sums exist once a Pod was
// scraped twice.
const errorRateQuery = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code="500"}[10s]))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[10s]))`

// delivery is a CloneSet of the demo app driven by a Rollout, with
// traffic to its Pods and a Prometheus scraping their /metrics.
type delivery struct {
	b      *bed
	t      *testing.T
	ns     string
	pods   map[string]corev1.Pod // as first created
	prom   *promrunner.Prometheus
	stopTr func()
}

// newDelivery creates the CloneSet on v1, sends traffic to its Pods,
// starts Prometheus on the Pods' gateway (the manager queries it from its
// Pod), and creates the Rollout with steps, changed by each of change,
// waiting until it adopted v1.
func (b *bed) newDelivery(t *testing.T, ns string, replicas int32, steps []stepwisev1.RolloutStep, change ...func(*stepwisev1.Rollout)) *delivery {
	t.Helper()
	g := gomega.NewWithT(t)
	b.namespace(t, ns)
	b.create(t, demoCloneSet(ns, "web", "v1", replicas, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType))
	b.waitSettled(t, ns, "web", replicas, 2*time.Minute)
	d := &delivery{b: b, t: t, ns: ns, pods: map[string]corev1.Pod{}}
	var targets []string
	labels := map[string]map[string]string{}
	for _, p := range b.pods(g, ns) {
		d.pods[p.Name] = p
		target := p.Status.PodIP + ":8080"
		targets = append(targets, target)
		// What kubernetes_sd_configs with the usual relabelling gives; a
		// static target stays right because in-place updates keep Pod
		// names and IPs.
		labels[target] = map[string]string{"namespace": ns, "pod": p.Name}
	}
	d.stopTr = sendTraffic(targets)
	t.Cleanup(d.stopTr)
	startCtx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	prom, err := promrunner.Start(startCtx, targets, promrunner.Options{ListenHost: Gateway, TargetLabels: labels, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	d.prom = prom
	t.Cleanup(prom.Stop)
	// rate() needs two samples in its window: wait for a rate of every Pod.
	g.Eventually(func() (int, error) {
		return d.series(fmt.Sprintf(`sum by (pod) (rate(http_requests_total{namespace=%q}[10s]))`, ns))
	}, time.Minute, 500*time.Millisecond).Should(gomega.Equal(int(replicas)))

	ro := &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "web"},
			Steps:       steps,
			Analysis: &stepwisev1.AnalysisSpec{
				Interval:     &metav1.Duration{Duration: time.Second},
				Count:        ptr.To[int32](2),
				FailureLimit: ptr.To[int32](0),
				ScrapeMargin: &metav1.Duration{Duration: 2 * time.Second},
				Metrics: []stepwisev1.Metric{{
					Name: "error-rate",
					Prometheus: &stepwisev1.PrometheusMetric{
						Address: prom.URL(),
						Query:   errorRateQuery,
						Timeout: &metav1.Duration{Duration: 2 * time.Second},
					},
					ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.01"},
				}},
			},
		},
	}
	for _, c := range change {
		c(ro)
	}
	b.create(t, ro)
	d.waitRollout("adopts v1", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(gomega.Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).NotTo(gomega.BeEmpty())
	})
	return d
}

func step(partition string, pause time.Duration) stepwisev1.RolloutStep {
	s := stepwisev1.RolloutStep{Partition: intstr.Parse(partition)}
	if pause > 0 {
		s.Pause = &stepwisev1.StepPause{Duration: &metav1.Duration{Duration: pause}}
	}
	return s
}

// series is how many series a PromQL query returns now.
func (d *delivery) series(query string) (int, error) {
	resp, err := httpClient.Get(d.prom.URL() + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var r struct {
		Data struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("%w: %s", err, body)
	}
	return len(r.Data.Result), nil
}

// sendTraffic asks every target for / twenty times a second until stopped:
// the demo app counts the answers in its /metrics.
func sendTraffic(targets []string) (stop func()) {
	var stops []func()
	for _, target := range targets {
		stops = append(stops, every(50*time.Millisecond, func(ctx context.Context) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+target+"/", nil)
			if resp, err := httpClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}))
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// every calls f every interval, one call at a time, until stop is called;
// stop returns once the call under way has returned, and may be called
// more than once.
func every(interval time.Duration, f func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait.NonSlidingUntilWithContext(ctx, f, interval)
	}()
	return func() { cancel(); <-done }
}

func (d *delivery) rollout(g gomega.Gomega) *stepwisev1.Rollout {
	ro := &stepwisev1.Rollout{}
	g.Expect(d.b.client.Get(context.Background(), client.ObjectKey{Namespace: d.ns, Name: "web"}, ro)).To(gomega.Succeed())
	return ro
}

func (d *delivery) waitRollout(what string, check func(g gomega.Gomega, ro *stepwisev1.Rollout)) *stepwisev1.Rollout {
	d.t.Helper()
	var last *stepwisev1.Rollout
	gomega.NewWithT(d.t).Eventually(func(g gomega.Gomega) {
		last = d.rollout(g)
		check(g, last)
	}, 3*time.Minute, 250*time.Millisecond).Should(gomega.Succeed(), func() string {
		if last == nil {
			return what
		}
		data, _ := json.MarshalIndent(last.Status, "", "  ")
		return what + "\n" + string(data)
	})
	return last
}

// commit changes the app's image tag, as a commit applied by GitOps would.
func (d *delivery) commit(tag string) string {
	d.t.Helper()
	d.b.mutate(d.t, d.ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = DemoImage + ":" + tag })
	var rev string
	gomega.NewWithT(d.t).Eventually(func(g gomega.Gomega) {
		cs := &stepwisev1.CloneSet{}
		g.Expect(d.b.client.Get(context.Background(), client.ObjectKey{Namespace: d.ns, Name: "web"}, cs)).To(gomega.Succeed())
		g.Expect(cs.Status.ObservedGeneration).To(gomega.Equal(cs.Generation))
		rev = cs.Status.UpdateRevision
	}, time.Minute, 250*time.Millisecond).Should(gomega.Succeed())
	return rev
}

// versions is what each Pod's app says it runs, asked over its IP.
func (d *delivery) versions(g gomega.Gomega) map[string]string {
	out := map[string]string{}
	for name, p := range d.pods {
		in, err := askInstance(p.Status.PodIP)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		out[name] = in.Version
	}
	return out
}

// expectSamePods checks that every Pod is the one first created (updates
// were in place) and returns each app container's restart count.
func (d *delivery) expectSamePods(g gomega.Gomega) map[string]int32 {
	restarts := map[string]int32{}
	pods := d.b.pods(g, d.ns)
	g.Expect(pods).To(gomega.HaveLen(len(d.pods)))
	for _, p := range pods {
		old, ok := d.pods[p.Name]
		g.Expect(ok).To(gomega.BeTrue(), "Pod %s was created during the rollout", p.Name)
		g.Expect(p.UID).To(gomega.Equal(old.UID))
		g.Expect(p.Status.PodIP).To(gomega.Equal(old.Status.PodIP))
		restarts[p.Name] = containerStatus(&p, "app").RestartCount
	}
	return restarts
}

func count(m map[string]string, v string) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}

// testRolloutWithPrometheus: v2 promoted step by step on the error rate
// Prometheus scrapes from the Pods themselves; v3-bad, whose app fails 20%
// of requests, aborted and rolled back in place.
func testRolloutWithPrometheus(t *testing.T, b *bed) {
	d := b.newDelivery(t, "rollout", 2, []stepwisev1.RolloutStep{step("50%", 0), step("0", 0)})

	v2 := d.commit("v2")
	// The canary step: one Pod on v2, the other still on v1, measured.
	d.waitRollout("canary step with one Pod on v2", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(gomega.Equal(stepwisev1.RolloutProgressing))
		g.Expect(ro.Status.CurrentStepIndex).To(gomega.Equal(ptr.To[int32](0)))
		v := d.versions(g)
		g.Expect(count(v, "v2")).To(gomega.Equal(1), "versions %v", v)
		g.Expect(count(v, "v1")).To(gomega.Equal(1), "versions %v", v)
	})
	d.waitRollout("v2 promoted", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(gomega.Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(gomega.Equal(v2))
		g.Expect(count(d.versions(g), "v2")).To(gomega.Equal(2))
	})
	g := gomega.NewWithT(t)
	// The kubelet writes a container's status after it starts, so the new
	// process may answer before its restart is counted.
	g.Eventually(func(g gomega.Gomega) {
		for name, n := range d.expectSamePods(g) {
			g.Expect(n).To(gomega.BeEquivalentTo(1), "Pod %s restarts after v2", name)
		}
	}, 30*time.Second, 250*time.Millisecond).Should(gomega.Succeed())

	d.commit("v3-bad")
	ro := d.waitRollout("v3-bad aborted and rolled back", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(gomega.Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.StableRevision).To(gomega.Equal(v2))
		v := d.versions(g)
		g.Expect(count(v, "v2")).To(gomega.Equal(2), "versions %v", v)
	})
	t.Logf("aborted: %s", conditionMessages(ro))
	// The canary ran v3-bad and went back to v2 (two more restarts); the
	// other Pod never left v2.
	g.Eventually(func(g gomega.Gomega) {
		restarts := d.expectSamePods(g)
		var got []int32
		for _, n := range restarts {
			got = append(got, n)
		}
		g.Expect(got).To(gomega.ConsistOf(int32(1), int32(3)), "restart counts %v", restarts)
	}, 30*time.Second, 250*time.Millisecond).Should(gomega.Succeed())
}

func conditionMessages(ro *stepwisev1.Rollout) string {
	var parts []string
	for _, c := range ro.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}
