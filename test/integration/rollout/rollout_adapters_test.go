package rollout_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// OpenKruise's CloneSet is driven through the same partition field, kept
// as written ("50%"), and its status changes are watched.
func TestKruiseCloneSetAdapterSetsItsPartition(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.kruise.io/v1alpha1",
		"kind":       "CloneSet",
		"metadata":   map[string]any{"namespace": ns, "name": "web"},
		"spec": map[string]any{
			"replicas": int64(10),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": image("1.0.0")}}},
			},
			"updateStrategy": map[string]any{"type": "InPlaceIfPossible"},
		},
	}}
	if err := env.client.Create(testContext(t), u); err != nil {
		t.Fatalf("creating Kruise CloneSet: %v", err)
	}
	reportKruise(t, ns, "web", map[string]any{"updateRevision": "web-r1", "currentRevision": "web-r1", "updatedReadyReplicas": int64(10)})
	startController(t, ns)
	ref := stepwisev1.WorkloadReference{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet", Name: "web"}
	createRollout(t, newRollout(ns, "web", ref, stepAt(pct("50%"), pauseForPromote()), stepAt(num(0))))

	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-r1"))
	})
	kruise := waitKruisePartition(t, ns, "web", "100%")
	if got := managersOfPartition(kruise, "spec", "updateStrategy", "partition"); len(got) != 1 || got[0] != workload.FieldManager {
		t.Errorf("partition owned by %v, want only %q", got, workload.FieldManager)
	}

	// A new template: the Kruise controller reports a new update revision.
	reportKruise(t, ns, "web", map[string]any{"updateRevision": "web-r2", "updatedReadyReplicas": int64(0)})
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-r2"))
	})
	waitKruisePartition(t, ns, "web", "50%")
	reportKruise(t, ns, "web", map[string]any{"updatedReadyReplicas": int64(5)})
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
}

// waitKruisePartition waits until an OpenKruise CloneSet stores partition want.
func waitKruisePartition(t *testing.T, ns, name, want string) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	NewWithT(t).Eventually(func(g Gomega) {
		got = getKruise(t, ns, name)
		p, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "updateStrategy", "partition")
		g.Expect(p).To(Equal(want))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return got
}

func getKruise(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workload.KruiseCloneSetGVK)
	if err := env.client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("getting Kruise CloneSet: %v", err)
	}
	return u
}

// reportKruise writes the Kruise CloneSet's status: observedGeneration
// current, replicas, and fields.
func reportKruise(t *testing.T, ns, name string, fields map[string]any) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		u := getKruise(t, ns, name)
		status, _, _ := unstructured.NestedMap(u.Object, "status")
		if status == nil {
			status = map[string]any{}
		}
		status["observedGeneration"] = u.GetGeneration()
		status["replicas"] = int64(10)
		for k, v := range fields {
			status[k] = v
		}
		u.Object["status"] = status
		return env.client.Status().Update(testContext(t), u)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// A StatefulSet stores its partition as an integer: percents are resolved
// against its replicas. It reports no updatedReadyReplicas; the adapter
// derives them from ready and updated replicas.
func TestStatefulSetAdapterSetsAnIntegerPartition(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	replicas := int32(4)
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: image("1.0.0")}}},
			},
		},
	}
	if err := env.client.Create(testContext(t), sts); err != nil {
		t.Fatalf("creating StatefulSet: %v", err)
	}
	reportStatefulSet(t, ns, "db", func(st *appsv1.StatefulSetStatus) {
		st.UpdateRevision, st.CurrentRevision = "db-r1", "db-r1"
		st.ReadyReplicas, st.UpdatedReplicas, st.CurrentReplicas = 4, 4, 4
	})
	startController(t, ns)
	ref := stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	createRollout(t, newRollout(ns, "db", ref, stepAt(pct("50%"), pauseForPromote()), stepAt(num(0))))

	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(condition(ro, stepwisev1.PartitionConflictCondition)).To(BeNil(), "taking over a defaulted partition is no conflict")
	})
	// The partition is written once the status that decided it is.
	got := waitStatefulSetPartition(t, ns, "db", 4) // 100% of 4 replicas
	if owners := managersOfPartition(got, "spec", "updateStrategy", "rollingUpdate", "partition"); len(owners) != 1 || owners[0] != workload.FieldManager {
		t.Errorf("partition owned by %v, want only %q", owners, workload.FieldManager)
	}

	reportStatefulSet(t, ns, "db", func(st *appsv1.StatefulSetStatus) {
		st.UpdateRevision, st.UpdatedReplicas, st.CurrentReplicas = "db-r2", 0, 4
	})
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.CanaryRevision).To(Equal("db-r2"))
	})
	waitStatefulSetPartition(t, ns, "db", 2) // 50% of 4
	// Pods 2 and 3 updated; one of them is not ready yet: 3 of 4 ready.
	reportStatefulSet(t, ns, "db", func(st *appsv1.StatefulSetStatus) {
		st.UpdatedReplicas, st.CurrentReplicas, st.ReadyReplicas = 2, 2, 3
	})
	consistently(t, ns, "db", timeout/20, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonWaitingForPods))
	})
	reportStatefulSet(t, ns, "db", func(st *appsv1.StatefulSetStatus) { st.ReadyReplicas = 4 })
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
}

// waitStatefulSetPartition waits until a StatefulSet stores partition want.
func waitStatefulSetPartition(t *testing.T, ns, name string, want int32) *appsv1.StatefulSet {
	t.Helper()
	var got *appsv1.StatefulSet
	NewWithT(t).Eventually(func(g Gomega) {
		got = getStatefulSet(t, ns, name)
		ru := got.Spec.UpdateStrategy.RollingUpdate
		g.Expect(ru).NotTo(BeNil())
		g.Expect(ru.Partition).To(HaveValue(Equal(want)))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return got
}

func getStatefulSet(t *testing.T, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := env.client.Get(testContext(t), types.NamespacedName{Namespace: ns, Name: name}, sts); err != nil {
		t.Fatalf("getting StatefulSet: %v", err)
	}
	return sts
}

func reportStatefulSet(t *testing.T, ns, name string, f func(*appsv1.StatefulSetStatus)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		sts := getStatefulSet(t, ns, name)
		sts.Status.ObservedGeneration = sts.Generation
		sts.Status.Replicas = *sts.Spec.Replicas
		f(&sts.Status)
		sts.Status.AvailableReplicas = sts.Status.ReadyReplicas
		return env.client.Status().Update(testContext(t), sts)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}
