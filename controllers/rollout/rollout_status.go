package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
)

// toStepStatus reads the part of the status the step decision works on.
// AnalysisStartedAt comes from status.analysis, and only when it is the
// current step's analysis of the current canary: an older tally must not be
// taken for this step's.
func toStepStatus(st *v1alpha1.RolloutStatus) step.Status {
	s := step.Status{
		Phase:                   st.Phase,
		Reason:                  st.Reason,
		Message:                 st.Message,
		CurrentStepIndex:        st.CurrentStepIndex,
		StableRevision:          st.StableRevision,
		PreviousStableRevisions: st.PreviousStableRevisions,
		CanaryRevision:          st.CanaryRevision,
		StepStartedAt:           timeOf(st.StepStartedAt),
		StepReadyAt:             timeOf(st.StepReadyAt),
		LastProgressAt:          timeOf(st.LastProgressAt),
		UpdatedReadyReplicas:    st.UpdatedReadyReplicas,
		PauseRequested:          st.PauseRequested,
		PromotedFull:            st.PromotedFull,
		Handled: step.Requests{
			Promote:     st.LastHandledPromoteAt,
			PromoteFull: st.LastHandledPromoteFullAt,
			Abort:       st.LastHandledAbortAt,
			Retry:       st.LastHandledRetryAt,
			Pause:       st.LastHandledPauseAt,
			Resume:      st.LastHandledResumeAt,
		},
	}
	if a := currentAnalysis(st); a != nil {
		s.AnalysisStartedAt = a.StartedAt.Time
	}
	if a := st.PostPromotionAnalysis; a != nil && a.Revision == st.CanaryRevision && st.CanaryRevision != "" {
		s.PostPromotionStartedAt = a.StartedAt.Time
	}
	return s
}

// fromStepStatus writes a decision's status back. Times are kept to the
// second, as the API server stores them, so that an unchanged status
// compares equal and is not patched again.
func fromStepStatus(st *v1alpha1.RolloutStatus, s step.Status) {
	st.Phase = s.Phase
	st.Reason = s.Reason
	st.Message = s.Message
	st.CurrentStepIndex = s.CurrentStepIndex
	st.StableRevision = s.StableRevision
	st.PreviousStableRevisions = s.PreviousStableRevisions
	st.CanaryRevision = s.CanaryRevision
	st.StepStartedAt = v1alpha1.StatusTime(s.StepStartedAt)
	st.StepReadyAt = v1alpha1.StatusTime(s.StepReadyAt)
	st.LastProgressAt = v1alpha1.StatusTime(s.LastProgressAt)
	st.UpdatedReadyReplicas = s.UpdatedReadyReplicas
	st.PauseRequested = s.PauseRequested
	st.PromotedFull = s.PromotedFull
	st.LastHandledPromoteAt = s.Handled.Promote
	st.LastHandledPromoteFullAt = s.Handled.PromoteFull
	st.LastHandledAbortAt = s.Handled.Abort
	st.LastHandledRetryAt = s.Handled.Retry
	st.LastHandledPauseAt = s.Handled.Pause
	st.LastHandledResumeAt = s.Handled.Resume
}

// currentAnalysis returns status.analysis when it belongs to the step in
// progress and the current canary; nil otherwise.
func currentAnalysis(st *v1alpha1.RolloutStatus) *v1alpha1.AnalysisStatus {
	a := st.Analysis
	if a == nil || st.CurrentStepIndex == nil || a.StepIndex != *st.CurrentStepIndex || a.Revision != st.CanaryRevision {
		return nil
	}
	return a
}

// verdictOf is the analysis verdict as the step decision reads it.
func verdictOf(st *v1alpha1.RolloutStatus) step.Analysis {
	return verdictOfTally(currentAnalysis(st))
}

// spanningVerdictOf is a background or post-promotion tally's verdict when
// it is for the canary revision.
func spanningVerdictOf(a *v1alpha1.AnalysisStatus, st *v1alpha1.RolloutStatus) step.Analysis {
	if a != nil && a.Revision == st.CanaryRevision {
		return verdictOfTally(a)
	}
	return step.Analysis{}
}

