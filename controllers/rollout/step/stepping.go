package step

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// stepIndex is the current step, clamped to the plan: if spec.steps shrank
// during a rollout, the last step (partition 0) carries on.
func (d *decider) stepIndex() int {
	i := int(*d.status().CurrentStepIndex)
	if i >= len(d.in.Steps) {
		i = len(d.in.Steps) - 1
	}
	if i < 0 {
		i = 0
	}
	return i
}

func (d *decider) stepName(i int) string { return fmt.Sprintf("step %d/%d", i+1, len(d.in.Steps)) }

// stepping runs one step of the rollout in progress: gate, pause, analysis.
func (d *decider) stepping() {
	s := d.status()
	i := d.stepIndex()
	if int(*s.CurrentStepIndex) != i {
		// spec.steps shrank under the rollout: the last step starts afresh.
		s.StepStartedAt, s.StepReadyAt, s.AnalysisStartedAt = d.in.Now, time.Time{}, time.Time{}
		s.PostPromotionStartedAt = time.Time{}
		d.out.Analysis = AnalysisClear
	}
	idx := int32(i)
	s.CurrentStepIndex = &idx
	st := d.in.Steps[i]
	d.out.Partition = st.Partition
	if !s.StepReadyAt.IsZero() && d.in.Workload.Partition != st.Pods {
		// The workload left the step's partition (the step was edited in git,
		// or another writer changed it): the gate is taken again, so that no
		// step is passed on Pods it never had.
		s.StepReadyAt = time.Time{}
		s.LastProgressAt = d.in.Now
	}

	if d.abort {
		d.abort = false
		d.abortRollout(v1alpha1.ReasonAbortRequested, "aborted by request")
		return
	}
	post := !s.PostPromotionStartedAt.IsZero()
	if post && d.postPromotionVerdict(i) {
		return
	}
	if d.background(i) {
		return
	}
	if d.paused() {
		reason, by := d.pauseReason()
		s.Phase = v1alpha1.RolloutPaused
		s.Reason = reason
		s.Message = fmt.Sprintf("%s (partition %s) held: paused by %s", d.stepName(i), st.Partition.String(), by)
		// Time spent paused is not a lack of progress.
		s.LastProgressAt = d.in.Now
		return
	}
	if d.in.Status.Phase == v1alpha1.RolloutPaused {
		// Leaving a pause: the deadline counts from now, not from the last
		// call made while paused. (Other Paused states are past the gate,
		// where the deadline does not apply.)
		s.LastProgressAt = d.in.Now
		if d.in.Status.Reason == v1alpha1.ReasonPausedBySpec {
			d.event(corev1.EventTypeNormal, v1alpha1.EventResumed, "resumed: spec.paused is false")
		}
	}

	if d.promoteFull {
		d.promoteFull = false
		if d.promoteInFull(i) {
			return
		}
	}

	if s.StepReadyAt.IsZero() {
		if !d.gate(st) {
			d.waitForPods(i, false)
			return
		}
		if d.in.TrafficRouted && (d.in.TrafficStep == nil || *d.in.TrafficStep != idx) {
			d.waitForTraffic(i, st)
			return
		}
		s.StepReadyAt = d.in.Now
		s.LastProgressAt = d.in.Now
		d.event(corev1.EventTypeNormal, v1alpha1.EventStepReady, "%s reached: %d/%d Pods on revision %s ready", d.stepName(i), d.in.Workload.UpdatedReadyReplicas, d.in.Workload.Replicas, s.CanaryRevision)
	}

	if post {
		d.postPromoting(i)
		return
	}
	if s.PromotedFull {
		d.advance(i)
		return
	}
	if st.Pause && s.AnalysisStartedAt.IsZero() && !d.pauseOver(i, st) {
		return
	}
	if !st.Analysis {
		d.advance(i)
		return
	}
	if d.promote {
		d.promote = false
		d.event(corev1.EventTypeNormal, v1alpha1.EventPromoted, "%s: analysis skipped by a promote request", d.stepName(i))
		d.advance(i)
		return
	}
	if s.AnalysisStartedAt.IsZero() {
		s.AnalysisStartedAt = d.in.Now
		d.out.Analysis = AnalysisStart
		d.analysing(i, "started")
		d.event(corev1.EventTypeNormal, v1alpha1.EventAnalysisStarted, "%s: analysis started", d.stepName(i))
		return
	}
	switch d.in.Analysis.Verdict {
	case VerdictPassed:
		d.advance(i)
	case VerdictFailed:
		d.abortRollout(v1alpha1.ReasonAnalysisFailed, "analysis failed: "+d.in.Analysis.Message)
	case VerdictInconclusive:
		d.inconclusive(i, st)
	default:
		d.out.Analysis = AnalysisRun
		d.analysing(i, "running")
	}
}

