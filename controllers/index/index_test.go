package index

import (
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestRolloutWorkloadKeys(t *testing.T) {
	rollout := func(apiVersion, kind, name string) *v1alpha1.Rollout {
		return &v1alpha1.Rollout{Spec: v1alpha1.RolloutSpec{WorkloadRef: v1alpha1.WorkloadReference{APIVersion: apiVersion, Kind: kind, Name: name}}}
	}
	tests := []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"a Stepwise CloneSet", rollout(v1alpha1.GroupVersion.String(), "CloneSet", "web"), []string{v1alpha1.GroupVersion.Group + "/CloneSet/web"}},
		{"an OpenKruise CloneSet of the same name is another key", rollout("apps.kruise.io/v1alpha1", "CloneSet", "web"), []string{"apps.kruise.io/CloneSet/web"}},
		{"a StatefulSet: the core apps group", rollout("apps/v1", "StatefulSet", "db"), []string{"apps/StatefulSet/db"}},
		{"an apiVersion that does not parse is no key", rollout("a/b/c", "CloneSet", "web"), nil},
		{"not a Rollout", &v1alpha1.CloneSet{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rolloutWorkload(tt.obj); !slices.Equal(got, tt.want) {
				t.Errorf("key %v, want %v", got, tt.want)
			}
		})
	}
}
