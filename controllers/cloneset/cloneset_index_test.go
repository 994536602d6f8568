package cloneset

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestIndexKeys(t *testing.T) {
	revision := func(refs ...metav1.OwnerReference) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "web-1", OwnerReferences: refs}}
	}
	owner := func(kind string, uid types.UID, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: kind, Name: "web", UID: uid, Controller: ptr.To(controller)}
	}
	rollout := func(apiVersion, kind, name string) *stepwisev1.Rollout {
		return &stepwisev1.Rollout{Spec: stepwisev1.RolloutSpec{WorkloadRef: stepwisev1.WorkloadReference{APIVersion: apiVersion, Kind: kind, Name: name}}}
	}
	tests := []struct {
		name  string
		index func(client.Object) []string
		obj   client.Object
		want  []string
	}{
		{"a revision is keyed by its controller's UID", revisionOwner, revision(owner("CloneSet", "uid-1", true)), []string{"uid-1"}},
		{"an owner that is not the controller is no key", revisionOwner, revision(owner("CloneSet", "uid-1", false)), nil},
		{"a revision without owner has no key", revisionOwner, revision(), nil},
		{"any controller's UID: IsControlledBy compares UIDs only", revisionOwner, revision(owner("StatefulSet", "uid-2", true)), []string{"uid-2"}},
		{"a Rollout of a Stepwise CloneSet is keyed by its name", governedCloneSet, rollout(stepwisev1.GroupVersion.String(), "CloneSet", "web"), []string{"web"}},
		{"a Rollout of an OpenKruise CloneSet governs none of ours", governedCloneSet, rollout("apps.kruise.io/v1alpha1", "CloneSet", "web"), nil},
		{"a Rollout of a StatefulSet governs none of ours", governedCloneSet, rollout("apps/v1", "StatefulSet", "web"), nil},
		{"not a Rollout", governedCloneSet, revision(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.index(tt.obj); !slices.Equal(got, tt.want) {
				t.Errorf("key %v, want %v", got, tt.want)
			}
		})
	}
}
