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
