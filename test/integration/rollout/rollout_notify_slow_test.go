package rollout_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/notification"
)

// TestNotificationSlowWebhookDelaysNoOther: a webhook that accepts the
// connection and never answers holds only its own destination's queue.
// The same Rollout's other webhook, listed after it, gets every transition
// within a second or two of its status write, not one 10 s timeout later
// per transition.
func TestNotificationSlowWebhookDelaysNoOther(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	recv := newWebhookReceiver(t)
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) })
	createWebhookSecret(t, ns, "webhooks", map[string]string{
		"hung":  hung.URL + "/hook",
		"audit": recv.srv.URL + "/audit",
	})
	createCloneSet(t, newCloneSet(ns, "web", 4, "1.0.0"))
	autopilot(t, ns, "web")
	startController(t, ns, func(o *managerSetup) {
		o.NotificationAddresses = []string{strings.TrimPrefix(hung.URL, "http://"), strings.TrimPrefix(recv.srv.URL, "http://")}
		o.hooks.NotificationPolicy = notification.Policy{Attempts: 3, Backoff: 200 * time.Millisecond, Timeout: 10 * time.Second}
	})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0)))
	ro.Spec.Notifications = []stepwisev1.Notification{webhook("hung", "hung", ""), webhook("audit", "audit", "")}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	// Each transition is timed from the status write that records it to
	// its arrival at the webhook that answers.
	onTime := func(want ...string) {
		t.Helper()
		start := time.Now()
		NewWithT(t).Eventually(func() []string { return recv.phases("/audit") }).WithTimeout(5*time.Second).WithPolling(poll).
			Should(Equal(want), "the webhook that answers waits for the one that does not")
		t.Logf("%s arrived %v after its status write was seen", want[len(want)-1], time.Since(start).Round(time.Millisecond))
	}
	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Notifications.Sequence).To(BeEquivalentTo(2))
	})
	onTime("Healthy→Progressing", "Progressing→Paused")
	annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.Notifications.Sequence).To(BeEquivalentTo(4))
	})
	onTime("Healthy→Progressing", "Progressing→Paused", "Paused→Progressing", "Progressing→Healthy")
	// The hung webhook is given up on, each transition in turn.
	waitForEvent(t, ns, "web", stepwisev1.EventNotificationFailed, "webhook hung: Healthy → Progressing not posted after 1 attempt(s): the webhook did not answer in time")
}
