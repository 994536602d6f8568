package inplace

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Reasons the engine writes on the InPlaceUpdateReady condition.
//
// The engine owns a False condition only when its reason is
// ConditionReasonUpdating: Refresh turns such a condition back to True once
// the update is done, and leaves any other False alone. A lifecycle hook that
// holds a Pod out of service must therefore use another reason.
const (
	// ConditionReasonUpdating: the Pod is out of service for an in-place update.
	ConditionReasonUpdating = "InPlaceUpdating"
	// ConditionReasonCompleted: the in-place update finished.
	ConditionReasonCompleted = "InPlaceUpdateCompleted"
	// ConditionReasonNotUpdating: no in-place update is in progress (new Pod,
	// or an update that stopped before changing anything).
	ConditionReasonNotUpdating = "NotUpdating"
)

const podConditionType = corev1.PodConditionType(v1alpha1.InPlaceUpdateReady)

// updatingMessage names the revision in the False condition, which both
// tells a human what the Pod waits for and lets Update recognise its own
// earlier write when it resumes.
func updatingMessage(revision string) string {
	return fmt.Sprintf("in-place update to revision %s", revision)
}

// getCondition returns the Pod's InPlaceUpdateReady condition, or nil.
func getCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == podConditionType {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// setCondition sets InPlaceUpdateReady. The transition time moves only when
// the status does, so it keeps saying since when the Pod is out of service.
func setCondition(pod *corev1.Pod, status corev1.ConditionStatus, reason, message string, now time.Time) {
	c := getCondition(pod)
	if c == nil {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: podConditionType})
		c = &pod.Status.Conditions[len(pod.Status.Conditions)-1]
	}
	if c.Status != status {
		c.LastTransitionTime = metav1.NewTime(now)
	}
	c.Status, c.Reason, c.Message = status, reason, message
}

// ReasonReadinessGateFalse is the reason of the Ready=False the engine
// writes ahead of the kubelet (see takeOutOfService); it is the reason the
// kubelet itself gives once it catches up.
const ReasonReadinessGateFalse = "ReadinessGatesNotReady"

// takeOutOfService sets InPlaceUpdateReady=False on pod (in memory) and
// returns the conditions to write in one pods/status write. When the Pod
// carries the readiness gate and is Ready, Ready=False goes in the same
// write: the kubelet would compute exactly that from the gate, but only
// after its own watch and status sync (~40 ms on a real node, longer on a
// busy one), and until then the EndpointSlice controller keeps the Pod a
// ready endpoint, even of the Service that selects the revision label
// moved in this very write: a canary Service would send requests to a Pod
// still running the old image, or a stable one to a container about to
// restart. The engine never writes Ready=True: only the kubelet knows the
// containers are ready again.
func takeOutOfService(pod *corev1.Pod, reason, message string, now time.Time) []corev1.PodCondition {
	setCondition(pod, corev1.ConditionFalse, reason, message, now)
	out := []corev1.PodCondition{*getCondition(pod)}
	if !hasReadinessGate(pod) {
		return out
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != corev1.PodReady || c.Status != corev1.ConditionTrue {
			continue
		}
		c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, ReasonReadinessGateFalse, metav1.NewTime(now)
		c.Message = fmt.Sprintf("readiness gate %s is False (%s)", v1alpha1.InPlaceUpdateReady, message)
		out = append(out, *c)
	}
	return out
}

func hasReadinessGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == podConditionType {
			return true
		}
	}
	return false
}

func conditionIsFalse(pod *corev1.Pod) bool {
	c := getCondition(pod)
	return c != nil && c.Status == corev1.ConditionFalse
}

// heldByEngine reports whether the engine took the Pod out of service.
func heldByEngine(pod *corev1.Pod) bool {
	c := getCondition(pod)
	return c != nil && c.Status == corev1.ConditionFalse && c.Reason == ConditionReasonUpdating
}

// heldFor reports whether the engine took the Pod out of service for this
// revision, so Update need not write the condition again.
func heldFor(pod *corev1.Pod, revision string) bool {
	return heldByEngine(pod) && getCondition(pod).Message == updatingMessage(revision)
}

// outOfServiceSince is when the Pod left service, for counting the grace
// period. A condition already False counts from its transition time plus one
// second, because the stored time is truncated to the second.
func outOfServiceSince(pod *corev1.Pod, now time.Time) time.Time {
	c := getCondition(pod)
	if c == nil || c.Status != corev1.ConditionFalse || c.LastTransitionTime.IsZero() {
		return now
	}
	since := c.LastTransitionTime.Add(time.Second)
	if since.After(now) {
		return now
	}
	return since
}

// IsUpdating reports whether an in-place update of the Pod is in progress
// (or its record is unreadable): the Pod is waiting for a grace period, has
// batches to patch, or is held out of service by the engine. The controller
// counts such Pods as unavailable. Update may still retarget one (a newer
// revision, or a rollback): the update in progress is merged, not dropped.
func IsUpdating(pod *corev1.Pod) bool {
	if heldByEngine(pod) {
		return true
	}
	return !recordsSettled(readRecords(pod))
}

// Ready reports whether the Pod serves traffic as far as a CloneSet is
// concerned: Running, Ready, and InPlaceUpdateReady True.
func Ready(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	ready := false
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	c := getCondition(pod)
	return ready && c != nil && c.Status == corev1.ConditionTrue
}

// EnsureReadinessGate adds the InPlaceUpdateReady readiness gate to a Pod
// spec that lacks it. Without the gate a False condition does not take the
// Pod out of Service endpoints, so every Pod meant for in-place updates must
// be created with it.
func EnsureReadinessGate(spec *corev1.PodSpec) {
	for _, g := range spec.ReadinessGates {
		if g.ConditionType == podConditionType {
			return
		}
	}
	spec.ReadinessGates = append(spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: podConditionType})
}
