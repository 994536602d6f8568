package inplace

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// finishedPod is a Pod whose in-place update to r2 is over: its records say
// so, and nothing is pending.
func finishedPod(t *testing.T, uid types.UID, resourceVersion string) *corev1.Pod {
	t.Helper()
	pod := newPod(container("app", "a:2"))
	pod.UID, pod.ResourceVersion = uid, resourceVersion
	state := &State{
		Revision:              "r2",
		UpdateTimestamp:       metav1.NewTime(epoch),
		LastContainerStatuses: map[string]ContainerRecord{"app": {ImageID: "sha256:old"}},
		UpdatedContainers:     []string{"app"},
	}
	if err := writeRecords(pod, state, nil); err != nil {
		t.Fatal(err)
	}
	return pod
}

// A settled Pod is decoded once per resourceVersion: asking again about
// the same version allocates nothing, and a new version is decoded afresh.
func TestEngineRemembersSettledPods(t *testing.T) {
	e, _, _ := newEngine(t)
	pod := finishedPod(t, "uid-1", "10")
	if e.IsUpdating(pod) {
		t.Fatal("IsUpdating(finished Pod) = true, want false")
	}
	if allocs := testing.AllocsPerRun(50, func() {
		if e.IsUpdating(pod) {
			t.Fatal("IsUpdating(finished Pod) = true on a second look")
		}
	}); allocs != 0 {
		t.Errorf("IsUpdating of a Pod seen settled at this resourceVersion made %.0f allocations, want 0 (no decoding)", allocs)
	}
	if allocs := testing.AllocsPerRun(50, func() {
		if res := e.Refresh(context.Background(), pod); res.Phase != PhaseIdle || res.Pod != nil || res.Err != nil {
			t.Fatalf("Refresh(finished Pod) = %+v, want Idle and no write", res)
		}
	}); allocs > 3 {
		t.Errorf("Refresh of a Pod seen settled made %.0f allocations, want at most 3 (no decoding)", allocs)
	}

	// The next version carries a new update's pending batch: the memo of
	// the old version does not answer for it.
	next := finishedPod(t, "uid-1", "11")
	next.Annotations[v1alpha1.InPlaceUpdateStateAnnotation] = `{"revision":"r3","pendingBatches":[["app"]],"pendingImages":{"app":"a:3"}}`
	if !e.IsUpdating(next) {
		t.Error("IsUpdating(new version with a pending batch) = false, want true")
	}
	// Pods without identity (never from an API server) are never remembered.
	anonymous := finishedPod(t, "", "")
	e.IsUpdating(anonymous)
	if e.settled.has(anonymous, epoch) {
		t.Error("a Pod without UID and resourceVersion was remembered")
	}
}

// The memo agrees with IsUpdating on every case of its table, on the first
// look and from memory.
func TestEngineIsUpdatingAgreesWithIsUpdating(t *testing.T) {
	e, _, _ := newEngine(t)
	pods := map[string]*corev1.Pod{
		"finished": finishedPod(t, "uid-1", "1"),
		"no records": func() *corev1.Pod {
			p := newPod(container("app", "a:1"))
			p.UID, p.ResourceVersion = "uid-2", "1"
			return p
		}(),
		"held by the engine": func() *corev1.Pod {
			p := finishedPod(t, "uid-3", "1")
			setCondition(p, corev1.ConditionFalse, ConditionReasonUpdating, updatingMessage("r2"), epoch)
			return p
		}(),
		"corrupt": func() *corev1.Pod {
			p := finishedPod(t, "uid-4", "1")
			p.Annotations[v1alpha1.InPlaceUpdateStateAnnotation] = "nope"
			return p
		}(),
		"grace": func() *corev1.Pod {
			p := finishedPod(t, "uid-5", "1")
			p.Annotations[v1alpha1.InPlaceUpdateGraceAnnotation] = `{"revision":"r2","images":{"app":"a:2"},"notBefore":"2026-03-01T12:00:00Z"}`
			return p
		}(),
	}
	for name, pod := range pods {
		want := IsUpdating(pod)
		for look := range 2 {
			if got := e.IsUpdating(pod); got != want {
				t.Errorf("%s, look %d: Engine.IsUpdating = %v, IsUpdating = %v", name, look, got, want)
			}
		}
	}
}

// A Pod the engine holds is decoded even when its records were seen
// settled: finishing its update needs them.
func TestRefreshOfAHeldSettledPodReadsItsRecords(t *testing.T) {
	pod := finishedPod(t, "uid-1", "1")
	setCondition(pod, corev1.ConditionFalse, ConditionReasonUpdating, updatingMessage("r2"), epoch)
	if plan := planRefresh(pod, epoch.Add(time.Minute), true); plan.phase != PhaseCompleted || plan.action != refreshSetReady {
		t.Errorf("planRefresh(held, settled) = phase %s action %v, want Completed and set ready", plan.phase, plan.action)
	}
}

// Entries asked about survive the generations, however many Pods there
// are; the rest, such as deleted Pods', go within two generations.
func TestSettledRecordsForgetsPodsNoLongerAskedAbout(t *testing.T) {
	var m settledRecords
	now := epoch
	pods := make([]*corev1.Pod, 20000)
	for i := range pods {
		pods[i] = finishedPod(t, types.UID(fmt.Sprintf("uid-%d", i)), "1")
	}
	gone := finishedPod(t, "uid-deleted", "1")
	m.add(gone, now)
	// Every Pod is asked about once a minute for half an hour: three
	// generations pass, and none of them is forgotten.
	for minute := range 30 {
		now = epoch.Add(time.Duration(minute) * time.Minute)
		for i, pod := range pods {
			if !m.has(pod, now) {
				if minute > 0 {
					t.Fatalf("minute %d: Pod %d, asked about every minute, was forgotten", minute, i)
				}
				m.add(pod, now)
			}
		}
	}
	if m.has(gone, now) {
		t.Error("a Pod not asked about for three generations is still remembered")
	}
	if total := len(m.current); total > len(pods) {
		t.Errorf("current generation holds %d entries for %d Pods", total, len(pods))
	}
}
