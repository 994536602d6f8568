package inplace

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestEngine_ResumeNeverPatchesTwice(t *testing.T) {
	oldT := template(container("app", "app:v1"), container("sidecar", "proxy:v1"))
	newT := template(container("app", "app:v2"), container("sidecar", "proxy:v2"))

	t.Run("update_again_with_same_spec_writes_nothing", func(t *testing.T) {
		e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))
		spec := specFor(t, "r2", oldT, newT)
		stale := f.get("web-0") // the controller's cache before the update
		update(t, e, f, spec, UpdateOptions{})
		res := e.Update(context.Background(), stale, spec, UpdateOptions{})
		if res.Err != nil || !res.InPlace || res.Pod != nil {
			t.Fatalf("second Update = %+v, want in place with nothing written", res)
		}
		expectWrites(t, f, 1, 1)
	})

	t.Run("update_again_mid_batches_keeps_progress", func(t *testing.T) {
		e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))
		spec := specFor(t, "r2", oldT, newT)
		opts := UpdateOptions{ContainerBatches: [][]string{{"sidecar"}, {"app"}}}
		update(t, e, f, spec, opts)
		f.kubeletRestart("web-0", true, newImageID)
		refresh(t, e, f) // patches app
		update(t, e, f, spec, opts)
		refresh(t, e, f)
		expectWrites(t, f, 1, 2)
		initial := newPod(oldT.Spec.Containers...)
		if f.imagePatches(initial, "app") != 1 || f.imagePatches(initial, "sidecar") != 1 {
			t.Fatalf("patches: app %d sidecar %d, want 1 each", f.imagePatches(initial, "app"), f.imagePatches(initial, "sidecar"))
		}
	})

	t.Run("crash_between_condition_and_spec_resumes_with_one_write", func(t *testing.T) {
		e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))
		spec := specFor(t, "r2", oldT, newT)
		f.failNextUpdate = errors.New("controller stopped")
		if res := e.Update(context.Background(), f.get("web-0"), spec, UpdateOptions{}); res.Err == nil || res.InPlace {
			t.Fatalf("Update = %+v, want the injected failure", res)
		}
		expectWrites(t, f, 1, 0)
		update(t, e, f, spec, UpdateOptions{})
		expectWrites(t, f, 1, 1) // the False condition of the first try is reused
	})

	t.Run("refresh_in_the_crash_window_lets_the_pod_serve", func(t *testing.T) {
		e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))
		spec := specFor(t, "r2", oldT, newT)
		f.failNextUpdate = errors.New("controller stopped")
		e.Update(context.Background(), f.get("web-0"), spec, UpdateOptions{})
		// No container was patched, so the Pod may serve until Update resumes.
		expectPhase(t, refresh(t, e, f), PhaseIdle)
		if c := conditionOf(t, f.get("web-0")); c.Status != corev1.ConditionTrue {
			t.Fatalf("condition = %+v, want True", c)
		}
		update(t, e, f, spec, UpdateOptions{})
		f.kubeletRestart("web-0", true, newImageID)
		expectPhase(t, refresh(t, e, f), PhaseCompleted)
	})

	t.Run("refresh_with_stale_pod_is_idempotent", func(t *testing.T) {
		e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))
		opts := UpdateOptions{ContainerBatches: [][]string{{"sidecar"}, {"app"}}}
		update(t, e, f, specFor(t, "r2", oldT, newT), opts)
		f.kubeletRestart("web-0", true, newImageID)
		cached := f.get("web-0")
		expectPhase(t, refreshWith(t, e, cached), PhaseUpdating) // patches app
		expectPhase(t, refreshWith(t, e, cached), PhaseUpdating) // conflict, re-read, nothing to do
		expectWrites(t, f, 1, 2)
	})
}

func TestEngine_ConflictIsRetriedFromFreshRead(t *testing.T) {
	oldT := template(container("app", "app:v1"))
	newT := template(container("app", "app:v2"))
	e, f, _ := newEngine(t, newPod(oldT.Spec.Containers...))
	f.raceNextWrite = true
	update(t, e, f, specFor(t, "r2", oldT, newT), UpdateOptions{})
	expectWrites(t, f, 1, 1)
	if got := imageOf(t, f.get("web-0"), "app"); got != "app:v2" {
		t.Fatalf("app image = %s, want app:v2", got)
	}
}

