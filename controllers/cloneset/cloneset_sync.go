package cloneset

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/cloneset/plan"
	"github.com/stepwise-dev/stepwise/pkg/inplace"
)

// sync is the update path, in order: refresh in-place updates, compute the
// plan, move Pods along their lifecycle hooks, then create, delete and move
// Pods. It returns when to look again
// for time-driven work (grace periods, minReadySeconds); everything else
// arrives as watch events.
func (r *Reconciler) sync(ctx context.Context, round *syncRound) (time.Duration, error) {
	cs := round.cs
	key := types.NamespacedName{Namespace: cs.Namespace, Name: cs.Name}
	var requeue requeueAfter

	if err := r.labelRevisionHashes(ctx, round, key); err != nil {
		return 0, err
	}
	// Refreshes come first: they bring Pods back into service. Those left
	// over for want of budget count as unavailable in this round's plan,
	// which only makes it move fewer.
	budget := &podWriteBudget{left: maxPodsWrittenPerRound}
	if round.gov.rollout == "" {
		budget.handOver = r.mem.gateWaits.claim
	}
	refreshedAll, err := writePods(budget, round.pods, func(pod *corev1.Pod) (bool, error) {
		if pod.DeletionTimestamp != nil {
			return false, nil
		}
		delay, wrote, err := r.refreshPod(ctx, round, key, pod)
		requeue.at(delay)
		return wrote, err
	})
	if err != nil {
		return 0, err
	}

	input := r.planInput(cs, round)
	p := plan.Calculate(input)
	round.expectedUpdated = p.ExpectedUpdatedReplicas
	if err := r.syncLifecycle(ctx, round, key, p.Release); err != nil {
		return 0, err
	}
	if p.Blocked != nil {
		// A Pod created or restarted a moment ago is not ready either; only
		// a blocker that stays unready is worth a condition and an Event.
		if wait := blockerGrace(round, p.Blocked.Pods); wait > 0 {
			requeue.at(wait)
		} else {
			round.findings.blocked = p.Blocked.Message
		}
	}

	if err := r.createPods(ctx, round, key, p); err != nil {
		return 0, err
	}
	if err := r.deletePods(ctx, round, key, p.Delete); err != nil {
		return 0, err
	}
	updates, rollbacks, more := limitMoves(p.Update, p.Rollback, budget.remaining())
	more = more || !refreshedAll
	moves := make([]podMove, 0, len(updates)+len(rollbacks))
	for _, name := range updates {
		moves = append(moves, podMove{name, round.revs.update})
	}
	for _, name := range rollbacks {
		moves = append(moves, podMove{name, round.revs.current})
	}
	movedAll, err := writePods(budget, moves, func(m podMove) (bool, error) {
		delay, err := r.movePod(ctx, round, key, round.podsByName[m.pod], m.target)
		requeue.at(delay)
		return true, err
	})
	if err != nil {
		return 0, err
	}
	more = more || !movedAll
	if budget.handedOver {
		r.Metrics.RoundsHandedOver.WithLabelValues(cs.Namespace, cs.Name).Inc()
		log.FromContext(ctx).V(1).Info("round ended early: a governed CloneSet's Pod turned ready and waits for a worker", "podsWritten", budget.written)
	}
	if more {
		// The writes' own watch events bring the next round; this is the
		// safety net should none arrive.
		requeue.at(time.Second)
	}

	requeue.at(round.podCounts().nextAvailable)
	return requeue.soonest(), nil
}

func (r *Reconciler) inPlaceOptions(round *syncRound) inplace.UpdateOptions {
	opts := inplace.UpdateOptions{RevisionLabel: RevisionLabel, ServiceLabel: stepwisev1.RevisionHashLabel}
	if s := round.cs.Spec.UpdateStrategy.InPlaceUpdateStrategy; s != nil {
		opts.GracePeriodSeconds = s.GracePeriodSeconds
		opts.ContainerBatches = s.ContainerBatches
	}
	opts.GracePeriodSeconds = round.gov.gracePeriodSeconds(opts.GracePeriodSeconds)
	return opts
}

