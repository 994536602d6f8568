package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

const (
	settleTimeout = 2 * time.Minute
	v1            = "example.com/app:v1"
	v2            = "example.com/app:v2"
)

// TestCloneSet tells the CloneSet's stories on a kwok cluster: real
// scheduler, garbage collector, EndpointSlices, and Stages that restart a
// container when its image changes. One cluster and one manager serve all
// subtests; each has its own namespace.
func TestCloneSet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kwok cluster")
	}
	b := newBed(t, 2)
	// Stopping the manager stalls every story in flight, so this one runs
	// alone, before the others.
	t.Run("ManagerRestartMidUpdateRestartsNothingTwice", func(t *testing.T) { testManagerRestart(t, b) })
	// The others run side by side, each in its own namespace.
	runSideBySide(t, b, []sideStory[*bed]{
		{"InPlaceImageUpdateKeepsPodsAndDrainsEndpoints", testInPlaceImageUpdate},
		{"EnvChangeRecreatesOrIsRefused", testEnvChange},
		{"PartitionHoldsAndRaisingItRollsBackInPlace", testPartitionAndRollback},
		{"MaxUnavailableOneNeverTwoUnavailable", testMaxUnavailable},
		{"PausedUpdatesNothingButScales", testPaused},
		{"GracePeriodDelaysImagePatch", testGracePeriod},
		{"RevertReusesOldRevision", testRevert},
		{"TwoContainersUpdateInOrder", testOrderedContainers},
		{"LabelChangePatchedWithoutRestart", testMetadataOnly},
		{"CorruptStateIsRedriven", testCorruptState},
		{"NeverReadyReleaseRollsBackWhenPartitionRaised", testNeverReadyRollback},
		{"RetagWithSameImageIDCompletes", testRetag},
		{"PreDeleteHookHoldsUntilReleased", testPreDeleteHook},
		{"InPlaceUpdateHookHoldsUntilReleased", testInPlaceUpdateHook},
		{"NotReadyHookOnMetadataOnlyUpdateServesAgain", testNotReadyHookMetadataOnly},
		{"NotReadyHookRevertedWhilePreparingServesAgain", testNotReadyHookRevert},
		{"NotReadyHookKeptByRaisedPartitionServesAgain", testNotReadyHookPartition},
	})
}

func testInPlaceImageUpdate(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "inplace")
	cs := cloneSet(ns, "web", 3, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.UpdateStrategy.MaxUnavailable = intOrString("1")
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	g.Expect(b.client.Create(t.Context(), svc)).To(Succeed())
	b.waitSettled(t, ns, "web", 3, 3, settleTimeout)
	before := snapshot(b.pods(g, ns))
	g.Eventually(func(g Gomega) { g.Expect(readyEndpoints(g, b, ns)).To(HaveLen(3)) }, settleTimeout).Should(Succeed())

	// Watch the Service's endpoints: each Pod must leave while it updates.
	left := map[string]bool{}
	stopSlices := b.watchEndpoints(t, ns, func(ready map[string]bool) {
		for name := range before {
			if !ready[name] {
				left[name] = true
			}
		}
	})
	watcher := b.watchPods(t, ns, v2)
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })
	updated := b.waitSettled(t, ns, "web", 3, 3, settleTimeout)
	stopSlices()

	pods := b.pods(g, ns)
	g.Expect(snapshot(pods)).To(Equal(before), "in place keeps every Pod's name, UID, IP and node")
	for _, p := range pods {
		g.Expect(imageOf(&p, "app")).To(Equal(v2))
		g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(1), "pod %s", p.Name)
		g.Expect(containerStatus(&p, "app").Image).To(Equal(v2))
		g.Expect(p.Labels["controller-revision-hash"]).To(Equal(updated.Status.UpdateRevision))
		g.Expect(podCondition(&p, stepwisev1.InPlaceUpdateReady)).To(Equal(corev1.ConditionTrue))
		g.Expect(p.Annotations).To(HaveKey(stepwisev1.InPlaceUpdateStateAnnotation))
	}
	_, gateFalse := watcher.snapshot()
	for name := range before {
		g.Expect(gateFalse[name]).To(BeTrue(), "InPlaceUpdateReady went False on %s during its update", name)
		g.Expect(left[name]).To(BeTrue(), "pod %s left the Service's ready endpoints during its update", name)
	}
	g.Eventually(func(g Gomega) { g.Expect(readyEndpoints(g, b, ns)).To(HaveLen(3)) }, settleTimeout).Should(Succeed(), "all Pods back in endpoints")
	g.Expect(updated.Status.CurrentRevision).To(Equal(updated.Status.UpdateRevision))
	g.Expect(apimeta.IsStatusConditionTrue(updated.Status.Conditions, meta.ReadyCondition)).To(BeTrue())
	// One Event per round, naming its Pods: together they name each Pod
	// once.
	g.Eventually(func(g Gomega) {
		told := map[string]int{}
		for _, note := range b.events(g, ns, stepwisev1.EventSuccessfulUpdatePodInPlace) {
			for name := range before {
				if regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(note) {
					told[name]++
				}
			}
		}
		for name := range before {
			g.Expect(told[name]).To(Equal(1), "SuccessfulUpdatePodInPlace Events naming pod %s", name)
		}
	}, 30*time.Second).Should(Succeed())

	// The controller's own metrics tell the same story: three started,
	// three succeeded, three durations, nothing failed or recreated.
	m := b.currentManager().Metrics
	g.Expect(testutil.ToFloat64(m.InPlaceUpdatesStarted.WithLabelValues(ns, "web"))).To(BeEquivalentTo(3))
	g.Expect(testutil.ToFloat64(m.InPlaceUpdatesSucceeded.WithLabelValues(ns, "web"))).To(BeEquivalentTo(3))
	g.Expect(testutil.ToFloat64(m.InPlaceUpdatesFailed.WithLabelValues(ns, "web"))).To(BeEquivalentTo(0))
	g.Expect(testutil.ToFloat64(m.PodsRecreated.WithLabelValues(ns, "web"))).To(BeEquivalentTo(0))
	g.Expect(testutil.CollectAndCount(m.InPlaceUpdateDuration)).To(BeNumerically(">=", 1))
}

