package rollout_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout"
	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

// rssChildEnv runs TestAnalysisMemoryIsBoundedUnderAnswersAtTheCap alone in
// a child process that reports its peak resident memory.
const rssChildEnv = "STEPWISE_TEST_RSS_CHILD"

// atTheCap is a Prometheus answer of exactly MaxResponseBytes that passes
// (a scalar of 0.001) once read: the rest is one string in a key the
// decoder skips, the shape whose decoding holds the most memory per byte.
var atTheCap = func() []byte {
	head := `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"0.001"]},"pad":"`
	tail := `"}`
	return []byte(head + strings.Repeat("x", prometheus.MaxResponseBytes-len(head)-len(tail)) + tail)
}()

// Sixteen Rollouts in four namespaces (so that their namespaces' shares
// let all sixteen measure at once), ten metrics each, every answer at the
// cap, against the manager's default memory budget: what the budget
// reserves never exceeds it, and an honest Rollout steps about as fast as
// it does alone. The peak heap and resident memory are logged; run alone
// (TestAnalysisMemoryStaysUnder256MiB), the resident memory is asserted.
func TestAnalysisMemoryIsBoundedUnderAnswersAtTheCap(t *testing.T) {
	if os.Getenv(rssChildEnv) == "" {
		t.Parallel()
	}
	var served atomic.Int64
	hostileProm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(atTheCap)
	}))
	t.Cleanup(hostileProm.Close)

	honestNS := newNamespace(t)
	env.prom.set(honestNS, answer{value: 0.001})
	createCloneSet(t, newCloneSet(honestNS, "web", 2, "1.0.0"))
	autopilot(t, honestNS, "web")
	namespaces := []string{honestNS}
	type hostileRollout struct{ ns, name string }
	var hostile []hostileRollout
	for range 4 {
		ns := newNamespace(t)
		namespaces = append(namespaces, ns)
		var names []string
		for i := range 4 {
			name := fmt.Sprintf("greedy-%d", i)
			names = append(names, name)
			hostile = append(hostile, hostileRollout{ns, name})
			createCloneSet(t, newCloneSet(ns, name, 2, "1.0.0"))
		}
		pilotAll(t, ns, names, 200*time.Millisecond)
	}

	var (
		mu     sync.Mutex
		budget *prometheus.Budget
	)
	startController(t, honestNS, func(o *managerSetup) {
		o.Namespaces = namespaces
		o.hooks.ProviderFactory = func(m stepwisev1.PrometheusMetric, refs rollout.ResolvedRefs, limits rollout.ProviderLimits) (analysis.Provider, error) {
			mu.Lock()
			budget = limits.Budget
			mu.Unlock()
			return fakeProviderFactory(m, refs, limits)
		}
	})
	for _, h := range hostile {
		ro := newRollout(h.ns, h.name, cloneSetRef(h.name), stepAt(pct("50%")), stepAt(num(0)))
		ro.Spec.Analysis = greedyAnalysis(hostileProm.URL)
		createRollout(t, ro)
	}
	honest := newRollout(honestNS, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	honest.Spec.Analysis = errorRate(2)
	createRollout(t, honest)
	for _, h := range hostile {
		eventually(t, h.ns, h.name, func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	}
	eventually(t, honestNS, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	alone := release(t, honestNS, "web", "2.0.0")

	stopHeap := sampleHeap()
	for _, h := range hostile {
		commit(t, h.ns, h.name, "2.0.0")
	}
	// The answers at the cap are being read.
	NewWithT(t).Eventually(served.Load).WithTimeout(timeout).WithPolling(poll).Should(BeNumerically(">=", 160))
	busy := release(t, honestNS, "web", "3.0.0")
	// Keep the pressure on for a few more rounds.
	time.Sleep(5 * time.Second)
	peakHeap := stopHeap()

	mu.Lock()
	b := budget
	mu.Unlock()
	hwm, rss := residentMemory(t)
	t.Logf("answers at the cap served: %d; budget peak %.1f MiB of %d MiB; peak heap %.1f MiB; VmHWM %.1f MiB, VmRSS %.1f MiB",
		served.Load(), mib(b.Peak()), b.Limit()>>20, mib(peakHeap), mib(hwm), mib(rss))
	t.Logf("the honest release took %s alone, %s beside 16 Rollouts reading answers at the cap", alone.Round(time.Millisecond), busy.Round(time.Millisecond))
	if os.Getenv(rssChildEnv) != "" {
		fmt.Printf("rss-hwm-bytes=%d peak-heap-bytes=%d\n", hwm, peakHeap)
	}

	if b == nil || b.Limit() != prometheus.DefaultBudget {
		t.Fatalf("the providers' budget is %v, want the manager's default of %d bytes", b, prometheus.DefaultBudget)
	}
	if b.Peak() > b.Limit() {
		t.Errorf("the budget's peak %d exceeds its limit %d", b.Peak(), b.Limit())
	}
	if b.Peak() < int64(len(atTheCap)) {
		t.Errorf("the budget's peak %d: no answer at the cap was read in full", b.Peak())
	}
	if limit := 2*alone + 5*time.Second; busy > limit {
		t.Errorf("the honest release took %s beside answers at the cap, %s alone: want at most %s", busy, alone, limit)
	}
	var measured, refused int
	for _, h := range hostile {
		for _, m := range getRollout(t, h.ns, h.name).Status.Measurements {
			measured++
			if m.Phase == stepwisev1.MeasurementError && strings.Contains(m.Message, "memory for reading analysis answers") {
				refused++
			}
		}
	}
	t.Logf("the greedy Rollouts' last measurements: %d, of which %d refused by the budget", measured, refused)
}

// TestAnalysisMemoryStaysUnder256MiB runs the test above alone in a child
// process, at the manager's collector target (GOGC=50), and asserts the
// child's peak resident memory: the manager with sixteen Rollouts reading
// answers at the cap, and this test's own client, stays under 256 MiB.
func TestAnalysisMemoryStaysUnder256MiB(t *testing.T) {
	if os.Getenv(rssChildEnv) != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("starts a second API server")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAnalysisMemoryIsBoundedUnderAnswersAtTheCap$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), rssChildEnv+"=1", fmt.Sprintf("GOGC=%d", manager.DefaultGCPercent))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out.String())
	}
	var hwm, heap int64
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "rss-hwm-bytes=%d peak-heap-bytes=%d", &hwm, &heap); err == nil {
			break
		}
	}
	if hwm == 0 {
		t.Fatalf("the child reported no peak resident memory:\n%s", out.String())
	}
	t.Logf("alone in its process: peak resident memory %.1f MiB, peak heap %.1f MiB", mib(hwm), mib(heap))
	if hwm >= 256<<20 {
		t.Errorf("peak resident memory %.1f MiB, want under 256 MiB", mib(hwm))
	}
}

