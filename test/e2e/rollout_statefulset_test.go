package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// A bad release of a StatefulSet is aborted by the analysis, and the
// canaries go back to the stable image: raising the partition moves no Pod
// back by itself, so the Rollout deletes them, highest ordinal first, one at
// a time (maxUnavailable 1), and the real StatefulSet controller recreates
// each on the stable revision.
func testStatefulSetAbortRollsCanariesBack(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	ns := e.namespace(t, "sts")
	s := &story{e: e, t: t, ns: ns}
	labels := map[string]string{"app": "web"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](4),
			ServiceName: "web",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: webImage("1.0.0")}}},
			},
		},
	}
	g.Expect(e.client.Create(t.Context(), sts)).To(Succeed())
	stable := e.waitStatefulSet(t, ns, "web", func(g Gomega, sts *appsv1.StatefulSet) {
		g.Expect(sts.Status.ReadyReplicas).To(BeEquivalentTo(4))
		g.Expect(sts.Status.CurrentRevision).To(Equal(sts.Status.UpdateRevision))
	}).Status.CurrentRevision
	s.waitRates(4)

	ro := &stepwisev1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web"},
			Steps:       []stepwisev1.RolloutStep{step("2", stepPause), step("0", noPause)},
			Analysis:    errorRateAnalysis(e.prom.URL()),
		},
	}
	g.Expect(e.client.Create(t.Context(), ro)).To(Succeed())
	s.waitRollout("adopts the running revision and arms the partition", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(stable))
		g.Expect(e.statefulSetPartition(g, ns, "web")).To(BeEquivalentTo(4))
	})

	// The bad release: the StatefulSet replaces web-3 and web-2 (partition 2).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &appsv1.StatefulSet{}
		if err := e.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = webImage("1.1.0-bad")
		return e.client.Update(t.Context(), cur)
	})
	g.Expect(err).NotTo(HaveOccurred())
	canary := e.waitStatefulSet(t, ns, "web", func(g Gomega, sts *appsv1.StatefulSet) {
		g.Expect(sts.Status.UpdateRevision).NotTo(Equal(stable))
	}).Status.UpdateRevision
	unavailable := e.countUnavailable(t, ns, labels, 4)

	aborted := s.waitRollout("aborted by the analysis", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisFailed))
	})
	g.Expect(aborted.Status.CanaryRevision).To(Equal(canary))
	g.Expect(aborted.Status.Message).To(ContainSubstring("aborted at step 1/2: analysis failed: metric " + errorRateMetric))
	t.Logf("aborted; Pods then: %v", podImages(e.pods(g, ns)))

	// Every Pod runs the stable image again, in its spec and in its status.
	done := s.waitRollout("every canary Pod back on the stable revision", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		status, reason, message := condition(ro, stepwisev1.CanaryRollbackCondition)
		g.Expect([]string{string(status), reason}).To(Equal([]string{"False", stepwisev1.ReasonCanaryPodsRolledBack}))
		g.Expect(message).To(MatchRegexp(`^every Pod is back on revision ` + stable + `, (under 1s|[0-9]+s) after the rollback began$`))
	})
	_, _, took := condition(done, stepwisev1.CanaryRollbackCondition)
	t.Logf("recreating rollback of 2 canaries: %s", took)
	expectStable := func(g Gomega) {
		pods := e.pods(g, ns)
		g.Expect(pods).To(HaveLen(4))
		for _, p := range pods {
			g.Expect(imageOf(&p, "app")).To(Equal(webImage("1.0.0")), "pod %s spec", p.Name)
			g.Expect(containerStatus(&p, "app")).NotTo(BeNil(), "pod %s status", p.Name)
			g.Expect(containerStatus(&p, "app").Image).To(Equal(webImage("1.0.0")), "pod %s status", p.Name)
			g.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(stable), "pod %s revision", p.Name)
			g.Expect(podCondition(&p, corev1.PodReady)).To(Equal(corev1.ConditionTrue), "pod %s ready", p.Name)
		}
	}
	g.Eventually(expectStable, rolloutTimeout, rolloutPoll).Should(Succeed())
	status, _, _ := condition(done, "Stalled")
	g.Expect(status).To(Equal(metav1.ConditionTrue), "still Aborted: git asks for the bad release")
	s.waitEvents(stepwisev1.EventCanaryPodDeleted, ConsistOf(
		"deleted canary Pod web-3 (revision "+canary+") so that StatefulSet web recreates it on stable revision "+stable,
		"deleted canary Pod web-2 (revision "+canary+") so that StatefulSet web recreates it on stable revision "+stable))
	s.waitEvent(stepwisev1.EventCanaryRollbackCompleted, "every Pod is back on revision "+stable)
	g.Expect(unavailable()).To(BeNumerically("<=", 1), "never more than maxUnavailable (1) Pod unavailable")

	s.holdRollout("stays aborted, every Pod stable", holdFor, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(e.statefulSetPartition(g, ns, "web")).To(BeEquivalentTo(4))
		expectStable(g)
	})
}

func (e *rolloutEnv) waitStatefulSet(t *testing.T, ns, name string, check func(g Gomega, sts *appsv1.StatefulSet)) *appsv1.StatefulSet {
	t.Helper()
	var sts *appsv1.StatefulSet
	NewWithT(t).Eventually(func(g Gomega) {
		sts = &appsv1.StatefulSet{}
		g.Expect(e.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
		g.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation))
		check(g, sts)
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	return sts
}

func (e *rolloutEnv) statefulSetPartition(g Gomega, ns, name string) int32 {
	sts := &appsv1.StatefulSet{}
	g.Expect(e.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return *ru.Partition
	}
	return 0
}

// countUnavailable polls the Pods every 100 ms until the test ends and
// returns a function giving the most found unavailable at once (not ready,
// terminating or missing).
func (e *rolloutEnv) countUnavailable(t *testing.T, ns string, labels map[string]string, replicas int) func() int {
	var mu sync.Mutex
	most := 0
	ctx := t.Context()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			var list corev1.PodList
			if err := e.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
				continue
			}
			n := max(replicas-len(list.Items), 0)
			for i := range list.Items {
				if list.Items[i].DeletionTimestamp != nil || podCondition(&list.Items[i], corev1.PodReady) != corev1.ConditionTrue {
					n++
				}
			}
			mu.Lock()
			most = max(most, n)
			mu.Unlock()
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

func podImages(pods []corev1.Pod) string {
	var out []string
	for i := range pods {
		out = append(out, pods[i].Name+"="+imageOf(&pods[i], "app"))
	}
	return strings.Join(out, " ")
}
