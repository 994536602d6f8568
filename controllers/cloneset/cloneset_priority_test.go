package cloneset

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TestGovernedCloneSetsGoFirst: through controller-runtime's own priority
// queue, the events of a governed CloneSet's Pods and its Rollout's grant
// come out before those of others; the initial list and resyncs stay low.
func TestGovernedCloneSetsGoFirst(t *testing.T) {
	governedSets := map[string]bool{"canary": true}
	governed := func(_ context.Context, key client.ObjectKey) bool { return governedSets[key.Name] }
	podOf := func(kind, apiVersion, owner, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: owner + "-0", ResourceVersion: rv,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, Controller: ptr.To(true)}}}}
	}
	cloneSetPod := func(owner, rv string) *corev1.Pod {
		return podOf("CloneSet", stepwisev1.GroupVersion.String(), owner, rv)
	}
	rollout := func(rv string) *stepwisev1.Rollout {
		return &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "canary", ResourceVersion: rv},
			Spec: stepwisev1.RolloutSpec{WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "canary"}}}
	}
	// "waiting" is an ungoverned CloneSet whose round waits for a slot,
	// and "taken" one that waited and is now governed.
	waitingSets := map[string]bool{"waiting": true, "taken": true}
	governedSets["taken"] = true
	waits := func(_ context.Context, key client.ObjectKey) bool { return waitingSets[key.Name] }
	pods, rollouts := podEvents(governed, waits), rolloutEvents()
	tests := []struct {
		name string
		send func(context.Context, priorityqueue.PriorityQueue[reconcile.Request])
		// want is the key that comes out, and at what priority; "" for none.
		want     string
		priority int
	}{{
		name: "a governed CloneSet's Pod changed",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Update(ctx, event.UpdateEvent{ObjectOld: cloneSetPod("canary", "1"), ObjectNew: cloneSetPod("canary", "2")}, q)
		},
		want: "canary", priority: governedPriority,
	}, {
		name: "an ungoverned CloneSet's Pod changed",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Update(ctx, event.UpdateEvent{ObjectOld: cloneSetPod("fleet", "1"), ObjectNew: cloneSetPod("fleet", "2")}, q)
		},
		want: "fleet", priority: 0,
	}, {
		name: "a resync of a governed CloneSet's Pod",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Update(ctx, event.UpdateEvent{ObjectOld: cloneSetPod("canary", "2"), ObjectNew: cloneSetPod("canary", "2")}, q)
		},
		want: "canary", priority: handler.LowPriority,
	}, {
		name: "a governed CloneSet's Pod in the initial list",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Create(ctx, event.CreateEvent{Object: cloneSetPod("canary", "1"), IsInInitialList: true}, q)
		},
		want: "canary", priority: handler.LowPriority,
	}, {
		name: "a governed CloneSet's Pod deleted",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Delete(ctx, event.DeleteEvent{Object: cloneSetPod("canary", "1")}, q)
		},
		want: "canary", priority: governedPriority,
	}, {
		name: "a Pod released by its CloneSet: the CloneSet it left looks again",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			released := cloneSetPod("fleet", "2")
			released.OwnerReferences = nil
			pods.Update(ctx, event.UpdateEvent{ObjectOld: cloneSetPod("fleet", "1"), ObjectNew: released}, q)
		},
		want: "fleet", priority: 0,
	}, {
		name: "a Pod of an ungoverned CloneSet waiting for a slot: left to its wake",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Update(ctx, event.UpdateEvent{ObjectOld: cloneSetPod("waiting", "1"), ObjectNew: cloneSetPod("waiting", "2")}, q)
			pods.Delete(ctx, event.DeleteEvent{Object: cloneSetPod("waiting", "2")}, q)
		},
	}, {
		name: "a Pod of a CloneSet that waited and is governed now",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Update(ctx, event.UpdateEvent{ObjectOld: cloneSetPod("taken", "1"), ObjectNew: cloneSetPod("taken", "2")}, q)
		},
		want: "taken", priority: governedPriority,
	}, {
		name: "a Pod of another controller",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Update(ctx, event.UpdateEvent{ObjectOld: podOf("ReplicaSet", "apps/v1", "canary", "1"), ObjectNew: podOf("ReplicaSet", "apps/v1", "canary", "2")}, q)
		},
	}, {
		name: "an OpenKruise CloneSet's Pod",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Create(ctx, event.CreateEvent{Object: podOf("CloneSet", "apps.kruise.io/v1alpha1", "canary", "1")}, q)
		},
	}, {
		name: "the Rollout's grant changed",
		send: func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			rollouts.Update(ctx, event.UpdateEvent{ObjectOld: rollout("1"), ObjectNew: rollout("2")}, q)
		},
		want: "canary", priority: governedPriority,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			tt.send(context.Background(), q)
			if tt.want == "" {
				if n := q.Len(); n != 0 {
					t.Fatalf("%d keys queued, want none", n)
				}
				return
			}
			got, priority, _ := q.GetWithPriority()
			if got.Name != tt.want || got.Namespace != "ns" || priority != tt.priority {
				t.Fatalf("got %v at priority %d, want ns/%s at %d", got, priority, tt.want, tt.priority)
			}
		})
	}
}