// greedyAnalysis asks address ten times an interval, a hundred times,
// through every error: it keeps reading answers at the cap.
func greedyAnalysis(address string) *stepwisev1.AnalysisSpec {
	a := &stepwisev1.AnalysisSpec{
		Interval:              &metav1.Duration{Duration: time.Second},
		Count:                 new(int32(100)),
		ConsecutiveErrorLimit: new(int32(100)),
		InconclusiveLimit:     new(int32(100)),
		ScrapeMargin:          &metav1.Duration{Duration: time.Second},
	}
	for i := range 10 {
		a.Metrics = append(a.Metrics, stepwisev1.Metric{
			Name:           fmt.Sprintf("m%d", i),
			Prometheus:     &stepwisev1.PrometheusMetric{Address: address, Query: fmt.Sprintf(`max(m%d{pod=~"{{ .CanaryPods }}"})`, i)},
			ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.01"},
		})
	}
	return a
}

// sampleHeap records the heap's live and unswept objects every 10ms until
// the returned function is called, which returns the most seen.
func sampleHeap() func() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := int64(sample[0].Value.Uint64()); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}

// residentMemory reads this process' peak and current resident memory.
func residentMemory(t *testing.T) (hwm, rss int64) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Logf("no /proc/self/status: %v", err)
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmHWM:":
			hwm = kb << 10
		case "VmRSS:":
			rss = kb << 10
		}
	}
	return hwm, rss
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
