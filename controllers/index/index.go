// Package index holds the informer-cache indexes that more than one
// controller reads. internal/manager registers them once, whichever
// controllers it runs: a cache refuses a second index of the same name, and
// two indexes of the same field would each be kept up to date on every
// event.
package index

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// RolloutWorkload indexes Rollouts by the workload they drive, keyed by
// WorkloadKey. The Rollout controller reads it to find the other Rollouts
// of its workload; the CloneSet controller, to find the Rollouts that
// govern a CloneSet.
const RolloutWorkload = "spec.workloadRef"

// WorkloadKey is RolloutWorkload's key of a workload: "<group>/<kind>/<name>".
// The group tells Stepwise's CloneSet from OpenKruise's; the version is left
// out, as every version of a group names the same object.
func WorkloadKey(gk schema.GroupKind, name string) string {
	return gk.Group + "/" + gk.Kind + "/" + name
}

// rolloutWorkload is RolloutWorkload's key of a Rollout; none when its
// workloadRef.apiVersion does not parse.
func rolloutWorkload(obj client.Object) []string {
	ro, ok := obj.(*v1alpha1.Rollout)
	if !ok {
		return nil
	}
	ref := ro.Spec.WorkloadRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil
	}
	return []string{WorkloadKey(gv.WithKind(ref.Kind).GroupKind(), ref.Name)}
}

// Register adds every index of this package to the cache.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1alpha1.Rollout{}, RolloutWorkload, rolloutWorkload); err != nil {
		return fmt.Errorf("indexing Rollouts by workload: %w", err)
	}
	return nil
}
