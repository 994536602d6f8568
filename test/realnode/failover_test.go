package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/manager"
)

// leaseHolder is who holds the manager's leader-election Lease: the Pod's
// hostname (its name) and a random suffix.
func (b *bed) leaseHolder(g gomega.Gomega) string {
	lease := &coordinationv1.Lease{}
	g.Expect(b.client.Get(context.Background(), client.ObjectKey{Namespace: managerNamespace, Name: manager.LeaderElectionID}, lease)).To(gomega.Succeed())
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// readyManager is the one manager Pod, Ready and not terminating.
func (b *bed) readyManager(g gomega.Gomega) corev1.Pod {
	var ready []corev1.Pod
	for _, p := range b.managerPods(g) {
		if p.DeletionTimestamp == nil && containerStatus(&p, "manager").Ready {
			ready = append(ready, p)
		}
	}
	g.Expect(ready).To(gomega.HaveLen(1), "one Ready manager Pod")
	return ready[0]
}

// testFailover: the manager Pod is deleted while a rollout waits in its
// canary step; the Deployment's new Pod takes the Lease and finishes the
// rollout, and no app container restarts more than the update needs.
func testFailover(t *testing.T, b *bed) {
	d := b.newDelivery(t, "failover", 2, []stepwisev1.RolloutStep{step("50%", 20*time.Second), step("0", 0)})
	g := gomega.NewWithT(t)
	old := b.readyManager(g)
	g.Expect(b.leaseHolder(g)).To(gomega.HavePrefix(old.Name+"_"), "the running manager leads")

	v2 := d.commit("v2")
	d.waitRollout("canary step paused with one Pod on v2", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(gomega.Equal(stepwisev1.RolloutProgressing))
		g.Expect(ro.Status.CurrentStepIndex).To(gomega.Equal(ptr.To[int32](0)))
		g.Expect(count(d.versions(g), "v2")).To(gomega.Equal(1))
	})
	began := time.Now()
	g.Expect(b.client.Delete(t.Context(), &old)).To(gomega.Succeed())
	var next corev1.Pod
	g.Eventually(func(g gomega.Gomega) {
		next = b.readyManager(g)
		g.Expect(next.Name).NotTo(gomega.Equal(old.Name))
		g.Expect(b.leaseHolder(g)).To(gomega.HavePrefix(next.Name+"_"), "the new manager leads")
	}, 2*time.Minute, 250*time.Millisecond).Should(gomega.Succeed())
	t.Logf("manager %s took over from %s after %s", next.Name, old.Name, time.Since(began).Round(time.Millisecond))

	d.waitRollout("v2 promoted by the new manager", func(g gomega.Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(gomega.Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(gomega.Equal(v2))
		g.Expect(count(d.versions(g), "v2")).To(gomega.Equal(2))
	})
	g.Eventually(func(g gomega.Gomega) {
		for name, n := range d.expectSamePods(g) {
			g.Expect(n).To(gomega.BeEquivalentTo(1), "Pod %s: app container restarts", name)
		}
	}, 30*time.Second, 250*time.Millisecond).Should(gomega.Succeed())
	// And no more: a second restart would show up here.
	g.Consistently(func(g gomega.Gomega) {
		for name, n := range d.expectSamePods(g) {
			g.Expect(n).To(gomega.BeEquivalentTo(1), "Pod %s: app container restarts", name)
		}
	}, 3*time.Second, 500*time.Millisecond).Should(gomega.Succeed())
	g.Expect(strings.HasPrefix(b.leaseHolder(g), next.Name+"_")).To(gomega.BeTrue())
}
