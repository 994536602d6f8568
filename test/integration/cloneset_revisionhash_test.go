package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/inplace"
)

// The API server takes a label change in a pods/status write: the engine
// relies on it to move the Service label in the write that takes the Pod
// out of endpoints.
func TestPodStatusWriteMovesALabel(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0", Labels: map[string]string{"app": "web", stepwisev1.RevisionHashLabel: "aaa111"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:v1"}}},
	}
	g.Expect(env.client.Create(ctx, pod)).To(Succeed())
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	g.Expect(env.client.Status().Update(ctx, pod)).To(Succeed())

	pods := inplace.NewControllerRuntimePodClient(env.client, env.client)
	gate := corev1.PodCondition{Type: stepwisev1.InPlaceUpdateReady, Status: corev1.ConditionFalse, Reason: "Updating", LastTransitionTime: metav1.Now()}
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: inplace.ReasonReadinessGateFalse, LastTransitionTime: metav1.Now()}
	g.Expect(pods.PatchConditions(ctx, pod, []corev1.PodCondition{gate, ready}, map[string]string{stepwisev1.RevisionHashLabel: "bbb222"})).To(Succeed())

	got := &corev1.Pod{}
	g.Expect(env.client.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
	g.Expect(got.Labels).To(HaveKeyWithValue(stepwisev1.RevisionHashLabel, "bbb222"))
	g.Expect(got.Labels).To(HaveKeyWithValue("app", "web"))
	g.Expect(conditionStatus(got, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionFalse))
	g.Expect(conditionStatus(got, corev1.PodReady)).To(Equal(corev1.ConditionFalse))
	// One write: the label and the conditions came with the same resourceVersion.
	g.Expect(got.ResourceVersion).To(Equal(pod.ResourceVersion))
}

// Every CloneSet Pod carries its revision's short hash, gets it back when
// it lost it (Pods created before the label existed), and moves it to the
// new revision when updated in place.
func TestCloneSetPodsCarryTheirRevisionHash(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.client.Create(ctx, newCloneSet(ns, "web", 2))).To(Succeed())

	hashesMatch := func(g Gomega, revision string) {
		pods := listPods(g, ns)
		g.Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			g.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(revision))
			g.Expect(p.Labels).To(HaveKeyWithValue(stepwisev1.RevisionHashLabel, stepwisev1.RevisionHash(revision)))
		}
	}
	var first string
	g.Eventually(func(g Gomega) {
		first = getCloneSet(g, ns, "web").Status.UpdateRevision
		g.Expect(first).NotTo(BeEmpty())
		hashesMatch(g, first)
	}, timeout).Should(Succeed())
	g.Expect(stepwisev1.RevisionHash(first)).NotTo(Equal(first), "the hash is the short part of the revision name")

	victim := listPods(g, ns)[0]
	patch := []byte(`{"metadata":{"labels":{"` + stepwisev1.RevisionHashLabel + `":null}}}`)
	g.Expect(env.client.Patch(ctx, &victim, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	g.Eventually(func(g Gomega) { hashesMatch(g, first) }, timeout).Should(Succeed())

	mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = "example.com/app:v2" })
	g.Eventually(func(g Gomega) {
		second := getCloneSet(g, ns, "web").Status.UpdateRevision
		g.Expect(second).NotTo(Equal(first))
		hashesMatch(g, second)
		for _, p := range listPods(g, ns) {
			// No kubelet restarts the container: out of endpoints, under
			// the new revision's label.
			g.Expect(conditionStatus(&p, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionFalse))
		}
	}, timeout).Should(Succeed())
}
