package rollout_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/notification"
)

// webhookReceiver is a chat or incident tool on 127.0.0.1: it keeps every
// body posted to it, by path.
type webhookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies map[string][]map[string]any
}

func newWebhookReceiver(t *testing.T) *webhookReceiver {
	w := &webhookReceiver{bodies: map[string][]map[string]any{}}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		if r.Method != http.MethodPost || json.Unmarshal(data, &body) != nil {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		body["_idempotencyKey"] = r.Header.Get("Idempotency-Key")
		w.mu.Lock()
		w.bodies[r.URL.Path] = append(w.bodies[r.URL.Path], body)
		w.mu.Unlock()
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *webhookReceiver) received(path string) []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]map[string]any(nil), w.bodies[path]...)
}

// phases lists "previous→phase" of the JSON bodies posted to path.
func (w *webhookReceiver) phases(path string) []string {
	var out []string
	for _, b := range w.received(path) {
		prev, _ := b["previousPhase"].(string)
		phase, _ := b["phase"].(string)
		out = append(out, prev+"→"+phase)
	}
	return out
}

func createWebhookSecret(t *testing.T, ns, name string, urls map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: urls}
	if err := env.client.Create(testContext(t), s); err != nil {
		t.Fatalf("creating Secret: %v", err)
	}
}

func webhook(name, key string, format stepwisev1.NotificationFormat, phases ...stepwisev1.RolloutPhase) stepwisev1.Notification {
	return stepwisev1.Notification{
		Name:         name,
		URLSecretRef: stepwisev1.WebhookSecretKeyReference{Name: "webhooks", Key: key},
		Format:       format,
		Phases:       phases,
	}
}

// fastDelivery keeps a down receiver's retries within a second or so.
func fastDelivery(o *managerSetup) {
	o.hooks.NotificationPolicy = notification.Policy{Attempts: 3, Backoff: 200 * time.Millisecond, Timeout: 2 * time.Second}
}

// TestNotificationsPostEachTransitionOnce: a release that pauses for a
// promote posts Progressing, Paused, Progressing and Healthy, once each,
// to every webhook in its format; the Healthy the Rollout started in is
// not posted; a webhook that wants Aborted only gets nothing.
func TestNotificationsPostEachTransitionOnce(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	recv := newWebhookReceiver(t)
	createWebhookSecret(t, ns, "webhooks", map[string]string{
		"audit": recv.srv.URL + "/audit",
		"chat":  recv.srv.URL + "/services/T0/B0/SECRET",
		"pager": recv.srv.URL + "/pager",
	})
	createCloneSet(t, newCloneSet(ns, "web", 4, "1.0.0"))
	autopilot(t, ns, "web")
	host := strings.TrimPrefix(recv.srv.URL, "http://")
	startController(t, ns, fastDelivery, func(o *managerSetup) { o.NotificationAddresses = []string{host} })
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0)))
	ro.Spec.Notifications = []stepwisev1.Notification{
		webhook("audit", "audit", stepwisev1.NotificationJSON),
		webhook("chat", "chat", stepwisev1.NotificationSlack),
		webhook("pager", "pager", "", stepwisev1.RolloutAborted),
	}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.Notifications).NotTo(BeNil())
		g.Expect(ro.Status.Notifications.Phase).To(Equal(stepwisev1.RolloutHealthy))
	})

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
	})
	NewWithT(t).Eventually(func() []string { return recv.phases("/audit") }).WithTimeout(timeout).WithPolling(poll).
		Should(Equal([]string{"Healthy→Progressing", "Progressing→Paused"}))
	annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	done := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	want := []string{"Healthy→Progressing", "Progressing→Paused", "Paused→Progressing", "Progressing→Healthy"}
	NewWithT(t).Eventually(func() []string { return recv.phases("/audit") }).WithTimeout(timeout).WithPolling(poll).Should(Equal(want))
	NewWithT(t).Eventually(func() int { return len(recv.received("/services/T0/B0/SECRET")) }).WithTimeout(timeout).WithPolling(poll).Should(Equal(4))
	// Nothing more comes: each transition was posted once.
	NewWithT(t).Consistently(func() []string { return recv.phases("/audit") }).WithTimeout(2 * time.Second).WithPolling(poll).Should(Equal(want))

	audit := recv.received("/audit")
	for i, b := range audit {
		id := string(done.UID) + "/" + []string{"1", "2", "3", "4"}[i]
		if b["id"] != id || b["_idempotencyKey"] != id {
			t.Errorf("body %d: id %v, Idempotency-Key %v, want %s", i, b["id"], b["_idempotencyKey"], id)
		}
		if b["namespace"] != ns || b["rollout"] != "web" {
			t.Errorf("body %d names %v/%v", i, b["namespace"], b["rollout"])
		}
	}
	if got := audit[1]["reason"]; got != stepwisev1.ReasonAwaitingPromotion {
		t.Errorf("the Paused body's reason is %v, want %s", got, stepwisev1.ReasonAwaitingPromotion)
	}
	if got := audit[3]["stableRevision"]; got != "web-2-0-0" {
		t.Errorf("the Healthy body's stable revision is %v", got)
	}
	chat := recv.received("/services/T0/B0/SECRET")
	if text, _ := chat[1]["text"].(string); !strings.HasPrefix(text, "Rollout "+ns+"/web is Paused (was Progressing): AwaitingPromotion") {
		t.Errorf("Slack text: %q", text)
	}
	if n := len(recv.received("/pager")); n != 0 {
		t.Errorf("the webhook that wants Aborted only got %d posts", n)
	}
	if st := done.Status.Notifications; st.Sequence != 4 || st.PreviousPhase != stepwisev1.RolloutProgressing {
		t.Errorf("status.notifications = %+v, want sequence 4 from Progressing", st)
	}
	// The events API folds a webhook's later Events into the series of
	// its first, which keeps the first note.
	waitForEvent(t, ns, "web", stepwisev1.EventNotificationSent, "webhook chat: Healthy → Progressing posted")
	waitForEvent(t, ns, "web", stepwisev1.EventNotificationSent, "webhook audit: Healthy → Progressing posted")
}

