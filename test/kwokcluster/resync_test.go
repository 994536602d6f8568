package kwokcluster

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestRestartWait(t *testing.T) {
	for raw, want := range map[string]time.Duration{
		"":       2 * time.Second, // unparseable: the 1s default
		"1s":     2 * time.Second,
		"2s":     3 * time.Second,
		"1500ms": 3 * time.Second,
		"0.2s":   2 * time.Second,
		"1m":     61 * time.Second,
		"3":      4 * time.Second,
		"0":      0,
		"0s":     0,
		"-1s":    2 * time.Second,
		"soon":   2 * time.Second,
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationRestartDelay: raw}}}
		if got := RestartWait(pod); got != want {
			t.Errorf("RestartWait(%q) = %v, want %v", raw, got, want)
		}
	}
	if got := RestartWait(&corev1.Pod{}); got != 2*time.Second {
		t.Errorf("RestartWait without annotation = %v, want 2s", got)
	}
}

// settled is a running, ready Pod as the Stages leave it.
func settled() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2},
		Spec: corev1.PodSpec{
			NodeName:       "node-000000",
			Containers:     []corev1.Container{{Name: "app", Image: "nginx:2"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "InPlaceUpdateReady"}},
		},
		Status: corev1.PodStatus{
			Phase:              corev1.PodRunning,
			ObservedGeneration: 2,
			Conditions: []corev1.PodCondition{
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: "InPlaceUpdateReady", Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Image: "nginx:2", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}},
		},
	}
}

func TestStuck(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	finished := metav1.NewTime(now.Add(-time.Second))
	cases := []struct {
		name      string
		mutate    func(p *corev1.Pod)
		reason    string
		notBefore time.Time
	}{
		{name: "settled", mutate: func(*corev1.Pod) {}},
		{name: "unbound", reason: "", mutate: func(p *corev1.Pod) { p.Spec.NodeName = ""; p.Status = corev1.PodStatus{} }},
		{name: "bound but pending", reason: "pending", mutate: func(p *corev1.Pod) { p.Status = corev1.PodStatus{Phase: corev1.PodPending} }},
		{name: "image changed", reason: "image changed", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:3" }},
		{name: "terminated", reason: "restart due", notBefore: finished.Add(2 * time.Second), mutate: func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: finished}}
			p.Status.ContainerStatuses[0].Ready = false
		}},
		{name: "gate false but ready", reason: "readiness", mutate: func(p *corev1.Pod) { p.Status.Conditions[2].Status = corev1.ConditionFalse }},
		{name: "gate missing but ready", reason: "readiness", mutate: func(p *corev1.Pod) { p.Status.Conditions = p.Status.Conditions[:2] }},
		{name: "gate false, not ready", reason: "", mutate: func(p *corev1.Pod) {
			p.Status.Conditions[2].Status = corev1.ConditionFalse
			p.Status.Conditions[1].Status = corev1.ConditionFalse
		}},
		{name: "stalled by annotation, still ready", reason: "readiness", mutate: func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationReady: "false"}
		}},
		{name: "stalled by annotation", reason: "", mutate: func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationReady: "false"}
			p.Status.ContainerStatuses[0].Ready = false
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			p.Status.Conditions[1].Status = corev1.ConditionFalse
		}},
		{name: "generation behind", reason: "observedGeneration", mutate: func(p *corev1.Pod) { p.Generation = 3 }},
		{name: "deleting", reason: "deleting", mutate: func(p *corev1.Pod) { p.DeletionTimestamp = &finished }},
		{name: "deleting with finalizer", reason: "", mutate: func(p *corev1.Pod) {
			p.DeletionTimestamp = &finished
			p.Finalizers = []string{"example.com/hold"}
		}},
		{name: "succeeded", reason: "", mutate: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := settled()
			tc.mutate(pod)
			reason, notBefore := stuck(pod)
			if reason != tc.reason {
				t.Fatalf("reason = %q, want %q", reason, tc.reason)
			}
			if !notBefore.Equal(tc.notBefore) {
				t.Errorf("notBefore = %v, want %v", notBefore, tc.notBefore)
			}
		})
	}
}

func TestSweepTouchesOnlyPodsStuckLongEnough(t *testing.T) {
	stuckPod := settled()
	stuckPod.Name, stuckPod.Namespace, stuckPod.UID, stuckPod.ResourceVersion = "stuck", "ns", "u1", "10"
	stuckPod.Spec.Containers[0].Image = "nginx:3" // kwok never terminated it
	fine := settled()
	fine.Name, fine.Namespace, fine.UID, fine.ResourceVersion = "fine", "ns", "u2", "11"

	cs := fake.NewClientset(stuckPod, fine)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range []*corev1.Pod{stuckPod, fine} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cluster{clientset: cs, opts: Options{ResyncAfter: 3 * time.Second}}
	r := &resyncer{cluster: c, lister: corelisters.NewPodLister(indexer), seen: map[types.UID]stuckSince{}}

	annotation := func(name string) string {
		p, err := cs.CoreV1().Pods("ns").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Annotations[AnnotationResync]
	}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r.sweep(t.Context(), t0)
	r.sweep(t.Context(), t0.Add(2*time.Second))
	if got := annotation("stuck"); got != "" || c.Resyncs() != 0 {
		t.Fatalf("touched after 2s (annotation %q, %d resyncs); want to wait 3s", got, c.Resyncs())
	}

	// Progress (a new resourceVersion) restarts the clock.
	moved := stuckPod.DeepCopy()
	moved.ResourceVersion = "12"
	if err := indexer.Update(moved); err != nil {
		t.Fatal(err)
	}
	r.sweep(t.Context(), t0.Add(4*time.Second))
	if c.Resyncs() != 0 {
		t.Fatalf("touched a pod that just changed")
	}
	r.sweep(t.Context(), t0.Add(7*time.Second))
	if got := annotation("stuck"); got != t0.Add(7*time.Second).Format(time.RFC3339Nano) || c.Resyncs() != 1 {
		t.Fatalf("stuck pod: annotation %q, %d resyncs; want one touch at 7s", got, c.Resyncs())
	}
	if got := annotation("fine"); got != "" {
		t.Fatalf("settled pod touched: %q", got)
	}
}

func TestSweepWaitsForTheRestartDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := settled()
	pod.Name, pod.Namespace, pod.UID, pod.ResourceVersion = "p", "ns", "u1", "10"
	pod.Annotations = map[string]string{AnnotationRestartDelay: "5s"} // restart due at t0+6s
	pod.Status.ContainerStatuses[0].Ready = false
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(t0)},
	}

	cs := fake.NewClientset(pod)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{clientset: cs, opts: Options{ResyncAfter: 3 * time.Second}}
	r := &resyncer{cluster: c, lister: corelisters.NewPodLister(indexer), seen: map[types.UID]stuckSince{}}
	for _, sec := range []int{0, 3, 6, 8} {
		r.sweep(t.Context(), t0.Add(time.Duration(sec)*time.Second))
		if c.Resyncs() != 0 {
			t.Fatalf("touched at %ds, before the deadline (6s) plus ResyncAfter (3s)", sec)
		}
	}
	r.sweep(t.Context(), t0.Add(9*time.Second))
	if c.Resyncs() != 1 {
		t.Fatalf("not touched at 9s")
	}
}
