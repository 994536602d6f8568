package rollout

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/index"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

func workloadGVK(ref v1alpha1.WorkloadReference) (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("workloadRef.apiVersion %q: %w", ref.APIVersion, err)
	}
	return gv.WithKind(ref.Kind), nil
}

// rolloutsOf maps a workload event to the Rollouts in its namespace that
// drive it.
func (r *Reconciler) rolloutsOf(gvk schema.GroupVersionKind) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var list v1alpha1.RolloutList
		if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{index.RolloutWorkload: index.WorkloadKey(gvk.GroupKind(), obj.GetName())}); err != nil {
			log.FromContext(ctx).Error(err, "listing Rollouts of a workload", "kind", gvk.Kind, "name", obj.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
		}
		return reqs
	}
}

// decisionInput gathers what step.Decide reads.
func (r *Reconciler) decisionInput(ctx context.Context, rd *round) (step.Input, error) {
	wl, obs := rd.wl, rd.obs
	ro := rd.ro
	steps, err := step.ResolveSteps(&ro.Spec, obs.Replicas)
	if err != nil {
		return step.Input{}, stall(v1alpha1.ReasonInvalidSpec, "%v", err)
	}
	partition, err := obs.PartitionPods()
	if err != nil {
		// A value no step can have: the gate waits, and the partition is
		// applied again below.
		log.FromContext(ctx).Info("workload partition unreadable", "error", err.Error())
		partition = -1
	}
	if g := ro.Status.PartitionGrant; obs.Governed && g != nil && obs.Acknowledged != g.Revision {
		// The CloneSet has not applied the last grant yet: what it reports
		// is for another revision, and the gate waits.
		partition = -1
	}
	var deadline time.Duration
	if ro.Spec.ProgressDeadlineSeconds != nil {
		deadline = time.Duration(*ro.Spec.ProgressDeadlineSeconds) * time.Second
	}
	in := step.Input{
		Now:              rd.now,
		Steps:            steps,
		Paused:           ro.Spec.Paused,
		ProgressDeadline: deadline,
		Status:           toStepStatus(&ro.Status),
		Workload: step.Workload{
			ObservedGenerationCurrent: obs.ObservedGenerationCurrent(),
			Replicas:                  obs.Replicas,
			UpdatedReadyReplicas:      obs.UpdatedReadyReplicas,
			UpdateRevision:            obs.UpdateRevision,
			CurrentRevision:           obs.CurrentRevision,
			Partition:                 partition,
		},
		Governed: obs.Governed,
		Analysis: verdictOf(&ro.Status),
		Requests: step.RequestsFromAnnotations(ro.Annotations),
	}
	if bg, from, ok := ro.Spec.BackgroundAnalysis(); ok {
		in.Background = &step.Background{From: from, Inconclusive: bg.Inconclusive, Verdict: spanningVerdictOf(ro.Status.BackgroundAnalysis, &ro.Status)}
	}
	if pp, window, ok := ro.Spec.PostPromotionAnalysis(); ok {
		in.PostPromotion = &step.PostPromotion{Window: window, Inconclusive: pp.Inconclusive, Verdict: spanningVerdictOf(ro.Status.PostPromotionAnalysis, &ro.Status)}
	}
	if ro.Spec.TrafficRouting != nil {
		in.TrafficRouted = true
		if t := ro.Status.Traffic; t != nil && t.CanaryRevision == ro.Status.CanaryRevision {
			in.TrafficStep = t.Step
		}
	}
	vc, err := r.versions(ctx, ro, wl, obs)
	if err != nil {
		return step.Input{}, err
	}
	if vc.Invalid != "" {
		return step.Input{}, stall(v1alpha1.ReasonInvalidSpec, "%s", vc.Invalid)
	}
	in.VersionViolation, in.Downgrade, in.UntrustedDowngrade = vc.Violation, vc.Downgrade, vc.Untrusted
	return in, nil
}

// versions applies spec.versionPolicy to the update revision. It reads
// revisions only while the update revision differs from the stable one.
func (r *Reconciler) versions(ctx context.Context, ro *v1alpha1.Rollout, wl workload.Workload, obs workload.Observation) (versionCheck, error) {
	policy := ro.Spec.VersionPolicy
	if policy == nil || obs.UpdateRevision == "" {
		return versionCheck{}, nil
	}
	// The stable revision a new Rollout adopts, as step.Decide adopts it.
	stable := ro.Status.StableRevision
	if stable == "" {
		stable = obs.CurrentRevision
	}
	if stable == "" || stable == obs.UpdateRevision {
		return versionCheck{}, nil
	}
	update, err := wl.Revision(ctx, obs, obs.UpdateRevision)
	if err != nil {
		return versionCheck{}, err
	}
	if !update.Found {
		// The workload reported a revision it has not stored yet; its
		// ControllerRevision's creation is not watched, so retry.
		return versionCheck{}, fmt.Errorf("reading the images of update revision %s: not found yet", obs.UpdateRevision)
	}
	stableRev, err := wl.Revision(ctx, obs, stable)
	if err != nil {
		return versionCheck{}, err
	}
	var stableImages map[string]string
	if stableRev.Found {
		stableImages = stableRev.Images
	}
	wasStable := slices.Contains(ro.Status.PreviousStableRevisions, obs.UpdateRevision)
	return checkVersion(policy, obs.UpdateRevision, update.Images, stableImages, wasStable), nil
}

// planPartition prepares the write of the decided partition when the
// workload does not hold it; finish applies it once the status is written.
// Before re-applying over a value that is set, it reads who owns the
// field: when the cache only lags behind our own write that is us alone,
// and otherwise another writer (a GitOps tool applying a manifest that
// sets the partition) to report in PartitionConflict. The check costs a
// request, so it runs only then, not every reconcile, and not on a
// takeover (the Rollout's first decision).
func (r *Reconciler) planPartition(ctx context.Context, rd *round, desired intstr.IntOrString, takeover bool) error {
	wl, obs := rd.wl, rd.obs
	if obs.Holds(desired) {
		return nil
	}
	if obs.Partition != nil && !takeover {
		writers, err := wl.PartitionManagers(ctx)
		if err != nil {
			return err
		}
		rd.writers = writers
	}
	rd.apply = &partitionApply{wl: wl, obs: obs, partition: desired}
	return nil
}

// partitionApply is a partition write decided this round.
type partitionApply struct {
	wl        workload.Workload
	obs       workload.Observation
	partition intstr.IntOrString
}

// applyPartition writes the round's partition. A failure is retried by the
// next round, which finds the workload not holding the partition its
// status decided and plans the write again.
func (r *Reconciler) applyPartition(ctx context.Context, rd *round) error {
	a := rd.apply
	if err := a.wl.SetPartition(ctx, a.obs, a.partition); err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("partition applied", "partition", a.partition.String(), "others", rd.writers)
	return nil
}

// grantOf is the partitionGrant of a decision for a governed CloneSet: the
// revision the decision moves Pods toward (the canary while there is one,
// rolled out or aborted, else the stable revision) and how far. Without a
// canary every Pod may run the stable revision: partition 0, and a new
// update revision waits, unacknowledged, moving no Pod, until the Rollout
// starts it.
func grantOf(st *v1alpha1.RolloutStatus, partition intstr.IntOrString) *v1alpha1.PartitionGrant {
	if st.CanaryRevision == "" {
		return &v1alpha1.PartitionGrant{Revision: st.StableRevision, Partition: intstr.FromInt32(0)}
	}
	return &v1alpha1.PartitionGrant{Revision: st.CanaryRevision, Partition: partition}
}
