package cloneset

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/inplace"
)

// hooked reports whether another controller still holds the Pod: every
// label of the hook's labelsHandler and every finalizer of its
// finalizersHandler is present (OpenKruise semantics). Removing any of them
// releases the Pod.
func hooked(pod *corev1.Pod, hook *stepwisev1.LifecycleHook) bool {
	if hook == nil || (len(hook.LabelsHandler) == 0 && len(hook.FinalizersHandler) == 0) {
		return false
	}
	for k, v := range hook.LabelsHandler {
		if pod.Labels[k] != v {
			return false
		}
	}
	for _, f := range hook.FinalizersHandler {
		found := false
		for _, have := range pod.Finalizers {
			found = found || have == f
		}
		if !found {
			return false
		}
	}
	return true
}

func lifecycleState(pod *corev1.Pod) string {
	return pod.Labels[stepwisev1.LifecycleStateLabel]
}

func preDeleteHook(cs *stepwisev1.CloneSet) *stepwisev1.LifecycleHook {
	if cs.Spec.Lifecycle == nil {
		return nil
	}
	return cs.Spec.Lifecycle.PreDelete
}

func inPlaceUpdateHook(cs *stepwisev1.CloneSet) *stepwisev1.LifecycleHook {
	if cs.Spec.Lifecycle == nil {
		return nil
	}
	return cs.Spec.Lifecycle.InPlaceUpdate
}

// heldByHook reports whether a hook's markPodNotReady took the Pod out of
// service: InPlaceUpdateReady is False with the hook's reason.
func heldByHook(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == stepwisev1.InPlaceUpdateReady {
			return c.Status == corev1.ConditionFalse && c.Reason == stepwisev1.ReasonLifecycleHook
		}
	}
	return false
}

// lifecycleStep is what one round does about one Pod's lifecycle.
type lifecycleStep struct {
	// delete: the preDelete hook released a Pod in PreparingDelete.
	delete bool
	// state is the lifecycle state to write; empty keeps the Pod's.
	state string
	// serveReason, when not empty, is the reason of the
	// InPlaceUpdateReady=True that ends a markPodNotReady hold: the Pod left
	// the Preparing state, and nothing else would put it back in service.
	serveReason string
}

// decideLifecycle is the lifecycle of one Pod as a pure decision, from the
// Pod, the CloneSet's hooks, and whether the plan released it (a Pod held in
// PreparingUpdate that no update wants any more, plan.Plan.Release):
//
//   - PreparingDelete, no longer hooked: delete it.
//   - PreparingUpdate, released: its update is called off (the template went
//     back to its revision, or the partition keeps it), so it goes where a
//     finished update would.
//   - Updating, and the in-place engine has nothing left in flight: the
//     update is over. That includes a metadata-only update, which the engine
//     applies in one write and never reports as completed.
//   - Updated, hooked again by the hook's controller: Normal.
//
// Whatever the state, a Pod that ends outside the Preparing states while
// still out of service for its hook (markPodNotReady) is put back: that
// hold belongs to the Preparing state, and the engine never lifts it.
func decideLifecycle(pod *corev1.Pod, lc *stepwisev1.Lifecycle, released bool) lifecycleStep {
	var step lifecycleStep
	if pod.DeletionTimestamp != nil {
		return step
	}
	var preDelete, inPlaceUpdate *stepwisev1.LifecycleHook
	if lc != nil {
		preDelete, inPlaceUpdate = lc.PreDelete, lc.InPlaceUpdate
	}
	state := lifecycleState(pod)
	switch state {
	case stepwisev1.LifecycleStatePreparingDelete:
		step.delete = !hooked(pod, preDelete)
		return step
	case stepwisev1.LifecycleStatePreparingUpdate:
		if released {
			step.state = afterUpdate(pod, inPlaceUpdate)
		}
	case stepwisev1.LifecycleStateUpdating:
		if !inplace.IsUpdating(pod) {
			step.state = afterUpdate(pod, inPlaceUpdate)
		}
	case stepwisev1.LifecycleStateUpdated:
		if afterUpdate(pod, inPlaceUpdate) == stepwisev1.LifecycleStateNormal {
			step.state = stepwisev1.LifecycleStateNormal
		}
	}
	next := state
	if step.state != "" {
		next = step.state
	}
	if heldByHook(pod) && next != stepwisev1.LifecycleStatePreparingUpdate && next != stepwisev1.LifecycleStatePreparingDelete {
		step.serveReason = inplace.ConditionReasonNotUpdating
		if state == stepwisev1.LifecycleStateUpdating {
			step.serveReason = inplace.ConditionReasonCompleted
		}
	}
	return step
}

