package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

// The gate the CloneSet controller owns; the Stages must never write it.
const stageGate corev1.PodConditionType = "InPlaceUpdateReady"

// Generous but bounded: two cores shared with compilers.
const (
	stagePodTimeout  = 90 * time.Second
	stageManyTimeout = 4 * time.Minute
	stagePoll        = 200 * time.Millisecond
)

// TestStages proves test/kwok/stages.yaml behaves like a kubelet for in-place
// image updates. One cluster serves every subtest; each uses its own
// namespace.
func TestStages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kwok cluster")
	}
	cluster := kwokcluster.StartForTest(t, kwokcluster.Options{Nodes: 2})

	t.Run("ReadinessGate", func(t *testing.T) { testStagesReadinessGate(t, cluster) })
	t.Run("ImageUpdateRestartsOnce", func(t *testing.T) { testStagesImageUpdate(t, cluster) })
	t.Run("GateDrivesEndpoints", func(t *testing.T) { testStagesGateDrivesEndpoints(t, cluster) })
	t.Run("OnlyChangedContainerRestarts", func(t *testing.T) { testStagesOnlyChangedContainer(t, cluster) })
	t.Run("FiftyPodsRestartOnce", func(t *testing.T) { testStagesManyPods(t, cluster, 50) })
	t.Run("ReadyAnnotationStalls", func(t *testing.T) { testStagesReadyAnnotation(t, cluster) })

	// Not an assertion: the loop is allowed to help under load, but a
	// count that grows run after run says the Stages lose events.
	t.Logf("resync loop touched %d pod(s)", cluster.Resyncs())
}

// (a) Running, IP and ready containers, but Ready only once the gate is True.
func testStagesReadinessGate(t *testing.T, cluster *kwokcluster.Cluster) {
	g := gomega.NewWithT(t)
	ctx := t.Context()
	cs := cluster.Clientset()
	ns := stageNamespace(t, cluster, "gate")

	pod := stagePod(ns, "web", true, corev1.Container{Name: "app", Image: "nginx:1.0"})
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	g.Eventually(func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, "web")
		g.Expect(p.Status.Phase).To(gomega.Equal(corev1.PodRunning))
		g.Expect(p.Status.PodIP).NotTo(gomega.BeEmpty())
		g.Expect(p.Status.PodIPs).NotTo(gomega.BeEmpty())
		g.Expect(p.Status.HostIP).NotTo(gomega.BeEmpty())
		g.Expect(p.Status.ContainerStatuses).To(gomega.HaveLen(1))
		s := p.Status.ContainerStatuses[0]
		g.Expect(s.Name).To(gomega.Equal("app"))
		g.Expect(s.Image).To(gomega.Equal("nginx:1.0"))
		g.Expect(s.ImageID).To(gomega.HavePrefix("docker-pullable://nginx:1.0@sha256:"))
		g.Expect(s.ContainerID).To(gomega.HavePrefix("containerd://"))
		g.Expect(s.Ready).To(gomega.BeTrue())
		g.Expect(s.Started).To(gomega.HaveValue(gomega.BeTrue()))
		g.Expect(s.RestartCount).To(gomega.BeZero())
		g.Expect(s.State.Running).NotTo(gomega.BeNil())
		g.Expect(s.State.Running.StartedAt.IsZero()).To(gomega.BeFalse())
		g.Expect(stageCondStatus(p, corev1.ContainersReady)).To(gomega.Equal(corev1.ConditionTrue))
		g.Expect(stageCondStatus(p, corev1.PodReady)).To(gomega.Equal(corev1.ConditionFalse))
	}).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.Succeed())

	// Nothing but the test may write the gate: the Pod must stay not Ready
	// and the gate's condition absent.
	g.Consistently(func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, "web")
		g.Expect(stageCondStatus(p, corev1.PodReady)).To(gomega.Equal(corev1.ConditionFalse))
		g.Expect(stageCond(p, stageGate)).To(gomega.BeNil())
	}).WithTimeout(3 * time.Second).WithPolling(stagePoll).Should(gomega.Succeed())
	p := stageGetPod(g, cs, ns, "web")
	g.Expect(stageCond(p, corev1.PodReady).Reason).To(gomega.Equal("ReadinessGatesNotReady"))
	ip := p.Status.PodIP

	stageSetGate(t, cs, ns, "web", corev1.ConditionTrue)
	g.Eventually(func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, "web")
		g.Expect(stageCondStatus(p, corev1.PodReady)).To(gomega.Equal(corev1.ConditionTrue))
		g.Expect(p.Status.PodIP).To(gomega.Equal(ip))
	}).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.Succeed())

	// Deletion completes: kwok removes finalizer-free Pods.
	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{})).To(gomega.Succeed())
	g.Eventually(func() bool {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.BeTrue(), "pod was not removed after deletion")
}

