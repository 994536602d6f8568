// Package rollout_test runs the shipped manager (internal/manager) with the
// Rollout controller alone against a real kube-apiserver and etcd
// (envtest). No workload controller runs: the tests play it, writing the
// workloads' status through the status subresource as a CloneSet or
// StatefulSet controller would. Prometheus is an httptest
// server speaking its HTTP API, reached through the real
// pkg/analysis/prometheus client; stories against a real Prometheus live in
// test/e2e.
//
// Each test gets its own namespace and its own manager, whose cache only
// sees that namespace, so tests run in parallel and a test can stop and
// start its controller.
package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/shippedrbac"
)

// env is shared by the package's tests: one API server and one fake
// Prometheus per package run.
var env struct {
	cfg    *rest.Config
	client client.Client
	// managerCfg authenticates as the manager's ServiceAccount, with the
	// RBAC of config/rbac.
	managerCfg *rest.Config
	prom       *fakePrometheus
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	// The Kruise CloneSet CRD lets the Kruise adapter run against a real
	// API server without Kruise itself.
	// The Gateway API CRDs let traffic routing run against real HTTPRoutes.
	gateway, err := envtestenv.GatewayAPICRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, cfg, stop, err := envtestenv.StartSuite(append([]string{filepath.Join("test", "integration", "rollout", "testdata")}, gateway...)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()

	env.cfg = cfg
	env.client, err = harness.NewClient(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env.managerCfg, err = shippedrbac.ManagerConfig(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.prom = newFakePrometheus()
	defer env.prom.close()
	return m.Run()
}

// zapLevel keeps test output to errors unless STEPWISE_TEST_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("STEPWISE_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

// fakePrometheus answers /api/v1/query like Prometheus does. Queries carry
// namespace="<ns>", and each test sets the answer for its own namespace.
type fakePrometheus struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers map[string]answer
	queries map[string]int
}

// answer is what the fake returns for a namespace's queries.
type answer struct {
	// value is the single sample of a one-element vector, unless empty.
	value float64
	// empty returns an empty vector: no data.
	empty bool
	// token, when set, is the bearer token every query must carry.
	token string
	// perPod, when set, answers a query grouped by pod as Prometheus
	// does: one series per Pod its pod=~"..." matcher names, labelled
	// pod, with perPod's value; a Pod it says nothing of (ok false) has
	// no series.
	perPod func(pod string) (value float64, ok bool)
}

var (
	namespaceMatcher = regexp.MustCompile(`namespace="([^"]+)"`)
	podMatcher       = regexp.MustCompile(`pod=~"([^"]*)"`)
)

// podNamesOfQuery reads the Pod names back from a query's pod=~"..." matcher, as
// analysis.PodRegex writes them (names joined by |, dots as [.], other
// characters escaped by regexp.QuoteMeta).
func podNamesOfQuery(query string) []string {
	m := podMatcher.FindStringSubmatch(query)
	if m == nil {
		return nil
	}
	var out []string
	for _, part := range strings.Split(m[1], "|") {
		name := strings.ReplaceAll(strings.ReplaceAll(part, "[.]", "."), `\`, "")
		if name != "a^" {
			out = append(out, name)
		}
	}
	return out
}

func newFakePrometheus() *fakePrometheus {
	p := &fakePrometheus{answers: map[string]answer{}, queries: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/query", p.query)
	p.srv = httptest.NewServer(mux)
	return p
}

func (p *fakePrometheus) close() { p.srv.Close() }

func (p *fakePrometheus) set(namespace string, a answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers[namespace] = a
}

func (p *fakePrometheus) count(namespace string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queries[namespace]
}

func (p *fakePrometheus) query(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	ns := ""
	if m := namespaceMatcher.FindStringSubmatch(q); m != nil {
		ns = m[1]
	}
	p.mu.Lock()
	a, ok := p.answers[ns]
	p.queries[ns]++
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if ok && a.token != "" && r.Header.Get("Authorization") != "Bearer "+a.token {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": "unauthorized", "error": "bad or missing bearer token"})
		return
	}
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": "bad_data", "error": "no answer set for namespace " + ns})
		return
	}
	result := []any{}
	now := float64(time.Now().UnixMilli()) / 1000
	if a.perPod != nil {
		for _, pod := range podNamesOfQuery(q) {
			if v, ok := a.perPod(pod); ok {
				result = append(result, map[string]any{
					"metric": map[string]string{"pod": pod},
					"value":  []any{now, strconv.FormatFloat(v, 'g', -1, 64)},
				})
			}
		}
	} else if !a.empty {
		result = append(result, map[string]any{
			"metric": map[string]string{},
			"value":  []any{now, strconv.FormatFloat(a.value, 'g', -1, 64)},
		})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status": "success",
		"data":   map[string]any{"resultType": "vector", "result": result},
	})
}

// ctx is a context for test helpers, ended with the test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
