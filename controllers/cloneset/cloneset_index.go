package cloneset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cache indexes, so that a reconcile reads its own CloneSet's revisions and
// Rollouts rather than every one of the namespace: listed whole, each
// reconcile deep-copied all of them, and with 200 CloneSets and 200
// Rollouts in one namespace those two lists were two fifths of everything
// the manager allocated (make bench-scale, heap profile). Rollouts are
// found by index.RolloutWorkload, which the Rollout controller reads too.

// revisionOwnerIndex keys a ControllerRevision by the UID of the object that
// controls it: the UID, as IsControlledBy compares it, so that a CloneSet
// recreated under the same name never reads its predecessor's history.
const revisionOwnerIndex = "stepwise.dev/cloneset-revision-owner"

// controllerUID is the key of an object in revisionOwnerIndex and
// podControllerIndex: its controller's UID, whatever its kind (a UID names
// one object).
func controllerUID(obj client.Object) []string {
	owner := metav1.GetControllerOf(obj)
	if owner == nil {
		return nil
	}
	return []string{string(owner.UID)}
}

// podControllerIndex keys a cached Pod by its controller's UID, in the Pod
// informer's own indexer, which ownedPods reads directly.
const podControllerIndex = "stepwise.dev/pod-controller"

// podController is controllerUID for the informer's own indexer, which
// hands it untyped objects.
func podController(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	return controllerUID(pod), nil
}

func (r *Reconciler) setUpIndexes(ctx context.Context, indexer client.FieldIndexer, informers cache.Informers) error {
	if err := indexer.IndexField(ctx, &appsv1.ControllerRevision{}, revisionOwnerIndex, controllerUID); err != nil {
		return fmt.Errorf("indexing ControllerRevisions by CloneSet: %w", err)
	}
	informer, err := informers.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("getting the Pod informer: %w", err)
	}
	// controller-runtime hands out client-go's shared informer when it
	// watches every namespace; its indexer is the only read of the cache
	// that returns the stored objects without copying each into a list.
	if withIndexer, ok := informer.(interface{ GetIndexer() toolscache.Indexer }); ok {
		if err := informer.AddIndexers(toolscache.Indexers{podControllerIndex: podController}); err != nil {
			return fmt.Errorf("indexing Pods by controller: %w", err)
		}
		r.podIndexer = withIndexer.GetIndexer()
		return nil
	}
	// Watching a list of namespaces (--namespaces), it keeps an informer
	// per namespace behind one without an indexer of its own: Pods are then
	// listed through the cache by the same key, copied into the list.
	if err := indexer.IndexField(ctx, &corev1.Pod{}, podControllerIndex, controllerUID); err != nil {
		return fmt.Errorf("indexing Pods by controller: %w", err)
	}
	return nil
}
