package manager

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// versionlessRecorder records Events that name the object they are about
// without its resourceVersion. client-go's events.k8s.io broadcaster folds a
// repeated Event into a series only when the object it regards is equal,
// version included. A reconcile that read an object from a cache one write
// behind (another writer's metadata change between our status write and its
// watch event) would otherwise leave a second Event for the same transition,
// and `kubectl events` would tell it twice. The legacy recorder never looked
// at the version when it aggregated; this keeps that behaviour.
type versionlessRecorder struct {
	events.EventRecorder
}

func (r versionlessRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(withoutResourceVersion(regarding), withoutResourceVersion(related), eventtype, reason, action, note, args...)
}

// withoutResourceVersion returns a copy of obj with no resourceVersion, or
// obj itself when there is nothing to clear (nil stays an untyped nil, as
// the recorder tests for it).
func withoutResourceVersion(obj runtime.Object) runtime.Object {
	if obj == nil {
		return nil
	}
	accessor, err := meta.Accessor(obj)
	if err != nil || accessor.GetResourceVersion() == "" {
		return obj
	}
	out := obj.DeepCopyObject()
	if copied, err := meta.Accessor(out); err == nil {
		copied.SetResourceVersion("")
	}
	return out
}
