package cloneset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cache indexes, so that a reconcile reads its own CloneSet's revisions and
// Rollouts rather than every one of the namespace: listed whole, each
// reconcile deep-copied all of them, and with 200 CloneSets and 200
// Rollouts in one namespace those two lists were two fifths of everything
// the manager allocated (make bench-scale, heap profile). Rollouts are
// found by index.RolloutWorkload, which the Rollout controller reads too,
// and Pods by controller in the Pod informers' own indexers
// (podcache.ControllerIndex), which ownedPods reads.

// revisionOwnerIndex keys a ControllerRevision by the UID of the object that
// controls it: the UID, as IsControlledBy compares it, so that a CloneSet
// recreated under the same name never reads its predecessor's history.
const revisionOwnerIndex = "stepwise.dev/cloneset-revision-owner"

// controllerUID is the key of an object in revisionOwnerIndex: its
// controller's UID, whatever its kind (a UID names one object).
func controllerUID(obj client.Object) []string {
	owner := metav1.GetControllerOf(obj)
	if owner == nil {
		return nil
	}
	return []string{string(owner.UID)}
}

func (r *Reconciler) setUpIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &appsv1.ControllerRevision{}, revisionOwnerIndex, controllerUID); err != nil {
		return fmt.Errorf("indexing ControllerRevisions by CloneSet: %w", err)
	}
	return nil
}