func TestEngine_CorruptState(t *testing.T) {
	oldT := template(container("app", "app:v1"), container("sidecar", "proxy:v1"))
	newT := template(container("app", "app:v2"), container("sidecar", "proxy:v2"))
	pod := newPod(oldT.Spec.Containers...)
	// Mid-update when the record was damaged: sidecar patched, app not.
	pod.Spec.Containers[1].Image = "proxy:v2"
	pod.Labels["controller-revision-hash"] = "r2"
	pod.Annotations = map[string]string{v1alpha1.InPlaceUpdateStateAnnotation: `{"revision":`}
	setCondition(pod, corev1.ConditionFalse, ConditionReasonUpdating, updatingMessage("r2"), epoch)
	e, f, _ := newEngine(t, pod)

	r := refresh(t, e, f)
	if !errors.Is(r.CorruptState, ErrCorruptState) {
		t.Fatalf("Refresh CorruptState = %v, want ErrCorruptState", r.CorruptState)
	}
	expectWrites(t, f, 0, 0)
	if !IsUpdating(f.get("web-0")) {
		t.Fatalf("a pod with a corrupt record must count as updating")
	}

	// The controller starts over from the template of the pod's revision.
	res := update(t, e, f, SpecForTemplate(newT, "r2"), UpdateOptions{})
	if !errors.Is(res.CorruptState, ErrCorruptState) {
		t.Fatalf("Update CorruptState = %v, want ErrCorruptState", res.CorruptState)
	}
	expectWrites(t, f, 0, 1) // already out of service for r2
	got := f.get("web-0")
	if imageOf(t, got, "app") != "app:v1" || imageOf(t, got, "sidecar") != "proxy:v2" {
		t.Fatalf("images after restart: app=%s sidecar=%s", imageOf(t, got, "app"), imageOf(t, got, "sidecar"))
	}
	// The sidecar was patched before the damage: it is awaited, not
	// patched again, and app waits until it runs its new image.
	expectPhase(t, refresh(t, e, f), PhaseUpdating)
	expectWrites(t, f, 0, 1)
	f.kubeletRestart("web-0", true, newImageID)
	expectPhase(t, refresh(t, e, f), PhaseUpdating)
	if got := imageOf(t, f.get("web-0"), "app"); got != "app:v2" {
		t.Fatalf("app image = %s, want app:v2", got)
	}
	f.kubeletRestart("web-0", true, newImageID)
	expectPhase(t, refresh(t, e, f), PhaseCompleted)
	expectWrites(t, f, 1, 2)
	if n := f.imagePatches(pod, "sidecar"); n != 0 {
		t.Fatalf("sidecar image patched %d times during recovery, want 0", n)
	}
	if n := f.imagePatches(pod, "app"); n != 1 {
		t.Fatalf("app image patched %d times, want 1", n)
	}
}

func TestEngine_SupersedingUpdates(t *testing.T) {
	t1 := template(container("app", "app:v1"), container("sidecar", "proxy:v1"))
	t2 := template(container("app", "app:v2"), container("sidecar", "proxy:v2"))
	opts := UpdateOptions{ContainerBatches: [][]string{{"sidecar"}, {"app"}}}

	t.Run("rollback_drops_the_pending_batch", func(t *testing.T) {
		e, f, _ := newEngine(t, newPod(t1.Spec.Containers...))
		update(t, e, f, specFor(t, "r2", t1, t2), opts) // sidecar patched, app pending
		update(t, e, f, specFor(t, "r1", t2, t1), opts)
		pod := f.get("web-0")
		if imageOf(t, pod, "sidecar") != "proxy:v1" || imageOf(t, pod, "app") != "app:v1" {
			t.Fatalf("after rollback: sidecar=%s app=%s", imageOf(t, pod, "sidecar"), imageOf(t, pod, "app"))
		}
		state, _ := ParseState(pod)
		if len(state.PendingBatches) != 0 {
			t.Fatalf("pending batches after rollback: %v", state.PendingBatches)
		}
		f.kubeletRestart("web-0", true, newImageID)
		expectPhase(t, refresh(t, e, f), PhaseCompleted)
		if got := imageOf(t, f.get("web-0"), "app"); got != "app:v1" {
			t.Fatalf("app image = %s, want app:v1", got)
		}
	})

	t.Run("metadata_change_keeps_the_pending_batch", func(t *testing.T) {
		e, f, _ := newEngine(t, newPod(t1.Spec.Containers...))
		update(t, e, f, specFor(t, "r2", t1, t2), opts)
		t3 := t2.DeepCopy()
		t3.Labels["tier"] = "front"
		update(t, e, f, specFor(t, "r3", t2, t3), opts)
		if got := imageOf(t, f.get("web-0"), "app"); got != "app:v1" {
			t.Fatalf("app patched while the sidecar restarts: %s", got)
		}
		f.kubeletRestart("web-0", true, newImageID)
		refresh(t, e, f) // patches app
		if got := imageOf(t, f.get("web-0"), "app"); got != "app:v2" {
			t.Fatalf("pending app image lost: %s", got)
		}
		f.kubeletRestart("web-0", true, newImageID)
		expectPhase(t, refresh(t, e, f), PhaseCompleted)
	})
}

func TestEngine_Errors(t *testing.T) {
	e, f, _ := newEngine(t, newPod(container("app", "app:v1")))
	if res := e.Update(context.Background(), f.get("web-0"), &UpdateSpec{}, UpdateOptions{}); res.Err == nil {
		t.Fatalf("Update without revision must fail")
	}
	spec := &UpdateSpec{Revision: "r2", ContainerImages: map[string]string{"missing": "x:1"}}
	res := e.Update(context.Background(), f.get("web-0"), spec, UpdateOptions{})
	var notInPlace *NotInPlaceError
	if !errors.As(res.Err, &notInPlace) {
		t.Fatalf("Update for a container the pod lacks = %v, want *NotInPlaceError", res.Err)
	}
	gone := f.get("web-0")
	gone.Name = "web-9"
	if res := e.Update(context.Background(), gone, &UpdateSpec{Revision: "r2"}, UpdateOptions{}); !apierrors.IsNotFound(res.Err) {
		t.Fatalf("Update of a deleted pod = %v, want NotFound", res.Err)
	}
	expectWrites(t, f, 0, 0)
}
