package workload

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TestStatefulSetUpdatedReadyIsALowerBound: a StatefulSet reports no
// updatedReadyReplicas; the adapter counts Pods left on the old revision as
// ready, so a Pod that is not ready is taken from the updated ones and the
// gate waits rather than passes.
func TestStatefulSetUpdatedReadyIsALowerBound(t *testing.T) {
	tests := []struct {
		name                    string
		replicas, ready, update int32
		want                    int32
	}{
		{name: "all ready", replicas: 4, ready: 4, update: 2, want: 2},
		{name: "a Pod not ready, updated or not, counts against the updated ones", replicas: 4, ready: 3, update: 2, want: 1},
		{name: "nothing ready", replicas: 4, ready: 0, update: 2, want: 0},
		{name: "never more than updated", replicas: 4, ready: 4, update: 0, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			_ = clientgoscheme.AddToScheme(scheme)
			replicas := tt.replicas
			sts := &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", Generation: 2},
				Spec:       appsv1.StatefulSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
				Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: tt.replicas, ReadyReplicas: tt.ready, UpdatedReplicas: tt.update,
					UpdateRevision: "db-2", CurrentRevision: "db-1"},
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sts).Build()
			w, err := New(v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}, "ns", Clients{Reader: c, Writer: c, APIReader: c})
			if err != nil {
				t.Fatal(err)
			}
			obs, err := w.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if obs.UpdatedReadyReplicas != tt.want || !obs.CountsOnly || !obs.ObservedGenerationCurrent() || obs.Partition != nil {
				t.Errorf("observation = %+v, want %d updated ready, counts only, current, no partition", obs, tt.want)
			}
		})
	}
}

func TestStatefulSetOnDeleteIsUnsupported(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec:       appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sts).Build()
	w, _ := New(v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}, "ns", Clients{Reader: c, Writer: c, APIReader: c})
	if _, err := w.Observe(context.Background()); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Observe() = %v, want ErrUnsupported", err)
	}
}
