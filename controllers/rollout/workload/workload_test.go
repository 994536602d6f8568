package workload

import (
	"encoding/json"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestObservationPartition(t *testing.T) {
	p := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	tests := []struct {
		name       string
		obs        Observation
		desired    intstr.IntOrString
		wantHolds  bool
		wantStored string
		wantPods   int32
	}{
		{name: "unset holds nothing and is 0 Pods", obs: Observation{Replicas: 10}, desired: intstr.FromString("100%"), wantStored: "100%", wantPods: 0},
		{name: "the same percent", obs: Observation{Replicas: 10, Partition: p(intstr.FromString("50%"))}, desired: intstr.FromString("50%"), wantHolds: true, wantStored: "50%", wantPods: 5},
		{name: "a count is not the same percent", obs: Observation{Replicas: 10, Partition: p(intstr.FromInt32(5))}, desired: intstr.FromString("50%"), wantStored: "50%", wantPods: 5},
		{name: "percents round up", obs: Observation{Replicas: 3, Partition: p(intstr.FromString("50%"))}, desired: intstr.FromString("50%"), wantHolds: true, wantStored: "50%", wantPods: 2},
		{name: "counts only: a percent is stored resolved", obs: Observation{Replicas: 4, CountsOnly: true, Partition: p(intstr.FromInt32(2))}, desired: intstr.FromString("50%"), wantHolds: true, wantStored: "2", wantPods: 2},
		{name: "counts only: 100% is all replicas", obs: Observation{Replicas: 4, CountsOnly: true, Partition: p(intstr.FromInt32(0))}, desired: intstr.FromString("100%"), wantStored: "4", wantPods: 0},
		{name: "counts only: replicas changed under a percent", obs: Observation{Replicas: 6, CountsOnly: true, Partition: p(intstr.FromInt32(2))}, desired: intstr.FromString("50%"), wantStored: "3", wantPods: 2},
		{name: "a count above replicas is clamped", obs: Observation{Replicas: 3, Partition: p(intstr.FromInt32(7))}, desired: intstr.FromInt32(7), wantHolds: true, wantStored: "7", wantPods: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.obs.Holds(tt.desired); got != tt.wantHolds {
				t.Errorf("Holds(%s) = %v, want %v", tt.desired.String(), got, tt.wantHolds)
			}
			stored, err := tt.obs.Stored(tt.desired)
			if err != nil || stored.String() != tt.wantStored {
				t.Errorf("Stored(%s) = %s, %v, want %s", tt.desired.String(), stored.String(), err, tt.wantStored)
			}
			if tt.obs.CountsOnly && stored.Type != intstr.Int {
				t.Errorf("Stored(%s) is a %v, want an integer", tt.desired.String(), stored.Type)
			}
			if pods, err := tt.obs.PartitionPods(); err != nil || pods != tt.wantPods {
				t.Errorf("PartitionPods() = %d, %v, want %d", pods, err, tt.wantPods)
			}
		})
	}
}

func TestManagersOwning(t *testing.T) {
	entry := func(manager, subresource, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Subresource: subresource, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	partition := `{"f:spec":{"f:updateStrategy":{"f:partition":{}}}}`
	entries := []metav1.ManagedFieldsEntry{
		entry(FieldManager, "", partition),
		entry("flux-kustomize", "", `{"f:spec":{"f:replicas":{},"f:updateStrategy":{"f:partition":{},"f:type":{}}}}`),
		entry("argocd-controller", "", `{"f:spec":{"f:updateStrategy":{"f:type":{}}}}`),
		entry("kubectl-edit", "", partition),
		entry("kubectl-edit", "", partition),
		entry("stepwise-cloneset", "status", `{"f:status":{"f:partition":{}}}`),
		{Manager: "empty"},
	}
	got, err := managersOwning(entries, cloneSetPartitionPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"flux-kustomize", "kubectl-edit"}; !equal(got, want) {
		t.Errorf("managers = %v, want %v", got, want)
	}
	sts, _ := managersOwning([]metav1.ManagedFieldsEntry{
		entry("helm", "", `{"f:spec":{"f:updateStrategy":{"f:rollingUpdate":{"f:partition":{}}}}}`),
		entry("creator", "", `{"f:spec":{"f:updateStrategy":{"f:type":{}}}}`),
	}, statefulSetPartitionPath)
	if want := []string{"helm"}; !equal(sts, want) {
		t.Errorf("StatefulSet managers = %v, want %v", sts, want)
	}
	if _, err := managersOwning([]metav1.ManagedFieldsEntry{entry("bad", "", "{")}, cloneSetPartitionPath); err == nil {
		t.Error("undecodable managed fields: want an error")
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDecodeTemplate reads both ways ControllerRevisions store a template.
func TestDecodeTemplate(t *testing.T) {
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1"}},
		Containers:     []corev1.Container{{Name: "app", Image: "web:1.2.3"}},
	}}
	own, _ := json.Marshal(template)
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
	for name, raw := range map[string][]byte{"Stepwise CloneSet (the template)": own, "StatefulSet and Kruise (a patch)": patch} {
		t.Run(name, func(t *testing.T) {
			got, err := decodeTemplate(raw)
			if err != nil {
				t.Fatal(err)
			}
			images := imagesOf(&got.Spec)
			if images["app"] != "web:1.2.3" || images["init"] != "busybox:1" {
				t.Errorf("images = %v", images)
			}
		})
	}
	if _, err := decodeTemplate([]byte("not json")); err == nil {
		t.Error("garbage: want an error")
	}
}

func TestNewRejectsOtherKinds(t *testing.T) {
	for _, ref := range []v1alpha1.WorkloadReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		{APIVersion: "apps.kruise.io/v1beta1", Kind: "CloneSet", Name: "web"},
		{APIVersion: "a/b/c", Kind: "CloneSet", Name: "web"},
	} {
		if _, err := New(ref, "ns", Clients{}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("New(%+v) = %v, want ErrUnsupported", ref, err)
		}
	}
	for _, gvk := range []struct{ apiVersion, kind string }{{"stepwise.dev/v1alpha1", "CloneSet"}, {"apps.kruise.io/v1alpha1", "CloneSet"}, {"apps/v1", "StatefulSet"}} {
		if _, err := New(v1alpha1.WorkloadReference{APIVersion: gvk.apiVersion, Kind: gvk.kind, Name: "web"}, "ns", Clients{}); err != nil {
			t.Errorf("New(%s %s) = %v", gvk.apiVersion, gvk.kind, err)
		}
	}
}
