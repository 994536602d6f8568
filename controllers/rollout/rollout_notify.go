package rollout

import (
	"context"
	"fmt"
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
	"github.com/stepwise-dev/stepwise/controllers/rollout/notification"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
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
	// Copies: the job outlives the reconcile, on other goroutines, and may
	// wait in a queue, so it keeps only what the post and its Events need,
	// not the whole Rollout.
	var step *int32
	if i := ro.Status.CurrentStepIndex; i != nil {
		step = new(*i)
	}
	job := notifyJob{
		rollout: &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{
			Namespace: ro.Namespace, Name: ro.Name, UID: ro.UID, ResourceVersion: ro.ResourceVersion,
		}},
		message: notification.Message{
			ID:             string(ro.UID) + "/" + strconv.FormatInt(send.Sequence, 10),
			Namespace:      ro.Namespace,
			Rollout:        ro.Name,
			Phase:          string(send.Phase),
			PreviousPhase:  string(send.PreviousPhase),
			Reason:         ro.Status.Reason,
			Message:        ro.Status.Message,
			StableRevision: ro.Status.StableRevision,
			CanaryRevision: ro.Status.CanaryRevision,
			Step:           step,
			Steps:          len(ro.Spec.Steps),
			Time:           send.TransitionTime.Time,
		},
	}
	for i := range ro.Spec.Notifications {
		if h := &ro.Spec.Notifications[i]; h.Wants(send.Phase) {
			job.hooks = append(job.hooks, *h.DeepCopy())
		}
	}
	rd.notify = &job
}

// handOver gives the Notifier a transition whose status write succeeded.
// What it cannot take is dropped at once, never waited for: each drop is
// counted in the metrics and recorded as a Warning Event naming the
// webhook.
func (r *Reconciler) handOver(job notifyJob) {
	for _, d := range r.Notifier.enqueue(job) {
		r.Metrics.notificationDropped(job.rollout.Namespace, job.rollout.Name, d.hook, d.reason)
		r.Notifier.event(job.rollout, d.hook, corev1.EventTypeWarning, v1alpha1.EventNotificationFailed,
			"webhook %s: %s not posted: %s; it will not be posted again", d.hook, transitionText(job.message), d.why)
	}
}

// notifyJob is one transition to post to the webhooks that want it.
type notifyJob struct {
	// rollout names the Rollout (namespace, name, UID), for the Secrets'
	// namespace and the Events.
	rollout *v1alpha1.Rollout
	hooks   []v1alpha1.Notification
	message notification.Message
}

// Bounds of what waits to be posted. Past them a transition is dropped,
// with a Warning Event and a count in
// stepwise_rollout_notifications_dropped_total, rather than hold a
// reconcile or grow without end: at most MaxNotifierDestinations times
// NotifierQueueSize transitions are kept, each a copy of its message and
// webhook, not of the Rollout.
const (
	// NotifierQueueSize bounds the transitions waiting for one destination,
	// besides the one being posted.
	NotifierQueueSize = 128
	// MaxNotifierDestinations bounds the destinations with transitions to
	// post, each with its own goroutine.
	MaxNotifierDestinations = 256
	// MaxNotifierDestinationsPerNamespace bounds them per namespace, so
	// that one namespace's webhooks that never answer cannot take every
	// destination from the others.
	MaxNotifierDestinationsPerNamespace = 16
)

// Reasons a transition is dropped, the metric's reason label.
const (
	dropQueueFull           = "queue_full"
	dropTooManyDestinations = "too_many_destinations"
)

// destination is where a webhook posts, as the Rollout names it: the key
// of a Secret in the Rollout's namespace that holds the URL. Not the URL
// itself: the Secret is read at each post (a rotated URL takes effect at
// the next), not when a reconcile hands a transition over, which reads no
// Secret. The namespace is part of it, so no two namespaces ever share a
// queue, even when their webhooks post to the same host (a shared relay):
// one namespace's receiver that never answers delays no other namespace.
type destination struct {
	namespace, secret, key string
}

// delivery is one transition to post to one webhook.
type delivery struct {
	rollout *v1alpha1.Rollout
	hook    v1alpha1.Notification
	message notification.Message
}

// destinationQueue holds a destination's deliveries in the order they were
// handed over; one goroutine at a time posts them, so a Rollout's
// transitions reach each of its webhooks in the order they happened.
type destinationQueue struct {
	pending []delivery
	// posting: a goroutine is posting this queue's deliveries.
	posting bool
}

// dropped is a delivery the Notifier could not take.
type dropped struct {
	hook, reason, why string
}

