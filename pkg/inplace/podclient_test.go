package inplace

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestControllerRuntimePodClient runs a plain image update through the
// adapter over controller-runtime's fake client, which enforces
// resourceVersions and the status subresource the way the engine expects.
func TestControllerRuntimePodClient(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	oldT := template(container("app", "app:v1"))
	newT := template(container("app", "app:v2"))
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(newPod(oldT.Spec.Containers...)).
		WithStatusSubresource(&corev1.Pod{}).
		Build()
	e := New(NewControllerRuntimePodClient(c, c), clocktesting.NewFakePassiveClock(epoch))
	get := func() *corev1.Pod {
		pod := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "web-0"}, pod); err != nil {
			t.Fatal(err)
		}
		return pod
	}

	spec := specFor(t, "r2", oldT, newT)
	if res := e.Update(ctx, get(), spec, UpdateOptions{}); res.Err != nil {
		t.Fatalf("Update: %v", res.Err)
	}
	pod := get()
	if imageOf(t, pod, "app") != "app:v2" || conditionOf(t, pod).Status != corev1.ConditionFalse {
		t.Fatalf("after Update: image %s, condition %+v", imageOf(t, pod, "app"), conditionOf(t, pod))
	}

	st := findStatus(pod, "app", false)
	st.Image, st.ImageID = "app:v2", "id-of-app:v2"
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if res := e.Refresh(ctx, get()); res.Err != nil || res.Phase != PhaseCompleted {
		t.Fatalf("Refresh = %+v", res)
	}
	if conditionOf(t, get()).Status != corev1.ConditionTrue {
		t.Fatalf("condition not True after completion")
	}
}
