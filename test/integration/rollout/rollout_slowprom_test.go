package rollout_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// blackHole accepts connections and never answers, as a Prometheus behind
// a dead load balancer does.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// Twenty Rollouts share one controller; ten, in another namespace, ask a
// Prometheus that never answers. The other ten step on time: a silent
// Prometheus holds a worker for at most the analysis interval, its
// namespace at most its share of the workers, and there are workers
// enough. (Within one namespace, Rollouts share its share: see
// rollout_tenancy_fairness_test.go.)
func TestSilentPrometheusDoesNotHoldUpOtherRollouts(t *testing.T) {
	t.Parallel()
	live, dead := newNamespace(t), newNamespace(t)
	nsOf := func(i int) string {
		if i%2 == 1 {
			return dead
		}
		return live
	}
	silent := blackHole(t)
	env.prom.set(live, answer{value: 0.001})
	for i := range 20 {
		name := fmt.Sprintf("web-%02d", i)
		createCloneSet(t, newCloneSet(nsOf(i), name, 2, "1.0.0"))
		autopilot(t, nsOf(i), name)
	}
	startController(t, live, func(o *managerSetup) { o.Namespaces = []string{live, dead} })
	for i := range 20 {
		name, ns := fmt.Sprintf("web-%02d", i), nsOf(i)
		ro := newRollout(ns, name, cloneSetRef(name), stepAt(pct("50%")), stepAt(num(0)))
		ro.Spec.Analysis = errorRate(2)
		if i%2 == 1 {
			m := &ro.Spec.Analysis.Metrics[0]
			m.Prometheus.Address = silent
			m.Prometheus.Timeout = &metav1.Duration{Duration: 30 * time.Second}
			ro.Spec.Analysis.Interval = &metav1.Duration{Duration: 10 * time.Second}
		}
		createRollout(t, ro)
	}
	for i := range 20 {
		eventually(t, nsOf(i), fmt.Sprintf("web-%02d", i), func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	}

	start := time.Now()
	for i := range 20 {
		commit(t, nsOf(i), fmt.Sprintf("web-%02d", i), "2.0.0")
	}
	// Alone, a good Rollout takes about 8s here: two steps, each a 1s
	// scrape margin and two measurements a second apart.
	for i := 0; i < 20; i += 2 {
		name := fmt.Sprintf("web-%02d", i)
		eventually(t, live, name, func(g Gomega, ro *stepwisev1.Rollout) {
			kstatusHealthy(g, ro)
			g.Expect(ro.Status.StableRevision).To(Equal(name + "-2-0-0"))
		})
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the ten Rollouts with a live Prometheus took %s, want them on time (under 20s)", took)
	}
	for i := 1; i < 20; i += 2 {
		ro := getRollout(t, dead, fmt.Sprintf("web-%02d", i))
		if ro.Status.Phase == stepwisev1.RolloutHealthy && ro.Status.StableRevision == ro.Name+"-2-0-0" {
			t.Errorf("%s promoted with a Prometheus that never answered", ro.Name)
		}
		for _, m := range ro.Status.Measurements {
			if m.Phase != stepwisev1.MeasurementError {
				t.Errorf("%s: measurement %+v, want only errors", ro.Name, m)
			}
		}
	}
}
