package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// A status write that would have moved currentRevision can be lost to the
// next template (a GitOps tool applying the next release the moment the
// last one is done). The next release's partition must then keep Pods on
// the revision they all run, not on the one status still names: the
// CloneSet here runs v2 whole, status is set back to v1 as if its write
// was lost, and v3 comes with partition 50%. Two Pods move to v3; the
// other two stay on v2 and none goes back to v1.
func TestCloneSetPartitionKeepsWhatThePodsRunAfterALostStatusWrite(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cs := newCloneSet(ns, "web", 4)
	// Recreated Pods are settled at once here (no kubelet to finish an
	// in-place update); the revision bookkeeping is the same.
	cs.Spec.UpdateStrategy = stepwisev1.CloneSetUpdateStrategy{Type: stepwisev1.RecreateCloneSetUpdateStrategyType, Partition: intOrStr("0"), MaxUnavailable: intOrStr("100%")}
	g.Expect(env.client.Create(ctx, cs)).To(Succeed())
	var r1 string
	g.Eventually(func(g Gomega) {
		got := getCloneSet(g, ns, "web")
		r1 = got.Status.CurrentRevision
		g.Expect(r1).NotTo(BeEmpty())
		g.Expect(revisionsOf(g, ns)).To(Equal(map[string]int{r1: 4}))
	}, timeout).Should(Succeed())

	mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) { cs.Spec.Template.Spec.Containers[0].Image = "example.com/app:v2" })
	var r2 string
	g.Eventually(func(g Gomega) {
		got := getCloneSet(g, ns, "web")
		r2 = got.Status.UpdateRevision
		g.Expect(r2).NotTo(Equal(r1))
		g.Expect(got.Status.CurrentRevision).To(Equal(r2))
		g.Expect(revisionsOf(g, ns)).To(Equal(map[string]int{r2: 4}))
	}, timeout).Should(Succeed())

	// The lost write, then the next release, back to back.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest := &stepwisev1.CloneSet{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(cs), latest); err != nil {
			return err
		}
		latest.Status.CurrentRevision = r1
		return env.client.Status().Update(ctx, latest)
	})).To(Succeed())
	mutate(t, ns, "web", func(cs *stepwisev1.CloneSet) {
		cs.Spec.Template.Spec.Containers[0].Image = "example.com/app:v3"
		cs.Spec.UpdateStrategy.Partition = intOrStr("50%")
	})

	var r3 string
	g.Eventually(func(g Gomega) {
		got := getCloneSet(g, ns, "web")
		r3 = got.Status.UpdateRevision
		g.Expect(r3).NotTo(BeElementOf(r1, r2))
		g.Expect(got.Status.CurrentRevision).To(Equal(r2))
		g.Expect(revisionsOf(g, ns)).To(Equal(map[string]int{r2: 2, r3: 2}))
	}, timeout).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(revisionsOf(g, ns)).To(Equal(map[string]int{r2: 2, r3: 2}))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}
