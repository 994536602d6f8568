package rollout

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
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

// TestNotifierEnqueueNeverBlocks: with its workers stuck (here: not
// started), a full queue drops the transition at once instead of holding
// the reconcile that hands it over; a Rollout's transitions share one
// queue, so they are posted in order.
func TestNotifierEnqueueNeverBlocks(t *testing.T) {
	n := &Notifier{}
	job := func(name string) notifyJob {
		return notifyJob{rollout: &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}}
	}
	for i := range NotifierQueueSize {
		if !n.enqueue(job("web")) {
			t.Fatalf("transition %d dropped before the queue is full", i)
		}
	}
	done := make(chan bool)
	go func() { done <- n.enqueue(job("web")) }()
	select {
	case ok := <-done:
		if ok {
			t.Error("a transition past the queue's size was accepted")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("enqueue blocked on a full queue")
	}
	used := 0
	for _, q := range n.queues {
		if len(q) > 0 {
			used++
		}
	}
	if used != 1 {
		t.Errorf("one Rollout's transitions went to %d queues, want 1", used)
	}
}
