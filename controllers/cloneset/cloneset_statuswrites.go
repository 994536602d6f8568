package cloneset

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// statusWrites remembers each CloneSet's last status write until the
// informer cache holds it. A Pod event often brings a CloneSet back before
// the cache has seen the status the previous round wrote; that round's
// CloneSet is then one write behind, and its status patch, whose
// precondition is the resourceVersion read, was refused with a conflict
// (147 of 2,359 status writes in a 1800-Pod run of make bench-scale), a
// round trip lost on the way from a ready Pod to the Rollout's next step.
// With the write remembered, the round starts from the status and
// resourceVersion it produced instead.
//
// Like expectations it is per manager and only saves work: it holds one
// status per CloneSet at most, and forgetting
// (a restart) costs a conflict, and a write by anyone else makes the
// cached version differ from the one remembered, which is then dropped.
type statusWrites struct {
	mu    sync.Mutex
	bySet map[types.NamespacedName]statusWrite
}

// statusWrite is one status patch that landed: over resourceVersion from,
// producing resourceVersion to, with status.
type statusWrite struct {
	uid      types.UID
	from, to string
	status   *stepwisev1.CloneSetStatus
}

func newStatusWrites() *statusWrites {
	return &statusWrites{bySet: map[types.NamespacedName]statusWrite{}}
}

// record remembers that a status patch over resourceVersion from produced
// cs (its resourceVersion and status, as the API server answered).
func (w *statusWrites) record(cs *stepwisev1.CloneSet, from string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bySet[types.NamespacedName{Namespace: cs.Namespace, Name: cs.Name}] = statusWrite{
		uid: cs.UID, from: from, to: cs.ResourceVersion, status: cs.Status.DeepCopy(),
	}
}

// catchUp brings cs, read from the cache, up to our last status write when
// the cache holds exactly the version that write went over: cs gets the
// status and resourceVersion the write produced, and catchUp says true.
// A cache that holds anything else has seen the write, or a later one by
// someone else; the record is dropped.
func (w *statusWrites) catchUp(cs *stepwisev1.CloneSet) bool {
	key := types.NamespacedName{Namespace: cs.Namespace, Name: cs.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.bySet[key]
	if !ok {
		return false
	}
	if last.uid != cs.UID || last.from != cs.ResourceVersion {
		delete(w.bySet, key)
		return false
	}
	cs.ResourceVersion = last.to
	cs.Status = *last.status.DeepCopy()
	return true
}

// forget drops a deleted CloneSet's record.
func (w *statusWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.bySet, key)
}
