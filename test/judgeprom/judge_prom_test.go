package judgeprom

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stepwise-dev/stepwise/internal/testsupport/promrunner"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
	"github.com/stepwise-dev/stepwise/test/traffic"
)

const (
	namespace   = "shop"
	podsPerSide = 10
	seed        = 37
)

// Each group is podsPerSide Pods of one image tag; the stable group is
// what every canary group is compared with.
var (
	errorRates = map[string]float64{"stable": 0.01, "errors4pct": 0.04, "same": 0.01, "slower": 0.01, "faster": 0.01}
	latencies  = map[string]float64{"stable": 0.1, "errors4pct": 0.1, "same": 0.1, "slower": 0.15, "faster": 0.07}
)

// sameRuns more groups at the stable's error rate, each a seeded run of
// "equal canary with noise" (Pod names seed the noise); they serve no
// latency, to keep the simulator cheap.
const sameRuns = 20

func init() {
	for i := range sameRuns {
		errorRates[fmt.Sprintf("same%02d", i)] = 0.01
	}
}

const (
	errorQuery = `sum by (pod) (rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}",code="500"}[15s]))` +
		` / sum by (pod) (rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}"}[15s]))`
	// The canary's whole error ratio, the way a fixed threshold reads it.
	errorThresholdQuery = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code="500"}[15s]))` +
		` / sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[15s]))`
	p95Query = `histogram_quantile(0.95, sum by (pod, le) (rate(http_request_duration_seconds_bucket{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}"}[15s])))`
)

func podNames(group string) []string {
	names := make([]string, podsPerSide)
	for i := range names {
		names[i] = fmt.Sprintf("web-%s-%d", group, i)
	}
	return names
}

func pods() []client.Object {
	var objs []client.Object
	for group := range errorRates {
		for _, name := range podNames(group) {
			objs = append(objs, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name)},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.com/web:" + group}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning,
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
			})
		}
	}
	return objs
}

// TestJudgeWithRealPrometheus runs the judge stories against one
// Prometheus: a 4% canary beside a 1% stable passes a max 0.05 threshold
// and fails the judge; an equal canary passes, and 20 more seeded equal
// canaries never fail; p95 x1.5 fails; a faster canary passes with
// direction increase.
func TestJudgeWithRealPrometheus(t *testing.T) {
	if _, err := promrunner.Available(promrunner.Options{}); err != nil {
		t.Skip(err)
	}
	ctx := t.Context()
	sim, err := traffic.Start(ctx, "127.0.0.1:0", traffic.Options{
		Client:            fake.NewClientBuilder().WithObjects(pods()...).Build(),
		Namespace:         namespace,
		RequestsPerSecond: 200,
		ErrorRate:         traffic.PerImage(errorRates, 0.2, seed),
		Latency:           traffic.PerImage(latencies, 0.1, seed),
		Seed:              seed,
		Logf:              t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Stop()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	prom, err := promrunner.Start(startCtx, []string{sim.Addr()}, promrunner.Options{ScrapeInterval: time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Stop()
	provider, err := prometheus.New(prometheus.Config{Address: prom.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer provider.CloseIdleConnections()

	vars := func(canary string) analysis.Vars {
		return analysis.Vars{Namespace: namespace,
			CanaryPods: analysis.PodRegex(podNames(canary)), StablePods: analysis.PodRegex(podNames("stable"))}
	}
	samples := func(t *testing.T, query string, v analysis.Vars) []float64 {
		t.Helper()
		q, err := analysis.Render(query, v)
		if err != nil {
			t.Fatal(err)
		}
		res, err := provider.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		s, err := judge.Samples(res)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	measure := func(t *testing.T, canary, query string, c judge.Compare) judge.Result {
		t.Helper()
		r, m := judge.Measure(ctx, provider, query, vars(canary), c)
		if m.Phase == analysis.PhaseError {
			t.Fatal(m.Message)
		}
		return r
	}

	// Wait until a 15s window of every Pod is in Prometheus: the simulator
	// counts from its start, and rate() needs the window filled to read
	// the rates the simulator was given rather than a ramp.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cv, sv := judge.Sides(vars("slower"))
		if len(samples(t, p95Query, cv)) == podsPerSide && len(samples(t, p95Query, sv)) == podsPerSide {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Prometheus never held every Pod's latency")
		}
		time.Sleep(time.Second)
	}
	time.Sleep(16 * time.Second)

	rule := judge.Compare{Direction: judge.Increase, Tolerance: 0.25, Confidence: 0.98}
	t.Run("4pct_errors_beside_1pct_pass_a_max_0.05_and_fail_the_judge", func(t *testing.T) {
		q, err := analysis.Render(errorThresholdQuery, vars("errors4pct"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := provider.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if m := analysis.Evaluate(res, analysis.Threshold{Max: ptr(0.05)}); m.Phase != analysis.PhaseSuccessful {
			t.Fatalf("the fixed threshold should pass this canary: %+v", m)
		}
		r := measure(t, "errors4pct", errorQuery, rule)
		t.Logf("errors: %+v", r)
		if r.Verdict != judge.Fail {
			t.Fatalf("judge: %+v", r)
		}
		// Critical, it aborts the step beside a passing latency metric.
		cv, sv := judge.Sides(vars("errors4pct"))
		_, out := judge.Step([]judge.Metric{
			{Name: "errors", Compare: rule, Critical: true, Weight: 2, Canary: samples(t, errorQuery, cv), Stable: samples(t, errorQuery, sv)},
			{Name: "p95", Compare: rule, Canary: samples(t, p95Query, cv), Stable: samples(t, p95Query, sv)},
		}, judge.DefaultPass, judge.DefaultMarginal)
		if out.Decision != judge.Abort || out.Score != 33 {
			t.Fatalf("step: %+v", out)
		}
	})
	t.Run("equal_canary_with_noise_passes", func(t *testing.T) {
		for _, q := range []string{errorQuery, p95Query} {
			r := measure(t, "same", q, rule)
			t.Logf("same: %+v", r)
			if r.Verdict != judge.Pass {
				t.Fatalf("judge: %+v", r)
			}
		}
	})
	t.Run("20_equal_canaries_no_false_abort", func(t *testing.T) {
		for i := range sameRuns {
			group := fmt.Sprintf("same%02d", i)
			r := measure(t, group, errorQuery, rule)
			if r.Verdict != judge.Pass {
				t.Errorf("%s: false abort: %+v", group, r)
			}
		}
	})
	t.Run("p95_x1.5_fails", func(t *testing.T) {
		r := measure(t, "slower", p95Query, rule)
		t.Logf("slower: %+v", r)
		if r.Verdict != judge.Fail || r.Effect < 0.3 || r.Effect > 0.7 {
			t.Fatalf("judge: %+v", r)
		}
	})
	t.Run("faster_passes_with_direction_increase", func(t *testing.T) {
		r := measure(t, "faster", p95Query, rule)
		t.Logf("faster: %+v", r)
		if r.Verdict != judge.Pass || r.Effect > -0.2 {
			t.Fatalf("judge: %+v", r)
		}
		// The same improvement is a change, and fails, for direction either.
		either := rule
		either.Direction = judge.Either
		if r := measure(t, "faster", p95Query, either); r.Verdict != judge.Fail {
			t.Fatalf("direction either: %+v", r)
		}
	})
}

func ptr[T any](v T) *T { return &v }
