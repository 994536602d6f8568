package rollout

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/notification"
)

// TestDecideNotification replays sequences of phases, as successive
// reconciles write them, through the decision, feeding each round the
// record the previous one wrote, and checks what is posted.
func TestDecideNotification(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	all := []v1alpha1.Notification{{Name: "chat"}}
	abortsOnly := []v1alpha1.Notification{{Name: "pager", Phases: []v1alpha1.RolloutPhase{v1alpha1.RolloutAborted}}}
	const (
		H = v1alpha1.RolloutHealthy
		P = v1alpha1.RolloutProgressing
		W = v1alpha1.RolloutPaused
		A = v1alpha1.RolloutAborted
	)
	type posted struct {
		from, to v1alpha1.RolloutPhase
		seq      int64
	}
	tests := []struct {
		name  string
		hooks []v1alpha1.Notification
		start *v1alpha1.NotificationStatus
		// phases are the phases written by successive reconciles.
		phases []v1alpha1.RolloutPhase
		want   []posted
		// final is the phase recorded at the end; "" for no record.
		final v1alpha1.RolloutPhase
	}{
		{
			name: "first_phase_is_a_baseline_not_posted", hooks: all,
			phases: []v1alpha1.RolloutPhase{H, H}, final: H,
		},
		{
			name: "a_release_that_pauses_and_completes", hooks: all,
			phases: []v1alpha1.RolloutPhase{H, P, P, P, W, W, P, H, H},
			want:   []posted{{H, P, 1}, {P, W, 2}, {W, P, 3}, {P, H, 4}}, final: H,
		},
		{
			name: "an_abort_then_a_retry", hooks: all,
			phases: []v1alpha1.RolloutPhase{H, P, A, A, P, H},
			want:   []posted{{H, P, 1}, {P, A, 2}, {A, P, 3}, {P, H, 4}}, final: H,
		},
		{
			name: "a_webhook_that_wants_aborts_only", hooks: abortsOnly,
			phases: []v1alpha1.RolloutPhase{H, P, A, P, H},
			// Every transition is recorded (sequence 1 to 4); only the
			// abort is posted.
			want: []posted{{P, A, 2}}, final: H,
		},
		{
			name: "no_phase_yet_keeps_the_record", hooks: all,
			phases: []v1alpha1.RolloutPhase{"", H, "", P},
			want:   []posted{{H, P, 1}}, final: P,
		},
		{
			name:   "no_webhook_records_nothing",
			start:  &v1alpha1.NotificationStatus{Phase: H, Sequence: 7},
			phases: []v1alpha1.RolloutPhase{P, A, H},
		},
		{
			// After a restart the new manager reads the record the old one
			// wrote before posting: the same phase is not posted again.
			name: "a_recorded_transition_is_not_posted_again", hooks: all,
			start:  &v1alpha1.NotificationStatus{Phase: A, PreviousPhase: P, Sequence: 5},
			phases: []v1alpha1.RolloutPhase{A, A, H},
			want:   []posted{{A, H, 6}}, final: H,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.start
			var got []posted
			for i, phase := range tc.phases {
				now := t0.Add(time.Duration(i) * time.Minute)
				next, send := decideNotification(rec, tc.hooks, phase, now)
				if send != nil {
					if !reflect.DeepEqual(send, next) {
						t.Errorf("round %d posts %+v but records %+v", i, send, next)
					}
					if !send.TransitionTime.Equal(&metav1.Time{Time: now}) {
						t.Errorf("round %d: transition time %v, want %v", i, send.TransitionTime, now)
					}
					got = append(got, posted{send.PreviousPhase, send.Phase, send.Sequence})
				}
				rec = next
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("posted %+v, want %+v", got, tc.want)
			}
			switch {
			case tc.final == "" && rec != nil:
				t.Errorf("recorded %+v, want nothing", rec)
			case tc.final != "" && (rec == nil || rec.Phase != tc.final):
				t.Errorf("recorded %+v, want phase %s", rec, tc.final)
			}
		})
	}
}

func TestNotificationWants(t *testing.T) {
	n := v1alpha1.Notification{Phases: []v1alpha1.RolloutPhase{v1alpha1.RolloutAborted, v1alpha1.RolloutHealthy}}
	for phase, want := range map[v1alpha1.RolloutPhase]bool{
		v1alpha1.RolloutAborted: true, v1alpha1.RolloutHealthy: true, v1alpha1.RolloutPaused: false, v1alpha1.RolloutProgressing: false,
	} {
		if got := n.Wants(phase); got != want {
			t.Errorf("Wants(%s) = %v, want %v", phase, got, want)
		}
	}
	if !(&v1alpha1.Notification{}).Wants(v1alpha1.RolloutPaused) {
		t.Error("a webhook without phases does not want Paused")
	}
}

// hook is a webhook whose URL is Secret "webhooks", key key.
func hook(name, key string) v1alpha1.Notification {
	return v1alpha1.Notification{Name: name, URLSecretRef: v1alpha1.WebhookSecretKeyReference{Name: "webhooks", Key: key}}
}

