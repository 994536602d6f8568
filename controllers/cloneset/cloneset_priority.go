package cloneset

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
//
// A worker holds its CloneSet for a whole round, up to
// maxPodsWrittenPerRound Pods, about a second at 10,000 Pods; with every
// worker in such a round, a governed CloneSet at the head of the queue
// still waited for one of them to end (step reaction p99 1.2-2.9 s at
// 10,800 Pods). So a round of a CloneSet no Rollout governs yields: once
// it has written minPodsWrittenBeforeYield Pods, it ends early whenever a
// governed CloneSet waits at governedPriority (waitingGoverned), and its
// Pods' watch events bring it back behind that one. The minimum keeps a
// fleet of stepping Rollouts from holding a mass update to one Pod per
// round.
const governedPriority = 10

// minPodsWrittenBeforeYield is how many Pods a round of an ungoverned
// CloneSet writes before it may yield to a waiting governed one.
const minPodsWrittenBeforeYield = 4

// waitingGoverned is the set of governed CloneSets queued at
// governedPriority that no worker has picked up yet.
type waitingGoverned struct {
	mu   sync.Mutex
	keys map[client.ObjectKey]struct{}
}

func newWaitingGoverned() *waitingGoverned {
	return &waitingGoverned{keys: map[client.ObjectKey]struct{}{}}
}

func (w *waitingGoverned) add(key client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys[key] = struct{}{}
}

// pickedUp is called when a worker starts on key.
func (w *waitingGoverned) pickedUp(key client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.keys, key)
}

// any reports whether a governed CloneSet waits for a worker.
func (w *waitingGoverned) any() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.keys) > 0
}

// yields says whether a round that has written written Pods ends now to
// let a waiting governed CloneSet have its worker. A governed round never
// yields: it is what the others yield to.
func (w *waitingGoverned) yields(governed bool, written int) bool {
	return !governed && written >= minPodsWrittenBeforeYield && w.any()
}

var cloneSetGroupKind = stepwisev1.GroupVersion.WithKind("CloneSet").GroupKind()

// podEvents enqueues the CloneSet that controls a Pod, as Owns would, at
// governedPriority when a Rollout governs that CloneSet. Events of the
// initial list and resyncs (no new resourceVersion) keep the low priority
// controller-runtime gives them.
func podEvents(governed func(context.Context, client.ObjectKey) bool, waiting *waitingGoverned) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueController(ctx, e.Object, q, !e.IsInInitialList, governed, waiting)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			changed := e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
			enqueueController(ctx, e.ObjectNew, q, changed, governed, waiting)
			// A Pod's controller hardly ever changes; when it does (orphaned,
			// adopted), the one it left must look too.
			if old := metav1.GetControllerOfNoCopy(e.ObjectOld); old != nil && !sameController(old, metav1.GetControllerOfNoCopy(e.ObjectNew)) {
				enqueueController(ctx, e.ObjectOld, q, false, governed, waiting)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueController(ctx, e.Object, q, true, governed, waiting)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueController(ctx, e.Object, q, false, governed, waiting)
		},
	}
}

func sameController(a, b *metav1.OwnerReference) bool {
	return b != nil && a.UID == b.UID
}

// enqueueController adds obj's controlling CloneSet, if any. The queue
// keeps one entry per key, at the highest priority it was added with.
func enqueueController(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], mayRaise bool, governed func(context.Context, client.ObjectKey) bool, waiting *waitingGoverned) {
	owner := metav1.GetControllerOfNoCopy(obj)
	if owner == nil || owner.Kind != cloneSetGroupKind.Kind {
		return
	}
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || gv.Group != cloneSetGroupKind.Group {
		return
	}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner.Name}}
	add(q, req, mayRaise && governed(ctx, req.NamespacedName), waiting)
}

// rolloutEvents enqueues the CloneSet a Rollout names when its grant or
// its existence changed (governorChanged): such a CloneSet is governed by
// definition, and the grant is what it waits for to move its Pods.
func rolloutEvents(waiting *waitingGoverned) handler.EventHandler {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], raise bool) {
		for _, req := range cloneSetOf(context.Background(), obj) {
			add(q, req, raise, waiting)
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

// add queues req, at governedPriority (and marked waiting) when raise and
// the queue has priorities; otherwise at the priority the queue gives by
// default.
func add(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request, raise bool, waiting *waitingGoverned) {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || !raise {
		q.Add(req)
		return
	}
	waiting.add(req.NamespacedName)
	priority := governedPriority
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
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