// verdictOfTally reads an analysis tally's phase; nil is no verdict.
func verdictOfTally(a *v1alpha1.AnalysisStatus) step.Analysis {
	if a == nil {
		return step.Analysis{}
	}
	switch a.Phase {
	case v1alpha1.AnalysisPassed:
		return step.Analysis{Verdict: step.VerdictPassed, Message: a.Message}
	case v1alpha1.AnalysisFailed:
		return step.Analysis{Verdict: step.VerdictFailed, Message: a.Message}
	case v1alpha1.AnalysisInconclusive:
		return step.Analysis{Verdict: step.VerdictInconclusive, Message: a.Message}
	}
	return step.Analysis{Verdict: step.VerdictRunning}
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// setConditions summarizes the round in Flux's conditions, which kstatus
// (Flux health checks) and Argo CD's health script read:
//   - Ready is True only when Healthy; otherwise False with the decision's
//     reason and message, or the problem that prevented a decision.
//   - Reconciling (abnormal-true: absent unless True) while stepping,
//     pausing, waiting for the workload or retrying an error.
//   - Stalled (abnormal-true) when only git or a person can move the
//     Rollout on: aborted, a rejected version, an unsupported workload.
func setConditions(ro *v1alpha1.Rollout, rd *round, reconcileErr error) {
	now := metav1.NewTime(rd.now).Rfc3339Copy()
	set := func(typ string, status metav1.ConditionStatus, reason, message string) {
		apimeta.SetStatusCondition(&ro.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: message,
			ObservedGeneration: ro.Generation, LastTransitionTime: now,
		})
	}
	remove := func(typ string) { apimeta.RemoveStatusCondition(&ro.Status.Conditions, typ) }

	reason, message := ro.Status.Reason, ro.Status.Message
	if reason == "" {
		reason = meta.ProgressingReason
	}
	switch {
	case reconcileErr != nil:
		set(meta.ReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonReconcileFailed, reconcileErr.Error())
		set(meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingWithRetryReason, reconcileErr.Error())
		remove(meta.StalledCondition)
	case rd.problem != nil && rd.problem.terminal:
		set(meta.ReadyCondition, metav1.ConditionFalse, rd.problem.reason, rd.problem.message)
		set(meta.StalledCondition, metav1.ConditionTrue, rd.problem.reason, rd.problem.message)
		remove(meta.ReconcilingCondition)
	case rd.problem != nil:
		set(meta.ReadyCondition, metav1.ConditionFalse, rd.problem.reason, rd.problem.message)
		set(meta.ReconcilingCondition, metav1.ConditionTrue, rd.problem.reason, rd.problem.message)
		remove(meta.StalledCondition)
	case rd.decision != nil && rd.decision.Stalled:
		set(meta.ReadyCondition, metav1.ConditionFalse, reason, message)
		set(meta.StalledCondition, metav1.ConditionTrue, reason, message)
		remove(meta.ReconcilingCondition)
	case ro.Status.Phase == v1alpha1.RolloutHealthy:
		set(meta.ReadyCondition, metav1.ConditionTrue, reason, message)
		remove(meta.ReconcilingCondition)
		remove(meta.StalledCondition)
	default:
		set(meta.ReadyCondition, metav1.ConditionFalse, reason, message)
		set(meta.ReconcilingCondition, metav1.ConditionTrue, reason, message)
		remove(meta.StalledCondition)
	}
}

// setPartitionConflict raises PartitionConflict when this round found other
// writers of the partition, and returns the Warning Event to record when
// they are news. The condition stays up for the rest of the rollout, since
// the other writer (a GitOps tool re-applying git) comes back at its next
// sync even though the controller took the field back; it is dropped once
// the Rollout is Healthy and the partition is not fought over.
func setPartitionConflict(ro *v1alpha1.Rollout, rd *round, kind, path string) *step.Event {
	if len(rd.writers) == 0 {
		if rd.decision != nil && ro.Status.Phase == v1alpha1.RolloutHealthy {
			apimeta.RemoveStatusCondition(&ro.Status.Conditions, v1alpha1.PartitionConflictCondition)
		}
		return nil
	}
	quoted := make([]string, len(rd.writers))
	for i, w := range rd.writers {
		quoted[i] = fmt.Sprintf("%q", w)
	}
	message := fmt.Sprintf("field manager %s also writes %s of %s %s, which the Rollout owns (field manager %q) and moves step by step: "+
		"remove the partition from the manifest in git, or with Argo CD ignore it (ignoreDifferences: jsonPointers: [/%s])",
		strings.Join(quoted, ", "), path, kind, ro.Spec.WorkloadRef.Name, fieldManager, strings.ReplaceAll(path, ".", "/"))
	return raiseConflict(ro, rd, v1alpha1.PartitionConflictCondition, v1alpha1.EventPartitionConflict, message)
}

// raiseConflict sets a field-manager conflict condition True with message,
// and returns the Warning Event to record when the message is new (a
// conflict that goes on is told once, not at every round).
func raiseConflict(ro *v1alpha1.Rollout, rd *round, conditionType, eventReason, message string) *step.Event {
	previous := apimeta.FindStatusCondition(ro.Status.Conditions, conditionType)
	news := previous == nil || previous.Status != metav1.ConditionTrue || previous.Message != message
	apimeta.SetStatusCondition(&ro.Status.Conditions, metav1.Condition{
		Type: conditionType, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonFieldManagerConflict, Message: message,
		ObservedGeneration: ro.Generation, LastTransitionTime: metav1.NewTime(rd.now).Rfc3339Copy(),
	})
	if !news {
		return nil
	}
	return &step.Event{Type: corev1.EventTypeWarning, Reason: eventReason, Message: message}
}

// patchStatus writes the status in one merge patch, with the
// resourceVersion read as a precondition: a reconcile that read a cached
// Rollout older than the controller's own last write fails with a conflict
// and is retried, instead of writing an old step or analysis back.
func (r *Reconciler) patchStatus(ctx context.Context, original, ro *v1alpha1.Rollout) error {
	patch := client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, ro, patch, client.FieldOwner(fieldManager)); err != nil {
		return fmt.Errorf("patching Rollout status: %w", err)
	}
	r.mem.writes.wrote(ro)
	return nil
}
