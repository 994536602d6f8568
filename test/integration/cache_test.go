package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TestCacheHoldsOnlyWhatControllersRead looks into the running manager's
// informer cache: Pods without controller-revision-hash (a Deployment's, a
// bare one) are not there; a StatefulSet keeps only what the Rollout
// observes; a DaemonSet's revision has no data. The CloneSet and Rollout
// suites, run on the same cache, show that nothing a controller reads was
// dropped.
func TestCacheHoldsOnlyWhatControllersRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "example.com/app:v1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
		Volumes:    []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	pods := map[string]map[string]string{
		"deployment-pod": {"app": "web", "pod-template-hash": "5d8f"},
		"bare-pod":       nil,
		"db-0":           {"app": "db", appsv1.ControllerRevisionHashLabelKey: "db-1"},
	}
	for name, labels := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: spec}
		g.Expect(env.client.Create(ctx, pod)).To(Succeed())
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: `{"kind":"StatefulSet"}`, "team": "a"}},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}}, Spec: spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
		},
	}
	g.Expect(env.client.Create(ctx, sts)).To(Succeed())
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-1", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "3f9c1a52-0000-4000-8000-000000000001", Controller: ptr.To(true)}}},
		Data:     runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"agent:1"}]}}}}`)},
		Revision: 1,
	}
	g.Expect(env.client.Create(ctx, rev)).To(Succeed())

	cache := env.manager.Manager.GetCache()
	g.Eventually(func(g Gomega) {
		pods, err := env.manager.Manager.Pods.List(ns, labels.Everything())
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		g.Expect(names).To(ConsistOf("db-0"))

		var cached appsv1.StatefulSet
		g.Expect(cache.Get(ctx, client.ObjectKeyFromObject(sts), &cached)).To(Succeed())
		g.Expect(cached.ManagedFields).To(BeEmpty())
		g.Expect(cached.Annotations).To(Equal(map[string]string{"team": "a"}))
		g.Expect(cached.Spec.Template.Spec).To(Equal(corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:v1"}}}))
		g.Expect(cached.Spec.VolumeClaimTemplates).To(BeEmpty())
		g.Expect(*cached.Spec.Replicas).To(BeEquivalentTo(1))
		g.Expect(cached.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "db"}))

		var cachedRev appsv1.ControllerRevision
		g.Expect(cache.Get(ctx, client.ObjectKeyFromObject(rev), &cachedRev)).To(Succeed())
		g.Expect(cachedRev.Data.Raw).To(BeEmpty())
	}, timeout).Should(Succeed())
}

// TestWritesFromTrimmedPodsKeepWhatTheCacheDropped: the cache keeps only
// what the controllers read of a Pod, and the CloneSet's in-place writes
// are computed between two copies of that trimmed Pod. Its env, volumes,
// mounts, tolerations and the status the kubelet wrote survive an in-place
// image update untouched.
func TestWritesFromTrimmedPodsKeepWhatTheCacheDropped(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 1)
	spec := &cs.Spec.Template.Spec
	spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "serve"}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	g.Expect(env.client.Create(ctx, cs)).To(Succeed())

	var before corev1.Pod
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns)
		g.Expect(pods).To(HaveLen(1))
		before = pods[0]
	}, timeout).Should(Succeed())
	// What a kubelet would report. The controller may write the Pod
	// between the list and this write (CI saw a conflict once): each try
	// starts from the Pod as it is then.
	started := metav1.Now()
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest := &corev1.Pod{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(&before), latest); err != nil {
			return err
		}
		latest.Status.Phase = corev1.PodRunning
		latest.Status.HostIP = "10.0.0.7"
		latest.Status.PodIP = "10.244.0.7"
		latest.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "app", Image: "example.com/app:v1", ImageID: "example.com/app@sha256:aa", ContainerID: "containerd://1", Ready: true,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}},
		}}
		if err := env.client.Status().Update(ctx, latest); err != nil {
			return err
		}
		before = *latest
		return nil
	})).To(Succeed())

	var cached *corev1.Pod
	g.Eventually(func(g Gomega) {
		pods, err := env.manager.Manager.Pods.Controlled(before.OwnerReferences[0].UID, labels.Everything())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(1))
		cached = pods[0]
		g.Expect(cached.Status.ContainerStatuses).To(HaveLen(1))
	}, timeout).Should(Succeed())
	g.Expect(cached.Spec.Containers).To(Equal([]corev1.Container{{Name: "app", Image: "example.com/app:v1"}}))
	g.Expect(cached.Spec.Volumes).To(BeEmpty())
	g.Expect(cached.Spec.Tolerations).To(BeEmpty())
	g.Expect(cached.Status.PodIP).To(BeEmpty())
	g.Expect(cached.Status.ContainerStatuses[0].LastTerminationState).To(Equal(corev1.ContainerState{}))
	g.Expect(cached.Status.ContainerStatuses[0].ImageID).To(Equal("example.com/app@sha256:aa"))

	mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = "example.com/app:v2" })
	g.Eventually(func(g Gomega) {
		after := &corev1.Pod{}
		g.Expect(env.client.Get(ctx, client.ObjectKeyFromObject(&before), after)).To(Succeed())
		g.Expect(after.UID).To(Equal(before.UID))
		g.Expect(after.Spec.Containers[0].Image).To(Equal("example.com/app:v2"))
		g.Expect(after.Annotations).To(HaveKey(stepwisev1.InPlaceUpdateStateAnnotation))
		g.Expect(conditionStatus(after, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionFalse))

		// All the rest is as it was.
		g.Expect(after.Spec.Containers[0].Env).To(Equal(before.Spec.Containers[0].Env))
		g.Expect(after.Spec.Containers[0].VolumeMounts).To(Equal(before.Spec.Containers[0].VolumeMounts))
		g.Expect(after.Spec.Volumes).To(Equal(before.Spec.Volumes))
		g.Expect(after.Spec.Tolerations).To(Equal(before.Spec.Tolerations))
		g.Expect(after.Status.PodIP).To(Equal("10.244.0.7"))
		g.Expect(after.Status.HostIP).To(Equal("10.0.0.7"))
		g.Expect(after.Status.ContainerStatuses).To(Equal(before.Status.ContainerStatuses))
	}, timeout).Should(Succeed())
}
