package rollout_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/manager"
)

// The CloneSet controller's status write carries the resourceVersion it
// read as a precondition. When another writer got in between, the write is
// refused with a conflict; and since a status-only change brings the
// CloneSet no reconcile, nothing else would write the status again. The
// controller writes it once more from a fresh read, in the same round.
//
// Here the round of a spec change that moves nothing but the status
// (minReadySeconds: one round, one status write, no Pod event after it)
// meets another writer's status write just before its own. The round
// handles it without failing: a failed round would be retried too, after a
// backoff, and this one did, until the manager could read a CloneSet
// fresh (the ClusterRole lacked get on clonesets).
func TestCloneSetStatusWriteThatConflictsIsWrittenAgain(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := newNamespace(t)
	var armed, interfered atomic.Bool
	var wantGeneration atomic.Int64
	startController(t, ns, func(o *managerSetup) {
		o.Controllers = []string{manager.CloneSetController}
		o.hooks.WrapCloneSetClient = func(c client.Client) client.Client {
			return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if _, ok := obj.(*stepwisev1.CloneSet); ok && sub == "status" && armed.Load() &&
						observesGeneration(patch, obj, wantGeneration.Load()) && interfered.CompareAndSwap(false, true) {
						// Another writer's status write, just before ours.
						other := &stepwisev1.CloneSet{}
						other.Namespace, other.Name = obj.GetNamespace(), obj.GetName()
						if err := env.client.Status().Patch(ctx, other, client.RawPatch(types.MergePatchType, []byte(`{"status":{"replicas":99}}`))); err != nil {
							return err
						}
					}
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
		}
	})
	createCloneSet(t, newCloneSet(ns, "web", 2, "1.0.0"))
	g.Eventually(func(g Gomega) {
		cs := getCloneSet(t, ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(cs.Generation))
		g.Expect(cs.Status.Replicas).To(BeEquivalentTo(2))
		g.Expect(cs.Status.UpdatedReplicas).To(BeEquivalentTo(2))
	}, timeout, poll).Should(Succeed())

	errorsBefore := reconcileErrors(t, "cloneset")
	cs := getCloneSet(t, ns, "web")
	wantGeneration.Store(cs.Generation + 1)
	armed.Store(true)
	if err := env.client.Patch(testContext(t), cs, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"minReadySeconds":5}}`))); err != nil {
		t.Fatalf("changing minReadySeconds: %v", err)
	}
	g.Eventually(interfered.Load, timeout, poll).Should(BeTrue(), "the status write of the new generation was not made")
	g.Eventually(func(g Gomega) {
		cs := getCloneSet(t, ns, "web")
		g.Expect(cs.Status.ObservedGeneration).To(Equal(wantGeneration.Load()))
		g.Expect(cs.Status.Replicas).To(BeEquivalentTo(2), "the other writer's status stayed")
	}, 5*time.Second, poll).Should(Succeed())
	// This package's other tests run no CloneSet controller (see
	// TestCloneSetControllerWatchingNamespaces, which is not parallel).
	if n := reconcileErrors(t, "cloneset") - errorsBefore; n != 0 {
		t.Errorf("%v CloneSet reconciles failed, want the conflict handled within the round", n)
	}
}

// reconcileErrors reads controller-runtime's count of failed reconciles of
// a controller, from its registry in this process.
func reconcileErrors(t *testing.T, controller string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// observesGeneration tells whether a status patch of obj writes
// observedGeneration generation.
func observesGeneration(patch client.Patch, obj client.Object, generation int64) bool {
	body, err := patch.Data(obj)
	if err != nil {
		return false
	}
	var written struct {
		Status struct {
			ObservedGeneration int64 `json:"observedGeneration"`
		} `json:"status"`
	}
	return json.Unmarshal(body, &written) == nil && written.Status.ObservedGeneration == generation
}
