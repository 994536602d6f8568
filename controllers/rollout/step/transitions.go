package step

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// hold keeps the current state while the workload has not reported a revision.
func (d *decider) hold() {
	s := d.status()
	switch {
	case s.CurrentStepIndex != nil && len(d.in.Steps) > 0:
		d.out.Partition = d.in.Steps[d.stepIndex()].Partition
	case d.inFastPath(v1alpha1.ReasonRollingBack) || d.inFastPath(v1alpha1.ReasonDowngrading):
		d.out.Partition = allPods
	}
	// The phase stays as it was (empty on a new Rollout, so that the first
	// revision seen is adopted as idle, not taken for a rollback), and an
	// abort keeps the message that says why.
	if s.Phase == v1alpha1.RolloutAborted {
		d.out.Stalled = true
		return
	}
	s.Reason = v1alpha1.ReasonWaitingForWorkload
	s.Message = "waiting for the workload to report its revisions"
	if len(d.in.Steps) == 0 {
		s.Message = "spec.steps is empty"
	}
}

// atStable handles a template at the stable revision: nothing to do when
// idle; a rollback (fast path) when something else was in flight.
func (d *decider) atStable() {
	s := d.status()
	if s.Phase == v1alpha1.RolloutHealthy || s.Phase == "" {
		d.idle()
		return
	}
	d.fastPath(v1alpha1.ReasonRollingBack)
}

func (d *decider) idle() {
	s := d.status()
	s.Phase = v1alpha1.RolloutHealthy
	s.Reason = v1alpha1.ReasonStable
	s.Message = fmt.Sprintf("revision %s is stable; partition armed at 100%%", s.StableRevision)
	if d.in.Governed {
		s.Message = fmt.Sprintf("revision %s is stable; a new revision waits for this Rollout", s.StableRevision)
	}
	if d.paused() {
		_, by := d.pauseReason()
		s.Message += "; paused by " + by + ": a new revision will wait"
	}
	d.clearRollout()
	s.CanaryRevision = ""
	d.out.Partition = armed
}

// clearRollout forgets the step in progress, and a full promotion with it.
func (d *decider) clearRollout() {
	s := d.status()
	s.CurrentStepIndex = nil
	s.PromotedFull = false
	s.StepStartedAt, s.StepReadyAt, s.AnalysisStartedAt = time.Time{}, time.Time{}, time.Time{}
	s.PostPromotionStartedAt = time.Time{}
}

// inFastPath reports whether the status is already on the fast path for
// reason. Progressing without a step happens only there; a rollback has no
// canary, a downgrade has the update revision as canary.
func (d *decider) inFastPath(reason string) bool {
	s := d.in.Status
	if s.Phase != v1alpha1.RolloutProgressing || s.CurrentStepIndex != nil {
		return false
	}
	if reason == v1alpha1.ReasonRollingBack {
		return s.CanaryRevision == ""
	}
	return s.CanaryRevision != "" && s.CanaryRevision == d.in.Workload.UpdateRevision
}

// fastPath moves every Pod to the update revision at once, without steps or
// analysis: a rollback to the stable revision or a semver downgrade. It is
// never held by a pause, and past the progress deadline it keeps going with
// Stalled set, as there is nothing safer to go back to.
func (d *decider) fastPath(reason string) {
	s, w := d.status(), d.in.Workload
	target := w.UpdateRevision
	if !d.inFastPath(reason) {
		s.LastProgressAt = d.in.Now
		if reason == v1alpha1.ReasonRollingBack {
			d.event(corev1.EventTypeNormal, v1alpha1.EventRollingBack, "template is back at stable revision %s: moving every Pod to it at once, without analysis", target)
		} else {
			d.event(corev1.EventTypeNormal, v1alpha1.EventDowngrading, "revision %s is a downgrade of stable revision %s: moving every Pod to it at once, without analysis", target, s.StableRevision)
		}
	}
	d.clearRollout()
	d.out.Analysis = AnalysisClear
	if w.ObservedGenerationCurrent && w.UpdatedReadyReplicas >= w.Replicas {
		s.StableRevision = target
		d.idle()
		d.event(corev1.EventTypeNormal, v1alpha1.EventRolloutCompleted, "every Pod runs revision %s (%s)", target, reason)
		return
	}
	s.Phase = v1alpha1.RolloutProgressing
	s.Reason = reason
	s.CanaryRevision = ""
	if reason == v1alpha1.ReasonDowngrading {
		s.CanaryRevision = target
	}
	d.out.Partition = allPods
	s.Message = fmt.Sprintf("%s to %s: %d/%d Pods updated and ready", reason, target, w.UpdatedReadyReplicas, w.Replicas)
	if left, over := d.deadline(); over {
		if d.in.Status.Reason != v1alpha1.ReasonProgressDeadlineExceeded {
			d.event(corev1.EventTypeWarning, v1alpha1.EventProgressDeadlineExceeded, "%s: no progress for %s", s.Message, d.in.ProgressDeadline)
		}
		s.Reason = v1alpha1.ReasonProgressDeadlineExceeded
		s.Message += fmt.Sprintf("; no progress for %s", d.in.ProgressDeadline)
		d.out.Stalled = true
	} else if left > 0 {
		d.requeue(left)
	}
}

