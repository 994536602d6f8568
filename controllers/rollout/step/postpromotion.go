package step

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// PostPromotion is spec.analysis.postPromotion as the decision reads it.
type PostPromotion struct {
	// Window is how long it measures before the canary is made stable.
	Window time.Duration
	// Inconclusive is spec.analysis.inconclusive; empty means Pause.
	Inconclusive v1alpha1.InconclusivePolicy
	// Verdict is status.postPromotionAnalysis' verdict when that tally is
	// for the canary revision; VerdictNone otherwise.
	Verdict Analysis
}

// The post-promotion analysis runs once the last step is done (its Pods
// ready, its pause and analysis over): every Pod runs the canary revision,
// which is made stable only at the end of the window. Until then the
// rollout is still in progress at its last step, so a failure aborts like
// any other, and the abort's partition (100%) takes every Pod back to the
// stable revision, in place on Stepwise's CloneSet.

// startPostPromotion begins the post-promotion window after step i, the last.
func (d *decider) startPostPromotion(i int) {
	s := d.status()
	s.PostPromotionStartedAt = d.in.Now
	d.restartPostPromotion = true
	d.event(corev1.EventTypeNormal, v1alpha1.EventAnalysisStarted,
		"%s done: every Pod runs revision %s; post-promotion analysis for %s before it is made stable", d.stepName(i), s.CanaryRevision, d.in.PostPromotion.Window)
	d.postPromoting(i)
}

// postPromoting waits for the end of the window, or a promote request,
// and then completes the rollout.
func (d *decider) postPromoting(i int) {
	s, pp := d.status(), d.in.PostPromotion
	if pp == nil {
		// spec.analysis.postPromotion was removed mid-window.
		d.complete("after its steps (spec.analysis.postPromotion removed)")
		return
	}
	end := s.PostPromotionStartedAt.Add(pp.Window)
	if !d.in.Now.Before(end) {
		d.complete(fmt.Sprintf("after %d steps and a %s post-promotion analysis", len(d.in.Steps), pp.Window))
		return
	}
	if s.PromotedFull {
		d.complete("promoted in full during its post-promotion analysis")
		return
	}
	if d.promote {
		d.promote = false
		d.event(corev1.EventTypeNormal, v1alpha1.EventPromoted, "post-promotion analysis skipped by a promote request")
		d.complete("promoted by request during its post-promotion analysis")
		return
	}
	s.Phase = v1alpha1.RolloutProgressing
	s.Reason = v1alpha1.ReasonPostPromotionAnalysis
	s.Message = fmt.Sprintf("%s: every Pod runs revision %s; post-promotion analysis until %s, then it is made stable",
		d.stepName(i), s.CanaryRevision, end.UTC().Format(time.RFC3339))
	d.requeue(end.Sub(d.in.Now))
}

// postPromotionVerdict applies the post-promotion analysis' verdict, before
// a pause can hold it: a failure aborts at any point. It reports whether
// the verdict decided this call.
func (d *decider) postPromotionVerdict(i int) bool {
	pp, s := d.in.PostPromotion, d.status()
	if pp == nil {
		return false
	}
	msg := pp.Verdict.Message
	switch pp.Verdict.Verdict {
	case VerdictFailed:
		d.abortRollout(v1alpha1.ReasonPostPromotionAnalysisFailed, "post-promotion analysis failed: "+msg)
		return true
	case VerdictInconclusive:
	default:
		return false
	}
	switch {
	case pp.Inconclusive == v1alpha1.InconclusiveAbort:
		d.abortRollout(v1alpha1.ReasonPostPromotionAnalysisInconclusive, "post-promotion analysis inconclusive: "+msg)
		return true
	case pp.Inconclusive == v1alpha1.InconclusivePromote:
		d.event(corev1.EventTypeWarning, v1alpha1.EventAnalysisInconclusive, "post-promotion analysis inconclusive (%s); made stable as the policy says", msg)
		d.complete("after an inconclusive post-promotion analysis (policy Promote)")
		return true
	case d.retry:
		d.retry = false
		s.PostPromotionStartedAt = d.in.Now
		d.restartPostPromotion = true
		d.event(corev1.EventTypeNormal, v1alpha1.EventRetried, "post-promotion analysis restarted by a retry request")
		return false
	case d.promote:
		d.promote = false
		d.event(corev1.EventTypeNormal, v1alpha1.EventPromoted, "inconclusive post-promotion analysis passed over by a promote request")
		d.complete("promoted by request over an inconclusive post-promotion analysis")
		return true
	}
	if d.in.Status.Reason != v1alpha1.ReasonPostPromotionAnalysisInconclusive {
		d.event(corev1.EventTypeWarning, v1alpha1.EventAnalysisInconclusive,
			"post-promotion analysis inconclusive (%s); promote, retry or abort", msg)
	}
	s.Phase = v1alpha1.RolloutPaused
	s.Reason = v1alpha1.ReasonPostPromotionAnalysisInconclusive
	s.Message = fmt.Sprintf("%s: every Pod runs revision %s; post-promotion analysis inconclusive: %s; waiting for promote, retry or abort",
		d.stepName(i), s.CanaryRevision, msg)
	s.LastProgressAt = d.in.Now
	return true
}

// planPostPromotion tells the analysis runner what to do with
// status.postPromotionAnalysis, once the decision is taken.
func (d *decider) planPostPromotion() {
	pp, s := d.in.PostPromotion, d.status()
	switch {
	case pp == nil:
		d.out.PostPromotion = AnalysisClear
	case s.Phase == v1alpha1.RolloutAborted:
		// Aborted, now or before: the tally says why.
		d.out.PostPromotion = AnalysisKeep
	case s.CurrentStepIndex == nil || s.PostPromotionStartedAt.IsZero() || s.CanaryRevision != d.in.Status.CanaryRevision:
		d.out.PostPromotion = AnalysisClear
	case d.restartPostPromotion:
		d.out.PostPromotion = AnalysisStart
	case pp.Verdict.Verdict == VerdictRunning, pp.Verdict.Verdict == VerdictNone:
		d.out.PostPromotion = AnalysisRun
	default:
		d.out.PostPromotion = AnalysisKeep
	}
}
