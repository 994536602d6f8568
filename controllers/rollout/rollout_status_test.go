package rollout

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
)

// TestSetConditionsIsKstatusCorrect checks the three Flux conditions for
// every kind of round: Ready=True only when Healthy, Reconciling and Stalled
// present only when True and never together.
func TestSetConditionsIsKstatusCorrect(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		phase       v1alpha1.RolloutPhase
		reason      string
		round       round
		err         error
		ready       metav1.ConditionStatus
		readyReason string
		reconciling bool
		stalled     bool
	}{
		{name: "healthy", phase: v1alpha1.RolloutHealthy, reason: v1alpha1.ReasonStable, round: round{decision: &step.Decision{}},
			ready: metav1.ConditionTrue, readyReason: v1alpha1.ReasonStable},
		{name: "stepping", phase: v1alpha1.RolloutProgressing, reason: v1alpha1.ReasonWaitingForPods, round: round{decision: &step.Decision{}},
			ready: metav1.ConditionFalse, readyReason: v1alpha1.ReasonWaitingForPods, reconciling: true},
		{name: "paused for a promote", phase: v1alpha1.RolloutPaused, reason: v1alpha1.ReasonAwaitingPromotion, round: round{decision: &step.Decision{}},
			ready: metav1.ConditionFalse, readyReason: v1alpha1.ReasonAwaitingPromotion, reconciling: true},
		{name: "aborted", phase: v1alpha1.RolloutAborted, reason: v1alpha1.ReasonAnalysisFailed, round: round{decision: &step.Decision{Stalled: true}},
			ready: metav1.ConditionFalse, readyReason: v1alpha1.ReasonAnalysisFailed, stalled: true},
		{name: "workload missing", phase: v1alpha1.RolloutHealthy, round: round{problem: &problem{reason: v1alpha1.ReasonWorkloadNotFound, message: "gone"}},
			ready: metav1.ConditionFalse, readyReason: v1alpha1.ReasonWorkloadNotFound, reconciling: true},
		{name: "unsupported workload", round: round{problem: &problem{reason: v1alpha1.ReasonWorkloadUnsupported, message: "OnDelete", terminal: true}},
			ready: metav1.ConditionFalse, readyReason: v1alpha1.ReasonWorkloadUnsupported, stalled: true},
		{name: "an API error is retried", phase: v1alpha1.RolloutAborted, round: round{decision: &step.Decision{Stalled: true}}, err: errors.New("boom"),
			ready: metav1.ConditionFalse, readyReason: v1alpha1.ReasonReconcileFailed, reconciling: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro := &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			ro.Status.Phase, ro.Status.Reason, ro.Status.Message = tt.phase, tt.reason, "message"
			// Conditions left from an earlier round must be replaced, not kept.
			ro.Status.Conditions = []metav1.Condition{
				{Type: meta.StalledCondition, Status: metav1.ConditionTrue, Reason: "Old"},
				{Type: meta.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: "Old"},
			}
			rd := tt.round
			rd.ro, rd.now = ro, now
			setConditions(ro, &rd, tt.err)

			ready := apimeta.FindStatusCondition(ro.Status.Conditions, meta.ReadyCondition)
			if ready == nil || ready.Status != tt.ready || ready.Reason != tt.readyReason || ready.ObservedGeneration != 3 {
				t.Errorf("Ready = %+v, want %s %s", ready, tt.ready, tt.readyReason)
			}
			reconciling := apimeta.FindStatusCondition(ro.Status.Conditions, meta.ReconcilingCondition)
			stalled := apimeta.FindStatusCondition(ro.Status.Conditions, meta.StalledCondition)
			if (reconciling != nil) != tt.reconciling || reconciling != nil && reconciling.Status != metav1.ConditionTrue {
				t.Errorf("Reconciling = %+v, want present: %v", reconciling, tt.reconciling)
			}
			if (stalled != nil) != tt.stalled || stalled != nil && stalled.Status != metav1.ConditionTrue {
				t.Errorf("Stalled = %+v, want present: %v", stalled, tt.stalled)
			}
		})
	}
}