func (r *Reconciler) planInput(cs *stepwisev1.CloneSet, round *syncRound) plan.Input {
	strategy := cs.Spec.UpdateStrategy
	maxSurge := strategy.MaxSurge
	if strategy.Type == stepwisev1.InPlaceOnlyCloneSetUpdateStrategyType {
		zero := intstr.FromInt32(0)
		maxSurge = &zero
	}
	toDelete := map[string]bool{}
	for _, name := range cs.Spec.ScaleStrategy.PodsToDelete {
		toDelete[name] = true
	}
	in := plan.Input{
		Replicas:            ptr.Deref(cs.Spec.Replicas, 0),
		Partition:           round.gov.partition(strategy.Partition, round.revs.update.Name),
		MaxUnavailable:      strategy.MaxUnavailable,
		MaxSurge:            maxSurge,
		ScaleMaxUnavailable: cs.Spec.ScaleStrategy.MaxUnavailable,
		// While the update revision waits for the governing Rollout, no
		// Pod moves in either direction: Pods on the revision it last
		// acknowledged stay there until it decides where they go.
		Paused:           strategy.Paused || round.gov.awaiting(round.revs.update.Name) != "",
		CurrentRevision:  round.revs.current.Name,
		UpdateRevision:   round.revs.update.Name,
		PriorityStrategy: strategy.PriorityStrategy,
		ScatterStrategy:  strategy.ScatterStrategy,
	}
	in.Pods = make([]plan.Pod, 0, len(round.pods))
	for _, pod := range round.pods {
		available, _ := podAvailable(pod, cs.Spec.MinReadySeconds, round.now)
		in.Pods = append(in.Pods, plan.Pod{
			Name:              pod.Name,
			Revision:          pod.Labels[RevisionLabel],
			CreationTimestamp: pod.CreationTimestamp.Time,
			Ready:             podReady(pod),
			Available:         available,
			Scheduled:         pod.Spec.NodeName != "",
			// A Pod held by its preDelete hook is on its way out; one held
			// by its inPlaceUpdate hook is as good as updating.
			Terminating: pod.DeletionTimestamp != nil || lifecycleState(pod) == stepwisev1.LifecycleStatePreparingDelete,
			Updating: round.isUpdating(pod) ||
				(lifecycleState(pod) == stepwisev1.LifecycleStatePreparingUpdate && hooked(pod, inPlaceUpdateHook(cs))),
			Held:            lifecycleState(pod) == stepwisev1.LifecycleStatePreparingUpdate,
			SpecifiedDelete: toDelete[pod.Name] || pod.Labels[stepwisev1.SpecifiedDeleteLabel] == "true",
			Labels:          pod.Labels,
		})
	}
	return in
}

// createPods creates in slow-start batches (1, 2, 4, ...) like the
// ReplicaSet controller, so a quota or admission error costs one failed
// request, not hundreds.
func (r *Reconciler) createPods(ctx context.Context, round *syncRound, key types.NamespacedName, p plan.Plan) error {
	var queue []*appsv1.ControllerRevision
	for i := int32(0); i < p.CreateCurrentRevision; i++ {
		queue = append(queue, round.revs.current)
	}
	for i := int32(0); i < p.CreateUpdateRevision; i++ {
		queue = append(queue, round.revs.update)
	}
	for batch := 1; len(queue) > 0; batch *= 2 {
		n := min(batch, len(queue))
		for _, rev := range queue[:n] {
			pod, err := r.newPod(round.cs, rev)
			if err != nil {
				return err
			}
			if err := r.Client.Create(ctx, pod); err != nil {
				msg := fmt.Sprintf("creating pod on revision %s: %v", rev.Name, err)
				round.failed(stepwisev1.EventFailedCreate, msg, func(f *statusFindings) { f.scaleError = msg })
				return fmt.Errorf("%s", msg)
			}
			r.mem.expectations.expectCreate(key, pod.Name)
			round.noteAction(stepwisev1.EventSuccessfulCreate, "created ", pod.Name, " on revision "+rev.Name)
		}
		queue = queue[n:]
	}
	return nil
}

func (r *Reconciler) deletePods(ctx context.Context, round *syncRound, key types.NamespacedName, deletions []plan.Deletion) error {
	for _, d := range deletions {
		pod := round.podsByName[d.Name]
		if pod == nil {
			continue
		}
		if err := r.deleteOrHold(ctx, round, key, pod, stepwisev1.EventSuccessfulDelete, d.Reason); err != nil {
			return err
		}
	}
	return nil
}

// deleteOrHold deletes a Pod unless its preDelete hook holds it.
func (r *Reconciler) deleteOrHold(ctx context.Context, round *syncRound, key types.NamespacedName, pod *corev1.Pod, reason, why string) error {
	if hook := preDeleteHook(round.cs); hooked(pod, hook) {
		return r.holdForHook(ctx, round, key, pod, hook, stepwisev1.LifecycleStatePreparingDelete)
	}
	return r.deletePod(ctx, round, key, pod, reason, why)
}

// deletePod deletes with a UID precondition: a Pod recreated under the same
// name since our cache saw it is not ours to delete.
func (r *Reconciler) deletePod(ctx context.Context, round *syncRound, key types.NamespacedName, pod *corev1.Pod, reason, why string) error {
	err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		msg := fmt.Sprintf("deleting pod %s (%s): %v", pod.Name, why, err)
		round.failed(stepwisev1.EventFailedDelete, msg, func(f *statusFindings) { f.scaleError = msg })
		return fmt.Errorf("%s", msg)
	}
	r.mem.expectations.expectDelete(key, pod.Name)
	round.noteAction(reason, "deleted ", pod.Name, ": "+why)
	return nil
}

