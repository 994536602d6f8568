package cloneset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/inplace"
)

// lcPod is a Pod in a lifecycle state, hooked or not by the test hooks'
// label, with InPlaceUpdateReady as given ("" leaves it out).
func lcPod(state string, isHooked bool, ready corev1.ConditionStatus, reason string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-a", Labels: map[string]string{
		stepwisev1.LifecycleStateLabel: state,
		RevisionLabel:                  "web-1",
	}}}
	if isHooked {
		pod.Labels["example.com/hook"] = "on"
	}
	if ready != "" {
		pod.Status.Conditions = []corev1.PodCondition{{Type: stepwisev1.InPlaceUpdateReady, Status: ready, Reason: reason}}
	}
	return pod
}

func TestDecideLifecycle(t *testing.T) {
	hook := &stepwisev1.LifecycleHook{LabelsHandler: map[string]string{"example.com/hook": "on"}, MarkPodNotReady: true}
	hooks := &stepwisev1.Lifecycle{PreDelete: hook, InPlaceUpdate: hook}
	const (
		yes, f          = corev1.ConditionTrue, corev1.ConditionFalse
		normal          = stepwisev1.LifecycleStateNormal
		preparingUpdate = stepwisev1.LifecycleStatePreparingUpdate
		updating        = stepwisev1.LifecycleStateUpdating
		updated         = stepwisev1.LifecycleStateUpdated
		preparingDelete = stepwisev1.LifecycleStatePreparingDelete
		hookReason      = stepwisev1.ReasonLifecycleHook
	)
	deleting := lcPod(preparingDelete, false, f, hookReason)
	deleting.DeletionTimestamp = &metav1.Time{}

	cases := []struct {
		name     string
		pod      *corev1.Pod
		lc       *stepwisev1.Lifecycle
		released bool
		want     lifecycleStep
	}{
		{name: "preparing_delete_waits_while_hooked", pod: lcPod(preparingDelete, true, f, hookReason), lc: hooks},
		{name: "preparing_delete_released_is_deleted", pod: lcPod(preparingDelete, false, f, hookReason), lc: hooks,
			want: lifecycleStep{delete: true}},
		{name: "a_terminating_pod_is_left_alone", pod: deleting, lc: hooks},
		{name: "preparing_update_waits_while_its_update_is_wanted", pod: lcPod(preparingUpdate, true, f, hookReason), lc: hooks},
		{name: "preparing_update_waits_for_its_update_once_released_by_the_hook", pod: lcPod(preparingUpdate, false, f, hookReason), lc: hooks},
		{name: "template_reverted_while_preparing_and_hooked_is_normal_and_serves",
			pod: lcPod(preparingUpdate, true, f, hookReason), lc: hooks, released: true,
			want: lifecycleStep{state: normal, serveReason: inplace.ConditionReasonNotUpdating}},
		{name: "template_reverted_after_the_hook_let_go_is_updated_and_serves",
			pod: lcPod(preparingUpdate, false, f, hookReason), lc: hooks, released: true,
			want: lifecycleStep{state: updated, serveReason: inplace.ConditionReasonNotUpdating}},
		{name: "released_without_mark_not_ready_only_changes_state",
			pod: lcPod(preparingUpdate, true, yes, inplace.ConditionReasonNotUpdating), lc: hooks, released: true,
			want: lifecycleStep{state: normal}},
		{name: "metadata_only_update_done_is_updated_and_serves",
			pod: lcPod(updating, false, f, hookReason), lc: hooks,
			want: lifecycleStep{state: updated, serveReason: inplace.ConditionReasonCompleted}},
		{name: "metadata_only_update_done_and_hooked_again_is_normal",
			pod: lcPod(updating, true, f, hookReason), lc: hooks,
			want: lifecycleStep{state: normal, serveReason: inplace.ConditionReasonCompleted}},
		{name: "image_update_in_flight_waits", pod: lcPod(updating, false, f, inplace.ConditionReasonUpdating), lc: hooks},
		{name: "image_update_completed_is_updated", pod: lcPod(updating, false, yes, inplace.ConditionReasonCompleted), lc: hooks,
			want: lifecycleStep{state: updated}},
		{name: "updated_waits_to_be_hooked_again", pod: lcPod(updated, false, yes, inplace.ConditionReasonCompleted), lc: hooks},
		{name: "updated_and_hooked_again_is_normal", pod: lcPod(updated, true, yes, inplace.ConditionReasonCompleted), lc: hooks,
			want: lifecycleStep{state: normal}},
		{name: "a_hook_naming_nothing_goes_straight_to_normal",
			pod:  lcPod(updating, false, yes, inplace.ConditionReasonCompleted),
			lc:   &stepwisev1.Lifecycle{InPlaceUpdate: &stepwisev1.LifecycleHook{MarkPodNotReady: true}},
			want: lifecycleStep{state: normal}},
		{name: "updated_without_an_in_place_hook_any_more_is_normal", pod: lcPod(updated, false, yes, inplace.ConditionReasonCompleted),
			want: lifecycleStep{state: normal}},
		{name: "normal_still_held_by_its_hook_serves_again", pod: lcPod(normal, true, f, hookReason), lc: hooks,
			want: lifecycleStep{serveReason: inplace.ConditionReasonNotUpdating}},
		{name: "normal_and_serving_does_nothing", pod: lcPod(normal, true, yes, inplace.ConditionReasonCompleted), lc: hooks},
		{name: "a_pod_out_of_service_for_an_update_is_not_the_hooks_to_lift", pod: lcPod(normal, true, f, inplace.ConditionReasonUpdating), lc: hooks},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideLifecycle(tc.pod, tc.lc, tc.released); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
