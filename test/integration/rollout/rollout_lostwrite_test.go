package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// The Rollout records a decision in its status before it moves the
// workload. Here the k-th status write of the Rollout controller is lost
// (refused before it reaches the API server), for every k through a
// release: whichever is lost, the StatefulSet's partition only ever goes
// down, step by step, and the release completes. Had the partition been
// written first, the round after a lost write would read its own move as
// another writer's and put the partition back.
func TestALostStatusWriteNeverMovesThePartitionBack(t *testing.T) {
	t.Parallel()
	for k := int32(1); k <= 10; k++ {
		t.Run(fmt.Sprintf("write_%d_lost", k), func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t)
			pilotedStatefulSet(t, ns, "db", 4, "1.0.0")
			partitions := watchPartition(t, ns, "db")

			var writes atomic.Int32
			lost := &atomic.Bool{}
			startController(t, ns, func(o *managerSetup) {
				o.hooks.WrapRolloutClient = func(c client.Client) client.Client {
					return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
						SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
							if _, ok := obj.(*stepwisev1.Rollout); ok && sub == "status" && writes.Add(1) == k {
								lost.Store(true)
								return apierrors.NewServiceUnavailable("status write lost on purpose")
							}
							return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
						},
					})
				}
			})
			ref := stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
			createRollout(t, newRollout(ns, "db", ref, stepAt(num(3)), stepAt(num(1)), stepAt(num(0))))
			eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
			releaseStatefulSet(t, ns, "db", "2.0.0")
			waitStatefulSetPartition(t, ns, "db", 4)
			if !lost.Load() {
				t.Skipf("the release took fewer than %d status writes", k)
			}
			// The watch may deliver the last partition just after the read
			// above saw it.
			fromFirst4 := func() []int32 {
				got := partitions()
				if i := slices.Index(got, 4); i >= 0 {
					return got[i:]
				}
				return got
			}
			NewWithT(t).Eventually(fromFirst4).WithTimeout(timeout).WithPolling(poll).Should(Equal([]int32{4, 3, 1, 0, 4}),
				"partitions: never back up before the release is done")
		})
	}
}

// noWatch lets the interceptor wrap a client that does not watch; the
// controller watches through its cache, never through its client.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("the Rollout controller does not watch through its client")
}

// watchPartition records, from a watch, every partition a StatefulSet
// stores, without consecutive repeats (-1 while unset).
func watchPartition(t *testing.T, ns, name string) func() []int32 {
	t.Helper()
	wc, err := client.NewWithWatch(env.cfg, client.Options{Scheme: env.client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(testContext(t), &appsv1.StatefulSetList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []int32
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			sts, ok := ev.Object.(*appsv1.StatefulSet)
			if !ok || ev.Type == watch.Error || sts.Name != name {
				continue
			}
			p := int32(-1)
			if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
				p = *ru.Partition
			}
			mu.Lock()
			if n := len(seen); n == 0 || seen[n-1] != p {
				seen = append(seen, p)
			}
			mu.Unlock()
		}
	}()
	return func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}
