package rollout

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
	"github.com/stepwise-dev/stepwise/pkg/notification"
)

// decideNotification is the pure decision of what to post: given the
// transition recorded in status, the webhooks of the spec and the phase
// this reconcile writes, it returns the transition to record and, when one
// is to be posted, the same transition as send (nil otherwise).
//
//   - No webhook: nothing is recorded (status.notifications is cleared).
//   - No phase yet: the record stays as it is.
//   - Nothing recorded: the phase is recorded as a baseline and not posted,
//     so that setting spec.notifications, or creating a Rollout with it,
//     does not announce a phase that began before.
//   - The recorded phase: nothing changes, whatever happened in between
//     (a status write lost to a conflict is decided again from the record).
//   - Another phase: the transition is recorded with the next sequence
//     number, and posted when a webhook wants that phase.
func decideNotification(recorded *v1alpha1.NotificationStatus, hooks []v1alpha1.Notification, phase v1alpha1.RolloutPhase, now time.Time) (next, send *v1alpha1.NotificationStatus) {
	switch {
	case len(hooks) == 0:
		return nil, nil
	case phase == "":
		return recorded, nil
	case recorded == nil:
		return &v1alpha1.NotificationStatus{Phase: phase, TransitionTime: metav1.NewTime(now.Truncate(time.Second))}, nil
	case recorded.Phase == phase:
		return recorded, nil
	}
	next = &v1alpha1.NotificationStatus{
		Phase:          phase,
		PreviousPhase:  recorded.Phase,
		Sequence:       recorded.Sequence + 1,
		TransitionTime: metav1.NewTime(now.Truncate(time.Second)),
	}
	for i := range hooks {
		if hooks[i].Wants(phase) {
			return next, next
		}
	}
	return next, nil
}

// planNotification records this round's notification decision in the
// status about to be written, and keeps what to post once it is written.
func (r *Reconciler) planNotification(rd *round) {
	ro := rd.ro
	next, send := decideNotification(ro.Status.Notifications, ro.Spec.Notifications, ro.Status.Phase, rd.now)
	ro.Status.Notifications = next
	if send == nil {
		return
	}
	// A copy: the job outlives the reconcile, on another goroutine.
	cp := ro.DeepCopy()
	job := notifyJob{
		rollout: cp,
		message: notification.Message{
			ID:             string(cp.UID) + "/" + strconv.FormatInt(send.Sequence, 10),
			Namespace:      cp.Namespace,
			Rollout:        cp.Name,
			Phase:          string(send.Phase),
			PreviousPhase:  string(send.PreviousPhase),
			Reason:         cp.Status.Reason,
			Message:        cp.Status.Message,
			StableRevision: cp.Status.StableRevision,
			CanaryRevision: cp.Status.CanaryRevision,
			Step:           cp.Status.CurrentStepIndex,
			Steps:          len(cp.Spec.Steps),
			Time:           send.TransitionTime.Time,
		},
	}
	for _, h := range cp.Spec.Notifications {
		if h.Wants(send.Phase) {
			job.hooks = append(job.hooks, h)
		}
	}
	rd.notify = &job
}

// notifyJob is one transition to post to the webhooks that want it.
type notifyJob struct {
	// rollout is a copy, for the Secrets' namespace and the Events.
	rollout *v1alpha1.Rollout
	hooks   []v1alpha1.Notification
	message notification.Message
}

// NotifierQueueSize bounds the transitions waiting to be posted, per
// worker; past it a transition is dropped with a Warning Event rather than
// hold a reconcile.
const NotifierQueueSize = 64

// notifierWorkers post in parallel, each from its own queue. A Rollout's
// transitions always go to the same worker, so they arrive in the order
// they happened; a webhook that does not answer holds only its worker.
const notifierWorkers = 4

// Notifier posts phase transitions to webhooks off the reconcile workers:
// a reconcile hands it a transition already recorded in status and goes
// on; the Notifier's own workers read the URL Secret, post with retries
// and record an Event per webhook. It runs on the leader only, as the
// reconciles that feed it do. What is queued when the manager stops is not
// posted: the transition is already recorded, so it is never posted twice.
type Notifier struct {
	// Reader reads the URL Secrets (around the cache, get only).
	Reader   client.Reader
	Recorder events.EventRecorder
	// Allow restricts where webhooks may connect; empty allows any.
	Allow prometheus.AllowList
	// Policy bounds each delivery; notification.DefaultPolicy when zero.
	Policy notification.Policy
	// Client posts; notification.NewClient when nil.
	Client *http.Client

	once   sync.Once
	queues []chan notifyJob
}

