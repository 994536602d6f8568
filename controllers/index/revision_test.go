package index

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

func TestRevisionOwnerKeys(t *testing.T) {
	revision := func(refs ...metav1.OwnerReference) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "web-1", OwnerReferences: refs}}
	}
	owner := func(kind string, uid types.UID, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: kind, Name: "web", UID: uid, Controller: ptr.To(controller)}
	}
	tests := []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"a revision is keyed by its controller's UID", revision(owner("CloneSet", "uid-1", true)), []string{"uid-1"}},
		{"an owner that is not the controller is no key", revision(owner("CloneSet", "uid-1", false)), nil},
		{"a revision without owner has no key", revision(), nil},
		{"any controller's UID: IsControlledBy compares UIDs only", revision(owner("StatefulSet", "uid-2", true)), []string{"uid-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := controllerUID(tt.obj); !slices.Equal(got, tt.want) {
				t.Errorf("key %v, want %v", got, tt.want)
			}
		})
	}
}
