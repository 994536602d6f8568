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
	rollout := func(rv string) *stepwisev1.Rollout {
		return &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "canary", ResourceVersion: rv},
			Spec: stepwisev1.RolloutSpec{WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "canary"}}}
	}
	pods, rollouts := podEvents(governed, nil), rolloutEvents()
	// podUpdate sends the update of a Pod from before to after.
	podUpdate := func(before, after *corev1.Pod) func(context.Context, priorityqueue.PriorityQueue[reconcile.Request]) {
		return func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Update(ctx, event.UpdateEvent{ObjectOld: before, ObjectNew: after}, q)
		}
	}
	tests := []struct {
		name string
		send func(context.Context, priorityqueue.PriorityQueue[reconcile.Request])
		// want is the key that comes out, and at what priority; "" for none.
		want     string
		priority int
	}{{
		name: "a governed CloneSet's Pod changed",
		send: podUpdate(cloneSetPod("canary", "1"), cloneSetPod("canary", "2")),
		want: "canary", priority: governedPriority,
	}, {
		name: "a governed CloneSet's Pod turned ready",
		send: podUpdate(unreadyPod("canary", "1"), readyPod("canary", "2")),
		want: "canary", priority: gatePriority,
	}, {
		name: "a governed CloneSet's Pod turned ready through its own gate",
		send: podUpdate(withReadiness(cloneSetPod("canary", "1"), corev1.ConditionFalse, corev1.ConditionTrue), readyPod("canary", "2")),
		want: "canary", priority: gatePriority,
	}, {
		name: "a governed CloneSet's ready Pod changed otherwise",
		send: podUpdate(readyPod("canary", "1"), readyPod("canary", "2")),
		want: "canary", priority: governedPriority,
	}, {
		name: "a governed CloneSet's Pod left ready",
		send: podUpdate(readyPod("canary", "1"), unreadyPod("canary", "2")),
		want: "canary", priority: governedPriority,
	}, {
		name: "a resync of a governed CloneSet's ready Pod",
		send: podUpdate(unreadyPod("canary", "2"), readyPod("canary", "2")),
		want: "canary", priority: handler.LowPriority,
	}, {
		name: "an ungoverned CloneSet's Pod turned ready",
		send: podUpdate(unreadyPod("fleet", "1"), readyPod("fleet", "2")),
		want: "fleet", priority: 0,
	}, {
		name: "an ungoverned CloneSet's Pod changed",
		send: podUpdate(cloneSetPod("fleet", "1"), cloneSetPod("fleet", "2")),
		want: "fleet", priority: 0,
	}, {
		name: "a resync of a governed CloneSet's Pod",
		send: podUpdate(cloneSetPod("canary", "2"), cloneSetPod("canary", "2")),
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
		name: "a Pod of another controller",
		send: podUpdate(podOf("ReplicaSet", "apps/v1", "canary", "1"), podOf("ReplicaSet", "apps/v1", "canary", "2")),
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

// TestReadyCanaryOvertakesGovernedKeys: among governed CloneSets queued for
// their Pods' other events, the one whose Pod turned ready is the next out,
// even when its key was queued last and was already in the queue.
func TestReadyCanaryOvertakesGovernedKeys(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	pods := podEvents(func(context.Context, client.ObjectKey) bool { return true }, nil)
	ctx := context.Background()
	update := func(before, after *corev1.Pod) {
		pods.Update(ctx, event.UpdateEvent{ObjectOld: before, ObjectNew: after}, q)
	}
	update(unreadyPod("restarting-a", "1"), unreadyPod("restarting-a", "2"))
	update(unreadyPod("ready", "1"), unreadyPod("ready", "2"))
	update(unreadyPod("restarting-b", "1"), unreadyPod("restarting-b", "2"))
	update(unreadyPod("ready", "2"), readyPod("ready", "3"))
	if order := drain(q, 3); !slices.Equal(order, []string{"ready", "restarting-a", "restarting-b"}) {
		t.Fatalf("order %v, want ready first, then the others as they came", order)
	}
}

// TestGovernedCloneSetOvertakesTheQueue: queued behind others, a governed
// CloneSet's key is the next one out.
func TestGovernedCloneSetOvertakesTheQueue(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	pods := podEvents(func(_ context.Context, key client.ObjectKey) bool { return key.Name == "canary" }, nil)
	ctx := context.Background()
	for _, owner := range []string{"fleet-a", "fleet-b", "canary"} {
		pods.Update(ctx, event.UpdateEvent{ObjectOld: cloneSetPod(owner, "1"), ObjectNew: cloneSetPod(owner, "2")}, q)
	}
	if order := drain(q, 3); !slices.Equal(order, []string{"canary", "fleet-a", "fleet-b"}) {
		t.Fatalf("order %v, want canary first, then the others as they came", order)
	}
}

// podOf is a Pod in namespace ns that owner, of kind at apiVersion,
// controls.
func podOf(kind, apiVersion, owner, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: owner + "-0", ResourceVersion: rv,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, Controller: ptr.To(true)}}}}
}