func testEnvChange(t *testing.T, b *bed) {
	g := NewWithT(t)

	t.Run("InPlaceIfPossibleRecreates", func(t *testing.T) {
		ns := b.namespace(t, "envre")
		g.Expect(b.client.Create(t.Context(), cloneSet(ns, "web", 2, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType))).To(Succeed())
		b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
		before := snapshot(b.pods(g, ns))
		b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) {
			cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "fast"}}
		})
		b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
		for _, p := range b.pods(g, ns) {
			_, kept := before[p.Name]
			g.Expect(kept).To(BeFalse(), "pod %s should have been recreated", p.Name)
			g.Expect(p.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "MODE", Value: "fast"}))
		}
		g.Expect(b.events(g, ns, stepwisev1.EventSuccessfulUpdatePodReCreate)).NotTo(BeEmpty())
	})

	t.Run("InPlaceOnlyRefuses", func(t *testing.T) {
		ns := b.namespace(t, "envonly")
		g.Expect(b.client.Create(t.Context(), cloneSet(ns, "web", 2, stepwisev1.InPlaceOnlyCloneSetUpdateStrategyType))).To(Succeed())
		b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
		before := snapshot(b.pods(g, ns))
		b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) {
			cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "fast"}}
		})
		g.Eventually(func(g Gomega) {
			cs := b.get(g, ns, "web")
			cond := apimeta.FindStatusCondition(cs.Status.Conditions, stepwisev1.FailedUpdateCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(cond.Message).To(ContainSubstring("env"))
			g.Expect(apimeta.IsStatusConditionTrue(cs.Status.Conditions, meta.StalledCondition)).To(BeTrue())
			g.Expect(b.events(g, ns, stepwisev1.EventFailedUpdatePodInPlace)).NotTo(BeEmpty())
		}, settleTimeout).Should(Succeed())
		g.Consistently(func(g Gomega) {
			g.Expect(snapshot(b.pods(g, ns))).To(Equal(before), "no Pod is recreated under InPlaceOnly")
		}, 3*time.Second).Should(Succeed())
	})
}

