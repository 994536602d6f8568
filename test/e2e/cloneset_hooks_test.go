package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func testPreDeleteHook(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "predelete")
	cs := cloneSet(ns, "web", 2, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.Template.Labels["example.com/drain"] = "pending"
	cs.Spec.Lifecycle = &stepwisev1.Lifecycle{PreDelete: &stepwisev1.LifecycleHook{
		LabelsHandler: map[string]string{"example.com/drain": "pending"}, MarkPodNotReady: true,
	}}
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	for _, p := range b.pods(g, ns) {
		g.Expect(p.Labels).To(HaveKeyWithValue(stepwisev1.LifecycleStateLabel, stepwisev1.LifecycleStateNormal))
	}
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Replicas = ptrInt32(1) })

	var held corev1.Pod
	g.Eventually(func(g Gomega) {
		var preparing []corev1.Pod
		for _, p := range b.pods(g, ns) {
			if p.Labels[stepwisev1.LifecycleStateLabel] == stepwisev1.LifecycleStatePreparingDelete {
				preparing = append(preparing, p)
			}
		}
		g.Expect(preparing).To(HaveLen(1))
		held = preparing[0]
		g.Expect(podCondition(&held, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionFalse), "markPodNotReady")
	}, settleTimeout).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(b.pods(g, ns)).To(HaveLen(2), "the hook holds the Pod") }, 2*time.Second).Should(Succeed())

	// The hook's controller finishes its work and releases the Pod.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"example.com/drain":null}}}`))
	g.Expect(b.client.Patch(t.Context(), &held, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := b.pods(g, ns)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Name).NotTo(Equal(held.Name))
	}, settleTimeout).Should(Succeed())
}

func testInPlaceUpdateHook(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "updatehook")
	cs := cloneSet(ns, "web", 2, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.Template.Labels["example.com/traffic"] = "on"
	cs.Spec.Lifecycle = &stepwisev1.Lifecycle{InPlaceUpdate: &stepwisev1.LifecycleHook{
		LabelsHandler: map[string]string{"example.com/traffic": "on"},
	}}
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })

	g.Eventually(func(g Gomega) {
		for _, p := range b.pods(g, ns) {
			g.Expect(p.Labels).To(HaveKeyWithValue(stepwisev1.LifecycleStateLabel, stepwisev1.LifecycleStatePreparingUpdate))
		}
	}, settleTimeout).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for _, p := range b.pods(g, ns) {
			g.Expect(imageOf(&p, "app")).To(Equal(v1), "held Pods are not updated")
		}
	}, 2*time.Second).Should(Succeed())

	// Release both: the hook's controller took them out of traffic.
	for _, p := range b.pods(g, ns) {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"example.com/traffic":"off"}}}`))
		g.Expect(b.client.Patch(t.Context(), &p, patch)).To(Succeed())
	}
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	g.Eventually(func(g Gomega) {
		for _, p := range b.pods(g, ns) {
			g.Expect(imageOf(&p, "app")).To(Equal(v2))
			g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(1))
			g.Expect(p.Labels).To(HaveKeyWithValue(stepwisev1.LifecycleStateLabel, stepwisev1.LifecycleStateUpdated))
		}
	}, settleTimeout).Should(Succeed())

	// Hooked again: back to Normal.
	for _, p := range b.pods(g, ns) {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"example.com/traffic":"on"}}}`))
		g.Expect(b.client.Patch(t.Context(), &p, patch)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, p := range b.pods(g, ns) {
			g.Expect(p.Labels).To(HaveKeyWithValue(stepwisev1.LifecycleStateLabel, stepwisev1.LifecycleStateNormal))
		}
	}, settleTimeout).Should(Succeed())
}

// hookedCloneSet is a CloneSet whose inPlaceUpdate hook holds every Pod
// labelled example.com/traffic=on and takes it out of service while held.
func hookedCloneSet(ns string, replicas int32) *stepwisev1.CloneSet {
	cs := cloneSet(ns, "web", replicas, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.Template.Labels["example.com/traffic"] = "on"
	cs.Spec.Lifecycle = &stepwisev1.Lifecycle{InPlaceUpdate: &stepwisev1.LifecycleHook{
		LabelsHandler: map[string]string{"example.com/traffic": "on"}, MarkPodNotReady: true,
	}}
	return cs
}

// waitHeld waits until every Pod waits in PreparingUpdate, out of service.
func (b *bed) waitHeld(t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for _, p := range b.pods(g, ns) {
			g.Expect(p.Labels).To(HaveKeyWithValue(stepwisev1.LifecycleStateLabel, stepwisev1.LifecycleStatePreparingUpdate))
			g.Expect(podCondition(&p, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionFalse), "markPodNotReady")
		}
	}, settleTimeout).Should(Succeed())
}

