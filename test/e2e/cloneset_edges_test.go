package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func testOrderedContainers(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "ordered")
	cs := cloneSet(ns, "web", 1, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.Template.Spec.Containers = append(cs.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "example.com/proxy:v1"})
	cs.Spec.Template.Annotations = map[string]string{"stepwise.dev/kwok-restart-delay": "2s"}
	cs.Spec.UpdateStrategy.InPlaceUpdateStrategy = &stepwisev1.InPlaceUpdateStrategy{ContainerBatches: [][]string{{"sidecar"}, {"app"}}}
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	b.waitSettled(t, ns, "web", 1, 1, settleTimeout)

	w, err := b.cluster.Clientset().CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var sidecarStartedAt, appPatchedAt time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if s := containerStatus(pod, "sidecar"); s != nil && s.Image == "example.com/proxy:v2" && s.Ready && sidecarStartedAt.IsZero() {
				sidecarStartedAt = time.Now()
			}
			if imageOf(pod, "app") == v2 && appPatchedAt.IsZero() {
				appPatchedAt = time.Now()
				return
			}
		}
	}()
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Spec.Template.Spec.Containers[0].Image = v2
		cs.Spec.Template.Spec.Containers[1].Image = "example.com/proxy:v2"
	})
	b.waitSettled(t, ns, "web", 1, 1, settleTimeout)
	w.Stop()
	<-done
	g.Expect(sidecarStartedAt.IsZero()).To(BeFalse(), "sidecar restarted on v2")
	g.Expect(appPatchedAt.IsZero()).To(BeFalse(), "app patched to v2")
	g.Expect(appPatchedAt.After(sidecarStartedAt) || appPatchedAt.Equal(sidecarStartedAt)).To(BeTrue(), "app image patched only after the sidecar ran v2 and was ready")
	pod := b.pods(g, ns)[0]
	g.Expect(containerStatus(&pod, "app").RestartCount).To(BeEquivalentTo(1))
	g.Expect(containerStatus(&pod, "sidecar").RestartCount).To(BeEquivalentTo(1))
}

func testMetadataOnly(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "meta")
	g.Expect(b.client.Create(t.Context(), cloneSet(ns, "web", 2, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType))).To(Succeed())
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	before := snapshot(b.pods(g, ns))
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Labels["tier"] = "frontend" })
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	pods := b.pods(g, ns)
	g.Expect(snapshot(pods)).To(Equal(before))
	for _, p := range pods {
		g.Expect(p.Labels).To(HaveKeyWithValue("tier", "frontend"))
		g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(0))
	}
}

func testCorruptState(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "corrupt")
	g.Expect(b.client.Create(t.Context(), cloneSet(ns, "web", 1, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType))).To(Succeed())
	b.waitSettled(t, ns, "web", 1, 1, settleTimeout)
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })
	b.waitSettled(t, ns, "web", 1, 1, settleTimeout)
	pod := b.pods(g, ns)[0]
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+stepwisev1.InPlaceUpdateStateAnnotation+`":"{not json"}}}`))
	g.Expect(b.client.Patch(context.Background(), &pod, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(b.events(g, ns, stepwisev1.EventCorruptedInPlaceState)).NotTo(BeEmpty())
	}, settleTimeout).Should(Succeed())
	b.waitSettled(t, ns, "web", 1, 1, settleTimeout)
	pod = b.pods(g, ns)[0]
	g.Expect(containerStatus(&pod, "app").RestartCount).To(BeEquivalentTo(1), "re-driving a Pod already on its images restarts nothing")
}

// A retag: a new tag of the same image, so the restarted container reports
// the same imageID. Kruise waits forever here; the status image matching
// the spec must be enough.
func testRetag(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "retag")
	cs := cloneSet(ns, "web", 2, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.Template.Annotations = map[string]string{"stepwise.dev/kwok-image-digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	imageIDs := map[string]string{}
	for _, p := range b.pods(g, ns) {
		imageIDs[p.Name] = containerStatus(&p, "app").ImageID
	}
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Spec.Template.Spec.Containers[0].Image = "example.com/app:v1-retagged"
	})
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	for _, p := range b.pods(g, ns) {
		status := containerStatus(&p, "app")
		g.Expect(status.Image).To(Equal("example.com/app:v1-retagged"))
		g.Expect(status.RestartCount).To(BeEquivalentTo(1))
		g.Expect(status.ImageID).To(Equal(imageIDs[p.Name]), "same image, same imageID")
		g.Expect(podCondition(&p, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionTrue))
	}
}

// A release whose new container never becomes ready (a crash loop, a
// failing probe) leaves its Pod mid-update. Raising the partition, as a
// Rollout's abort does, must still bring that Pod back in place.
func testNeverReadyRollback(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "neverready")
	cs := cloneSet(ns, "web", 3, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.UpdateStrategy.MaxUnavailable = intOrString("1")
	cs.Spec.UpdateStrategy.Partition = intOrString("2")
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	b.waitSettled(t, ns, "web", 3, 3, settleTimeout)
	before := snapshot(b.pods(g, ns))

	// The bad release: the container starts but never reports ready.
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Spec.Template.Spec.Containers[0].Image = v2
		cs.Spec.Template.Annotations = map[string]string{"stepwise.dev/kwok-ready": "false"}
	})
	var stuck string
	g.Eventually(func(g Gomega) {
		for _, p := range b.pods(g, ns) {
			if s := containerStatus(&p, "app"); s != nil && s.Image == v2 && s.RestartCount == 1 && !s.Ready {
				stuck = p.Name
			}
		}
		g.Expect(stuck).NotTo(BeEmpty())
	}, settleTimeout).Should(Succeed())
	g.Consistently(func(g Gomega) {
		cs := b.get(g, ns, "web")
		g.Expect(cs.Status.UpdatedReadyReplicas).To(BeEquivalentTo(0), "the new container never becomes ready")
	}, 2*time.Second).Should(Succeed())

	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.Partition = intOrString("3") })
	g.Eventually(func(g Gomega) {
		cs := b.get(g, ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		g.Expect(cs.Status.UpdatedReplicas).To(BeEquivalentTo(0))
		g.Expect(cs.Status.ReadyReplicas).To(BeEquivalentTo(3))
	}, settleTimeout).Should(Succeed())
	pods := b.pods(g, ns)
	g.Expect(snapshot(pods)).To(Equal(before), "rolled back in place")
	for _, p := range pods {
		g.Expect(imageOf(&p, "app")).To(Equal(v1))
		if p.Name == stuck {
			g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(2))
			g.Expect(p.Annotations).NotTo(HaveKey("stepwise.dev/kwok-ready"))
		}
	}
}
