package cloneset

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// ReasonLifecycleHook is the InPlaceUpdateReady reason while a hook holds a
// Pod out of service (markPodNotReady). The in-place engine only turns its
// own reason back to True, so a hook's hold is never undone by a refresh.
const ReasonLifecycleHook = "LifecycleHook"

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
		condition := map[string]any{
			"type": stepwisev1.InPlaceUpdateReady, "status": corev1.ConditionFalse, "reason": ReasonLifecycleHook,
			"message": "held by the CloneSet's lifecycle hook (" + state + ")", "lastTransitionTime": metav1.NewTime(round.now),
		}
		statusPatch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{condition}}})
		if err != nil {
			return fmt.Errorf("encoding readiness patch: %w", err)
		}
		// Pod conditions merge by type under a strategic merge patch.
		if err := r.Client.Status().Patch(ctx, written, client.RawPatch(types.StrategicMergePatchType, statusPatch)); err != nil {
			return fmt.Errorf("marking pod %s not ready for its hook: %w", pod.Name, err)
		}
	}
	r.expectWritten(key, written)
	r.event(round.cs, corev1.EventTypeNormal, "LifecycleHook", fmt.Sprintf("pod %s is %s: waiting for its lifecycle hook to be released", pod.Name, state))
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

// syncLifecycle finishes what hooks held back, before the plan is made:
// Pods whose preDelete hook was released are deleted; Pods that completed
// an update and were hooked again return to Normal.
func (r *Reconciler) syncLifecycle(ctx context.Context, round *syncRound, key types.NamespacedName) error {
	cs := round.cs
	for _, pod := range round.pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		switch lifecycleState(pod) {
		case stepwisev1.LifecycleStatePreparingDelete:
			if !hooked(pod, preDeleteHook(cs)) {
				if err := r.deletePod(ctx, round, key, pod, stepwisev1.EventSuccessfulDelete, "its preDelete hook was released"); err != nil {
					return err
				}
			}
		case stepwisev1.LifecycleStateUpdated:
			if hooked(pod, inPlaceUpdateHook(cs)) {
				if _, err := r.setLifecycleState(ctx, key, pod, stepwisev1.LifecycleStateNormal); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