// TestNotificationReceiverDown: a webhook that is down is retried, then
// given up on with a Warning Event, and the release goes on without
// waiting for it, nor for one that never answers; a URL outside the
// allow-list is never connected to.
func TestNotificationReceiverDown(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	recv := newWebhookReceiver(t)
	down := unreachableAddress(t)
	// hung accepts the request and never answers, until the test ends.
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) })
	createWebhookSecret(t, ns, "webhooks", map[string]string{
		"down":    down + "/hook/SECRET",
		"hung":    hung.URL + "/hook",
		"outside": recv.srv.URL + "/outside",
	})
	createCloneSet(t, newCloneSet(ns, "web", 4, "1.0.0"))
	autopilot(t, ns, "web")
	allowed := []string{strings.TrimPrefix(down, "http://"), strings.TrimPrefix(hung.URL, "http://")}
	// Each post to the hung webhook holds its worker for 10s: a reconcile
	// that waited for it would take 20s for the two transitions.
	startController(t, ns, func(o *managerSetup) {
		o.NotificationAddresses = allowed
		o.hooks.NotificationPolicy = notification.Policy{Attempts: 3, Backoff: 200 * time.Millisecond, Timeout: 10 * time.Second}
	})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Notifications = []stepwisev1.Notification{webhook("down", "down", ""), webhook("hung", "hung", ""), webhook("outside", "outside", "")}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	start := time.Now()
	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
		g.Expect(ro.Status.Notifications.Sequence).To(BeEquivalentTo(2))
	})
	took := time.Since(start)
	t.Logf("release completed in %v with one webhook down and one hung", took.Round(time.Millisecond))
	if took > 8*time.Second {
		t.Errorf("the release took %v: it waited for a webhook", took)
	}

	failed := waitForEvent(t, ns, "web", stepwisev1.EventNotificationFailed, "webhook down: Healthy → Progressing not posted after 3 attempt(s)", "could not connect to 127.0.0.1:", "will not be posted again")
	if failed.Type != corev1.EventTypeWarning {
		t.Errorf("NotificationFailed is %s, want Warning", failed.Type)
	}
	// The second transition's failure joins the series of the first.
	NewWithT(t).Eventually(func() int {
		return occurrences(withNote(events(t, ns, "web", stepwisev1.EventNotificationFailed), "webhook down:"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Equal(2))
	waitForEvent(t, ns, "web", stepwisev1.EventNotificationFailed, "webhook outside: Healthy → Progressing not posted: secret webhooks key outside: host ", "is not allowed by the manager's --notification-allowed-addresses")
	waitForEvent(t, ns, "web", stepwisev1.EventNotificationFailed, "webhook hung: Healthy → Progressing not posted after 1 attempt(s): the webhook did not answer in time")
	for _, e := range events(t, ns, "web", stepwisev1.EventNotificationFailed) {
		if strings.Contains(e.Note, "SECRET") {
			t.Errorf("an Event quotes a webhook URL's path: %s", e.Note)
		}
	}
	if n := len(recv.received("/outside")); n != 0 {
		t.Errorf("the webhook outside the allow-list got %d posts", n)
	}
}

// TestNotificationsNotResentAfterRestart: a manager that starts again
// reads the transitions its predecessor recorded and posts none of them
// again; the next transition continues the sequence.
func TestNotificationsNotResentAfterRestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	recv := newWebhookReceiver(t)
	createWebhookSecret(t, ns, "webhooks", map[string]string{"audit": recv.srv.URL + "/audit"})
	createCloneSet(t, newCloneSet(ns, "web", 4, "1.0.0"))
	autopilot(t, ns, "web")
	first := startController(t, ns, fastDelivery)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0)))
	ro.Spec.Notifications = []stepwisev1.Notification{webhook("audit", "audit", "")}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
	})
	before := []string{"Healthy→Progressing", "Progressing→Paused"}
	NewWithT(t).Eventually(func() []string { return recv.phases("/audit") }).WithTimeout(timeout).WithPolling(poll).Should(Equal(before))
	first.Stop()

	startController(t, ns, fastDelivery)
	// A reconcile request proves the new manager has reconciled the
	// Rollout since it started.
	token := annotate(t, ns, "web", meta.ReconcileRequestAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.LastHandledReconcileAt).To(Equal(token))
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
	})
	NewWithT(t).Consistently(func() []string { return recv.phases("/audit") }).WithTimeout(2 * time.Second).WithPolling(poll).Should(Equal(before))

	annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	NewWithT(t).Eventually(func() []string { return recv.phases("/audit") }).WithTimeout(timeout).WithPolling(poll).
		Should(Equal(append(before, "Paused→Progressing", "Progressing→Healthy")))
	if ids := recv.received("/audit"); ids[3]["id"] != string(getRollout(t, ns, "web").UID)+"/4" {
		t.Errorf("the last transition's id is %v, want sequence 4", ids[3]["id"])
	}
}

