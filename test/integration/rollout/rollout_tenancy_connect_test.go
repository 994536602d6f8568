package rollout_test

import (
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// A Rollout's author chooses where analysis connects. The cloud metadata
// address is refused by default, before any Secret is read or provider
// built: the measurement is an Error that says why, the rollout pauses as
// for any error, and nothing is sent.
func TestAnalysisNeverQueriesTheMetadataAddress(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createCloneSet(t, newCloneSet(ns, "web", 10, "1.0.0"))
	autopilot(t, ns, "web")
	var built atomic.Int32
	startController(t, ns, func(o *managerSetup) {
		o.hooks.ProviderFactory = func(m stepwisev1.PrometheusMetric, refs rollout.ResolvedRefs, limits rollout.ProviderLimits) (analysis.Provider, error) {
			built.Add(1)
			return fakeProviderFactory(m, refs, limits)
		}
	})

	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(1)
	ro.Spec.Analysis.ConsecutiveErrorLimit = new(int32(1))
	m := &ro.Spec.Analysis.Metrics[0]
	m.Prometheus.Address = "http://169.254.169.254/"
	// A Secret that does not exist: reading it first would say so.
	m.Prometheus.BearerTokenSecretRef = &stepwisev1.SecretKeyReference{Name: "no-such-secret", Key: "token"}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	refused := "prometheus.address http://169.254.169.254/ is a link-local or cloud metadata address, which analysis never queries unless the manager's --analysis-allowed-addresses names that IP"
	done := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
		g.Expect(ro.Status.Message).To(ContainSubstring(refused))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventMeasurementError, refused)
	for _, m := range done.Status.Measurements {
		if m.Phase != stepwisev1.MeasurementError || !strings.Contains(m.Message, refused) {
			t.Errorf("measurement %+v, want an Error saying the address is refused", m)
		}
	}
	if n := built.Load(); n != 0 {
		t.Errorf("%d providers were built for the metadata address", n)
	}
}

// The same for a webhook: its URL naming the metadata address is refused
// before any connection, with a Warning that does not quote the URL's
// path, and the release goes on.
func TestNotificationNeverPostsToTheMetadataAddress(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createWebhookSecret(t, ns, "webhooks", map[string]string{"metadata": "http://169.254.169.254/latest/SECRET"})
	createCloneSet(t, newCloneSet(ns, "web", 4, "1.0.0"))
	autopilot(t, ns, "web")
	startController(t, ns, fastDelivery)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(num(0)))
	ro.Spec.Notifications = []stepwisev1.Notification{webhook("metadata", "metadata", stepwisev1.NotificationJSON)}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	failed := waitForEvent(t, ns, "web", stepwisev1.EventNotificationFailed, "webhook metadata: Healthy → Progressing not posted: ",
		"host 169.254.169.254 is a link-local or cloud metadata address, which webhooks never reach unless the manager's --notification-allowed-addresses names that IP")
	if strings.Contains(failed.Note, "SECRET") || strings.Contains(failed.Note, "attempt") {
		t.Errorf("NotificationFailed %q: want no URL path and no attempt made", failed.Note)
	}
}
