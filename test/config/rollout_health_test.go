package config_test

import (
	"testing"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/argocdhealth"
)

func TestRolloutHealth(t *testing.T) {
	abortMsg := "step 2 (partition 50%): analysis failed: error-rate 0.08 is above 0.01"
	runHealthCases[stepwisev1.Rollout](t, "Rollout", "rollout-health.lua", []healthCase{{
		name:    "no status yet",
		obj:     `metadata: {name: web, generation: 1}`,
		status:  argocdhealth.Progressing,
		message: "waiting for the rollout controller",
	}, {
		name: "spec change not observed yet",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 2
  phase: Healthy
  conditions: [{type: Ready, status: "True", reason: Stable, message: stable}]`,
		status:  argocdhealth.Progressing,
		message: "waiting for rollout spec update to be observed",
	}, {
		name: "status without observedGeneration",
		obj: `
metadata: {name: web, generation: 1}
status: {phase: Healthy}`,
		status:  argocdhealth.Progressing,
		message: "waiting for rollout spec update to be observed",
	}, {
		name: "aborted by a failed analysis",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Aborted
  reason: AnalysisFailed
  message: "` + abortMsg + `"
  conditions:
  - {type: Ready, status: "False", reason: AnalysisFailed, message: "` + abortMsg + `"}
  - {type: Stalled, status: "True", reason: AnalysisFailed, message: "` + abortMsg + `"}`,
		status:  argocdhealth.Degraded,
		message: abortMsg,
	}, {
		name: "aborted, message only in the Stalled condition",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Aborted
  conditions: [{type: Stalled, status: "True", reason: AbortRequested, message: aborted by request}]`,
		status:  argocdhealth.Degraded,
		message: "aborted by request",
	}, {
		name: "rollback past its progress deadline",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Progressing
  reason: ProgressDeadlineExceeded
  message: rolling back to the stable revision
  conditions: [{type: Stalled, status: "True", reason: ProgressDeadlineExceeded, message: no progress for 600s}]`,
		status:  argocdhealth.Degraded,
		message: "no progress for 600s",
	}, {
		name: "paused by spec.paused",
		obj: `
metadata: {name: web, generation: 4}
status: {observedGeneration: 4, phase: Paused, reason: PausedBySpec, message: "step 1 (partition 90%) held: paused by spec.paused"}`,
		status:  argocdhealth.Suspended,
		message: "paused by spec.paused",
	}, {
		name: "step pause without duration waits for a promote",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Paused
  reason: AwaitingPromotion
  currentStepIndex: 1
  message: "step 2 (partition 50%): waiting for a promote request"
  conditions:
  - {type: Ready, status: "False", reason: AwaitingPromotion, message: "step 2 (partition 50%): waiting for a promote request"}
  - {type: Reconciling, status: "True", reason: AwaitingPromotion, message: "step 2 (partition 50%): waiting for a promote request"}`,
		status:  argocdhealth.Suspended,
		message: "waiting for a promote request",
	}, {
		name: "inconclusive analysis waits for a person",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3, phase: Paused, reason: AnalysisInconclusive, message: "analysis inconclusive: no data"}`,
		status:  argocdhealth.Suspended,
		message: "no data",
	}, {
		name: "Progressing phase awaiting promotion",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3, phase: Progressing, reason: AwaitingPromotion, message: waiting for a promote request}`,
		status:  argocdhealth.Suspended,
		message: "waiting for a promote request",
	}, {
		name: "Progressing phase awaiting promotion, reason only in Ready",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Progressing
  conditions: [{type: Ready, status: "False", reason: AwaitingPromotion, message: waiting for a promote request}]`,
		status:  argocdhealth.Suspended,
		message: "waiting for a promote request",
	}, {
		name: "timed step pause",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3, phase: Progressing, reason: StepPaused, message: "step 1 (partition 90%): paused until 2030-01-01T00:00:00Z"}`,
		status:  argocdhealth.Progressing,
		message: "paused until",
	}, {
		name: "analysis running",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Progressing
  reason: AnalysisRunning
  message: "step 1 (partition 90%): analysis 2/5"
  conditions:
  - {type: Ready, status: "False", reason: AnalysisRunning, message: "step 1 (partition 90%): analysis 2/5"}
  - {type: Reconciling, status: "True", reason: AnalysisRunning, message: "step 1 (partition 90%): analysis 2/5"}`,
		status:  argocdhealth.Progressing,
		message: "analysis 2/5",
	}, {
		name: "waiting for Pods, partition conflict raised",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Progressing
  reason: PartitionMismatch
  message: workload partition is 100%, step wants 90%
  conditions:
  - {type: PartitionConflict, status: "True", reason: FieldManagerConflict, message: field manager argocd-controller also writes the partition}`,
		status:  argocdhealth.Progressing,
		message: "step wants 90%",
	}, {
		name: "healthy",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Healthy
  reason: Stable
  stableRevision: web-7d9f
  message: revision web-7d9f is stable
  conditions: [{type: Ready, status: "True", reason: Stable, message: revision web-7d9f is stable}]`,
		status:  argocdhealth.Healthy,
		message: "web-7d9f is stable",
	}, {
		name: "healthy phase while reconciles fail",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Healthy
  conditions:
  - {type: Ready, status: "False", reason: ReconcileFailed, message: "patching CloneSet web: connection refused"}
  - {type: Reconciling, status: "True", reason: ProgressingWithRetry, message: "patching CloneSet web: connection refused"}`,
		status:  argocdhealth.Progressing,
		message: "connection refused",
	}, {
		name: "healthy phase without conditions",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3, phase: Healthy}`,
		status: argocdhealth.Progressing,
	}, {
		name: "status without a phase",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3}`,
		status:  argocdhealth.Progressing,
		message: "report a phase",
	}})
}