func testPartitionAndRollback(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "partition")
	cs := cloneSet(ns, "web", 5, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.UpdateStrategy.Partition = intOrString("2")
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	b.waitSettled(t, ns, "web", 5, 5, settleTimeout)
	before := snapshot(b.pods(g, ns))

	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })
	got := b.waitSettled(t, ns, "web", 5, 3, settleTimeout)
	g.Expect(got.Status.ExpectedUpdatedReplicas).To(BeEquivalentTo(3))
	g.Expect(got.Status.CurrentRevision).NotTo(Equal(got.Status.UpdateRevision))
	g.Consistently(func(g Gomega) {
		onV2 := 0
		for _, p := range b.pods(g, ns) {
			if imageOf(&p, "app") == v2 {
				onV2++
			}
		}
		g.Expect(onV2).To(Equal(3), "partition 2 of 5 holds at exactly 3 updated")
	}, 3*time.Second).Should(Succeed())

	// Raising the partition rolls the 3 back, in place.
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.Partition = intOrString("5") })
	g.Eventually(func(g Gomega) {
		cs := b.get(g, ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		g.Expect(cs.Status.UpdatedReplicas).To(BeEquivalentTo(0))
		g.Expect(cs.Status.ReadyReplicas).To(BeEquivalentTo(5))
		for _, p := range b.pods(g, ns) {
			g.Expect(imageOf(&p, "app")).To(Equal(v1))
			g.Expect(containerStatus(&p, "app").Image).To(Equal(v1))
		}
	}, settleTimeout).Should(Succeed())
	pods := b.pods(g, ns)
	g.Expect(snapshot(pods)).To(Equal(before), "rollback keeps every Pod")
	restarts := map[int32]int{}
	for _, p := range pods {
		restarts[containerStatus(&p, "app").RestartCount]++
	}
	g.Expect(restarts).To(Equal(map[int32]int{0: 2, 2: 3}), "the 3 canaries restarted twice (forward, back), the others never")
}

func testMaxUnavailable(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "maxunavail")
	cs := cloneSet(ns, "web", 4, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.UpdateStrategy.MaxUnavailable = intOrString("1")
	cs.Spec.Template.Annotations = map[string]string{"stepwise.dev/kwok-restart-delay": "2s"}
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	b.waitSettled(t, ns, "web", 4, 4, settleTimeout)
	watcher := b.watchPods(t, ns, v2)
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })
	b.waitSettled(t, ns, "web", 4, 4, settleTimeout)
	maxUnready, gateFalse := watcher.snapshot()
	g.Expect(gateFalse).To(HaveLen(4), "every Pod was updated")
	g.Expect(maxUnready).To(Equal(1), "at most one Pod unavailable at any moment the watch saw")
}

func testPaused(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "paused")
	g.Expect(b.client.Create(t.Context(), cloneSet(ns, "web", 2, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType))).To(Succeed())
	b.waitSettled(t, ns, "web", 2, 2, settleTimeout)
	original := snapshot(b.pods(g, ns))
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Spec.UpdateStrategy.Paused = true
		cs.Spec.Template.Spec.Containers[0].Image = v2
		cs.Spec.Replicas = ptrInt32(4)
	})
	g.Eventually(func(g Gomega) {
		cs := b.get(g, ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		g.Expect(cs.Status.ReadyReplicas).To(BeEquivalentTo(4), "paused still scales")
	}, settleTimeout).Should(Succeed())
	g.Consistently(func(g Gomega) {
		byName := map[string]corev1.Pod{}
		for _, p := range b.pods(g, ns) {
			byName[p.Name] = p
		}
		for name, snap := range original {
			p, ok := byName[name]
			g.Expect(ok).To(BeTrue(), "original pod %s kept", name)
			g.Expect(string(p.UID)).To(Equal(snap.UID))
			g.Expect(imageOf(&p, "app")).To(Equal(v1), "paused: pod %s not updated", name)
			g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(0))
		}
	}, 3*time.Second).Should(Succeed())
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.UpdateStrategy.Paused = false })
	b.waitSettled(t, ns, "web", 4, 4, settleTimeout)
}

