package rollout

import (
	"context"
	"fmt"
	"slices"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/index"
)

// checkClaim stalls the round when another Rollout drives the workload,
// before anything is read from or written to it. The Rollouts come from the
// cache through the workload index; ro itself, read around the cache, is
// put in fresh.
func (r *Reconciler) checkClaim(ctx context.Context, rd *round) error {
	ro := rd.ro
	first, err := r.claimantOf(ctx, ro)
	if err != nil || first == nil || first.Name == ro.Name {
		return err
	}
	message := fmt.Sprintf("%s %s is driven by Rollout %s, created first (%s): this Rollout leaves its partition alone; "+
		"delete one of the two Rollouts (this one takes over when %s is deleted)",
		ro.Spec.WorkloadRef.Kind, ro.Spec.WorkloadRef.Name, first.Name, first.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"), first.Name)
	// Reconcile records the Warning Event (reason EventDuplicateRollout)
	// when this refusal is news.
	return stall(v1alpha1.ReasonDuplicateRollout, "%s", message)
}

// claimantOf is the Rollout that drives ro's workload, ro among them; nil
// when the workload kind is not supported (the adapter reports it).
func (r *Reconciler) claimantOf(ctx context.Context, ro *v1alpha1.Rollout) (*v1alpha1.Rollout, error) {
	gvk, err := workloadGVK(ro.Spec.WorkloadRef)
	if err != nil {
		return nil, nil //nolint:nilerr // the adapter reports an unsupported workload
	}
	var list v1alpha1.RolloutList
	if err := r.Client.List(ctx, &list, client.InNamespace(ro.Namespace),
		client.MatchingFields{index.RolloutWorkload: index.WorkloadKey(gvk.GroupKind(), ro.Spec.WorkloadRef.Name)}); err != nil {
		return nil, fmt.Errorf("listing the Rollouts of %s %s: %w", ro.Spec.WorkloadRef.Kind, ro.Spec.WorkloadRef.Name, err)
	}
	rollouts := slices.DeleteFunc(list.Items, func(o v1alpha1.Rollout) bool { return o.Name == ro.Name })
	rollouts = append(rollouts, *ro)
	return v1alpha1.Claimant(rollouts), nil
}

// claimant is the name of the Rollout that drove ro's workload until ro
// was deleted: ro's own when no other older one does (or its kind is not
// supported). A Rollout being deleted no longer claims anything, so ro is
// counted as it was before.
func (r *Reconciler) claimant(ctx context.Context, ro *v1alpha1.Rollout) (string, error) {
	live := ro.DeepCopy()
	live.DeletionTimestamp = nil
	first, err := r.claimantOf(ctx, live)
	if err != nil || first == nil {
		return ro.Name, err
	}
	return first.Name, nil
}

// news reports whether the Ready condition does not already say message
// for reason (setConditions writes a problem there, terminal or not): an
// Event is recorded once per refusal, not per reconcile.
func news(ro *v1alpha1.Rollout, reason, message string) bool {
	c := apimeta.FindStatusCondition(ro.Status.Conditions, meta.ReadyCondition)
	return c == nil || c.Reason != reason || c.Message != message
}

// siblingsOf maps a Rollout going away to the other Rollouts of its
// workload, so that the next in line takes over at once.
func (r *Reconciler) siblingsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	ro, ok := obj.(*v1alpha1.Rollout)
	if !ok {
		return nil
	}
	gvk, err := workloadGVK(ro.Spec.WorkloadRef)
	if err != nil {
		return nil
	}
	var list v1alpha1.RolloutList
	if err := r.Client.List(ctx, &list, client.InNamespace(ro.Namespace),
		client.MatchingFields{index.RolloutWorkload: index.WorkloadKey(gvk.GroupKind(), ro.Spec.WorkloadRef.Name)}); err != nil {
		log.FromContext(ctx).Error(err, "listing the other Rollouts of a workload", "rollout", ro.Name)
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Name != ro.Name {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ro.Namespace, Name: list.Items[i].Name}})
		}
	}
	return reqs
}

// goingAway passes the events after which a Rollout no longer claims its
// workload: its deletion, or a deletion timestamp set while a finalizer of
// another controller holds it.
var goingAway = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
}
