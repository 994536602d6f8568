package rollout_test

import (
	"testing"

	. "github.com/onsi/gomega"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout"
)

// The manager's allow-list of Prometheus addresses: a metric naming another
// address, even a reachable Prometheus, gets Error measurements naming the
// flag, that Prometheus is never asked, and the rollout pauses as for any
// error. Pointed at an allowed address, the retried analysis passes.
func TestAnalysisAddressOutsideTheAllowListIsRefused(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createCloneSet(t, newCloneSet(ns, "web", 10, "1.0.0"))
	autopilot(t, ns, "web")
	startController(t, ns, func(r *rollout.Reconciler) { r.AnalysisAddresses = []string{promAddress} })
	env.prom.set(ns, answer{value: 0.001})

	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(1)
	ro.Spec.Analysis.ConsecutiveErrorLimit = new(int32(1))
	// The fake Prometheus itself, under an address the list does not name.
	ro.Spec.Analysis.Metrics[0].Prometheus.Address = env.prom.srv.URL
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	refused := "prometheus.address " + env.prom.srv.URL + " is not allowed by the manager's --analysis-allowed-addresses"
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
		g.Expect(ro.Status.Message).To(ContainSubstring(refused))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventMeasurementError, refused)
	if n := env.prom.count(ns); n != 0 {
		t.Fatalf("the refused Prometheus was asked %d queries", n)
	}

	updateRollout(t, ns, "web", func(ro *stepwisev1.Rollout) {
		ro.Spec.Analysis.Metrics[0].Prometheus.Address = promAddress
	})
	annotate(t, ns, "web", stepwisev1.RetryAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	if env.prom.count(ns) == 0 {
		t.Error("the allowed Prometheus was never asked")
	}
}