// setTraffic sets the hook's label on every Pod: "off" releases the hook,
// "on" hooks the Pod again, as the hook's own controller would.
func (b *bed) setTraffic(t *testing.T, ns, value string) {
	t.Helper()
	g := NewWithT(t)
	for _, p := range b.pods(g, ns) {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"example.com/traffic":"`+value+`"}}}`))
		g.Expect(b.client.Patch(t.Context(), &p, patch)).To(Succeed())
	}
}

// waitServing waits until every Pod is in the lifecycle state given, back
// in service, and the CloneSet counts them ready, updatedReady of them on
// the update revision.
func (b *bed) waitServing(t *testing.T, ns, state string, replicas, updatedReady int32) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for _, p := range b.pods(g, ns) {
			g.Expect(p.Labels).To(HaveKeyWithValue(stepwisev1.LifecycleStateLabel, state), "pod %s", p.Name)
			g.Expect(podCondition(&p, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionTrue), "pod %s back in service", p.Name)
		}
	}, settleTimeout).Should(Succeed())
	b.waitSettled(t, ns, "web", replicas, updatedReady, settleTimeout)
}

// A metadata-only update restarts nothing, so the in-place engine never
// takes the Pod out of service itself; the hook's markPodNotReady did, and
// that hold must end with the update.
func testNotReadyHookMetadataOnly(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "hookmeta")
	g.Expect(b.client.Create(t.Context(), hookedCloneSet(ns, 2))).To(Succeed())
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	before := snapshot(b.pods(g, ns))

	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Labels["tier"] = "frontend" })
	b.waitHeld(t, ns)
	b.setTraffic(t, ns, "off")
	b.waitServing(t, ns, stepwisev1.LifecycleStateUpdated, 2, 2)
	for _, p := range b.pods(g, ns) {
		g.Expect(p.Labels).To(HaveKeyWithValue("tier", "frontend"))
		g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(0), "metadata restarts nothing")
	}

	b.setTraffic(t, ns, "on")
	b.waitServing(t, ns, stepwisev1.LifecycleStateNormal, 2, 2)
	g.Expect(snapshot(b.pods(g, ns))).To(Equal(before), "updated in place")
}

// The template goes back to the Pods' own revision while the hook still
// holds them: nothing is left to update, so they return to Normal and to
// service without the hook being released (Kruise issue 1156).
func testNotReadyHookRevert(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "hookrevert")
	g.Expect(b.client.Create(t.Context(), hookedCloneSet(ns, 2))).To(Succeed())
	first := b.waitSettled(t, ns, "web", 2, 2, settleTimeout).Status.UpdateRevision
	before := snapshot(b.pods(g, ns))

	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })
	b.waitHeld(t, ns)
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v1 })
	b.waitServing(t, ns, stepwisev1.LifecycleStateNormal, 2, 2)

	pods := b.pods(g, ns)
	g.Expect(snapshot(pods)).To(Equal(before))
	for _, p := range pods {
		g.Expect(p.Labels).To(HaveKeyWithValue("controller-revision-hash", first))
		g.Expect(imageOf(&p, "app")).To(Equal(v1))
		g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(0))
	}
	g.Expect(b.get(g, ns, "web").Status.UpdateRevision).To(Equal(first))
}

// A Rollout's abort raises the partition to every Pod: Pods held for an
// update that will no longer happen go back to Normal and to service.
func testNotReadyHookPartition(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "hookpartition")
	g.Expect(b.client.Create(t.Context(), hookedCloneSet(ns, 2))).To(Succeed())
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	before := snapshot(b.pods(g, ns))

	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })
	b.waitHeld(t, ns)
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.Partition = intOrString("100%") })
	b.waitServing(t, ns, stepwisev1.LifecycleStateNormal, 2, 0)

	pods := b.pods(g, ns)
	g.Expect(snapshot(pods)).To(Equal(before))
	for _, p := range pods {
		g.Expect(imageOf(&p, "app")).To(Equal(v1))
		g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(0))
	}
}