func testGracePeriod(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "grace")
	cs := cloneSet(ns, "web", 1, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.UpdateStrategy.InPlaceUpdateStrategy = &stepwisev1.InPlaceUpdateStrategy{GracePeriodSeconds: 3}
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	b.waitSettled(t, ns, "web", 1, 1, settleTimeout)
	watcher := b.watchPods(t, ns, v2)
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })
	b.waitSettled(t, ns, "web", 1, 1, settleTimeout)
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	g.Expect(watcher.gateFalseAt).To(HaveLen(1))
	for name, falseAt := range watcher.gateFalseAt {
		patched, ok := watcher.imagePatchedAt[name]
		g.Expect(ok).To(BeTrue())
		// Status times have one-second precision; the controller waits the
		// whole grace period from the gate flip, so allow a second's slack.
		g.Expect(patched.Sub(falseAt)).To(BeNumerically(">=", 2*time.Second), "image patched %s after the gate went False", patched.Sub(falseAt))
	}
}

func testManagerRestart(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "restart")
	cs := cloneSet(ns, "web", 6, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	cs.Spec.UpdateStrategy.MaxUnavailable = intOrString("2")
	cs.Spec.Template.Annotations = map[string]string{"stepwise.dev/kwok-restart-delay": "3s"}
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	b.waitSettled(t, ns, "web", 6, 6, settleTimeout)
	before := snapshot(b.pods(g, ns))
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = v2 })
	// Stop as soon as the first Pods are mid-update.
	g.Eventually(func(g Gomega) {
		updating := 0
		for _, p := range b.pods(g, ns) {
			if podCondition(&p, stepwisev1.InPlaceUpdateReady) == corev1.ConditionFalse {
				updating++
			}
		}
		g.Expect(updating).To(BeNumerically(">", 0))
	}, settleTimeout, 50*time.Millisecond).Should(Succeed())
	b.stopManager()
	time.Sleep(4 * time.Second) // the test's own pause: let containers restart while no manager runs
	b.startManager(t)
	b.waitSettled(t, ns, "web", 6, 6, settleTimeout)
	pods := b.pods(g, ns)
	g.Expect(snapshot(pods)).To(Equal(before))
	for _, p := range pods {
		g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(1), "pod %s restarted exactly once", p.Name)
	}
}

func testRevert(t *testing.T, b *bed) {
	g := NewWithT(t)
	ns := b.namespace(t, "revert")
	cs := cloneSet(ns, "web", 3, stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType)
	g.Expect(b.client.Create(t.Context(), cs)).To(Succeed())
	first := b.waitSettled(t, ns, "web", 3, 3, settleTimeout).Status.UpdateRevision
	// Hold every Pod on v1 while v2 is the template, then revert.
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Spec.UpdateStrategy.Partition = intOrString("3")
		cs.Spec.Template.Spec.Containers[0].Image = v2
	})
	g.Eventually(func(g Gomega) {
		cs := b.get(g, ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		g.Expect(cs.Status.UpdateRevision).NotTo(Equal(first))
	}, settleTimeout).Should(Succeed())
	b.mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Spec.UpdateStrategy.Partition = nil
		cs.Spec.Template.Spec.Containers[0].Image = v1
	})
	got := b.waitSettled(t, ns, "web", 3, 3, settleTimeout)
	g.Expect(got.Status.UpdateRevision).To(Equal(first), "reverting reuses the first revision")
	for _, p := range b.pods(g, ns) {
		g.Expect(containerStatus(&p, "app").RestartCount).To(BeEquivalentTo(0), "no churn for Pods already on the reverted revision")
	}
}

func ptrInt32(v int32) *int32 { return &v }

// readyEndpoints lists the Pod names the Service's EndpointSlices mark ready.
func readyEndpoints(g Gomega, b *bed, ns string) []string {
	var slices discoveryv1.EndpointSliceList
	g.Expect(b.client.List(context.Background(), &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "web"})).To(Succeed())
	var names []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && e.Conditions.Ready != nil && *e.Conditions.Ready {
				names = append(names, e.TargetRef.Name)
			}
		}
	}
	return names
}

// watchEndpoints calls seen with the set of ready Pods after every change.
func (b *bed) watchEndpoints(t *testing.T, ns string, seen func(ready map[string]bool)) func() {
	w, err := b.cluster.Clientset().DiscoveryV1().EndpointSlices(ns).Watch(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			ready := map[string]bool{}
			for _, e := range s.Endpoints {
				if e.TargetRef != nil && e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready[e.TargetRef.Name] = true
				}
			}
			seen(ready)
		}
	}()
	return func() { w.Stop(); <-done }
}
