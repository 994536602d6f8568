package cloneset

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	readyPod := func(owner, rv string) *corev1.Pod {
		return withReadiness(cloneSetPod(owner, rv), corev1.ConditionTrue, corev1.ConditionTrue)
	}
	rollout := func(rv string) *stepwisev1.Rollout {
		return &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "canary", ResourceVersion: rv},
			Spec: stepwisev1.RolloutSpec{WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: "canary"}}}
	}
	pods, rollouts := podEvents(governed), rolloutEvents()
	// podUpdate sends the update of a Pod from before to after.
	podUpdate := func(before, after *corev1.Pod) func(context.Context, priorityqueue.PriorityQueue[reconcile.Request]) {
		return func(ctx context.Context, q priorityqueue.PriorityQueue[reconcile.Request]) {
			pods.Update(ctx, event.UpdateEvent{ObjectOld: before, ObjectNew: after}, q)
		}
	}
	unreadyPod := func(owner, rv string) *corev1.Pod {
		return withReadiness(cloneSetPod(owner, rv), corev1.ConditionTrue, corev1.ConditionFalse)
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

// withReadiness gives pod a Running phase, the InPlaceUpdateReady
// condition gate and kubelet's Ready condition ready.
func withReadiness(pod *corev1.Pod, gate, ready corev1.ConditionStatus) *corev1.Pod {
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodConditionType(stepwisev1.InPlaceUpdateReady), Status: gate},
		{Type: corev1.PodReady, Status: ready},
	}
	return pod
}

// TestReadyCanaryOvertakesGovernedKeys: among governed CloneSets queued for
// their Pods' other events, the one whose Pod turned ready is the next out,
// even when its key was queued last and was already in the queue.
func TestReadyCanaryOvertakesGovernedKeys(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	pods := podEvents(func(context.Context, client.ObjectKey) bool { return true })
	ctx := context.Background()
	update := func(owner, fromRV string, from, to corev1.ConditionStatus) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: owner + "-0", ResourceVersion: fromRV,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: owner, Controller: ptr.To(true)}}}}
		old := withReadiness(pod.DeepCopy(), corev1.ConditionTrue, from)
		pod.ResourceVersion += "1"
		pods.Update(ctx, event.UpdateEvent{ObjectOld: old, ObjectNew: withReadiness(pod, corev1.ConditionTrue, to)}, q)
	}
	update("restarting-a", "1", corev1.ConditionFalse, corev1.ConditionFalse)
	update("ready", "1", corev1.ConditionFalse, corev1.ConditionFalse)
	update("restarting-b", "1", corev1.ConditionFalse, corev1.ConditionFalse)
	update("ready", "2", corev1.ConditionFalse, corev1.ConditionTrue)
	var order []string
	for range 3 {
		req, _, _ := q.GetWithPriority()
		order = append(order, req.Name)
		q.Done(req)
	}
	if order[0] != "ready" || order[1] != "restarting-a" || order[2] != "restarting-b" {
		t.Fatalf("order %v, want ready first, then the others as they came", order)
	}
}

// TestGovernedCloneSetOvertakesTheQueue: queued behind others, a governed
// CloneSet's key is the next one out.
func TestGovernedCloneSetOvertakesTheQueue(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	pods := podEvents(func(_ context.Context, key client.ObjectKey) bool { return key.Name == "canary" })
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
