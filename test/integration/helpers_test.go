package integration

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

var namespaceCounter atomic.Int32

// newNamespace gives each test its own namespace, deleted at cleanup.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("it-%d-%d", namespaceCounter.Add(1), metav1.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), ns) })
	return name
}

// newCloneSet is a small valid CloneSet with one container "app".
func newCloneSet(namespace, name string, replicas int32) *stepwisev1.CloneSet {
	// Separate maps: a test that adds template labels must not widen the selector.
	selector := map[string]string{"app": name}
	labels := map[string]string{"app": name}
	return &stepwisev1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: stepwisev1.CloneSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:v1"}}},
			},
			UpdateStrategy: stepwisev1.CloneSetUpdateStrategy{Type: stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType},
		},
	}
}

func intOrStr(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}
