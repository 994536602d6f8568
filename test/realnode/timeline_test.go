package realnode

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// record is one observed write: a Pod or an EndpointSlice as it was at
// revision rv.
type record struct {
	rv    int64
	pod   *corev1.Pod
	slice *discoveryv1.EndpointSlice
}

// timeline watches a namespace's Pods and EndpointSlices. Both come from
// the bed's single etcd, whose revisions order every write, so the records
// sorted by resourceVersion are the order things happened in. (Kubernetes
// calls resourceVersions opaque; on this bed they are etcd revisions.)
type timeline struct {
	mu      sync.Mutex
	records []record
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

func (b *bed) watchTimeline(t *testing.T, ns string) *timeline {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tl := &timeline{cancel: cancel}
	pods, err := b.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices, err := b.Clientset.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []watch.Interface{pods, slices} {
		tl.done.Add(1)
		go func() {
			defer tl.done.Done()
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				var r record
				switch o := ev.Object.(type) {
				case *corev1.Pod:
					r.pod = o
					r.rv, _ = strconv.ParseInt(o.ResourceVersion, 10, 64)
				case *discoveryv1.EndpointSlice:
					r.slice = o
					r.rv, _ = strconv.ParseInt(o.ResourceVersion, 10, 64)
				default:
					continue
				}
				tl.mu.Lock()
				tl.records = append(tl.records, r)
				tl.mu.Unlock()
			}
		}()
	}
	t.Cleanup(tl.stop)
	return tl
}

func (tl *timeline) stop() {
	tl.cancel()
	tl.done.Wait()
}

// sorted returns the records in revision order.
func (tl *timeline) sorted() []record {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := append([]record(nil), tl.records...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].rv < out[j].rv })
	return out
}

// inService is, after each record, whether ip is a ready endpoint of any
// of the namespace's EndpointSlices.
type serviceState struct {
	rv    int64
	ready bool
}

func inService(records []record, ip string) []serviceState {
	slices := map[string]*discoveryv1.EndpointSlice{}
	var out []serviceState
	for _, r := range records {
		if r.slice == nil {
			continue
		}
		slices[r.slice.Name] = r.slice
		ready := false
		for _, s := range slices {
			for _, ep := range s.Endpoints {
				for _, a := range ep.Addresses {
					if a == ip && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
						ready = true
					}
				}
			}
		}
		out = append(out, serviceState{rv: r.rv, ready: ready})
	}
	return out
}