// cloneSetPod is a Pod that a Stepwise CloneSet named owner controls.
func cloneSetPod(owner, rv string) *corev1.Pod {
	return podOf("CloneSet", stepwisev1.GroupVersion.String(), owner, rv)
}

// readyPod and unreadyPod are cloneSetPod Running, its InPlaceUpdateReady
// gate True, and kubelet's Ready condition True or False.
func readyPod(owner, rv string) *corev1.Pod {
	return withReadiness(cloneSetPod(owner, rv), corev1.ConditionTrue, corev1.ConditionTrue)
}

func unreadyPod(owner, rv string) *corev1.Pod {
	return withReadiness(cloneSetPod(owner, rv), corev1.ConditionTrue, corev1.ConditionFalse)
}

// withReadiness gives pod a Running phase and the given InPlaceUpdateReady
// and Ready conditions.
func withReadiness(pod *corev1.Pod, gate, ready corev1.ConditionStatus) *corev1.Pod {
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodConditionType(stepwisev1.InPlaceUpdateReady), Status: gate},
		{Type: corev1.PodReady, Status: ready},
	}
	return pod
}

// drain takes n keys out of q, in the order it gives them.
func drain(q priorityqueue.PriorityQueue[reconcile.Request], n int) []string {
	var order []string
	for range n {
		req, _, _ := q.GetWithPriority()
		order = append(order, req.Name)
		q.Done(req)
	}
	return order
}

// TestGateEventsWaitForAWorker: only a governed CloneSet's Pod turning
// ready makes its key wait for a worker that a long round hands over;
// other events of governed Pods, and any of ungoverned ones, do not.
func TestGateEventsWaitForAWorker(t *testing.T) {
	gates := newGateWaits()
	pods := podEvents(func(_ context.Context, key client.ObjectKey) bool { return key.Name != "fleet" }, gates)
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	ctx := context.Background()
	update := func(before, after *corev1.Pod) {
		pods.Update(ctx, event.UpdateEvent{ObjectOld: before, ObjectNew: after}, q)
	}
	update(cloneSetPod("restarting", "1"), cloneSetPod("restarting", "2"))
	update(unreadyPod("fleet", "1"), readyPod("fleet", "2"))
	update(unreadyPod("resynced", "2"), readyPod("resynced", "2"))
	pods.Delete(ctx, event.DeleteEvent{Object: cloneSetPod("deleted", "1")}, q)
	if gates.claim() {
		t.Fatal("a round was asked to hand over its worker, but no governed Pod turned ready")
	}
	update(unreadyPod("canary", "1"), readyPod("canary", "2"))
	if !gates.claim() {
		t.Fatal("a governed Pod turned ready, but no round was asked to hand over its worker")
	}
}

// TestGateWaitsEndOneRoundPerKey: each waiting key ends one round; a key a
// worker took ends none; a key queued again while claimed is not claimed
// twice; a key queued again while a worker holds it ends a round only once
// that worker is done with it, since no other worker could take it before.
func TestGateWaitsEndOneRoundPerKey(t *testing.T) {
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	type step struct {
		raise, start, finish string
		// claim asks as a round would; want is its answer.
		claim, want bool
	}
	claimed := step{claim: true, want: true}
	none := step{claim: true, want: false}
	tests := []struct {
		name  string
		steps []step
	}{{
		name:  "none waits",
		steps: []step{none},
	}, {
		name:  "one key ends one round",
		steps: []step{{raise: "a"}, claimed, none},
	}, {
		name:  "two keys end two rounds",
		steps: []step{{raise: "a"}, {raise: "b"}, claimed, claimed, none},
	}, {
		name:  "a key raised twice ends one round",
		steps: []step{{raise: "a"}, {raise: "a"}, claimed, none},
	}, {
		name:  "a key raised again once claimed keeps its claim",
		steps: []step{{raise: "a"}, claimed, {raise: "a"}, none},
	}, {
		name:  "a key a free worker took ends no round",
		steps: []step{{raise: "a"}, {start: "a"}, none, {finish: "a"}, none},
	}, {
		name:  "a key raised while a worker holds it waits for that worker",
		steps: []step{{start: "a"}, {raise: "a"}, none, {finish: "a"}, claimed, none},
	}, {
		name:  "a claimed key taken, then raised again while held, ends another round once let go",
		steps: []step{{raise: "a"}, claimed, {start: "a"}, {raise: "a"}, none, {finish: "a"}, claimed},
	}, {
		name:  "a key taken leaves the others waiting",
		steps: []step{{raise: "a"}, {raise: "b"}, {start: "a"}, claimed, none},
	}, {
		name:  "other keys taken and let go change nothing",
		steps: []step{{raise: "a"}, {start: "z"}, {finish: "z"}, claimed, none},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gates := newGateWaits()
			for i, s := range tt.steps {
				switch {
				case s.raise != "":
					gates.raise(key(s.raise))
				case s.start != "":
					gates.started(key(s.start))
				case s.finish != "":
					gates.finished(key(s.finish))
				case s.claim:
					if got := gates.claim(); got != s.want {
						t.Fatalf("step %d: claim = %v, want %v", i, got, s.want)
					}
				}
			}
		})
	}
}
