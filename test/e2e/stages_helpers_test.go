package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/stepwise-dev/stepwise/test/kwokcluster"
)

func stageNamespace(t *testing.T, cluster *kwokcluster.Cluster, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stagePodTimeout)
	defer cancel()
	if err := cluster.CreateNamespace(ctx, name); err != nil {
		t.Fatal(err)
	}
	return name
}

func stagePod(ns, name string, gated bool, containers ...corev1.Container) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: containers},
	}
	if gated {
		pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: stageGate}}
	}
	return pod
}

func stageGetPod(g gomega.Gomega, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	g.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return p
}

func stageWaitRunning(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		p := stageGetPod(g, cs, ns, name)
		g.Expect(p.Status.Phase).To(gomega.Equal(corev1.PodRunning))
		g.Expect(p.Status.ContainerStatuses).To(gomega.HaveLen(len(p.Spec.Containers)))
	}).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.Succeed())
}

func stageWaitReady(t *testing.T, cs kubernetes.Interface, ns, name string, want corev1.ConditionStatus) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		g.Expect(stageCondStatus(stageGetPod(g, cs, ns, name), corev1.PodReady)).To(gomega.Equal(want))
	}).WithTimeout(stagePodTimeout).WithPolling(stagePoll).Should(gomega.Succeed(), "pod %s/%s Ready never became %s", ns, name, want)
}

// stageSetGate writes the readiness gate's condition as the controller would,
// leaving lastTransitionTime unset (null on the wire) on purpose: the Stages
// must cope.
func stageSetGate(t *testing.T, cs kubernetes.Interface, ns, name string, want corev1.ConditionStatus) {
	t.Helper()
	ctx := t.Context()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := corev1.PodCondition{Type: stageGate, Status: want}
		replaced := false
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == stageGate {
				p.Status.Conditions[i] = c
				replaced = true
			}
		}
		if !replaced {
			p.Status.Conditions = append(p.Status.Conditions, c)
		}
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("setting %s=%s on %s/%s: %v", stageGate, want, ns, name, err)
	}
}

func stagePatchImage(t *testing.T, cs kubernetes.Interface, ns, name string, container int, image string) {
	t.Helper()
	patch := fmt.Appendf(nil, `[{"op":"replace","path":"/spec/containers/%d/image","value":%q}]`, container, image)
	if _, err := cs.CoreV1().Pods(ns).Patch(t.Context(), name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching image of %s/%s: %v", ns, name, err)
	}
}

// stageReadyEndpoint reports whether the Service's EndpointSlices list ip as a
// ready endpoint.
func stageReadyEndpoint(cs kubernetes.Interface, ns, service, ip string) func(gomega.Gomega) bool {
	return func(g gomega.Gomega) bool {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + service,
		})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					if a == ip && e.Conditions.Ready != nil && *e.Conditions.Ready {
						return true
					}
				}
			}
		}
		return false
	}
}

func stageCond(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func stageCondStatus(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	if c := stageCond(p, t); c != nil {
		return c.Status
	}
	return ""
}

func stageContainer(g gomega.Gomega, p *corev1.Pod, container string) corev1.ContainerStatus {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s
		}
	}
	g.ExpectWithOffset(1, p.Status.ContainerStatuses).To(gomega.ContainElement(gomega.HaveField("Name", container)))
	return corev1.ContainerStatus{}
}