// gate is the workload gate: the workload saw its latest spec, runs the
// step's partition, and has enough updated Pods ready for it.
func (d *decider) gate(st Step) bool { return GateOpen(d.in.Workload, st) }

// GateOpen is the workload gate of st: the workload saw its latest spec,
// runs the step's partition, and has enough updated Pods ready for it.
func GateOpen(w Workload, st Step) bool {
	return w.ObservedGenerationCurrent && w.Partition == st.Pods && w.UpdatedReadyReplicas >= w.Replicas-st.Pods
}

// waitForTraffic reports step i's Pods ready and its traffic not yet
// carried by the routes. The progress deadline applies: a route that is
// never accepted aborts the rollout like Pods that never get ready.
func (d *decider) waitForTraffic(i int, st Step) {
	s := d.status()
	s.Phase = v1alpha1.RolloutProgressing
	s.Reason = v1alpha1.ReasonWaitingForTraffic
	s.Message = fmt.Sprintf("%s (partition %s): Pods ready, waiting for the routes to carry the step's traffic", d.stepName(i), st.Partition.String())
	if left, over := d.deadline(); over {
		d.abortRollout(v1alpha1.ReasonProgressDeadlineExceeded, fmt.Sprintf("no progress for %s: %s", d.in.ProgressDeadline, s.Message))
	} else if left > 0 {
		d.requeue(left)
	}
}

// waitForPods reports the gate of step i, and aborts past the progress
// deadline. fresh is true when this decision sets the step's partition, which
// the workload cannot have seen yet.
func (d *decider) waitForPods(i int, fresh bool) {
	s, w, st := d.status(), d.in.Workload, d.in.Steps[i]
	s.Phase = v1alpha1.RolloutProgressing
	need := w.Replicas - st.Pods
	switch {
	case fresh:
		s.Reason = v1alpha1.ReasonWaitingForPods
		s.Message = fmt.Sprintf("%s (partition %s): partition set, waiting for the workload", d.stepName(i), st.Partition.String())
	case !w.ObservedGenerationCurrent:
		s.Reason = v1alpha1.ReasonWaitingForPods
		s.Message = fmt.Sprintf("%s (partition %s): waiting for the workload to observe its spec", d.stepName(i), st.Partition.String())
	case w.Partition != st.Pods:
		s.Reason = v1alpha1.ReasonPartitionMismatch
		s.Message = fmt.Sprintf("%s: the workload runs partition %d, the step needs %d", d.stepName(i), w.Partition, st.Pods)
	default:
		s.Reason = v1alpha1.ReasonWaitingForPods
		s.Message = fmt.Sprintf("%s (partition %s): %d/%d updated Pods ready", d.stepName(i), st.Partition.String(), w.UpdatedReadyReplicas, need)
	}
	if s.PromotedFull {
		s.Message += "; promoted in full: no pause or analysis follows"
	}
	if left, over := d.deadline(); over {
		d.abortRollout(v1alpha1.ReasonProgressDeadlineExceeded, fmt.Sprintf("no progress for %s: %s", d.in.ProgressDeadline, s.Message))
	} else if left > 0 {
		d.requeue(left)
	}
}

// pauseOver reports whether step i's pause has ended, by time or by a
// promote request; while it has not, it sets the waiting status.
func (d *decider) pauseOver(i int, st Step) bool {
	s := d.status()
	end := s.StepReadyAt.Add(st.PauseDuration)
	if st.PauseDuration > 0 && !d.in.Now.Before(end) {
		return true
	}
	if d.promote {
		// Promote skips the current stage only: a step with a pause and an
		// analysis still analyses, so one request never skips an analysis
		// unseen.
		d.promote = false
		d.event(corev1.EventTypeNormal, v1alpha1.EventPromoted, "%s: pause skipped by a promote request", d.stepName(i))
		return true
	}
	if st.PauseDuration <= 0 {
		s.Phase = v1alpha1.RolloutPaused
		s.Reason = v1alpha1.ReasonAwaitingPromotion
		s.Message = fmt.Sprintf("%s (partition %s): waiting for a promote request", d.stepName(i), st.Partition.String())
		return false
	}
	s.Phase = v1alpha1.RolloutProgressing
	s.Reason = v1alpha1.ReasonStepPaused
	s.Message = fmt.Sprintf("%s (partition %s): paused until %s", d.stepName(i), st.Partition.String(), end.UTC().Format(time.RFC3339))
	d.requeue(end.Sub(d.in.Now))
	return false
}

