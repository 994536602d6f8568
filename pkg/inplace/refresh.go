package inplace

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
)

// Phase says where a Pod stands after Refresh.
type Phase string

const (
	// PhaseIdle: no in-place update in progress.
	PhaseIdle Phase = "Idle"
	// PhaseWaiting: the grace period runs; look again after Delay.
	PhaseWaiting Phase = "Waiting"
	// PhaseUpdating: containers are restarting, or this call patched the
	// next batch. The Pod's own status changes trigger the next look.
	PhaseUpdating Phase = "Updating"
	// PhaseCompleted: this call finished the update and set
	// InPlaceUpdateReady=True. Emit SuccessfulUpdatePodInPlace.
	PhaseCompleted Phase = "Completed"
)

// RefreshResult is the outcome of Refresh.
type RefreshResult struct {
	Phase Phase
	// Delay is when to look at the Pod again; zero means its events will do.
	Delay time.Duration
	// Pod is the Pod as last written, for resourceVersion expectations; nil
	// when nothing was written.
	Pod *corev1.Pod
	// CorruptState is non-nil (wrapping ErrCorruptState) when the Pod's
	// records are unreadable. Refresh then writes nothing; treat the Pod as
	// needing a fresh Update (see SpecForTemplate) and emit an Event.
	CorruptState error
	Err          error
}

// Refresh advances the in-place update of pod by at most one write:
//
//   - grace period over: patch the waiting images and drop the grace record;
//   - every patched container runs its new image and is ready: patch the
//     next batch, or, when none is left, set InPlaceUpdateReady=True;
//   - a new Pod without the condition: set it True.
//
// It decides from pod as given (usually the cache). An image patch carries
// the resourceVersion, so one decided from a stale copy is refused and
// decided again from a fresh read; the condition is merged by type with no
// precondition, because the caller's expectations already keep it from
// acting on a copy older than its own writes, and a kubelet's status
// writes must not refuse it. Calling it twice is harmless.
// The caller's pod is never modified.
func (e *Engine) Refresh(ctx context.Context, pod *corev1.Pod) RefreshResult {
	// The caller's Pod is read, and copied only by the branches that
	// write. Most Pods of a round have nothing to refresh, and a reconcile
	// refreshes every Pod of its CloneSet: copying each first made a third
	// of what the CloneSet controller allocated (make bench-scale, heap
	// profile).
	current := pod
	stale := false
	var res RefreshResult
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if stale {
			fresh, err := e.client.GetFresh(ctx, pod.Namespace, pod.Name)
			if err != nil {
				return fmt.Errorf("get pod: %w", err)
			}
			current = fresh
		}
		stale = true
		now := e.clock.Now()
		plan := planRefresh(current, now, e.settled.has(current, now))
		if plan.settled {
			e.settled.add(current, now)
		}
		res = RefreshResult{Phase: plan.phase, Delay: plan.delay, CorruptState: plan.corrupt, Pod: res.Pod}

		switch plan.action {
		case refreshNothing:
			return nil
		case refreshSetReady, refreshSetNotReady:
			current = current.DeepCopy()
			var conditions []corev1.PodCondition
			if plan.action == refreshSetNotReady {
				conditions = takeOutOfService(current, plan.reason, plan.message, now)
			} else {
				setCondition(current, corev1.ConditionTrue, plan.reason, plan.message, now)
				conditions = []corev1.PodCondition{*getCondition(current)}
			}
			if err := e.client.PatchConditions(ctx, current, conditions, nil); err != nil {
				return err
			}
		case refreshPatch:
			original := current
			current = current.DeepCopy()
			setImages(current, plan.patch)
			if err := writeRecords(current, plan.state, nil); err != nil {
				return err
			}
			// Decided from the (possibly stale) cached copy: locked.
			if err := e.client.Patch(ctx, original, current, true); err != nil {
				return err
			}
		}
		res.Pod = current
		return nil
	})
	if err != nil {
		res.Err = fmt.Errorf("refresh in-place update of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return res
}
