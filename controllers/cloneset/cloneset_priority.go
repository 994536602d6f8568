package cloneset

import (
	"context"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// A CloneSet that a Rollout governs goes ahead of the others in the
// workqueue. Its Rollout steps when the CloneSet's status counts the
// step's Pods ready, so every second such a CloneSet waits in the queue
// is a second added to the release; a CloneSet nobody waits on (a mass
// update at maxUnavailable 100 %) is bound by how fast the API server
// takes its writes, and loses nothing by letting a few small rounds pass
// first. One key is never processed by two workers at once, so governed
// CloneSets never hold more workers than there are of them with work.
//
// Measured (docs/benchmarks.md, bench-scale at 1800 Pods): with 200
// governed CloneSets stepping while 10 others update all their Pods at
// once, the Rollouts' gate reaction p50/p99 was 3.3/7.5 s without this and
// 0.2/0.9 s with it.
const governedPriority = 10

var cloneSetGroupKind = stepwisev1.GroupVersion.WithKind("CloneSet").GroupKind()

// podEvents enqueues the CloneSet that controls a Pod, as Owns would, at
// governedPriority when a Rollout governs that CloneSet. Events of the
// initial list and resyncs (no new resourceVersion) keep the low priority
// controller-runtime gives them. An ungoverned CloneSet whose round waits
// for a slot (ungovernedRounds) is left to its wake.
func podEvents(governed, waits func(context.Context, client.ObjectKey) bool) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueController(ctx, e.Object, q, !e.IsInInitialList, governed, waits)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			changed := e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
			enqueueController(ctx, e.ObjectNew, q, changed, governed, waits)
			// A Pod's controller hardly ever changes; when it does (orphaned,
			// adopted), the one it left must look too.
			if old := metav1.GetControllerOfNoCopy(e.ObjectOld); old != nil && !sameController(old, metav1.GetControllerOfNoCopy(e.ObjectNew)) {
				enqueueController(ctx, e.ObjectOld, q, false, governed, waits)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueController(ctx, e.Object, q, true, governed, waits)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueController(ctx, e.Object, q, false, governed, waits)
		},
	}
}

func sameController(a, b *metav1.OwnerReference) bool {
	return b != nil && a.UID == b.UID
}

// enqueueController adds obj's controlling CloneSet, if any. The queue
// keeps one entry per key, at the highest priority it was added with.
func enqueueController(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], mayRaise bool, governed, waits func(context.Context, client.ObjectKey) bool) {
	owner := metav1.GetControllerOfNoCopy(obj)
	if owner == nil || owner.Kind != cloneSetGroupKind.Kind {
		return
	}
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || gv.Group != cloneSetGroupKind.Group {
		return
	}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner.Name}}
	raise := mayRaise && governed(ctx, req.NamespacedName)
	if !raise && waits(ctx, req.NamespacedName) {
		return
	}
	add(q, req, raise)
}

// rolloutEvents enqueues the CloneSet a Rollout names when its grant or
// its existence changed (governorChanged): such a CloneSet is governed by
// definition, and the grant is what it waits for to move its Pods.
func rolloutEvents() handler.EventHandler {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], raise bool) {
		for _, req := range cloneSetOf(context.Background(), obj) {
			add(q, req, raise)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q, !e.IsInInitialList)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.ObjectNew, q, e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion())
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q, false)
		},
	}
}

// add queues req, at governedPriority when raise and the queue has
// priorities; otherwise at the priority the queue gives by default.
func add(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request, raise bool) {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || !raise {
		q.Add(req)
		return
	}
	priority := governedPriority
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
}

// waits says whether the CloneSet's round waits for a slot.
func (r *Reconciler) waits(_ context.Context, key client.ObjectKey) bool {
	return r.ungoverned.waits(key)
}

// governed reads from the cache whether a Rollout governs the CloneSet, as
// its status last said.
func (r *Reconciler) governed(ctx context.Context, key client.ObjectKey) bool {
	cs := &stepwisev1.CloneSet{}
	if err := r.Client.Get(ctx, key, cs, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	return cs.Status.Rollout != nil
}

// ungovernedRounds keeps workers free for governed CloneSets. The queue's
// priority decides which key a free worker takes next, but a round once
// started holds its worker until it ends: a mass update's rounds (up to
// maxPodsWrittenPerRound writes each) could hold every worker at once while
// 200 Rollouts waited on their CloneSets' status. So the controller runs
// more workers than CloneSets nobody governs may use: at most max of their
// rounds run at once, and the others' rounds are governed CloneSets'.
//
// A round refused for want of a slot is not queued again by its Pods'
// events while it waits (every event would take a worker only to be
// refused again): the round that frees a slot wakes the longest waiting
// key, through a channel source, at the queue's default priority.
type ungovernedRounds struct {
	mu      sync.Mutex
	max     int
	running int
	// waiting holds the refused keys, oldest first, each once.
	waiting   []types.NamespacedName
	isWaiting map[types.NamespacedName]bool
	wake      chan event.GenericEvent
}

// ungovernedWakeBuffer is the wake channel's room: a key is woken only when
// a round ends, so the controller's channel source drains it as fast as
// rounds end; a full channel leaves the key to the refused round's requeue.
const ungovernedWakeBuffer = 1024

// ungovernedRetry requeues a refused round in case its wake is lost (a full
// channel); the wake normally comes first.
const ungovernedRetry = time.Second

func newUngovernedRounds(limit int) *ungovernedRounds {
	return &ungovernedRounds{
		max:       limit,
		isWaiting: map[types.NamespacedName]bool{},
		wake:      make(chan event.GenericEvent, ungovernedWakeBuffer),
	}
}

// start takes a slot for key's round, or records key as waiting and says
// false.
func (u *ungovernedRounds) start(key types.NamespacedName) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.running < u.max {
		u.running++
		u.dropLocked(key)
		return true
	}
	if !u.isWaiting[key] {
		u.isWaiting[key] = true
		u.waiting = append(u.waiting, key)
	}
	return false
}

// done frees a slot and wakes the key that has waited longest.
func (u *ungovernedRounds) done() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.running--
	if len(u.waiting) == 0 {
		return
	}
	key := u.waiting[0]
	wake := event.GenericEvent{Object: &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
	select {
	case u.wake <- wake:
		u.dropLocked(key)
	default:
	}
}

// waits says whether key's last round was refused and not woken yet.
func (u *ungovernedRounds) waits(key types.NamespacedName) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.isWaiting[key]
}

// forget drops a deleted CloneSet's key.
func (u *ungovernedRounds) forget(key types.NamespacedName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.dropLocked(key)
}

func (u *ungovernedRounds) dropLocked(key types.NamespacedName) {
	if !u.isWaiting[key] {
		return
	}
	delete(u.isWaiting, key)
	u.waiting = slices.DeleteFunc(u.waiting, func(k types.NamespacedName) bool { return k == key })
}