// (b) An image patch restarts the container once, in place.
func testStagesImageUpdate(t *testing.T, cluster *kwokcluster.Cluster) {
	g := gomega.NewWithT(t)
	ctx := t.Context()
	cs := cluster.Clientset()
	ns := stageNamespace(t, cluster, "image")

	pod := stagePod(ns, "web", true, corev1.Container{Name: "app", Image: "nginx:1.0"})
	// Long enough to watch the terminated state between the two.
	pod.Annotations = map[string]string{kwokcluster.AnnotationRestartDelay: "2s"}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	stageWaitRunning(t, cs, ns, "web")
	// The gate with lastTransitionTime null, as a controller may write it.
	stageSetGate(t, cs, ns, "web", corev1.ConditionTrue)
	stageWaitReady(t, cs, ns, "web", corev1.ConditionTrue)

	before := stageGetPod(g, cs, ns, "web")
	old := before.Status.ContainerStatuses[0]
	g.Expect(old.RestartCount).To(gomega.BeZero())

	stagePatchImage(t, cs, ns, "web", 0, "nginx:1.1")

	// First the old container stops: terminated, not ready, same count.
	g.Eventually(func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, "web")
		s := stageContainer(g, p, "app")
		g.Expect(s.State.Terminated).NotTo(gomega.BeNil())
		g.Expect(s.State.Terminated.FinishedAt.IsZero()).To(gomega.BeFalse())
		g.Expect(s.Ready).To(gomega.BeFalse())
		g.Expect(s.RestartCount).To(gomega.BeZero())
		g.Expect(stageCondStatus(p, corev1.PodReady)).To(gomega.Equal(corev1.ConditionFalse))
	}).WithTimeout(stagePodTimeout).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())

	// Then it starts with the new image.
	g.Eventually(func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, "web")
		s := stageContainer(g, p, "app")
		g.Expect(s.RestartCount).To(gomega.BeEquivalentTo(1))
		g.Expect(s.Image).To(gomega.Equal("nginx:1.1"))
		g.Expect(s.State.Running).NotTo(gomega.BeNil())
		g.Expect(s.Ready).To(gomega.BeTrue())
		g.Expect(stageCondStatus(p, corev1.PodReady)).To(gomega.Equal(corev1.ConditionTrue))
	}).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.Succeed())

	after := stageGetPod(g, cs, ns, "web")
	s := stageContainer(g, after, "app")
	g.Expect(after.Name).To(gomega.Equal(before.Name))
	g.Expect(after.UID).To(gomega.Equal(before.UID))
	g.Expect(after.Status.PodIP).To(gomega.Equal(before.Status.PodIP))
	g.Expect(after.Spec.NodeName).To(gomega.Equal(before.Spec.NodeName))
	g.Expect(s.ImageID).NotTo(gomega.Equal(old.ImageID))
	g.Expect(s.ImageID).To(gomega.HavePrefix("docker-pullable://nginx:1.1@sha256:"))
	g.Expect(s.ContainerID).NotTo(gomega.Equal(old.ContainerID))
	g.Expect(s.LastTerminationState.Terminated).NotTo(gomega.BeNil())
	g.Expect(s.LastTerminationState.Terminated.ContainerID).To(gomega.Equal(old.ContainerID))
	g.Expect(s.State.Running.StartedAt.Sub(s.LastTerminationState.Terminated.FinishedAt.Time)).
		To(gomega.BeNumerically(">=", 2*time.Second), "restarted before the 2s delay")
	g.Expect(after.Status.ObservedGeneration).To(gomega.Equal(after.Generation))

	// No second restart, on its own or when the Pod changes for other reasons.
	stable := func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, "web")
		s := stageContainer(g, p, "app")
		g.Expect(s.RestartCount).To(gomega.BeEquivalentTo(1))
		g.Expect(s.ContainerID).To(gomega.Equal(after.Status.ContainerStatuses[0].ContainerID))
		g.Expect(s.State.Running).NotTo(gomega.BeNil())
	}
	g.Consistently(stable).WithTimeout(4 * time.Second).WithPolling(stagePoll).Should(gomega.Succeed())
	for i := range 3 {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{"unrelated":"v%d"}}}`, i)
		_, err := cs.CoreV1().Pods(ns).Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	stageSetGate(t, cs, ns, "web", corev1.ConditionTrue) // rewrites the gate: a status update
	g.Consistently(stable).WithTimeout(4 * time.Second).WithPolling(stagePoll).Should(gomega.Succeed())
}

// (c) The gate alone takes the Pod out of and back into a Service.
func testStagesGateDrivesEndpoints(t *testing.T, cluster *kwokcluster.Cluster) {
	g := gomega.NewWithT(t)
	ctx := t.Context()
	cs := cluster.Clientset()
	ns := stageNamespace(t, cluster, "endpoints")

	pod := stagePod(ns, "web", true, corev1.Container{Name: "app", Image: "nginx:1.0"})
	pod.Labels = map[string]string{"app": "web"}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	_, err = cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	stageWaitRunning(t, cs, ns, "web")
	stageSetGate(t, cs, ns, "web", corev1.ConditionTrue)
	stageWaitReady(t, cs, ns, "web", corev1.ConditionTrue)
	ip := stageGetPod(g, cs, ns, "web").Status.PodIP

	g.Eventually(stageReadyEndpoint(cs, ns, "web", ip)).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.BeTrue(), "pod never became a ready endpoint")

	stageSetGate(t, cs, ns, "web", corev1.ConditionFalse)
	stageWaitReady(t, cs, ns, "web", corev1.ConditionFalse)
	p := stageGetPod(g, cs, ns, "web")
	g.Expect(stageCondStatus(p, corev1.ContainersReady)).To(gomega.Equal(corev1.ConditionTrue), "only the stageGate is False")
	g.Expect(stageCondStatus(p, stageGate)).To(gomega.Equal(corev1.ConditionFalse), "the Stages overwrote the gate")
	g.Eventually(stageReadyEndpoint(cs, ns, "web", ip)).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.BeFalse(), "pod stayed a ready endpoint with its gate False")

	stageSetGate(t, cs, ns, "web", corev1.ConditionTrue)
	stageWaitReady(t, cs, ns, "web", corev1.ConditionTrue)
	g.Eventually(stageReadyEndpoint(cs, ns, "web", ip)).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.BeTrue(), "pod did not come back as a ready endpoint")
}

// (d) Of two containers, only the one whose image changed restarts.
func testStagesOnlyChangedContainer(t *testing.T, cluster *kwokcluster.Cluster) {
	g := gomega.NewWithT(t)
	ctx := t.Context()
	cs := cluster.Clientset()
	ns := stageNamespace(t, cluster, "sidecar")

	pod := stagePod(ns, "web", true,
		corev1.Container{Name: "app", Image: "nginx:1.0"},
		corev1.Container{Name: "sidecar", Image: "envoy:1.0"})
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	stageWaitRunning(t, cs, ns, "web")
	stageSetGate(t, cs, ns, "web", corev1.ConditionTrue)
	stageWaitReady(t, cs, ns, "web", corev1.ConditionTrue)
	before := stageGetPod(g, cs, ns, "web")
	sidecar := stageContainer(g, before, "sidecar")

	stagePatchImage(t, cs, ns, "web", 0, "nginx:1.1")

	g.Eventually(func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, "web")
		app := stageContainer(g, p, "app")
		g.Expect(app.RestartCount).To(gomega.BeEquivalentTo(1))
		g.Expect(app.Image).To(gomega.Equal("nginx:1.1"))
		g.Expect(app.State.Running).NotTo(gomega.BeNil())
		g.Expect(stageCondStatus(p, corev1.PodReady)).To(gomega.Equal(corev1.ConditionTrue))
	}).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.Succeed())

	g.Consistently(func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, "web")
		g.Expect(stageContainer(g, p, "app").RestartCount).To(gomega.BeEquivalentTo(1))
		s := stageContainer(g, p, "sidecar")
		g.Expect(s.RestartCount).To(gomega.BeZero())
		g.Expect(s.ContainerID).To(gomega.Equal(sidecar.ContainerID))
		g.Expect(s.ImageID).To(gomega.Equal(sidecar.ImageID))
		g.Expect(s.State.Running).NotTo(gomega.BeNil())
		g.Expect(s.State.Running.StartedAt).To(gomega.Equal(sidecar.State.Running.StartedAt))
		g.Expect(s.LastTerminationState.Terminated).To(gomega.BeNil())
	}).WithTimeout(3 * time.Second).WithPolling(stagePoll).Should(gomega.Succeed())
}

// (e) Many Pods updated at once: every container restarts exactly once.
func testStagesManyPods(t *testing.T, cluster *kwokcluster.Cluster, n int) {
	g := gomega.NewWithT(t)
	ctx := t.Context()
	cs := cluster.Clientset()
	ns := stageNamespace(t, cluster, "many")

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("web-%02d", i)
		pod := stagePod(ns, names[i], false, corev1.Container{Name: "app", Image: "nginx:1.0"})
		pod.Labels = map[string]string{"app": "many"}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	g.Eventually(func(g gomega.Gomega) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=many"})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(pods.Items).To(gomega.HaveLen(n))
		for i := range pods.Items {
			g.Expect(stageCondStatus(&pods.Items[i], corev1.PodReady)).To(gomega.Equal(corev1.ConditionTrue), pods.Items[i].Name)
		}
	}).WithTimeout(stageManyTimeout).WithPolling(time.Second).Should(gomega.Succeed())

	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, name := range names {
		wg.Go(func() {
			patch := []byte(`{"spec":{"containers":[{"name":"app","image":"nginx:1.1"}]}}`)
			_, errs[i] = cs.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		g.Expect(err).NotTo(gomega.HaveOccurred(), names[i])
	}

	restarted := func(g gomega.Gomega) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=many"})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(pods.Items).To(gomega.HaveLen(n))
		for i := range pods.Items {
			p := &pods.Items[i]
			s := stageContainer(g, p, "app")
			g.Expect(s.RestartCount).To(gomega.BeEquivalentTo(1), p.Name)
			g.Expect(s.Image).To(gomega.Equal("nginx:1.1"), p.Name)
			g.Expect(s.State.Running).NotTo(gomega.BeNil(), p.Name)
			g.Expect(stageCondStatus(p, corev1.PodReady)).To(gomega.Equal(corev1.ConditionTrue), p.Name)
		}
	}
	g.Eventually(restarted).WithTimeout(stageManyTimeout).WithPolling(time.Second).Should(gomega.Succeed())
	g.Consistently(restarted).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(gomega.Succeed())
}

// The kwok-ready annotation holds containers not ready until removed.
func testStagesReadyAnnotation(t *testing.T, cluster *kwokcluster.Cluster) {
	g := gomega.NewWithT(t)
	ctx := t.Context()
	cs := cluster.Clientset()
	ns := stageNamespace(t, cluster, "stall")

	pod := stagePod(ns, "web", false, corev1.Container{Name: "app", Image: "nginx:1.0"})
	pod.Annotations = map[string]string{kwokcluster.AnnotationReady: "false"}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	stageWaitRunning(t, cs, ns, "web")
	g.Consistently(func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, "web")
		g.Expect(stageContainer(g, p, "app").Ready).To(gomega.BeFalse())
		g.Expect(stageCondStatus(p, corev1.ContainersReady)).To(gomega.Equal(corev1.ConditionFalse))
		g.Expect(stageCondStatus(p, corev1.PodReady)).To(gomega.Equal(corev1.ConditionFalse))
	}).WithTimeout(3 * time.Second).WithPolling(stagePoll).Should(gomega.Succeed())

	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, kwokcluster.AnnotationReady)
	_, err = cs.CoreV1().Pods(ns).Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	stageWaitReady(t, cs, ns, "web", corev1.ConditionTrue)
	g.Expect(stageContainer(g, stageGetPod(g, cs, ns, "web"), "app").RestartCount).To(gomega.BeZero())
}