// afterUpdate is where a Pod goes once its update is over (or called off),
// as in Kruise: Updated while its hook's controller has not hooked it again,
// so that controller sees the update is done; Normal once it has, or when
// the hook names nothing to wait for.
func afterUpdate(pod *corev1.Pod, hook *stepwisev1.LifecycleHook) string {
	if hook == nil || (len(hook.LabelsHandler) == 0 && len(hook.FinalizersHandler) == 0) || hooked(pod, hook) {
		return stepwisev1.LifecycleStateNormal
	}
	return stepwisev1.LifecycleStateUpdated
}

// holdForHook moves a hooked Pod into a Preparing state instead of acting on
// it: the label tells the hook's controller to do its work, and with
// markPodNotReady the Pod leaves Service endpoints first.
func (r *Reconciler) holdForHook(ctx context.Context, round *syncRound, key types.NamespacedName, pod *corev1.Pod, hook *stepwisev1.LifecycleHook, state string) error {
	if lifecycleState(pod) == state {
		return nil
	}
	written, err := r.setLifecycleState(ctx, key, pod, state)
	if err != nil {
		return err
	}
	if hook.MarkPodNotReady {
		if err := r.patchHookReadiness(ctx, written, corev1.ConditionFalse, stepwisev1.ReasonLifecycleHook,
			"held by the CloneSet's lifecycle hook ("+state+")", round.now); err != nil {
			return err
		}
	}
	r.expectWritten(key, written)
	round.tell(corev1.EventTypeNormal, stepwisev1.EventLifecycleHook, fmt.Sprintf("pod %s is %s: waiting for its lifecycle hook to be released", pod.Name, state))
	return nil
}

// patchHookReadiness writes InPlaceUpdateReady with one status patch and
// updates pod to the Pod as written. Pod conditions merge by type under a
// strategic merge patch, so no other condition is touched.
func (r *Reconciler) patchHookReadiness(ctx context.Context, pod *corev1.Pod, status corev1.ConditionStatus, reason, message string, now time.Time) error {
	condition := map[string]any{
		"type": stepwisev1.InPlaceUpdateReady, "status": status, "reason": reason,
		"message": message, "lastTransitionTime": metav1.NewTime(now),
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{condition}}})
	if err != nil {
		return fmt.Errorf("encoding readiness patch: %w", err)
	}
	if err := r.Client.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("setting pod %s %s=%s for its lifecycle hook: %w", pod.Name, stepwisev1.InPlaceUpdateReady, status, err)
	}
	return nil
}

// setLifecycleState records a lifecycle state with one label patch and
// returns the Pod as written.
func (r *Reconciler) setLifecycleState(ctx context.Context, key types.NamespacedName, pod *corev1.Pod, state string) (*corev1.Pod, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": map[string]string{stepwisev1.LifecycleStateLabel: state},
	}})
	if err != nil {
		return nil, fmt.Errorf("encoding lifecycle patch: %w", err)
	}
	written := pod.DeepCopy()
	if err := r.Client.Patch(ctx, written, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("setting pod %s lifecycle state %s: %w", pod.Name, state, err)
	}
	r.expectWritten(key, written)
	return written, nil
}

// syncLifecycle applies decideLifecycle to every Pod, after the plan (whose
// Release it needs) and before the plan's actions. The state label is
// written before the readiness: should the second write fail, the next
// round still sees a Pod outside the Preparing states held by its hook, and
// lifts the hold then.
func (r *Reconciler) syncLifecycle(ctx context.Context, round *syncRound, key types.NamespacedName, released []string) error {
	isReleased := make(map[string]bool, len(released))
	for _, name := range released {
		isReleased[name] = true
	}
	for _, pod := range round.pods {
		step := decideLifecycle(pod, round.cs.Spec.Lifecycle, isReleased[pod.Name])
		if step.delete {
			if err := r.deletePod(ctx, round, key, pod, stepwisev1.EventSuccessfulDelete, "its preDelete hook was released"); err != nil {
				return err
			}
			continue
		}
		latest := pod
		if step.state != "" {
			written, err := r.setLifecycleState(ctx, key, pod, step.state)
			if err != nil {
				return err
			}
			latest = written
		}
		if step.serveReason != "" {
			if latest == pod {
				// The patch's answer is decoded into latest: never into
				// the cache's Pod (see ownedPods).
				latest = pod.DeepCopy()
			}
			if err := r.patchHookReadiness(ctx, latest, corev1.ConditionTrue, step.serveReason,
				"lifecycle state "+lifecycleState(latest)+": back in service", round.now); err != nil {
				return err
			}
			r.expectWritten(key, latest)
		}
		if isReleased[pod.Name] && step.state != "" {
			round.tell(corev1.EventTypeNormal, stepwisev1.EventLifecycleHook,
				fmt.Sprintf("pod %s is %s: no update wants it any more (the template went back to its revision, or the partition keeps it)", pod.Name, step.state))
		}
	}
	return nil
}
