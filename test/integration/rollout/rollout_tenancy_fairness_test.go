package rollout_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// One namespace gets at most its share of the workers for measuring.
// Namespace A has 50 Rollouts whose Prometheus accepts connections and
// never answers, each round holding its worker for the 10s interval;
// namespace B's honest Rollout steps as fast as it does alone. A's
// Rollouts past the share wait, and say so.
func TestNamespaceAtItsShareDoesNotHoldUpAnother(t *testing.T) {
	t.Parallel()
	a, b := newNamespace(t), newNamespace(t)
	silent := blackHole(t)
	env.prom.set(b, answer{value: 0.001})

	const hostile = 50
	names := make([]string, hostile)
	for i := range names {
		names[i] = fmt.Sprintf("web-%02d", i)
		createCloneSet(t, newCloneSet(a, names[i], 2, "1.0.0"))
	}
	pilotAll(t, a, names, 300*time.Millisecond)
	createCloneSet(t, newCloneSet(b, "web", 2, "1.0.0"))
	autopilot(t, b, "web")
	startController(t, a, func(o *managerSetup) { o.Namespaces = []string{a, b} })

	for _, name := range names {
		ro := newRollout(a, name, cloneSetRef(name), stepAt(pct("50%")), stepAt(num(0)))
		ro.Spec.Analysis = errorRate(2)
		ro.Spec.Analysis.Interval = &metav1.Duration{Duration: 10 * time.Second}
		ro.Spec.Analysis.Metrics[0].Prometheus.Address = silent
		ro.Spec.Analysis.Metrics[0].Prometheus.Timeout = &metav1.Duration{Duration: 30 * time.Second}
		createRollout(t, ro)
	}
	honest := newRollout(b, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	honest.Spec.Analysis = errorRate(2)
	createRollout(t, honest)
	for _, name := range names {
		eventually(t, a, name, func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	}
	eventually(t, b, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	alone := release(t, b, "web", "2.0.0")
	t.Logf("B's release alone: %s", alone.Round(time.Millisecond))

	for _, name := range names {
		commit(t, a, name, "2.0.0")
	}
	// Wait until A's rounds hold their share and the others are deferred.
	deferred := "namespace " + a + " already has 4 analysis rounds measuring, its share of the manager's 16 Rollout workers"
	NewWithT(t).Eventually(func() int {
		n := 0
		for _, name := range names {
			if strings.Contains(getRollout(t, a, name).Status.Message, "measurement deferred: "+deferred) {
				n++
			}
		}
		return n
	}).WithTimeout(timeout).WithPolling(500*time.Millisecond).Should(BeNumerically(">=", hostile/2), "A's Rollouts past the share say they wait")

	busy := release(t, b, "web", "3.0.0")
	t.Logf("B's release while A's %d Rollouts wait for a silent Prometheus: %s", hostile, busy.Round(time.Millisecond))
	if limit := 2*alone + 5*time.Second; busy > limit {
		t.Errorf("B's release took %s beside A, %s alone: want at most %s", busy, alone, limit)
	}

	var withEvent string
	for _, name := range names {
		if len(withNote(events(t, a, name, stepwisev1.EventMeasurementDeferred), deferred)) > 0 {
			withEvent = name
			break
		}
	}
	if withEvent == "" {
		t.Errorf("no Rollout of A has a %s Event saying %q", stepwisev1.EventMeasurementDeferred, deferred)
	}
	for _, name := range names {
		ro := getRollout(t, a, name)
		for _, m := range ro.Status.Measurements {
			if m.Phase != stepwisev1.MeasurementError {
				t.Errorf("%s: measurement %+v from a Prometheus that never answers", name, m)
			}
		}
	}
}

// release commits version and waits for the Rollout to finish it.
func release(t *testing.T, ns, name, version string) time.Duration {
	t.Helper()
	start := time.Now()
	commit(t, ns, name, version)
	eventually(t, ns, name, func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal(name + "-" + strings.ReplaceAll(version, ".", "-")))
	})
	return time.Since(start)
}

// pilotAll plays the CloneSet controller for many CloneSets from one
// goroutine, every period: cheaper than an autopilot each.
func pilotAll(t *testing.T, ns string, names []string, period time.Duration) {
	t.Helper()
	ctx := testContext(t)
	go func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, name := range names {
				_ = autopilotOnce(ctx, ns, name)
			}
		}
	}()
}
