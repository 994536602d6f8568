package cloneset

import (
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// expectationTimeout bounds how long a missing watch event can hold a
// CloneSet back; after it the cache is trusted again, as in kube-controller-manager.
const expectationTimeout = 30 * time.Second

// expectations records this controller's own Pod writes until the informer
// cache reflects them, so a reconcile never creates, deletes or updates twice
// on a stale view. It is per manager, not global, and is only an optimisation
// over the API server's truth: losing it (restart) is safe.
type expectations struct {
	mu    sync.Mutex
	now   func() time.Time
	bySet map[types.NamespacedName]*setExpectations
}

type setExpectations struct {
	// creates and deletes hold Pod names; resourceVersions the version our
	// last write to a Pod produced.
	creates          map[string]time.Time
	deletes          map[string]time.Time
	resourceVersions map[string]podWrite
}

type podWrite struct {
	resourceVersion string
	at              time.Time
}

func newExpectations(now func() time.Time) *expectations {
	return &expectations{now: now, bySet: map[types.NamespacedName]*setExpectations{}}
}

func (e *expectations) get(key types.NamespacedName) *setExpectations {
	set := e.bySet[key]
	if set == nil {
		set = &setExpectations{creates: map[string]time.Time{}, deletes: map[string]time.Time{}, resourceVersions: map[string]podWrite{}}
		e.bySet[key] = set
	}
	return set
}

func (e *expectations) expectCreate(key types.NamespacedName, podName string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key).creates[podName] = e.now()
}

func (e *expectations) expectDelete(key types.NamespacedName, podName string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key).deletes[podName] = e.now()
}

func (e *expectations) expectResourceVersion(key types.NamespacedName, podName, resourceVersion string) {
	if resourceVersion == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key).resourceVersions[podName] = podWrite{resourceVersion: resourceVersion, at: e.now()}
}

func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.bySet, key)
}

// satisfied reports whether the cached Pods show every write this controller
// made for the CloneSet, dropping the ones that are seen or timed out. It
// returns the names still awaited, for logging.
func (e *expectations) satisfied(key types.NamespacedName, byName map[string]*corev1.Pod) (bool, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	set := e.bySet[key]
	if set == nil {
		return true, nil
	}
	now := e.now()
	var waiting []string
	for name, at := range set.creates {
		if byName[name] != nil || now.Sub(at) > expectationTimeout {
			delete(set.creates, name)
			continue
		}
		waiting = append(waiting, "create "+name)
	}
	for name, at := range set.deletes {
		pod := byName[name]
		if pod == nil || pod.DeletionTimestamp != nil || now.Sub(at) > expectationTimeout {
			delete(set.deletes, name)
			continue
		}
		waiting = append(waiting, "delete "+name)
	}
	for name, write := range set.resourceVersions {
		pod := byName[name]
		if pod == nil || !olderThan(pod.ResourceVersion, write.resourceVersion) || now.Sub(write.at) > expectationTimeout {
			delete(set.resourceVersions, name)
			continue
		}
		waiting = append(waiting, "update "+name)
	}
	if len(waiting) == 0 {
		// A Go map keeps the room it grew to: a CloneSet that created
		// 1,000 Pods would hold three maps of that size for its lifetime.
		delete(e.bySet, key)
	}
	return len(waiting) == 0, waiting
}

// olderThan compares resourceVersions. They are opaque by contract but etcd
// revisions in practice; anything unparsable is treated as caught up rather
// than holding the CloneSet back.
func olderThan(cached, written string) bool {
	c, err1 := strconv.ParseUint(cached, 10, 64)
	w, err2 := strconv.ParseUint(written, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	return c < w
}
