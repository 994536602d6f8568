package traffic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager owns what Stepwise writes into Services and HTTPRoutes: the
// selectors of the Services during a release (with the revision key; at
// rest Stepwise lets go of them), the rules of the routes whose weights it
// sets, and its own canary Service and routes.
const FieldManager = "stepwise-traffic"

// Applier reads what a Rollout's traffic routing touches (Observe) and
// makes the writes Changes decided (Write). Reads go around the cache
// (Reader): no informer on HTTPRoutes is needed, the Rollout controller
// caches Services by their metadata only, and managed fields are there to
// name who else writes.
type Applier struct {
	Client client.Client
	Reader client.Reader
}

// ErrChanged says a write was refused because its object changed since it
// was read: the next round decides again from what is there now.
var ErrChanged = errors.New("changed since it was read")

// Write makes writes in order. An object that is gone is skipped (nothing
// of Stepwise's is left in it); one that changed since it was read stops
// the writes with ErrChanged.
func (a *Applier) Write(ctx context.Context, writes []Write) error {
	for _, w := range writes {
		err := a.write(ctx, w)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
			return fmt.Errorf("writing %s: %w", w.What, ErrChanged)
		default:
			return fmt.Errorf("writing %s: %w", w.What, err)
		}
	}
	return nil
}

func (a *Applier) write(ctx context.Context, w Write) error {
	switch w.Op {
	case ApplySelector, ApplyRules:
		return a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(w.Object.(*unstructured.Unstructured)), client.FieldOwner(FieldManager), client.ForceOwnership)
	case ReleaseSelector:
		return a.release(ctx, w.Object.(*corev1.Service))
	case Create:
		return a.Client.Create(ctx, w.Object, client.FieldOwner(FieldManager))
	case Apply:
		u, err := toUnstructured(w.Object)
		if err != nil {
			return err
		}
		delete(u, "status")
		if md, ok := u["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		return a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}), client.FieldOwner(FieldManager), client.ForceOwnership)
	case Delete:
		return a.Client.Delete(ctx, w.Object, client.Preconditions{UID: ptr.To(w.Object.GetUID()), ResourceVersion: ptr.To(w.Object.GetResourceVersion())})
	}
	return fmt.Errorf("unknown write %d", w.Op)
}

func toUnstructured(obj any) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	return m, nil
}

// release drops Stepwise's entry from a Service's managed fields: at rest
// the selector it holds is git's keys, and whoever applies git's manifest
// next owns it alone. The entry holds spec.selector only (all Stepwise
// applies to a Service it does not own). The write carries the
// resourceVersion read, so a concurrent change is never overwritten; it is
// retried in the next round.
func (a *Applier) release(ctx context.Context, svc *corev1.Service) error {
	fresh := &corev1.Service{}
	if err := a.Reader.Get(ctx, client.ObjectKeyFromObject(svc), fresh); err != nil {
		return fmt.Errorf("getting Service %s: %w", svc.Name, err)
	}
	kept := slices.DeleteFunc(slices.Clone(fresh.ManagedFields), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == FieldManager && e.Subresource == ""
	})
	if len(kept) == len(fresh.ManagedFields) {
		return nil
	}
	if len(kept) == 0 {
		// An empty list would leave managed fields as they are: with no
		// other manager, Stepwise's entry stays, harmlessly.
		return nil
	}
	patch := []map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": fresh.ResourceVersion},
		{"op": "replace", "path": "/metadata/managedFields", "value": kept},
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encoding the managed fields of Service %s: %w", svc.Name, err)
	}
	if err := a.Client.Patch(ctx, fresh, client.RawPatch(types.JSONPatchType, raw)); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			// Changed since read: the next round looks again.
			return nil
		}
		return fmt.Errorf("releasing the selector of Service %s: %w", svc.Name, err)
	}
	return nil
}
