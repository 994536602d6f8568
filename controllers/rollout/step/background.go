package step

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Background is spec.analysis.background as the decision reads it.
type Background struct {
	// From is the step whose gate starts it (startingStep).
	From int32
	// Inconclusive is spec.analysis.inconclusive; empty means Pause.
	Inconclusive v1alpha1.InconclusivePolicy
	// Verdict is status.backgroundAnalysis' verdict when that tally is for
	// the canary revision; VerdictNone otherwise.
	Verdict Analysis
}

// background applies the background analysis' verdict to step i of the
// rollout in progress, before a pause can hold it: a failure aborts at any
// point. It reports whether the verdict decided this call. A promote-full
// request ends the background analysis with the steps' pauses and analyses.
func (d *decider) background(i int) bool {
	bg, s := d.in.Background, d.status()
	if bg == nil || s.PromotedFull {
		return false
	}
	msg := bg.Verdict.Message
	switch bg.Verdict.Verdict {
	case VerdictFailed:
		d.abortRollout(v1alpha1.ReasonBackgroundAnalysisFailed, "background analysis failed: "+msg)
		return true
	case VerdictInconclusive:
	default:
		return false
	}
	switch bg.Inconclusive {
	case v1alpha1.InconclusiveAbort:
		d.abortRollout(v1alpha1.ReasonBackgroundAnalysisInconclusive, "background analysis inconclusive: "+msg)
		return true
	case v1alpha1.InconclusivePromote:
		// Promote carries on, and the measuring with it: a later failure
		// still aborts.
		d.restartBackground = true
		d.event(corev1.EventTypeWarning, v1alpha1.EventAnalysisInconclusive,
			"%s: background analysis inconclusive (%s); measuring again, as spec.analysis.inconclusive is Promote", d.stepName(i), msg)
		return false
	}
	if d.retry {
		d.retry = false
		d.restartBackground = true
		d.event(corev1.EventTypeNormal, v1alpha1.EventRetried, "%s: background analysis restarted by a retry request", d.stepName(i))
		return false
	}
	if d.in.Status.Reason != v1alpha1.ReasonBackgroundAnalysisInconclusive {
		d.event(corev1.EventTypeWarning, v1alpha1.EventAnalysisInconclusive,
			"%s: background analysis inconclusive (%s); retry or abort", d.stepName(i), msg)
	}
	s.Phase = v1alpha1.RolloutPaused
	s.Reason = v1alpha1.ReasonBackgroundAnalysisInconclusive
	s.Message = fmt.Sprintf("%s held: background analysis inconclusive: %s; waiting for retry or abort", d.stepName(i), msg)
	// Time spent waiting for a person is not a lack of progress.
	s.LastProgressAt = d.in.Now
	return true
}

// planBackground tells the analysis runner what to do with
// status.backgroundAnalysis, once the decision is taken: measure from the
// starting step's gate until the rollout ends, keep the tally on show when
// it aborted, and drop it otherwise.
func (d *decider) planBackground() {
	bg, s := d.in.Background, d.status()
	switch {
	case bg == nil:
		d.out.Background = AnalysisClear
	case s.Phase == v1alpha1.RolloutAborted:
		// Aborted, now or before: the tally says why.
		d.out.Background = AnalysisKeep
	case s.CurrentStepIndex == nil || s.CanaryRevision != d.in.Workload.UpdateRevision || s.PromotedFull,
		d.in.Status.Phase == v1alpha1.RolloutAborted, s.CanaryRevision != d.in.Status.CanaryRevision:
		// No rollout in progress, or one that just started afresh: after
		// an abort (a retry starts from step 1, and the measuring with
		// it) or over another canary.
		d.out.Background = AnalysisClear
	case d.restartBackground:
		d.out.Background = AnalysisStart
	case bg.Verdict.Verdict == VerdictNone:
		cur := *s.CurrentStepIndex
		if cur > bg.From || (cur == bg.From && !s.StepReadyAt.IsZero()) {
			d.out.Background = AnalysisStart
		} else {
			d.out.Background = AnalysisClear
		}
	case bg.Verdict.Verdict == VerdictRunning:
		d.out.Background = AnalysisRun
	default:
		// Decided: the next decision acts on it; measuring again would
		// only requeue at once.
		d.out.Background = AnalysisKeep
	}
}
