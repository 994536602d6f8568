package rollout

import (
	"context"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/rollback"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// rollBackCanaries plans the rollback of an aborted rollout on a workload
// that does not move updated Pods back itself when the partition rises:
// rollback.Decide picks the canary Pods to delete within the workload's
// budget (deleted by finish once the status says so), and the workload
// recreates each on its current (the stable) revision. A workload that
// rolls back in place by itself only has it followed. The plan is made
// again each round from the Pods, and Pod and workload events bring the
// next round; the only thing remembered is which Pods this process deleted
// that the cache does not show deleted yet (memory.deletedCanaries).
// CanaryRollbackCondition says what is going on, and at the end how long it
// took since the abort (its True condition's transition time).
func (r *Reconciler) rollBackCanaries(ctx context.Context, rd *round) error {
	wl, obs := rd.wl, rd.obs
	ro := rd.ro
	if ro.Status.Phase != v1alpha1.RolloutAborted {
		apimeta.RemoveStatusCondition(&ro.Status.Conditions, v1alpha1.CanaryRollbackCondition)
		r.mem.deletedCanaries.forget(client.ObjectKeyFromObject(ro))
		return nil
	}
	if c := apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.CanaryRollbackCondition); c != nil && c.Reason == v1alpha1.ReasonCanaryPodsRolledBack {
		// Done: with the partition at 100% no Pod becomes a canary again
		// while the Rollout stays aborted, so its Pods need not be read
		// again on every round.
		return nil
	}
	pods, err := rd.workloadPods(ctx)
	if err != nil {
		return err
	}
	partition, err := obs.PartitionPods()
	settled := err == nil && obs.ObservedGenerationCurrent() && partition >= obs.Replicas
	setName := ""
	if obs.CountsOnly {
		// A StatefulSet: its Pods are named after their ordinals.
		setName = ro.Spec.WorkloadRef.Name
	}
	observed := rollback.FromPods(pods, ro.Spec.WorkloadRef.Name, appsv1.ControllerRevisionHashLabelKey, obs.MinReadySeconds, rd.now)
	r.mem.deletedCanaries.settle(client.ObjectKeyFromObject(ro), observed)
	plan := rollback.Decide(rollback.Input{
		SetName:        setName,
		Pods:           observed,
		Replicas:       obs.Replicas,
		Target:         obs.CurrentRevision,
		Stable:         ro.Status.StableRevision,
		Settled:        settled,
		MaxUnavailable: obs.MaxUnavailable,
		InPlace:        obs.RollsBack,
	})

	previous := apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.CanaryRollbackCondition)
	inProgress := previous != nil && previous.Status == metav1.ConditionTrue
	switch {
	case plan.Done() && inProgress:
		message := plan.DoneMessage(rd.now.Sub(previous.LastTransitionTime.Time))
		setCanaryRollback(ro, rd, metav1.ConditionFalse, v1alpha1.ReasonCanaryPodsRolledBack, message)
		rd.events = append(rd.events, step.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventCanaryRollbackCompleted, Message: message})
		return nil
	case plan.Done(), len(plan.Canaries) == 0 && !inProgress:
		// Nothing of the rollback's to wait for: a stable Pod that is not
		// ready is the workload's business.
		return nil
	}

	if len(plan.Delete) > 0 {
		rd.canaryDeletion = &canaryDeletion{workload: wl, pods: plan.Delete, target: plan.Target}
	}
	setCanaryRollback(ro, rd, metav1.ConditionTrue, v1alpha1.ReasonRollingBackCanaryPods, plan.Message())
	return nil
}

// canaryDeletion is the canary Pods a rollback deletes, once the status
// that says so (CanaryRollbackCondition) is written.
type canaryDeletion struct {
	workload workload.Workload
	// pods are the Pods to delete, as rollback.Decide read them.
	pods []rollback.Pod
	// target is the revision they come back on.
	target string
}

