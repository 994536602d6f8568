package rollout

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// A round must decide from a Rollout that holds this controller's last
// write: its status is the controller's only memory, and a decision taken
// from a copy without the last step recorded would take that step again
// (see Reconcile). The cache can lag behind our own write, so reading the
// API server every round guarantees it, at one GET per round; under load
// that GET is a round trip the step's reaction waits for.
//
// The cache is enough whenever the copy it holds is the very object our
// last write produced: same resourceVersion, so the same status. Other
// writers' changes (git's, a request annotation) are watched and bring
// their own round; deciding from our last write until the cache has them
// is deciding just before they were made, and the status patch's
// optimistic lock refuses a write over a change the round did not see.

// ownWrites remembers, per Rollout, the resourceVersion its last write by
// this controller produced. A process that has not written a Rollout yet
// (just started, or newly leader) knows nothing of it and reads around the
// cache.
type ownWrites struct {
	mu      sync.Mutex
	written map[types.NamespacedName]string
}

// wrote records obj's resourceVersion, returned by the write that just
// succeeded, as this controller's last write of it.
func (w *ownWrites) wrote(obj *v1alpha1.Rollout) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written == nil {
		w.written = map[types.NamespacedName]string{}
	}
	w.written[client.ObjectKeyFromObject(obj)] = obj.ResourceVersion
}

// last is the resourceVersion of our last write of the Rollout at key, ""
// when none is known.
func (w *ownWrites) last(key types.NamespacedName) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written[key]
}

func (w *ownWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.written, key)
}

// readRollout reads the Rollout a round decides from: the cached copy when
// it is the object our last write produced, else the API server's.
func (r *Reconciler) readRollout(ctx context.Context, key types.NamespacedName) (*v1alpha1.Rollout, error) {
	if rv := r.mem.writes.last(key); rv != "" && r.cache != nil {
		cached := &v1alpha1.Rollout{}
		if err := r.cache.Get(ctx, key, cached); err == nil && cached.ResourceVersion == rv {
			return cached, nil
		}
	}
	ro := &v1alpha1.Rollout{}
	if err := r.APIReader.Get(ctx, key, ro); err != nil {
		return nil, err
	}
	return ro, nil
}