// TestNotificationsValidation: the API server refuses a bad
// spec.notifications with a message naming the field.
func TestNotificationsValidation(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cases := map[string]struct {
		hook stepwisev1.Notification
		want string
	}{
		"name":   {webhook("Chat_1", "chat", ""), `spec.notifications[0].name: Invalid value: "Chat_1": spec.notifications[].name must be lower-case letters, digits and '-'`},
		"format": {webhook("chat", "chat", "Teams"), `spec.notifications[0].format: Unsupported value: "Teams"`},
		"phase":  {webhook("chat", "chat", "", "Failed"), `spec.notifications[0].phases[0]: Unsupported value: "Failed"`},
		"key":    {webhook("chat", "a/b", ""), "spec.notifications[].urlSecretRef.key must be a valid Secret key"},
		"secret": {stepwisev1.Notification{Name: "chat", URLSecretRef: stepwisev1.WebhookSecretKeyReference{Key: "url"}}, "spec.notifications[0].urlSecretRef.name: Invalid value: \"\""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ro := newRollout(ns, "web-"+name, cloneSetRef("web"), stepAt(num(0)))
			ro.Spec.Notifications = []stepwisev1.Notification{c.hook}
			err := env.client.Create(testContext(t), ro)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
	ro := newRollout(ns, "web-dup", cloneSetRef("web"), stepAt(num(0)))
	ro.Spec.Notifications = []stepwisev1.Notification{webhook("chat", "a", ""), webhook("chat", "b", "")}
	if err := env.client.Create(testContext(t), ro); err == nil || !strings.Contains(err.Error(), `spec.notifications[1]: Duplicate value: {"name":"chat"}`) {
		t.Errorf("two webhooks named chat: err = %v", err)
	}
}
