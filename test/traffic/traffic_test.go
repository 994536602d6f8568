package traffic

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func pod(namespace, name, image string, phase corev1.PodPhase, ready corev1.ConditionStatus, podLabels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "/" + name), Labels: podLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
		Status: corev1.PodStatus{
			Phase:      phase,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}},
		},
	}
}

func TestDefaultErrorRate(t *testing.T) {
	for image, want := range map[string]float64{
		"example.com/web:v3-bad":           BadErrorRate,
		"registry:5000/web:v1-bad":         BadErrorRate,
		"example.com/web:v2":               0,
		"example.com/web-bad":              0, // a name, not a tag
		"registry-bad:5000/web":            0, // a port, not a tag
		"example.com/web:v1-bad@sha256:ab": BadErrorRate,
	} {
		p := pod("ns", "p", image, corev1.PodRunning, corev1.ConditionTrue, nil)
		if got := DefaultErrorRate(p); got != want {
			t.Errorf("DefaultErrorRate(%q) = %v, want %v", image, got, want)
		}
	}
	if got := DefaultErrorRate(&corev1.Pod{}); got != 0 {
		t.Errorf("DefaultErrorRate(no containers) = %v, want 0", got)
	}
}

// TestCounts drives ticks by hand to check the exact, deterministic totals.
func TestCounts(t *testing.T) {
	app := map[string]string{"app": "web"}
	c := fake.NewClientBuilder().WithObjects(
		pod("demo", "good", "example.com/web:v2", corev1.PodRunning, corev1.ConditionTrue, app),
		pod("demo", "bad", "example.com/web:v3-bad", corev1.PodRunning, corev1.ConditionTrue, app),
		pod("demo", "unready", "example.com/web:v2", corev1.PodRunning, corev1.ConditionFalse, app),
		pod("demo", "pending", "example.com/web:v2", corev1.PodPending, corev1.ConditionFalse, app),
		pod("demo", "other-app", "example.com/web:v2", corev1.PodRunning, corev1.ConditionTrue, map[string]string{"app": "db"}),
		pod("elsewhere", "good", "example.com/web:v2", corev1.PodRunning, corev1.ConditionTrue, app),
	).Build()

	ctx := t.Context()
	// An hour-long interval: only the tick at start happens on its own.
	s, err := Start(ctx, "127.0.0.1:0", Options{
		Client:            c,
		Namespace:         "demo",
		Selector:          labels.SelectorFromSet(app),
		RequestsPerSecond: 3,
		Interval:          time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	// Wait for Start's own tick (3600*3 requests), then tick by hand: 0.1 s
	// ticks of 0.3 requests.
	waitFor(t, s, `http_requests_total{code="200",namespace="demo",pod="good"}`, 10800)
	for range 10 {
		s.tick(ctx, 100*time.Millisecond)
	}
	// 10 ticks of 0.3 = 3 requests exactly; of the bad Pod's 3, 20% = 0.6
	// failed so far, which is not yet one whole request.
	got := scrape(t, s)
	want := map[string]float64{
		`http_requests_total{code="200",namespace="demo",pod="good"}`: 10800 + 3,
		`http_requests_total{code="500",namespace="demo",pod="good"}`: 0,
		`http_requests_total{code="200",namespace="demo",pod="bad"}`:  8640 + 3,
		`http_requests_total{code="500",namespace="demo",pod="bad"}`:  2160,
	}
	for series, value := range want {
		if got[series] != value {
			t.Errorf("%s = %v, want %v", series, got[series], value)
		}
	}
	if len(got) != len(want) {
		t.Errorf("served %d series, want %d: %v", len(got), len(want), got)
	}

	// Everything fails from now on, including the carried 0.6.
	s.SetErrorRate(func(*corev1.Pod) float64 { return 1 })
	for range 10 {
		s.tick(ctx, 100*time.Millisecond)
	}
	got = scrape(t, s)
	if v := got[`http_requests_total{code="500",namespace="demo",pod="good"}`]; v != 3 {
		t.Errorf("good Pod errors after SetErrorRate(1) = %v, want 3", v)
	}
	if v := got[`http_requests_total{code="200",namespace="demo",pod="good"}`]; v != 10803 {
		t.Errorf("good Pod successes after SetErrorRate(1) = %v, want unchanged 10803", v)
	}
}

func TestStopTwice(t *testing.T) {
	s, err := Start(t.Context(), "127.0.0.1:0", Options{Client: fake.NewClientBuilder().Build(), Namespace: "x", Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Stop()
	if _, err := http.Get("http://" + s.Addr() + "/metrics"); err == nil {
		t.Error("/metrics still served after Stop")
	}
}

func TestNeedsClient(t *testing.T) {
	if _, err := Start(context.Background(), "127.0.0.1:0", Options{}); err == nil {
		t.Fatal("Start without a client succeeded")
	}
}

func waitFor(t *testing.T, s *Simulator, series string, value float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if scrape(t, s)[series] == value {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never reached %v", series, value)
}

// scrape reads the served samples as "name{labels} value" lines; the label
// order of the text format is sorted, so the keys are stable.
func scrape(t *testing.T, s *Simulator) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatalf("scraping: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading metrics: %v", err)
	}
	samples := map[string]float64{}
	lines := bufio.NewScanner(strings.NewReader(string(body)))
	for lines.Scan() {
		line := lines.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("parsing %q: %v", line, err)
		}
		samples[line[:i]] = v
	}
	return samples
}

func TestPerImage(t *testing.T) {
	rates := PerImage(map[string]float64{"v1": 0.01, "v2": 0.04}, 0.2, 7)
	stable := pod("demo", "web-a", "example.com/web:v1", corev1.PodRunning, corev1.ConditionTrue, nil)
	canary := pod("demo", "web-b", "example.com/web:v2", corev1.PodRunning, corev1.ConditionTrue, nil)
	other := pod("demo", "web-c", "example.com/web:v3", corev1.PodRunning, corev1.ConditionTrue, nil)
	if a, b := rates(stable), rates(stable); a != b {
		t.Fatalf("one Pod got %v then %v", a, b)
	}
	if v := rates(other); v != 0 {
		t.Errorf("a tag not in the map = %v, want 0", v)
	}
	var sum1, sum2 float64
	const n = 400
	for i := range n {
		p1 := pod("demo", "s-"+strconv.Itoa(i), "example.com/web:v1", corev1.PodRunning, corev1.ConditionTrue, nil)
		p2 := pod("demo", "c-"+strconv.Itoa(i), "example.com/web:v2", corev1.PodRunning, corev1.ConditionTrue, nil)
		sum1 += rates(p1)
		sum2 += rates(p2)
	}
	if m := sum1 / n; m < 0.0095 || m > 0.0105 {
		t.Errorf("mean of v1 Pods %v, want about 0.01", m)
	}
	if m := sum2 / n; m < 0.038 || m > 0.042 {
		t.Errorf("mean of v2 Pods %v, want about 0.04", m)
	}
	if rates(canary) == 0.04 {
		t.Error("no noise on the canary Pod")
	}
}

// TestLatencyHistogram checks that the served histogram puts the Pod's
// median where it was asked: about half the requests at or below it.
func TestLatencyHistogram(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(
		pod("demo", "fast", "example.com/web:v1", corev1.PodRunning, corev1.ConditionTrue, nil),
		pod("demo", "slow", "example.com/web:v2", corev1.PodRunning, corev1.ConditionTrue, nil),
	).Build()
	s, err := Start(t.Context(), "127.0.0.1:0", Options{
		Client: c, Namespace: "demo", RequestsPerSecond: 2, Interval: time.Hour, Seed: 1,
		Latency: PerImage(map[string]float64{"v1": 0.1, "v2": 0.15}, 0, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	waitFor(t, s, `http_request_duration_seconds_count{namespace="demo",pod="fast"}`, 2*3600)
	got := scrape(t, s)
	for podName, median := range map[string]float64{"fast": 0.1, "slow": 0.15} {
		count := got[`http_request_duration_seconds_count{namespace="demo",pod="`+podName+`"}`]
		var below, above float64
		for _, le := range LatencyBuckets {
			v := got[`http_request_duration_seconds_bucket{namespace="demo",pod="`+podName+`",le="`+strconv.FormatFloat(le, 'g', -1, 64)+`"}`]
			if le <= median*0.9 {
				below = v
			}
			if le >= median*1.1 && above == 0 {
				above = v
			}
		}
		if below/count > 0.5 || above/count < 0.5 {
			t.Errorf("%s: %.3f of requests under 0.9x median, %.3f under 1.1x; want the median between", podName, below/count, above/count)
		}
	}
}
