package cloneset

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The current revision follows the Pods once they run one revision whole,
// whatever status last said: the case that matters is a status write lost
// to the next template (current still v1, every Pod on the promoted v2,
// update already v3), where keeping v1 would roll the v2 Pods back to it.
func TestSettleFollowsThePodsOnceTheyRunOneRevisionWhole(t *testing.T) {
	revision := func(name string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	pod := func(name, rev string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{RevisionLabel: rev}}}
	}
	terminating := func(p *corev1.Pod) *corev1.Pod {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		return p
	}
	promotedOnly := func(names ...string) func(string) bool {
		return func(rev string) bool { return slices.Contains(names, rev) }
	}
	always := func(string) bool { return true }
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		replicas int32
		updating string
		promoted func(string) bool
		want     string
	}{
		{name: "every Pod on the promoted v2, status still v1, update v3", pods: []*corev1.Pod{pod("a", "v2"), pod("b", "v2")}, replicas: 2, promoted: promotedOnly("v2"), want: "v2"},
		{name: "every Pod on the update revision", pods: []*corev1.Pod{pod("a", "v3"), pod("b", "v3")}, replicas: 2, promoted: always, want: "v3"},
		{name: "v2 not promoted by the governing Rollout", pods: []*corev1.Pod{pod("a", "v2"), pod("b", "v2")}, replicas: 2, promoted: promotedOnly("v1"), want: "v1"},
		{name: "Pods on two revisions", pods: []*corev1.Pod{pod("a", "v2"), pod("b", "v1")}, replicas: 2, promoted: always, want: "v1"},
		{name: "a Pod missing", pods: []*corev1.Pod{pod("a", "v2")}, replicas: 2, promoted: always, want: "v1"},
		{name: "a Pod terminating", pods: []*corev1.Pod{pod("a", "v2"), terminating(pod("b", "v2")), pod("c", "v2")}, replicas: 2, promoted: always, want: "v1"},
		{name: "a Pod mid-update", pods: []*corev1.Pod{pod("a", "v2"), pod("b", "v2")}, replicas: 2, updating: "b", promoted: always, want: "v1"},
		{name: "a revision no longer recorded", pods: []*corev1.Pod{pod("a", "v0"), pod("b", "v0")}, replicas: 2, promoted: always, want: "v1"},
		{name: "no Pods", replicas: 0, promoted: always, want: "v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &revisionSet{update: revision("v3"), current: revision("v1"), byName: map[string]*appsv1.ControllerRevision{
				"v1": revision("v1"), "v2": revision("v2"), "v3": revision("v3"),
			}}
			isUpdating := func(p *corev1.Pod) bool { return p.Name == tt.updating }
			s.settle(tt.pods, tt.replicas, isUpdating, tt.promoted)
			if s.current.Name != tt.want {
				t.Errorf("current = %s, want %s", s.current.Name, tt.want)
			}
		})
	}
}
