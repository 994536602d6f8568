package compare

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// InPlaceUpdateReady is the readiness gate Stepwise and OpenKruise both
// set on the Pods they update in place.
const InPlaceUpdateReady corev1.PodConditionType = "InPlaceUpdateReady"

// PodStateOf is what a benchmark follows of a Pod on its way to image: in
// the named containers, or in all of them when none is named.
func PodStateOf(pod *corev1.Pod, image string, containers ...string) PodState {
	followed := func(name string) bool { return len(containers) == 0 || slices.Contains(containers, name) }
	s := PodState{Deleting: pod.DeletionTimestamp != nil, Bound: pod.Spec.NodeName != ""}
	for _, c := range pod.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue:
			s.Ready = !s.Deleting
		case c.Type == InPlaceUpdateReady && c.Status == corev1.ConditionFalse:
			s.GateFalse = true
		case c.Type == InPlaceUpdateReady && c.Status == corev1.ConditionTrue:
			s.GateTrue = true
		}
	}
	s.SpecNewImage = len(pod.Spec.Containers) > 0
	for _, c := range pod.Spec.Containers {
		if followed(c.Name) && c.Image != image {
			s.SpecNewImage = false
		}
	}
	s.NewImage = len(pod.Status.ContainerStatuses) > 0
	for _, c := range pod.Status.ContainerStatuses {
		if followed(c.Name) && (c.Image != image || c.State.Running == nil) {
			s.NewImage = false
		}
	}
	if s.Deleting {
		s.NewImage = false
	}
	return s
}