// transition is the seq-th transition of Rollout ns/name, for hooks.
func transition(ns, name string, seq int, hooks ...v1alpha1.Notification) notifyJob {
	return notifyJob{
		rollout: &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)}},
		hooks:   hooks,
		message: notification.Message{ID: fmt.Sprintf("%s-%s/%d", ns, name, seq), Namespace: ns, Rollout: name, Phase: "Progressing", PreviousPhase: "Healthy"},
	}
}

func dropReasons(drops []dropped) []string {
	var out []string
	for _, d := range drops {
		out = append(out, d.hook+":"+d.reason)
	}
	return out
}

// TestNotifierEnqueueNeverBlocks: with nothing posting (here: not
// started), a destination's full queue drops the transition at once
// instead of holding the reconcile that hands it over, and only for that
// destination: another webhook of the same Rollout still takes it.
func TestNotifierEnqueueNeverBlocks(t *testing.T) {
	n := &Notifier{}
	for i := range NotifierQueueSize {
		if drops := n.enqueue(transition("shop", "web", i, hook("chat", "slack"))); len(drops) > 0 {
			t.Fatalf("transition %d dropped before the queue is full: %v", i, dropReasons(drops))
		}
	}
	done := make(chan []dropped)
	go func() {
		done <- n.enqueue(transition("shop", "web", NotifierQueueSize, hook("chat", "slack"), hook("pager", "pager")))
	}()
	select {
	case drops := <-done:
		if got, want := dropReasons(drops), []string{"chat:" + dropQueueFull}; !reflect.DeepEqual(got, want) {
			t.Errorf("drops %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("enqueue blocked on a full queue")
	}
	if len(n.queues) != 2 {
		t.Errorf("%d destinations, want 2 (Secret webhooks keys slack and pager)", len(n.queues))
	}
}

// TestNotifierDestinationBounds: a namespace has at most
// MaxNotifierDestinationsPerNamespace destinations with transitions
// waiting, and the Notifier at most MaxNotifierDestinations; past them a
// new destination's transition is dropped, while one already queued for
// still takes more.
func TestNotifierDestinationBounds(t *testing.T) {
	n := &Notifier{}
	for i := range MaxNotifierDestinationsPerNamespace {
		if drops := n.enqueue(transition("greedy", "web", 1, hook("h", fmt.Sprint(i)))); len(drops) > 0 {
			t.Fatalf("destination %d dropped: %v", i, dropReasons(drops))
		}
	}
	drops := n.enqueue(transition("greedy", "web", 2, hook("one-more", "x"), hook("h", "0")))
	if got, want := dropReasons(drops), []string{"one-more:" + dropTooManyDestinations}; !reflect.DeepEqual(got, want) {
		t.Fatalf("drops %v, want %v", got, want)
	}
	if !strings.Contains(drops[0].why, "16 webhook Secret keys of namespace greedy") {
		t.Errorf("the drop says %q", drops[0].why)
	}
	if drops := n.enqueue(transition("honest", "web", 1, hook("chat", "slack"))); len(drops) > 0 {
		t.Fatalf("another namespace's destination dropped: %v", dropReasons(drops))
	}
	for i := 0; len(n.queues) < MaxNotifierDestinations; i++ {
		ns := fmt.Sprintf("ns-%d", i/MaxNotifierDestinationsPerNamespace)
		if drops := n.enqueue(transition(ns, "web", 1, hook("h", fmt.Sprint(i)))); len(drops) > 0 {
			t.Fatalf("destination %d dropped below the bound: %v", len(n.queues), dropReasons(drops))
		}
	}
	drops = n.enqueue(transition("late", "web", 1, hook("chat", "slack")))
	if got, want := dropReasons(drops), []string{"chat:" + dropTooManyDestinations}; !reflect.DeepEqual(got, want) {
		t.Fatalf("drops %v, want %v", got, want)
	}
	if !strings.Contains(drops[0].why, "256 webhook Secret keys") {
		t.Errorf("the drop says %q", drops[0].why)
	}
}

// recorder keeps what the Notifier delivered, by destination key, and
// holds deliveries to the keys in hung until the test ends.
type recorder struct {
	mu        sync.Mutex
	delivered map[string][]string
	hung      map[string]bool
	release   chan struct{}
}

func (r *recorder) deliver(ctx context.Context, d delivery) {
	if r.hung[d.hook.URLSecretRef.Key] {
		select {
		case <-r.release:
		case <-ctx.Done():
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delivered[d.hook.URLSecretRef.Key] = append(r.delivered[d.hook.URLSecretRef.Key], d.message.ID)
}

func (r *recorder) got(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.delivered[key]...)
}

// TestNotifierSlowDestinationDelaysNoOther: a destination that never
// answers holds only its own queue. The transitions of the same Rollout to
// its other webhook, and of other Rollouts to theirs, are all posted, each
// destination's in the order they were handed over; once a destination has
// nothing left to post it is forgotten.
func TestNotifierSlowDestinationDelaysNoOther(t *testing.T) {
	rec := &recorder{delivered: map[string][]string{}, hung: map[string]bool{"hung": true}, release: make(chan struct{})}
	n := &Notifier{deliver: rec.deliver}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = n.Start(ctx); close(stopped) }()
	t.Cleanup(func() {
		close(rec.release)
		cancel()
		<-stopped
	})
	// Two namespaces post to Secret webhooks key slack, each in its own
	// queue: each gets its transitions in the order they were handed over.
	var wantShop, wantOther []string
	for seq := 1; seq <= 20; seq++ {
		n.enqueue(transition("shop", "web", seq, hook("hung", "hung"), hook("chat", "slack")))
		n.enqueue(transition("shop", "api", seq, hook("chat", "slack")))
		n.enqueue(transition("other", "api", seq, hook("chat", "slack")))
		wantShop = append(wantShop, fmt.Sprintf("shop-web/%d", seq), fmt.Sprintf("shop-api/%d", seq))
		wantOther = append(wantOther, fmt.Sprintf("other-api/%d", seq))
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(rec.got("slack")) < 60 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got := rec.got("slack")
	if len(got) != 60 {
		t.Fatalf("%d of 60 transitions posted to the webhooks that answer, with one that never does: %v", len(got), got)
	}
	var shop, other []string
	for _, id := range got {
		if strings.HasPrefix(id, "shop-") {
			shop = append(shop, id)
		} else {
			other = append(other, id)
		}
	}
	if !reflect.DeepEqual(shop, wantShop) || !reflect.DeepEqual(other, wantOther) {
		t.Errorf("order broken:\nshop  %v\nwant  %v\nother %v\nwant  %v", shop, wantShop, other, wantOther)
	}
	n.mu.Lock()
	left := len(n.queues)
	_, hungKept := n.queues[destination{namespace: "shop", secret: "webhooks", key: "hung"}]
	n.mu.Unlock()
	if left != 1 || !hungKept {
		t.Errorf("%d destinations kept, want only the hung one", left)
	}
}

// TestNotifierForgetsIdleDestinations: a destination whose queue is empty
// holds no goroutine and no entry.
func TestNotifierForgetsIdleDestinations(t *testing.T) {
	rec := &recorder{delivered: map[string][]string{}}
	n := &Notifier{deliver: rec.deliver}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = n.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	for i := range 50 {
		n.enqueue(transition(fmt.Sprintf("ns-%d", i), "web", 1, hook("chat", "slack"), hook("pager", "pager")))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n.mu.Lock()
		left, namespaces := len(n.queues), len(n.perNamespace)
		n.mu.Unlock()
		if left == 0 && namespaces == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d destinations and %d namespaces kept after every transition was posted", left, namespaces)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(rec.got("slack")) != 50 || len(rec.got("pager")) != 50 {
		t.Errorf("posted %d and %d, want 50 each", len(rec.got("slack")), len(rec.got("pager")))
	}
}

// TestHandOverCountsDrops: a transition the Notifier cannot take is
// counted in stepwise_rollout_notifications_dropped_total, by webhook and
// reason, and recorded as a Warning Event naming the webhook.
func TestHandOverCountsDrops(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Metrics: NewMetrics(), Notifier: &Notifier{Recorder: rec}}
	for i := range NotifierQueueSize {
		r.handOver(transition("shop", "web", i, hook("chat", "slack")))
	}
	dropped := func(webhook, reason string) float64 {
		return testutil.ToFloat64(r.Metrics.NotificationsDropped.WithLabelValues("shop", "web", webhook, reason))
	}
	if got := testutil.CollectAndCount(r.Metrics.NotificationsDropped); got != 0 {
		t.Fatalf("%d drop series before any drop", got)
	}
	r.handOver(transition("shop", "web", NotifierQueueSize, hook("chat", "slack")))
	if got := dropped("chat", dropQueueFull); got != 1 {
		t.Errorf("queue_full drops = %v, want 1", got)
	}
	select {
	case e := <-rec.Events:
		want := "Warning NotificationFailed webhook chat: Healthy → Progressing not posted: 128 transitions already wait to be posted to Secret webhooks key slack; it will not be posted again"
		if e != want {
			t.Errorf("Event %q\nwant  %q", e, want)
		}
	default:
		t.Error("no Event for the drop")
	}
	for i := range MaxNotifierDestinationsPerNamespace {
		r.handOver(transition("shop", "web", 1, hook("h", fmt.Sprint(i))))
	}
	if got := dropped("h", dropTooManyDestinations); got != 1 {
		t.Errorf("too_many_destinations drops = %v, want 1 (the 16th key after slack)", got)
	}
	r.Metrics.forget("shop", "web")
	if got := testutil.CollectAndCount(r.Metrics.NotificationsDropped); got != 0 {
		t.Errorf("%d drop series kept after the Rollout was deleted", got)
	}
}