func TestPartitionConflictIsRaisedOnceAndDroppedWhenHealthy(t *testing.T) {
	ro := &v1alpha1.Rollout{}
	ro.Spec.WorkloadRef = v1alpha1.WorkloadReference{APIVersion: "stepwise.dev/v1alpha1", Kind: "CloneSet", Name: "web"}
	ro.Status.Phase = v1alpha1.RolloutProgressing
	rd := &round{ro: ro, decision: &step.Decision{}, writers: []string{"flux-kustomize"}}

	e := setPartitionConflict(ro, rd, "CloneSet", "spec.updateStrategy.partition")
	if e == nil || e.Reason != v1alpha1.EventPartitionConflict {
		t.Fatalf("event = %+v, want a PartitionConflict Event", e)
	}
	if !apimeta.IsStatusConditionTrue(ro.Status.Conditions, v1alpha1.PartitionConflictCondition) {
		t.Fatal("PartitionConflict not True")
	}
	if again := setPartitionConflict(ro, rd, "CloneSet", "spec.updateStrategy.partition"); again != nil {
		t.Errorf("second event %+v for the same writers, want none", again)
	}

	rd.writers = nil
	setPartitionConflict(ro, rd, "CloneSet", "spec.updateStrategy.partition")
	if !apimeta.IsStatusConditionTrue(ro.Status.Conditions, v1alpha1.PartitionConflictCondition) {
		t.Error("PartitionConflict dropped mid-rollout, want it kept until Healthy")
	}
	ro.Status.Phase = v1alpha1.RolloutHealthy
	setPartitionConflict(ro, rd, "CloneSet", "spec.updateStrategy.partition")
	if apimeta.FindStatusCondition(ro.Status.Conditions, v1alpha1.PartitionConflictCondition) != nil {
		t.Error("PartitionConflict kept once Healthy without a conflict")
	}
}

// TestStepStatusRoundTrip: what the decision writes reads back the same,
// to the second, so an unchanged decision patches nothing.
func TestStepStatusRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678, time.UTC)
	i := int32(1)
	s := step.Status{
		Phase: v1alpha1.RolloutProgressing, Reason: v1alpha1.ReasonStepPaused, Message: "m",
		CurrentStepIndex: &i, StableRevision: "r1", PreviousStableRevisions: []string{"r0", "r-1"}, CanaryRevision: "r2",
		StepStartedAt: at, StepReadyAt: at, LastProgressAt: at, UpdatedReadyReplicas: 3, PauseRequested: true,
		PromotedFull: true,
		Handled:      step.Requests{Promote: "p", PromoteFull: "pf", Abort: "a", Retry: "r", Pause: "pa", Resume: "re"},
	}
	var st v1alpha1.RolloutStatus
	fromStepStatus(&st, s)
	got := toStepStatus(&st)
	want := s
	want.StepStartedAt, want.StepReadyAt, want.LastProgressAt = at.Truncate(time.Second), at.Truncate(time.Second), at.Truncate(time.Second)
	if !got.StepStartedAt.Equal(want.StepStartedAt) || got.Handled != want.Handled || got.Phase != want.Phase ||
		*got.CurrentStepIndex != 1 || got.UpdatedReadyReplicas != 3 || !got.PauseRequested || !got.PromotedFull ||
		!slices.Equal(got.PreviousStableRevisions, want.PreviousStableRevisions) {
		t.Errorf("round trip = %+v, want %+v", got, want)
	}
}

func TestAnalysisStartedAtIsReadOnlyForTheCurrentStepAndCanary(t *testing.T) {
	i := int32(1)
	started := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for name, tt := range map[string]struct {
		analysis *v1alpha1.AnalysisStatus
		want     bool
	}{
		"current step and canary": {&v1alpha1.AnalysisStatus{StepIndex: 1, Revision: "r2", StartedAt: started, Phase: v1alpha1.AnalysisPassed}, true},
		"an earlier step":         {&v1alpha1.AnalysisStatus{StepIndex: 0, Revision: "r2", StartedAt: started, Phase: v1alpha1.AnalysisPassed}, false},
		"an older canary":         {&v1alpha1.AnalysisStatus{StepIndex: 1, Revision: "r1", StartedAt: started, Phase: v1alpha1.AnalysisPassed}, false},
		"none":                    {nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			st := &v1alpha1.RolloutStatus{CurrentStepIndex: &i, CanaryRevision: "r2", Analysis: tt.analysis}
			s, v := toStepStatus(st), verdictOf(st)
			if got := !s.AnalysisStartedAt.IsZero(); got != tt.want {
				t.Errorf("AnalysisStartedAt set = %v, want %v", got, tt.want)
			}
			if got := v.Verdict == step.VerdictPassed; got != tt.want {
				t.Errorf("verdict = %q, want Passed: %v", v.Verdict, tt.want)
			}
		})
	}
}
