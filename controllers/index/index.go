// Package index holds every informer-cache index the controllers read.
// internal/manager registers them once, whichever controllers it runs: a
// cache refuses a second index of the same name, and two indexes of the
// same field would each be kept up to date on every event.
//
// They exist so that a reconcile reads its own objects rather than every
// one of its namespace: listed whole, each reconcile deep-copied all of
// them, and with 200 CloneSets and 200 Rollouts in one namespace the
// revisions and Rollouts so read were two fifths of everything the manager
// allocated (make bench-scale, heap profile). Pods are found by controller
// in the Pod informers' own indexers (podcache.ControllerIndex).
package index

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/traffic"
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

// RevisionOwner keys a ControllerRevision by the UID of the object that
// controls it: the UID, as IsControlledBy compares it, so that a CloneSet
// recreated under the same name never reads its predecessor's history.
const RevisionOwner = "stepwise.dev/cloneset-revision-owner"

// controllerUID is the key of an object in RevisionOwner: its controller's
// UID, whatever its kind (a UID names one object).
func controllerUID(obj client.Object) []string {
	owner := metav1.GetControllerOf(obj)
	if owner == nil {
		return nil
	}
	return []string{string(owner.UID)}
}

// RolloutTraffic indexes Rollouts by the objects their traffic routing
// reads (TrafficKey): the stable and canary Services, the routes it names
// and Stepwise's canary routes beside them, and, when a route is in
// another namespace, the Rollout's namespace for its ReferenceGrants (any
// name).
const RolloutTraffic = "spec.trafficRouting.objects"

// TrafficKey is RolloutTraffic's key of an object of kind:
// kind/namespace/name, without the name for a ReferenceGrant (any grant of
// the namespace may allow the route).
func TrafficKey(kind, namespace, name string) string {
	if kind == traffic.ReferenceGrantGVK.Kind {
		name = ""
	}
	return kind + "/" + namespace + "/" + name
}

func rolloutTraffic(obj client.Object) []string {
	ro, ok := obj.(*v1alpha1.Rollout)
	if !ok || ro.Spec.TrafficRouting == nil {
		return nil
	}
	tr := ro.Spec.TrafficRouting
	keys := []string{TrafficKey("Service", ro.Namespace, tr.StableService), TrafficKey("Service", ro.Namespace, tr.CanaryService.Name)}
	for _, ref := range tr.HTTPRoutes {
		ns := ref.Namespace
		if ns == "" {
			ns = ro.Namespace
		}
		keys = append(keys, TrafficKey("HTTPRoute", ns, ref.Name), TrafficKey("HTTPRoute", ns, traffic.CanaryRouteName(ref.Name)))
		if ns != ro.Namespace {
			// The grant that lets the route send to the Services, and its
			// owner's consent in its own namespace.
			keys = append(keys, TrafficKey(traffic.ReferenceGrantGVK.Kind, ro.Namespace, ""), TrafficKey(traffic.ReferenceGrantGVK.Kind, ns, ""))
		}
	}
	return keys
}

// Register adds every index of this package to the cache.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1alpha1.Rollout{}, RolloutWorkload, rolloutWorkload); err != nil {
		return fmt.Errorf("indexing Rollouts by workload: %w", err)
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Rollout{}, RolloutTraffic, rolloutTraffic); err != nil {
		return fmt.Errorf("indexing Rollouts by traffic object: %w", err)
	}
	if err := indexer.IndexField(ctx, &appsv1.ControllerRevision{}, RevisionOwner, controllerUID); err != nil {
		return fmt.Errorf("indexing ControllerRevisions by controller: %w", err)
	}
	return nil
}
