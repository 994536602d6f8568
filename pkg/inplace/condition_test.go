package inplace

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestIsUpdatingAndReady(t *testing.T) {
	tests := []struct {
		name         string
		mutate       func(*corev1.Pod)
		wantUpdating bool
		wantReady    bool
	}{
		{name: "serving", mutate: func(*corev1.Pod) {}, wantReady: true},
		{
			name: "held_by_engine",
			mutate: func(p *corev1.Pod) {
				setCondition(p, corev1.ConditionFalse, ConditionReasonUpdating, updatingMessage("r2"), epoch)
			},
			wantUpdating: true,
		},
		{
			name: "held_by_a_hook_is_not_updating_but_not_ready",
			mutate: func(p *corev1.Pod) {
				setCondition(p, corev1.ConditionFalse, "PreparingUpdate", "", epoch)
			},
		},
		{
			name: "grace_pending",
			mutate: func(p *corev1.Pod) {
				p.Annotations = map[string]string{
					v1alpha1.InPlaceUpdateStateAnnotation: `{"revision":"r2"}`,
					v1alpha1.InPlaceUpdateGraceAnnotation: `{"revision":"r2","images":{"app":"a:2"},"notBefore":"2026-03-01T12:00:00Z"}`,
				}
			},
			wantUpdating: true, wantReady: true,
		},
		{
			name: "corrupt_state",
			mutate: func(p *corev1.Pod) {
				p.Annotations = map[string]string{v1alpha1.InPlaceUpdateStateAnnotation: `nope`}
			},
			wantUpdating: true, wantReady: true,
		},
		{
			name:   "no_condition_yet",
			mutate: func(p *corev1.Pod) { p.Status.Conditions = p.Status.Conditions[:1] },
		},
		{
			name:   "not_running",
			mutate: func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending },
		},
		{
			name:   "pod_not_ready",
			mutate: func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod(container("app", "a:1"))
			tc.mutate(pod)
			if got := IsUpdating(pod); got != tc.wantUpdating {
				t.Errorf("IsUpdating = %v, want %v", got, tc.wantUpdating)
			}
			if got := Ready(pod); got != tc.wantReady {
				t.Errorf("Ready = %v, want %v", got, tc.wantReady)
			}
		})
	}
}

func TestSetConditionKeepsTransitionTime(t *testing.T) {
	pod := newPod(container("app", "a:1"))
	setCondition(pod, corev1.ConditionFalse, "PreparingUpdate", "", epoch)
	setCondition(pod, corev1.ConditionFalse, ConditionReasonUpdating, updatingMessage("r2"), epoch.Add(time.Minute))
	c := getCondition(pod)
	if !c.LastTransitionTime.Time.Equal(epoch) || c.Reason != ConditionReasonUpdating {
		t.Fatalf("condition = %+v, want the first transition time and the new reason", c)
	}
	if !heldFor(pod, "r2") || heldFor(pod, "r3") {
		t.Fatal("heldFor must match the revision in the message")
	}
	if got := outOfServiceSince(pod, epoch.Add(time.Minute)); !got.Equal(epoch.Add(time.Second)) {
		t.Fatalf("outOfServiceSince = %v, want transition time + 1s", got)
	}
}

func TestEnsureReadinessGate(t *testing.T) {
	spec := &corev1.PodSpec{}
	EnsureReadinessGate(spec)
	EnsureReadinessGate(spec)
	if len(spec.ReadinessGates) != 1 || spec.ReadinessGates[0].ConditionType != podConditionType {
		t.Fatalf("readiness gates = %v", spec.ReadinessGates)
	}
}

// takeOutOfService writes Ready=False with the gate only where the kubelet
// would compute the same from the gate: a gated Pod that is Ready now.
func TestTakeOutOfService(t *testing.T) {
	earlier := epoch.Add(-time.Hour)
	tests := []struct {
		name       string
		mutate     func(*corev1.Pod)
		wantTypes  []corev1.PodConditionType
		wantReady  corev1.ConditionStatus
		readySince time.Time
	}{
		{name: "gated_and_ready", mutate: func(*corev1.Pod) {},
			wantTypes: []corev1.PodConditionType{podConditionType, corev1.PodReady}, wantReady: corev1.ConditionFalse, readySince: epoch},
		{name: "no_gate_the_kubelet_would_say_ready", mutate: func(p *corev1.Pod) { p.Spec.ReadinessGates = nil },
			wantTypes: []corev1.PodConditionType{podConditionType}, wantReady: corev1.ConditionTrue, readySince: earlier},
		{name: "already_not_ready_keeps_its_transition_time", mutate: func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
			wantTypes: []corev1.PodConditionType{podConditionType}, wantReady: corev1.ConditionFalse, readySince: earlier},
		{name: "no_ready_condition_yet", mutate: func(p *corev1.Pod) { p.Status.Conditions = p.Status.Conditions[1:] },
			wantTypes: []corev1.PodConditionType{podConditionType}, wantReady: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod(container("app", "a:1"))
			pod.Status.Conditions[0].LastTransitionTime = metav1.NewTime(earlier)
			tt.mutate(pod)
			got := takeOutOfService(pod, ConditionReasonUpdating, updatingMessage("r2"), epoch)
			var types []corev1.PodConditionType
			for _, c := range got {
				types = append(types, c.Type)
			}
			if !slices.Equal(types, tt.wantTypes) {
				t.Fatalf("conditions written = %v, want %v", types, tt.wantTypes)
			}
			if !heldFor(pod, "r2") {
				t.Fatalf("the gate is not held for r2: %+v", getCondition(pod))
			}
			if ready := podReady(pod); ready != tt.wantReady {
				t.Fatalf("Ready = %q, want %q", ready, tt.wantReady)
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && !c.LastTransitionTime.Time.Equal(tt.readySince) {
					t.Fatalf("Ready transition time = %v, want %v", c.LastTransitionTime, tt.readySince)
				}
			}
		})
	}
}