// Notifier posts phase transitions to webhooks off the reconcile workers:
// a reconcile hands it a transition already recorded in status and goes
// on; the Notifier reads the URL Secret, posts with retries and records an
// Event per webhook. Each destination has its own queue and, while the
// queue holds anything, its own goroutine, so a webhook that does not
// answer holds only the transitions for that same destination; a
// destination with nothing left to post is forgotten. It runs on the
// leader only, as the reconciles that feed it do. What is queued when the
// manager stops is not posted: the transition is already recorded, so it
// is never posted twice.
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

	// deliver posts one delivery; post when nil. Tests replace it.
	deliver func(context.Context, delivery)

	once sync.Once
	mu   sync.Mutex
	// ctx is Start's, nil before Start: queues filled before it are
	// posted from once it runs.
	ctx          context.Context
	stopped      bool
	queues       map[destination]*destinationQueue
	perNamespace map[string]int
	posting      sync.WaitGroup
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
		n.queues = map[destination]*destinationQueue{}
		n.perNamespace = map[string]int{}
		if n.Policy == (notification.Policy{}) {
			n.Policy = notification.DefaultPolicy
		}
		if n.Client == nil {
			n.Client = notification.NewClientFor(n.Allow)
		}
		if n.deliver == nil {
			n.deliver = n.post
		}
	})
}

// NeedLeaderElection: only the leader reconciles, so only it has anything
// to post.
func (n *Notifier) NeedLeaderElection() bool { return true }

// Start posts until ctx ends (a manager Runnable), then waits for the
// posts under way to give up.
func (n *Notifier) Start(ctx context.Context) error {
	n.init()
	n.mu.Lock()
	n.ctx = ctx
	for dest, q := range n.queues {
		n.startPosting(dest, q)
	}
	n.mu.Unlock()
	<-ctx.Done()
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.posting.Wait()
	return nil
}

// enqueue never blocks: it queues the transition for each of its webhooks'
// destinations, and returns those it could not take.
func (n *Notifier) enqueue(job notifyJob) []dropped {
	n.init()
	n.mu.Lock()
	defer n.mu.Unlock()
	var drops []dropped
	for _, h := range job.hooks {
		dest := destination{namespace: job.rollout.Namespace, secret: h.URLSecretRef.Name, key: h.URLSecretRef.Key}
		q := n.queues[dest]
		if q == nil {
			if why := n.full(dest.namespace); why != "" {
				drops = append(drops, dropped{hook: h.Name, reason: dropTooManyDestinations, why: why})
				continue
			}
			q = &destinationQueue{}
			n.queues[dest] = q
			n.perNamespace[dest.namespace]++
		}
		if len(q.pending) >= NotifierQueueSize {
			drops = append(drops, dropped{hook: h.Name, reason: dropQueueFull,
				why: fmt.Sprintf("%d transitions already wait to be posted to Secret %s key %s", NotifierQueueSize, dest.secret, dest.key)})
			continue
		}
		q.pending = append(q.pending, delivery{rollout: job.rollout, hook: h, message: job.message})
		n.startPosting(dest, q)
	}
	return drops
}

// full says why a namespace may not have one more destination, "" when it may.
func (n *Notifier) full(namespace string) string {
	switch {
	case n.perNamespace[namespace] >= MaxNotifierDestinationsPerNamespace:
		return fmt.Sprintf("the manager already posts to %d webhook Secret keys of namespace %s, its most", MaxNotifierDestinationsPerNamespace, namespace)
	case len(n.queues) >= MaxNotifierDestinations:
		return fmt.Sprintf("the manager already posts to %d webhook Secret keys, its most", MaxNotifierDestinations)
	}
	return ""
}

// startPosting starts q's goroutine, unless it runs already or the
// Notifier is not running. Called with n.mu held.
func (n *Notifier) startPosting(dest destination, q *destinationQueue) {
	if q.posting || n.ctx == nil || n.stopped {
		return
	}
	q.posting = true
	n.posting.Add(1)
	go n.drain(n.ctx, dest, q)
}

// drain posts q's deliveries in order until it is empty, then forgets the
// destination.
func (n *Notifier) drain(ctx context.Context, dest destination, q *destinationQueue) {
	defer n.posting.Done()
	for {
		n.mu.Lock()
		if len(q.pending) == 0 || ctx.Err() != nil {
			q.posting = false
			if len(q.pending) == 0 {
				delete(n.queues, dest)
				if n.perNamespace[dest.namespace]--; n.perNamespace[dest.namespace] <= 0 {
					delete(n.perNamespace, dest.namespace)
				}
			}
			n.mu.Unlock()
			return
		}
		d := q.pending[0]
		q.pending[0] = delivery{}
		q.pending = q.pending[1:]
		n.mu.Unlock()
		n.deliver(ctx, d)
	}
}

// post delivers one transition to one webhook and records the outcome.
func (n *Notifier) post(ctx context.Context, d delivery) {
	ro, h := d.rollout, d.hook
	attempts, err := n.postOne(ctx, ro, h, d.message)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		log.FromContext(ctx).Info("notification not delivered", "rollout", client.ObjectKeyFromObject(ro), "webhook", h.Name, "phase", d.message.Phase, "error", err.Error())
		after := ""
		if attempts > 0 {
			after = fmt.Sprintf(" after %d attempt(s)", attempts)
		}
		n.event(ro, h.Name, corev1.EventTypeWarning, v1alpha1.EventNotificationFailed,
			"webhook %s: %s not posted%s: %v; it will not be posted again", h.Name, transitionText(d.message), after, err)
		return
	}
	n.event(ro, h.Name, corev1.EventTypeNormal, v1alpha1.EventNotificationSent, "webhook %s: %s posted", h.Name, transitionText(d.message))
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