// TestGovernedCloneSetOvertakesTheQueue: queued behind others, a governed
// CloneSet's key is the next one out.
func TestGovernedCloneSetOvertakesTheQueue(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	pods := podEvents(func(_ context.Context, key client.ObjectKey) bool { return key.Name == "canary" }, func(context.Context, client.ObjectKey) bool { return false })
	ctx := context.Background()
	for _, owner := range []string{"fleet-a", "fleet-b", "canary"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: owner + "-0", ResourceVersion: "2",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: owner, Controller: ptr.To(true)}}}}
		old := pod.DeepCopy()
		old.ResourceVersion = "1"
		pods.Update(ctx, event.UpdateEvent{ObjectOld: old, ObjectNew: pod}, q)
	}
	var order []string
	for range 3 {
		req, _, _ := q.GetWithPriority()
		order = append(order, req.Name)
		q.Done(req)
	}
	if order[0] != "canary" || order[1] != "fleet-a" || order[2] != "fleet-b" {
		t.Fatalf("order %v, want canary first, then the others as they came", order)
	}
}

// TestUngovernedRoundsKeepWorkersForGovernedCloneSets: at most max rounds
// of ungoverned CloneSets run at once; a refused key waits once however
// often it is refused, and each round that ends wakes the key that has
// waited longest, as a CloneSet event on the wake channel.
func TestUngovernedRoundsKeepWorkersForGovernedCloneSets(t *testing.T) {
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	woken := func(u *ungovernedRounds) []string {
		var names []string
		for {
			select {
			case e := <-u.wake:
				names = append(names, e.Object.GetNamespace()+"/"+e.Object.GetName())
			default:
				return names
			}
		}
	}
	u := newUngovernedRounds(2)
	if !u.start(key("a")) || !u.start(key("b")) {
		t.Fatal("the first two rounds were refused, want both to start")
	}
	for _, name := range []string{"c", "d", "c"} {
		if u.start(key(name)) {
			t.Fatalf("round of %s started with both slots taken", name)
		}
	}
	if !u.waits(key("c")) || !u.waits(key("d")) || u.waits(key("a")) {
		t.Fatalf("waiting: c %v, d %v, a %v; want c and d only", u.waits(key("c")), u.waits(key("d")), u.waits(key("a")))
	}
	u.done()
	if got := woken(u); !slices.Equal(got, []string{"ns/c"}) {
		t.Fatalf("woken %v, want ns/c (waited longest, once)", got)
	}
	if u.waits(key("c")) {
		t.Fatal("c still waits after its wake")
	}
	if !u.start(key("c")) {
		t.Fatal("the woken round was refused the slot it was woken for")
	}
	u.forget(key("d"))
	u.done()
	u.done()
	if got := woken(u); len(got) != 0 {
		t.Fatalf("woken %v, want none: d was forgotten", got)
	}
	if !u.start(key("e")) || !u.start(key("f")) || u.start(key("g")) {
		t.Fatal("after every round ended, want two slots free again and no third")
	}
}

// TestUngovernedRoundsLeaveAFullWakeChannelToTheRequeue: a wake that finds
// the channel full is not lost: the key keeps waiting, and the next round
// to end wakes it.
func TestUngovernedRoundsLeaveAFullWakeChannelToTheRequeue(t *testing.T) {
	u := newUngovernedRounds(1)
	for range ungovernedWakeBuffer {
		u.wake <- event.GenericEvent{Object: &stepwisev1.CloneSet{}}
	}
	key := types.NamespacedName{Namespace: "ns", Name: "late"}
	u.start(types.NamespacedName{Namespace: "ns", Name: "first"})
	u.start(key)
	u.done()
	if !u.waits(key) {
		t.Fatal("the key was dropped with the channel full, want it still waiting")
	}
}