// NewNotifier builds a Notifier whose allow-list is the manager flag
// notification.AllowedAddressesFlag.
func NewNotifier(reader client.Reader, recorder events.EventRecorder, allowed []string, policy notification.Policy) (*Notifier, error) {
	allow, err := prometheus.ParseAllowList(allowed)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", notification.AllowedAddressesFlag, err)
	}
	return &Notifier{Reader: reader, Recorder: recorder, Allow: allow, Policy: policy}, nil
}

func (n *Notifier) init() {
	n.once.Do(func() {
		n.queues = make([]chan notifyJob, notifierWorkers)
		for i := range n.queues {
			n.queues[i] = make(chan notifyJob, NotifierQueueSize)
		}
		if n.Policy == (notification.Policy{}) {
			n.Policy = notification.DefaultPolicy
		}
		if n.Client == nil {
			n.Client = notification.NewClient()
		}
	})
}

// NeedLeaderElection: only the leader reconciles, so only it has anything
// to post.
func (n *Notifier) NeedLeaderElection() bool { return true }

// Start runs the workers until ctx ends (a manager Runnable).
func (n *Notifier) Start(ctx context.Context) error {
	n.init()
	var wg sync.WaitGroup
	for _, queue := range n.queues {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case job := <-queue:
					n.post(ctx, job)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// enqueue never blocks: a full queue drops the transition, with a Warning.
func (n *Notifier) enqueue(job notifyJob) bool {
	n.init()
	h := fnv.New32a()
	_, _ = h.Write([]byte(job.rollout.Namespace + "/" + job.rollout.Name))
	select {
	case n.queues[h.Sum32()%uint32(len(n.queues))] <- job:
		return true
	default:
		return false
	}
}

// post delivers one transition to each of its webhooks in turn.
func (n *Notifier) post(ctx context.Context, job notifyJob) {
	ro := job.rollout
	for _, h := range job.hooks {
		attempts, err := n.postOne(ctx, ro, h, job.message)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.FromContext(ctx).Info("notification not delivered", "rollout", client.ObjectKeyFromObject(ro), "webhook", h.Name, "phase", job.message.Phase, "error", err.Error())
			after := ""
			if attempts > 0 {
				after = fmt.Sprintf(" after %d attempt(s)", attempts)
			}
			n.event(ro, h.Name, corev1.EventTypeWarning, v1alpha1.EventNotificationFailed,
				"webhook %s: %s not posted%s: %v; it will not be posted again", h.Name, transitionText(job.message), after, err)
			continue
		}
		n.event(ro, h.Name, corev1.EventTypeNormal, v1alpha1.EventNotificationSent, "webhook %s: %s posted", h.Name, transitionText(job.message))
	}
}

func (n *Notifier) postOne(ctx context.Context, ro *v1alpha1.Rollout, h v1alpha1.Notification, m notification.Message) (int, error) {
	ref := h.URLSecretRef
	var secret corev1.Secret
	if err := n.Reader.Get(ctx, types.NamespacedName{Namespace: ro.Namespace, Name: ref.Name}, &secret); err != nil {
		return 0, fmt.Errorf("reading Secret %s: %w", ref.Name, err)
	}
	raw, ok := secret.Data[ref.Key]
	if !ok {
		return 0, fmt.Errorf("secret %s has no key %s", ref.Name, ref.Key)
	}
	u, err := notification.CheckURL(string(raw), n.Allow)
	if err != nil {
		return 0, fmt.Errorf("secret %s key %s: %w", ref.Name, ref.Key, err)
	}
	body, err := notification.Body(h.Format, m)
	if err != nil {
		return 0, err
	}
	return notification.Post(ctx, n.Client, u, m.ID, body, n.Policy)
}

// event records on the Rollout. The action names the webhook: the events
// API folds Events of the same reason and action into one series that
// keeps the first note, and one webhook's failure must not hide another's.
func (n *Notifier) event(ro *v1alpha1.Rollout, hook, typ, reason, format string, args ...any) {
	if n.Recorder == nil {
		return
	}
	n.Recorder.Eventf(ro, nil, typ, reason, "Notify/"+hook, format, args...)
}

func transitionText(m notification.Message) string {
	if m.PreviousPhase == "" {
		return m.Phase
	}
	return m.PreviousPhase + " → " + m.Phase
}