// deadline returns the time left before the progress deadline, and whether
// it has passed. No deadline: (0, false).
func (d *decider) deadline() (left time.Duration, over bool) {
	if d.in.ProgressDeadline <= 0 {
		return 0, false
	}
	s := d.status()
	if s.LastProgressAt.IsZero() {
		s.LastProgressAt = d.in.Now
	}
	left = s.LastProgressAt.Add(d.in.ProgressDeadline).Sub(d.in.Now)
	return left, left <= 0
}

// reject keeps every Pod off a revision that breaks the version policy.
func (d *decider) reject() {
	s, w := d.status(), d.in.Workload
	alreadyHeld := d.in.Status.Phase == v1alpha1.RolloutAborted && d.in.Status.Reason == v1alpha1.ReasonVersionPolicyViolation &&
		d.in.Status.CanaryRevision == w.UpdateRevision
	first := !alreadyHeld
	d.clearRollout()
	s.Phase = v1alpha1.RolloutAborted
	s.Reason = v1alpha1.ReasonVersionPolicyViolation
	s.CanaryRevision = w.UpdateRevision
	s.Message = fmt.Sprintf("revision %s breaks spec.versionPolicy: %s", w.UpdateRevision, d.in.VersionViolation)
	d.out.Partition = armed
	d.out.Stalled = true
	d.out.Analysis = AnalysisClear
	if first {
		d.event(corev1.EventTypeWarning, v1alpha1.EventVersionPolicyViolation, "%s; no Pod is moved to it", s.Message)
	}
}

// aborted waits for git (handled by decide's other branches) or a retry.
func (d *decider) aborted() {
	s := d.status()
	if s.Reason == v1alpha1.ReasonVersionPolicyViolation {
		// The policy no longer rejects this revision (spec.versionPolicy changed).
		d.start()
		return
	}
	if d.retry {
		d.retry = false
		d.event(corev1.EventTypeNormal, v1alpha1.EventRetried, "retrying revision %s from step 1", s.CanaryRevision)
		d.start()
		return
	}
	d.out.Partition = armed
	d.out.Stalled = true
}

// start begins (or restarts) a rollout of the update revision at step 0,
// unless paused, in which case the revision waits with no Pod moved.
func (d *decider) start() {
	s, w := d.status(), d.in.Workload
	previous := s.CanaryRevision
	restarting := s.CurrentStepIndex != nil && previous != w.UpdateRevision
	waiting := previous == w.UpdateRevision
	d.clearRollout()
	d.out.Analysis = AnalysisClear
	d.out.Partition = armed
	s.CanaryRevision = w.UpdateRevision
	if d.abort && waiting {
		d.abort = false
		d.abortRollout(v1alpha1.ReasonAbortRequested, "aborted by request before it started")
		return
	}
	if d.paused() {
		reason, by := d.pauseReason()
		s.Phase = v1alpha1.RolloutPaused
		s.Reason = reason
		s.Message = fmt.Sprintf("revision %s waits: paused by %s", w.UpdateRevision, by)
		return
	}
	i := int32(0)
	s.CurrentStepIndex = &i
	s.StepStartedAt = d.in.Now
	s.LastProgressAt = d.in.Now
	first := d.in.Steps[0]
	d.out.Partition = first.Partition
	if restarting {
		d.event(corev1.EventTypeNormal, v1alpha1.EventRolloutRestarted, "revision %s replaces canary %s: restarting at step 1/%d, partition %s", w.UpdateRevision, previous, len(d.in.Steps), first.Partition.String())
	} else {
		msg := fmt.Sprintf("rolling out revision %s over stable %s: step 1/%d, partition %s", w.UpdateRevision, s.StableRevision, len(d.in.Steps), first.Partition.String())
		if d.in.UntrustedDowngrade != "" {
			msg += "; " + d.in.UntrustedDowngrade
		}
		d.event(corev1.EventTypeNormal, v1alpha1.EventRolloutStarted, "%s", msg)
	}
	d.waitForPods(0, true)
	d.requeue(settle)
}

// abortRollout sends every Pod back to the stable revision and stops.
func (d *decider) abortRollout(reason, why string) {
	s := d.status()
	where := "before the first step"
	if s.CurrentStepIndex != nil {
		where = "at " + d.stepName(d.stepIndex())
	}
	d.clearRollout()
	s.Phase = v1alpha1.RolloutAborted
	s.Reason = reason
	s.Message = fmt.Sprintf("revision %s aborted %s: %s", s.CanaryRevision, where, why)
	d.out.Partition = armed
	d.out.Stalled = true
	d.out.Analysis = AnalysisKeep
	d.out.RequeueAfter = 0
	d.event(corev1.EventTypeWarning, v1alpha1.EventRolloutAborted, "%s; partition back to 100%%", s.Message)
}