func (d *decider) analysing(i int, what string) {
	s := d.status()
	s.Phase = v1alpha1.RolloutProgressing
	s.Reason = v1alpha1.ReasonAnalysisRunning
	s.Message = fmt.Sprintf("%s (partition %s): analysis %s", d.stepName(i), d.in.Steps[i].Partition.String(), what)
}

// inconclusive applies the step's policy to an inconclusive analysis.
func (d *decider) inconclusive(i int, st Step) {
	s, msg := d.status(), d.in.Analysis.Message
	switch st.Inconclusive {
	case v1alpha1.InconclusiveAbort:
		d.abortRollout(v1alpha1.ReasonAnalysisInconclusive, "analysis inconclusive: "+msg)
	case v1alpha1.InconclusivePromote:
		d.event(corev1.EventTypeWarning, v1alpha1.EventAnalysisInconclusive, "%s: analysis inconclusive (%s); promoted as the policy says", d.stepName(i), msg)
		d.advance(i)
	default:
		if d.retry {
			d.retry = false
			s.AnalysisStartedAt = d.in.Now
			d.out.Analysis = AnalysisStart
			d.analysing(i, "restarted")
			d.event(corev1.EventTypeNormal, v1alpha1.EventRetried, "%s: analysis restarted by a retry request", d.stepName(i))
			return
		}
		if d.in.Status.Reason != v1alpha1.ReasonAnalysisInconclusive {
			d.event(corev1.EventTypeWarning, v1alpha1.EventAnalysisInconclusive, "%s: analysis inconclusive (%s); promote, retry or abort", d.stepName(i), msg)
		}
		s.Phase = v1alpha1.RolloutPaused
		s.Reason = v1alpha1.ReasonAnalysisInconclusive
		s.Message = fmt.Sprintf("%s: analysis inconclusive: %s; waiting for promote, retry or abort", d.stepName(i), msg)
	}
}

// advance moves from step i to the next, or after the last starts the
// post-promotion analysis or completes the rollout.
func (d *decider) advance(i int) {
	s := d.status()
	d.out.Analysis = AnalysisClear
	if i < len(d.in.Steps)-1 {
		d.enter(i + 1)
		return
	}
	if d.in.PostPromotion != nil && !s.PromotedFull {
		d.startPostPromotion(i)
		return
	}
	how := fmt.Sprintf("after %d steps", len(d.in.Steps))
	if s.PromotedFull {
		how = "promoted in full"
	}
	d.complete(how)
}

// complete makes the canary revision stable and the Rollout idle.
func (d *decider) complete(how string) {
	s := d.status()
	canary := s.CanaryRevision
	s.StableRevision = canary
	d.idle()
	d.event(corev1.EventTypeNormal, v1alpha1.EventRolloutCompleted, "revision %s is stable %s", canary, how)
}

// enter starts step next: its partition, and the gate to wait for.
func (d *decider) enter(next int) {
	s := d.status()
	d.out.Analysis = AnalysisClear
	idx := int32(next)
	st := d.in.Steps[next]
	s.CurrentStepIndex = &idx
	s.StepStartedAt = d.in.Now
	s.StepReadyAt, s.AnalysisStartedAt = time.Time{}, time.Time{}
	s.LastProgressAt = d.in.Now
	d.out.Partition = st.Partition
	d.event(corev1.EventTypeNormal, v1alpha1.EventStepAdvanced, "%s: partition %s", d.stepName(next), st.Partition.String())
	d.waitForPods(next, true)
	d.requeue(settle)
}

// promoteInFull applies a promote-full request at step i: every pause and
// analysis left is skipped, the last step's included, and the rollout goes
// to the last step at once, where it still waits for its Pods (and its
// traffic) before it completes. It reports whether it moved to the last
// step, which is then this call's step. A plain promote sent with it is
// part of it.
func (d *decider) promoteInFull(i int) bool {
	s, last := d.status(), len(d.in.Steps)-1
	d.promote = false
	s.PromotedFull = true
	if i == last {
		d.event(corev1.EventTypeNormal, v1alpha1.EventPromoted, "%s: promoted in full by request %q: its pause and analysis are skipped, and the rollout completes once its Pods are ready",
			d.stepName(i), d.in.Requests.PromoteFull)
		return false
	}
	d.event(corev1.EventTypeNormal, v1alpha1.EventPromoted, "%s: promoted in full by request %q: on to %s, skipping every pause and analysis left; the rollout completes once its Pods are ready",
		d.stepName(i), d.in.Requests.PromoteFull, d.stepName(last))
	d.enter(last)
	return true
}
