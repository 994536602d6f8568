package rollout_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stepwise-dev/stepwise/internal/manager"
)

// A round of a CloneSet no Rollout governs can hold its worker for seconds
// (its Pod writes, at a busy API server). The workers of
// --cloneset-governed-concurrency are never taken by such rounds: here the
// one ordinary worker is held by a round of "fleet-a" whose Pod create does
// not return, "fleet-b" (ungoverned too) is refused the governed worker,
// and the CloneSet a Rollout governs gets its round there (its status names
// the Rollout); without a governed worker it waits for fleet-a's round.
func TestGovernedCloneSetFindsAWorkerWhileOthersHoldTheirs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name            string
		governedWorkers int
	}{{"with a governed worker", 1}, {"without", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ns := newNamespace(t)
			held := map[string]chan struct{}{"fleet-a": make(chan struct{}), "fleet-b": make(chan struct{})}
			holdOnce := map[string]*sync.Once{"fleet-a": {}, "fleet-b": {}}
			release := make(chan struct{})
			var releaseOnce sync.Once
			startController(t, ns, func(o *manager.Options) {
				o.Controllers = []string{manager.CloneSetController}
				o.CloneSetConcurrency = 1
				o.CloneSetGovernedConcurrency = ptr.To(tt.governedWorkers)
				o.WrapCloneSetClient = func(c client.Client) client.Client {
					return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
						Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
							if owner := metav1.GetControllerOf(obj); owner != nil && held[owner.Name] != nil {
								if _, ok := obj.(*corev1.Pod); ok {
									holdOnce[owner.Name].Do(func() { close(held[owner.Name]) })
									select {
									case <-release:
									case <-ctx.Done():
									}
								}
							}
							return c.Create(ctx, obj, opts...)
						},
					})
				}
			})
			// Runs before the manager stops (cleanups run last first).
			t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

			createRollout(t, newRollout(ns, "canary", cloneSetRef("canary"), stepAt(pct("50%")), stepAt(num(0))))
			createCloneSet(t, newCloneSet(ns, "fleet-a", 1, "1.0.0"))
			g.Eventually(held["fleet-a"], timeout, poll).Should(BeClosed(), "fleet-a's round never created its Pod")
			createCloneSet(t, newCloneSet(ns, "fleet-b", 1, "1.0.0"))
			g.Consistently(held["fleet-b"], 2*time.Second, poll).ShouldNot(BeClosed(), "fleet-b's round took a worker while fleet-a held the only ordinary one")
			createCloneSet(t, newCloneSet(ns, "canary", 2, "1.0.0"))

			governed := func(g Gomega) {
				cs := getCloneSet(t, ns, "canary")
				g.Expect(cs.Status.Rollout).NotTo(BeNil(), "no round of canary wrote its status yet")
				g.Expect(cs.Status.Rollout.Name).To(Equal("canary"))
			}
			if tt.governedWorkers > 0 {
				g.Eventually(governed, timeout, poll).Should(Succeed())
				g.Expect(getCloneSet(t, ns, "fleet-a").Status.ObservedGeneration).To(BeZero(), "fleet-a's round ended: the test proves nothing")
				// fleet-a's round ends and wakes fleet-b's.
				releaseOnce.Do(func() { close(release) })
				g.Eventually(held["fleet-b"], timeout, poll).Should(BeClosed(), "fleet-b's round was not woken when fleet-a's ended")
				return
			}
			g.Consistently(func() *corev1.ObjectReference {
				if getCloneSet(t, ns, "canary").Status.Rollout != nil {
					return &corev1.ObjectReference{}
				}
				return nil
			}, 3*time.Second, poll).Should(BeNil(), "canary got a round while the only worker was held")
			releaseOnce.Do(func() { close(release) })
			g.Eventually(governed, timeout, poll).Should(Succeed())
		})
	}
}