// deleteCanaries deletes what a round's rollback planned. The Event is
// recorded also when a deletion fails after others: what was deleted is
// done, and the next round, which plans again from the Pods, does not
// repeat it. The deletions are the round's last act, so a round queued
// meanwhile starts at once, possibly before the Pod cache shows them: each
// deleted Pod is remembered until it does.
func (r *Reconciler) deleteCanaries(ctx context.Context, ro *v1alpha1.Rollout, act *canaryDeletion) error {
	key := client.ObjectKeyFromObject(ro)
	var deleted []rollback.Pod
	defer func() {
		if len(deleted) == 0 {
			return
		}
		r.event(ro, step.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventCanaryPodDeleted,
			Message: rollback.DeletedNote(deleted, ro.Spec.WorkloadRef.Kind+" "+ro.Spec.WorkloadRef.Name, act.target)})
	}()
	for _, p := range act.pods {
		if err := act.workload.DeletePod(ctx, p.Name, p.UID); err != nil {
			return err
		}
		r.mem.deletedCanaries.deleted(key, p.UID)
		deleted = append(deleted, p)
		log.FromContext(ctx).Info("canary Pod deleted for rollback", "pod", p.Name, "revision", p.Revision, "target", act.target)
	}
	return nil
}

// deletedCanaries are the canary Pods this process deleted for each
// Rollout's rollback that the Pod cache still shows without a deletion
// timestamp. It holds at most a rollback budget of Pods per Rollout: an
// entry goes once the cache shows its Pod terminating or gone, and all of a
// Rollout's go with its rollback.
type deletedCanaries struct {
	mu        sync.Mutex
	byRollout map[types.NamespacedName]map[types.UID]struct{}
}

func (d *deletedCanaries) deleted(key types.NamespacedName, uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byRollout == nil {
		d.byRollout = map[types.NamespacedName]map[types.UID]struct{}{}
	}
	if d.byRollout[key] == nil {
		d.byRollout[key] = map[types.UID]struct{}{}
	}
	d.byRollout[key][uid] = struct{}{}
}

// settle marks as terminating the Pods that this process deleted and the
// cache does not show so yet, so the plan neither deletes them again nor
// counts them available, and forgets the Pods the cache shows terminating
// or no longer lists.
func (d *deletedCanaries) settle(key types.NamespacedName, pods []rollback.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	uids := d.byRollout[key]
	if len(uids) == 0 {
		return
	}
	pending := make(map[types.UID]struct{}, len(uids))
	for i := range pods {
		if _, ok := uids[pods[i].UID]; !ok || pods[i].Terminating {
			continue
		}
		pods[i].Terminating = true
		pending[pods[i].UID] = struct{}{}
	}
	if len(pending) == 0 {
		delete(d.byRollout, key)
		return
	}
	d.byRollout[key] = pending
}

func (d *deletedCanaries) forget(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.byRollout, key)
}

func setCanaryRollback(ro *v1alpha1.Rollout, rd *round, status metav1.ConditionStatus, reason, message string) {
	apimeta.SetStatusCondition(&ro.Status.Conditions, metav1.Condition{
		Type: v1alpha1.CanaryRollbackCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: ro.Generation, LastTransitionTime: metav1.NewTime(rd.now).Rfc3339Copy(),
	})
}

// rolloutsOfPod maps a Pod of a StatefulSet or an OpenKruise CloneSet to
// the Rollouts driving its controller: a rollback waits for each Pod it
// deleted to come back ready, and the workload's status may have been read
// before the Pod cache saw it.
func (r *Reconciler) rolloutsOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	owner := metav1.GetControllerOf(obj)
	if owner == nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return nil
	}
	gvk := gv.WithKind(owner.Kind)
	if gvk != workload.StatefulSetGVK && gvk != workload.KruiseCloneSetGVK {
		return nil
	}
	u := &metav1.PartialObjectMetadata{}
	u.SetNamespace(obj.GetNamespace())
	u.SetName(owner.Name)
	return r.rolloutsOf(gvk)(ctx, u)
}

// podMoved passes the Pod events a rollback waits for: a Pod created or
// deleted, its readiness changed, or its deletion started.
var podMoved = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return true },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldPod, okOld := e.ObjectOld.(*corev1.Pod)
		newPod, okNew := e.ObjectNew.(*corev1.Pod)
		if !okOld || !okNew {
			return false
		}
		// A revision label that moves is a Pod changing sides under
		// traffic routing's weights, which follow the ready Pods.
		return podReady(oldPod.Status.Conditions) != podReady(newPod.Status.Conditions) || oldPod.DeletionTimestamp.IsZero() != newPod.DeletionTimestamp.IsZero() ||
			oldPod.Labels[appsv1.ControllerRevisionHashLabelKey] != newPod.Labels[appsv1.ControllerRevisionHashLabelKey]
	},
}

// podReady reads the Ready condition among a Pod's conditions.
func podReady(conditions []corev1.PodCondition) corev1.ConditionStatus {
	for _, c := range conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
