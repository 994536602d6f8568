package rollout

import (
	"context"
	"errors"

	"github.com/fluxcd/pkg/apis/meta"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/traffic"
)

// finish writes the status once per reconcile, and only when it changed;
// observedGeneration and lastHandledReconcileAt move only when the
// reconcile succeeded. Events and metrics are recorded once the status is
// written, so a reconcile that lost a conflict does not report twice what
// its retry will report again.
func (r *Reconciler) finish(ctx context.Context, original *v1alpha1.Rollout, rd *round, result ctrl.Result, reconcileErr error) (ctrl.Result, error) {
	if ctx.Err() != nil {
		// The manager is stopping: nothing can be written, and the next
		// leader decides again from the status as it stands.
		return ctrl.Result{}, nil
	}
	ro := rd.ro
	setConditions(ro, rd, reconcileErr)
	if r.Notifier != nil {
		// Intent before act, as for the partition: the transition is
		// recorded in the status written below, and posted only once that
		// write succeeded, so no manager posts it twice.
		r.planNotification(rd)
	}
	if reconcileErr == nil {
		ro.Status.ObservedGeneration = ro.Generation
		if token, ok := meta.ReconcileAnnotationValue(ro.Annotations); ok {
			ro.Status.SetLastHandledReconcileRequest(token)
		}
	}
	if !apiequality.Semantic.DeepEqual(original.Status, ro.Status) {
		if err := r.patchStatus(ctx, original, ro); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				return ctrl.Result{}, nil
			case apierrors.IsConflict(err) && reconcileErr == nil:
				log.FromContext(ctx).V(1).Info("Rollout changed since it was read; deciding again", "error", err.Error())
				return ctrl.Result{RequeueAfter: conflictRequeue}, nil
			}
			return result, errors.Join(reconcileErr, err)
		}
	}
	r.record(original, rd)
	if rd.notify != nil {
		r.handOver(*rd.notify)
	}
	if reconcileErr == nil && len(rd.trafficWrites) > 0 {
		// Only now that what they write is on record: had the status write
		// been lost, nothing would say what to take out again.
		if err := r.trafficApplier().Write(ctx, rd.trafficWrites); err != nil {
			if errors.Is(err, traffic.ErrChanged) {
				log.FromContext(ctx).V(1).Info("a Service or route changed since it was read; deciding again", "error", err.Error())
				return ctrl.Result{RequeueAfter: conflictRequeue}, nil
			}
			return result, err
		}
	}
	if reconcileErr == nil && rd.apply != nil {
		// Only now that the decision is on record: had the status write
		// been lost, the next round would read this move as another
		// writer's and move Pods back.
		if err := r.applyPartition(ctx, rd); err != nil {
			return result, err
		}
	}
	if rd.canaryDeletion != nil {
		// Planned from the Pods as they are, again each round: a round
		// whose later steps failed still rolls back, as the status it wrote
		// says.
		if err := r.deleteCanaries(ctx, ro, rd.canaryDeletion); err != nil {
			return result, errors.Join(reconcileErr, err)
		}
	}
	return result, reconcileErr
}

// record emits the round's Events and updates the Prometheus metrics.
func (r *Reconciler) record(original *v1alpha1.Rollout, rd *round) {
	ro := rd.ro
	if rd.decision != nil {
		for _, e := range rd.decision.Events {
			r.event(ro, e)
		}
	}
	for _, e := range rd.events {
		r.event(ro, e)
	}
	if r.Metrics == nil {
		return
	}
	r.Metrics.setState(ro.Namespace, ro.Name, ro.Status.Phase, ro.Status.CurrentStepIndex)
	for _, m := range rd.measured {
		r.Metrics.measured(ro.Namespace, ro.Name, m.metric, string(m.m.Phase), m.m.Value)
	}
	if rd.decision == nil {
		return
	}
	outcome := stepOutcome(rd.decision.Events)
	before, after := original.Status.CurrentStepIndex, ro.Status.CurrentStepIndex
	if outcome != "" && before != nil && original.Status.StepStartedAt != nil && (after == nil || *after != *before || outcome == "restarted") {
		r.Metrics.stepEnded(ro.Namespace, ro.Name, outcome, rd.now.Sub(original.Status.StepStartedAt.Time))
	}
	if !rd.rolloutStart.IsZero() {
		r.Metrics.rolloutEnded(ro.Namespace, ro.Name, outcome, rd.now.Sub(rd.rolloutStart))
	}
}

// stepOutcome names how the step in progress ended, from the decision's
// Events; "" when it did not.
func stepOutcome(evs []step.Event) string {
	for _, e := range evs {
		switch e.Reason {
		case v1alpha1.EventRolloutAborted:
			return "aborted"
		case v1alpha1.EventRolloutCompleted:
			return "completed"
		case v1alpha1.EventRolloutRestarted:
			return "restarted"
		case v1alpha1.EventRollingBack, v1alpha1.EventDowngrading:
			return "fastpath"
		}
	}
	for _, e := range evs {
		if e.Reason == v1alpha1.EventStepAdvanced {
			return "advanced"
		}
	}
	return ""
}

// noteRolloutEnd reads when the canary revision appeared, when this
// decision completes or aborts its rollout; only for the duration metric,
// so a failed read is logged, not returned.
func (r *Reconciler) noteRolloutEnd(ctx context.Context, rd *round, canary string) {
	wl, obs := rd.wl, rd.obs
	if r.Metrics == nil || canary == "" {
		return
	}
	switch stepOutcome(rd.decision.Events) {
	case "completed", "aborted":
	default:
		return
	}
	rev, err := wl.Revision(ctx, obs, canary)
	if err != nil {
		log.FromContext(ctx).V(1).Info("reading canary revision for the rollout duration", "revision", canary, "error", err.Error())
		return
	}
	rd.rolloutStart = rev.Created
}

func (r *Reconciler) event(ro *v1alpha1.Rollout, e step.Event) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(ro, nil, e.Type, e.Reason, e.Reason, "%s", e.Message)
}
