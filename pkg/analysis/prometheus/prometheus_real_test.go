package prometheus

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/internal/testsupport/promtest"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// errorRateQuery is the query of the Rollout contract's example.
const errorRateQuery = `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code=~"5.."}[1m]))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[1m]))`

// TestAgainstRealPrometheus runs one Prometheus (startup costs seconds) and
// checks the provider and the evaluation rules against real answers.
//
// Data: canary pod web-0 serves 10% errors; stable pod web-1 serves many
// more requests without errors, so a selector that leaked stable pods would
// dilute the ratio; pod web-2 gets no traffic at all.
func TestAgainstRealPrometheus(t *testing.T) {
	promtest.Binary(t) // fail (or skip) before doing any work
	exporter := promtest.NewExporter(t)
	for _, pod := range []string{"web-0", "web-1", "web-2"} {
		for _, code := range []string{"200", "500"} {
			exporter.AddRequests("shop", pod, code, 0)
		}
	}
	started := time.Now()
	server := promtest.Start(t, exporter.Target)
	t.Logf("prometheus ready at %s after %s", server.URL, time.Since(started).Round(time.Millisecond))

	p := newProvider(t, Config{Address: server.URL, Timeout: 5 * time.Second})
	ctx := context.Background()

	// rate() needs a sample before the increase: wait until the zeros are
	// scraped, then add the traffic.
	waitFor(t, p, `count(http_requests_total{namespace="shop"})`, func(r analysis.Result) bool {
		return len(r.Samples) == 1 && r.Samples[0].Value == 6
	})
	exporter.AddRequests("shop", "web-0", "200", 90)
	exporter.AddRequests("shop", "web-0", "500", 10)
	exporter.AddRequests("shop", "web-1", "200", 1000)

	vars := analysis.Vars{
		Namespace:  "shop",
		Workload:   "web",
		CanaryPods: analysis.PodRegex([]string{"web-0"}),
		StablePods: analysis.PodRegex([]string{"web-1", "web-2"}),
	}
	query := render(t, errorRateQuery, vars)
	started = time.Now()
	errorRate := waitFor(t, p, query, func(r analysis.Result) bool {
		return r.Kind == analysis.KindVector && len(r.Samples) == 1 && !math.IsNaN(r.Samples[0].Value)
	})
	t.Logf("error rate %v visible after %s", errorRate.Samples[0].Value, time.Since(started).Round(time.Millisecond))
	if got := errorRate.Samples[0].Value; math.Abs(got-0.1) > 0.005 {
		t.Fatalf("error rate = %v, want 0.1 (10 errors in 100 requests of the canary pod)", got)
	}

	t.Run("error rate under max is Successful", func(t *testing.T) {
		m := analysis.Evaluate(errorRate, analysis.Threshold{Max: ptr(0.2)})
		if m.Phase != analysis.PhaseSuccessful || m.Value == nil || math.Abs(*m.Value-0.1) > 0.005 {
			t.Errorf("Evaluate() = %+v, want Successful with value 0.1", m)
		}
	})
	t.Run("error rate above max is Failed", func(t *testing.T) {
		m := analysis.Evaluate(errorRate, analysis.Threshold{Max: ptr(0.01)})
		if m.Phase != analysis.PhaseFailed || !strings.Contains(m.Message, "above max 0.01") {
			t.Errorf("Evaluate() = %+v, want Failed above max 0.01", m)
		}
	})
	t.Run("error rate below min is Failed", func(t *testing.T) {
		m := analysis.Evaluate(errorRate, analysis.Threshold{Min: ptr(0.5)})
		if m.Phase != analysis.PhaseFailed || !strings.Contains(m.Message, "below min 0.5") {
			t.Errorf("Evaluate() = %+v, want Failed below min 0.5", m)
		}
	})
	t.Run("stable pods have no errors", func(t *testing.T) {
		stable := render(t, strings.ReplaceAll(errorRateQuery, ".CanaryPods", ".StablePods"), vars)
		m := analysis.Measure(ctx, p, stable, analysis.Threshold{Max: ptr(0.01)})
		if m.Phase != analysis.PhaseSuccessful || m.Value == nil || *m.Value != 0 {
			t.Errorf("Measure() = %+v, want Successful with value 0", m)
		}
	})

	// Shapes that must never pass, whatever the threshold.
	anything := analysis.Threshold{Min: ptr(-1e300), Max: ptr(1e300)}
	measure := func(t *testing.T, query string) analysis.Measurement {
		t.Helper()
		m := analysis.Measure(ctx, p, query, anything)
		if m.Phase == analysis.PhaseSuccessful || m.Phase == analysis.PhaseFailed {
			t.Fatalf("Measure(%s) = %+v, want no value", query, m)
		}
		return m
	}
	inconclusive := []struct {
		name, query, wantMessage string
	}{
		{"empty result", `http_requests_total{pod="nope"}`, "no series"},
		{"no traffic is NaN", render(t, errorRateQuery, analysis.Vars{Namespace: "shop", CanaryPods: analysis.PodRegex([]string{"web-2"})}), "NaN"},
		{"no canary pods matches no series", render(t, errorRateQuery, analysis.Vars{Namespace: "shop", CanaryPods: analysis.PodRegex(nil)}), "no series"},
		{"dotted pod name is valid PromQL inside double quotes", render(t, errorRateQuery, analysis.Vars{Namespace: "shop", CanaryPods: analysis.PodRegex([]string{"web.v2-0"})}), "no series"},
		{"several series", `http_requests_total{namespace="shop"}`, "6 series"},
		{"division by zero is +Inf", `sum(http_requests_total{pod="web-0"}) / 0`, "+Inf"},
		{"range vector", `http_requests_total{pod="web-0"}[1m]`, "matrix"},
	}
	for _, tt := range inconclusive {
		t.Run(tt.name+" is Inconclusive", func(t *testing.T) {
			m := measure(t, tt.query)
			if m.Phase != analysis.PhaseInconclusive || !strings.Contains(m.Message, tt.wantMessage) {
				t.Errorf("Measure() = %+v, want Inconclusive mentioning %q", m, tt.wantMessage)
			}
		})
	}
	t.Run("scalar result is a value", func(t *testing.T) {
		m := analysis.Measure(ctx, p, `scalar(sum(http_requests_total{pod="web-0",code="500"}))`, analysis.Threshold{Max: ptr(10)})
		if m.Phase != analysis.PhaseSuccessful || m.Value == nil || *m.Value != 10 {
			t.Errorf("Measure() = %+v, want Successful with value 10", m)
		}
	})
	t.Run("bad query is an Error naming the address", func(t *testing.T) {
		m := measure(t, `sum(`)
		if m.Phase != analysis.PhaseError || !strings.Contains(m.Message, server.URL) || !strings.Contains(m.Message, "bad_data") {
			t.Errorf("Measure() = %+v, want Error naming %s and bad_data", m, server.URL)
		}
	})
	t.Run("string result is Inconclusive", func(t *testing.T) {
		if m := measure(t, `"hello"`); m.Phase != analysis.PhaseInconclusive || !strings.Contains(m.Message, "query returned string") {
			t.Errorf("Measure() = %+v, want Inconclusive naming the string", m)
		}
	})

	t.Run("bearer token and custom header reach the server", func(t *testing.T) {
		target, err := url.Parse(server.URL)
		if err != nil {
			t.Fatal(err)
		}
		var authorized, rejected atomic.Int32
		proxy := httputil.NewSingleHostReverseProxy(target)
		gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Scope-OrgID") != "team-a" {
				rejected.Add(1)
				http.Error(w, "missing or wrong credentials", http.StatusUnauthorized)
				return
			}
			authorized.Add(1)
			proxy.ServeHTTP(w, r)
		}))
		defer gate.Close()

		withAuth := newProvider(t, Config{Address: gate.URL, BearerToken: "s3cret", Headers: map[string]string{"X-Scope-OrgID": "team-a"}})
		m := analysis.Measure(ctx, withAuth, query, analysis.Threshold{Max: ptr(0.2)})
		if m.Phase != analysis.PhaseSuccessful || m.Value == nil || math.Abs(*m.Value-0.1) > 0.005 {
			t.Errorf("Measure() through the gate = %+v, want Successful with value 0.1", m)
		}
		if authorized.Load() == 0 {
			t.Error("the gate saw no authorized request")
		}

		for name, cfg := range map[string]Config{
			"no credentials": {Address: gate.URL},
			"wrong token":    {Address: gate.URL, BearerToken: "nope", Headers: map[string]string{"X-Scope-OrgID": "team-a"}},
			"missing header": {Address: gate.URL, BearerToken: "s3cret"},
		} {
			before := rejected.Load()
			m := analysis.Measure(ctx, newProvider(t, cfg), query, analysis.Threshold{Max: ptr(0.2)})
			// The status is reported, the gate's body is not: whoever runs
			// the server chooses it, and it would end up in status.
			if m.Phase != analysis.PhaseError || !strings.Contains(m.Message, "HTTP 401 Unauthorized") || !strings.Contains(m.Message, gate.URL) ||
				strings.Contains(m.Message, "missing or wrong credentials") {
				t.Errorf("%s: Measure() = %+v, want Error with the gate's status and without its body", name, m)
			}
			if rejected.Load() == before {
				t.Errorf("%s: the gate rejected nothing", name)
			}
		}
	})
}

func render(t *testing.T, tmpl string, vars analysis.Vars) string {
	t.Helper()
	q, err := analysis.Render(tmpl, vars)
	if err != nil {
		t.Fatalf("Render() error = %v", err)
	}
	return q
}

// waitFor polls query until ok accepts the result; scrapes happen every
// second, so 30s leaves room for a slow, busy machine.
func waitFor(t *testing.T, p *Provider, query string, ok func(analysis.Result) bool) analysis.Result {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var (
		last    analysis.Result
		lastErr error
	)
	for time.Now().Before(deadline) {
		last, lastErr = p.Query(context.Background(), query)
		if lastErr == nil && ok(last) {
			return last
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("query %s: condition not met within 30s; last result %+v, error %v", query, last, lastErr)
	return analysis.Result{}
}