// movePod brings one Pod to the target revision the way decideMove
// chooses. It returns when to look at the Pod again (grace period).
func (r *Reconciler) movePod(ctx context.Context, round *syncRound, key types.NamespacedName, pod *corev1.Pod, target *appsv1.ControllerRevision) (time.Duration, error) {
	if pod == nil {
		return 0, nil
	}
	cs := round.cs
	hook := inPlaceUpdateHook(cs)
	move, err := decideMove(pod, round.revs, target, cs.Spec.UpdateStrategy.Type, hook)
	if err != nil {
		return 0, err
	}
	switch move.way {
	case moveRecreate:
		r.Metrics.PodsRecreated.WithLabelValues(cs.Namespace, cs.Name).Inc()
		return 0, r.deleteOrHold(ctx, round, key, pod, stepwisev1.EventSuccessfulUpdatePodReCreate, move.note)
	case moveRefused:
		r.Metrics.InPlaceUpdatesFailed.WithLabelValues(cs.Namespace, cs.Name).Inc()
		round.failed(stepwisev1.EventFailedUpdatePodInPlace, move.note, func(f *statusFindings) { f.failedUpdate = move.note })
		return 0, nil
	case moveHeldForHook:
		return 0, r.holdForHook(ctx, round, key, pod, hook, stepwisev1.LifecycleStatePreparingUpdate)
	}
	res := r.engine.Update(ctx, pod, move.spec, r.inPlaceOptions(round))
	if res.Err != nil {
		r.Metrics.InPlaceUpdatesFailed.WithLabelValues(cs.Namespace, cs.Name).Inc()
		round.failed(stepwisev1.EventFailedUpdatePodInPlace, fmt.Sprintf("updating pod %s in place to revision %s: %v", pod.Name, target.Name, res.Err), nil)
		return 0, fmt.Errorf("updating pod %s in place: %w", pod.Name, res.Err)
	}
	r.expectWritten(key, res.Pod)
	r.Metrics.InPlaceUpdatesStarted.WithLabelValues(cs.Namespace, cs.Name).Inc()
	round.noteAction(stepwisev1.EventSuccessfulUpdatePodInPlace, "updating ", pod.Name, " in place to revision "+target.Name)
	log.FromContext(ctx).V(1).Info("updating pod in place", "pod", pod.Name, "revision", target.Name)
	return res.Delay, nil
}

// refreshPod advances an in-place update already under way (grace period,
// next container batch, completion), records what happened and says
// whether it wrote the Pod.
func (r *Reconciler) refreshPod(ctx context.Context, round *syncRound, key types.NamespacedName, pod *corev1.Pod) (time.Duration, bool, error) {
	cs := round.cs
	res := r.engine.Refresh(ctx, pod)
	if res.CorruptState != nil {
		delay, err := r.redrive(ctx, round, key, pod, res.CorruptState)
		return delay, err == nil, err
	}
	if res.Err != nil {
		return 0, false, fmt.Errorf("refreshing pod %s: %w", pod.Name, res.Err)
	}
	r.expectWritten(key, res.Pod)
	if res.Phase == inplace.PhaseCompleted {
		r.Metrics.InPlaceUpdatesSucceeded.WithLabelValues(cs.Namespace, cs.Name).Inc()
		// Refresh leaves pod as read, so its records still say when the
		// update began; read only for the few Pods that just completed.
		if state, err := inplace.ParseState(pod); err == nil && state != nil && !state.UpdateTimestamp.IsZero() {
			r.Metrics.InPlaceUpdateDuration.WithLabelValues(cs.Namespace, cs.Name).Observe(round.now.Sub(state.UpdateTimestamp.Time).Seconds())
		}
	}
	return res.Delay, res.Pod != nil, nil
}

// redrive restarts the update of a Pod whose in-place records are unreadable:
// the Pod is driven to the whole template of the revision its label names,
// and only images that differ are patched, so nothing restarts needlessly.
func (r *Reconciler) redrive(ctx context.Context, round *syncRound, key types.NamespacedName, pod *corev1.Pod, cause error) (time.Duration, error) {
	round.tell(corev1.EventTypeWarning, stepwisev1.EventCorruptedInPlaceState,
		fmt.Sprintf("pod %s: %v; treating it as a fresh update", pod.Name, cause))
	rev := round.revs.byName[pod.Labels[RevisionLabel]]
	if rev == nil {
		rev = round.revs.update
	}
	template, err := templateOf(rev)
	if err != nil {
		return 0, err
	}
	res := r.engine.Update(ctx, pod, inplace.SpecForTemplate(template, rev.Name), r.inPlaceOptions(round))
	if res.Err != nil {
		return 0, fmt.Errorf("re-driving pod %s after corrupt state: %w", pod.Name, res.Err)
	}
	r.expectWritten(key, res.Pod)
	return res.Delay, nil
}

func (r *Reconciler) expectWritten(key types.NamespacedName, written *corev1.Pod) {
	if written != nil {
		r.mem.expectations.expectResourceVersion(key, written.Name, written.ResourceVersion)
	}
}
