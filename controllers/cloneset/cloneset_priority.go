package cloneset

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
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

// gatePriority goes ahead of governedPriority: a governed CloneSet one of
// whose Pods just turned ready. That is the event its Rollout's gate waits
// on (updatedReadyReplicas), while most of a governed CloneSet's Pod events
// are steps on the way there (its own writes coming back, a container
// restarting) that change no count the Rollout reads. During a mass update
// the governed keys queue too (50-200 of them at 10,000 Pods), and a key
// whose Pod is ready waited behind all of them.
//
// Measured with make bench-scale at 10,800 Pods, three runs each in turns
// (docs/benchmarks.md): gate reaction p99 0.93-1.06 s with this, 1.72-2.15
// s without; the mass update 12-37 s slower in each pair.
const gatePriority = 20

var cloneSetGroupKind = stepwisev1.GroupVersion.WithKind("CloneSet").GroupKind()

// podEvents enqueues the CloneSet that controls a Pod, as Owns would, at
// governedPriority when a Rollout governs that CloneSet. Events of the
// initial list and resyncs (no new resourceVersion) keep the low priority
// controller-runtime gives them. A key queued at gatePriority is also told
// to gates (nil: nobody listens), so that a long round can hand its worker
// over.
func podEvents(governed func(context.Context, client.ObjectKey) bool, gates *gateWaits) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueController(ctx, e.Object, q, raiseIf(!e.IsInInitialList, governedPriority), governed, nil)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			changed := e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
			enqueueController(ctx, e.ObjectNew, q, raiseIf(changed, updatePriority(e.ObjectOld, e.ObjectNew)), governed, gates)
			// A Pod's controller hardly ever changes; when it does (orphaned,
			// adopted), the one it left must look too.
			if old := metav1.GetControllerOfNoCopy(e.ObjectOld); old != nil && !sameController(old, metav1.GetControllerOfNoCopy(e.ObjectNew)) {
				enqueueController(ctx, e.ObjectOld, q, 0, governed, nil)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueController(ctx, e.Object, q, governedPriority, governed, nil)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueController(ctx, e.Object, q, 0, governed, nil)
		},
	}
}

// raiseIf is priority when the event is news (not the initial list or a
// resync), else 0: no raise.
func raiseIf(news bool, priority int) int {
	if !news {
		return 0
	}
	return priority
}

// updatePriority is the priority a governed CloneSet's Pod update earns:
// gatePriority when the Pod turned ready.
func updatePriority(oldObj, newObj client.Object) int {
	oldPod, okOld := oldObj.(*corev1.Pod)
	newPod, okNew := newObj.(*corev1.Pod)
	if okOld && okNew && !podReady(oldPod) && podReady(newPod) {
		return gatePriority
	}
	return governedPriority
}

func sameController(a, b *metav1.OwnerReference) bool {
	return b != nil && a.UID == b.UID
}

// enqueueController adds obj's controlling CloneSet, if any, at priority
// when a Rollout governs it (0: the queue's default). The queue keeps one
// entry per key, at the highest priority it was added with. At
// gatePriority the key is told to gates (when not nil) before it is
// queued, so a worker that takes it at once finds it to clear.
func enqueueController(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], priority int, governed func(context.Context, client.ObjectKey) bool, gates *gateWaits) {
	owner := metav1.GetControllerOfNoCopy(obj)
	if owner == nil || owner.Kind != cloneSetGroupKind.Kind {
		return
	}
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || gv.Group != cloneSetGroupKind.Group {
		return
	}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner.Name}}
	if priority != 0 && !governed(ctx, req.NamespacedName) {
		priority = 0
	}
	if priority == gatePriority && gates != nil {
		gates.raise(req.NamespacedName)
	}
	add(q, req, priority)
}

// rolloutEvents enqueues the CloneSet a Rollout names when its grant or
// its existence changed (governorChanged): such a CloneSet is governed by
// definition, and the grant is what it waits for to move its Pods.
func rolloutEvents() handler.EventHandler {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], raise bool) {
		for _, req := range cloneSetOf(context.Background(), obj) {
			add(q, req, raiseIf(raise, governedPriority))
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

// add queues req at priority when it is not 0 and the queue has
// priorities; otherwise at the priority the queue gives by default.
func add(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request, priority int) {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || priority == 0 {
		q.Add(req)
		return
	}
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

// gateWaits hands a worker to a governed CloneSet whose Pod just turned
// ready. gatePriority puts its key first in the queue, but the queue can
// only give it to a worker that is free: during a mass update all of them
// may be in rounds of CloneSets nobody waits on, each writing up to
// maxPodsWrittenPerRound Pods, up to 2.7 s per round on a loaded API
// server, and that wait is the tail of the Rollouts' gate reaction (0.4-1.8
// s of the slowest steps in make bench-scale's audit log, docs/benchmarks.md).
// So such a round asks, before each further Pod write, whether a gate
// waits; the first to ask ends its round and its worker takes the key.
//
// Each waiting key ends one round at most, so one gate event does not end
// every round running. A key a worker holds cannot be given to another:
// queued again meanwhile (its next canary Pod turned ready during its
// round), it waits unclaimed until that worker is done with it. A key
// leaves when a worker starts on it. A round ended for a key that another
// worker took first costs only that: its CloneSet's own watch events bring
// its next round.
type gateWaits struct {
	mu sync.Mutex
	// waiting holds the keys queued at gatePriority that no worker has
	// started since, each with whether a round has ended for it.
	waiting map[types.NamespacedName]bool
	// processing holds the keys a worker is on.
	processing map[types.NamespacedName]bool
	// claimable counts the waiting keys not claimed and not processing: a
	// round asks before each Pod it would write, and nearly always none
	// waits.
	claimable int
}

func newGateWaits() *gateWaits {
	return &gateWaits{waiting: map[types.NamespacedName]bool{}, processing: map[types.NamespacedName]bool{}}
}

// raise records that key was queued at gatePriority. A key already waiting
// keeps its claim.
func (w *gateWaits) raise(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.waiting[key]; ok {
		return
	}
	w.waiting[key] = false
	if !w.processing[key] {
		w.claimable++
	}
}

// claim says whether a key waits that no round has ended for yet and no
// worker holds, and claims it: the caller ends its round.
func (w *gateWaits) claim() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.claimable == 0 {
		return false
	}
	for key, claimed := range w.waiting {
		if !claimed && !w.processing[key] {
			w.waiting[key] = true
			w.claimable--
			return true
		}
	}
	return false
}

// started records that a worker took key; finished, that it let go.
func (w *gateWaits) started(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if claimed, ok := w.waiting[key]; ok {
		if !claimed && !w.processing[key] {
			w.claimable--
		}
		delete(w.waiting, key)
	}
	w.processing[key] = true
}

func (w *gateWaits) finished(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.processing, key)
	if claimed, ok := w.waiting[key]; ok && !claimed {
		w.claimable++
	}
}
