package inplace

import (
	"context"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// A CloneSet reconcile refreshes every one of its Pods, and most have
// nothing to refresh: for those Refresh reads the caller's Pod and copies
// nothing. (Copying each first made a third of what the CloneSet
// controller allocated in make bench-scale: this two-container Pod cost 10
// allocations before, 1 after.)
func TestRefreshOfAnIdlePodCopiesNothing(t *testing.T) {
	pod := newPod(container("app", "example.com/app:v1"), container("sidecar", "example.com/proxy:v1"))
	e, f, _ := newEngine(t, pod)
	before := pod.DeepCopy()
	allocs := testing.AllocsPerRun(100, func() {
		if res := e.Refresh(context.Background(), pod); res.Phase != PhaseIdle || res.Err != nil || res.Pod != nil {
			t.Fatalf("Refresh of an idle Pod = %+v, want Idle and no write", res)
		}
	})
	if len(f.writes) != 0 {
		t.Fatalf("Refresh of an idle Pod wrote %d times", len(f.writes))
	}
	if !apiequality.Semantic.DeepEqual(before, pod) {
		t.Fatal("Refresh modified the caller's Pod")
	}
	if allocs > 3 {
		t.Errorf("Refresh of an idle Pod made %.0f allocations, want at most 3 (no copy of the Pod)", allocs)
	}
	t.Logf("Refresh of an idle Pod: %.0f allocations", allocs)
}
