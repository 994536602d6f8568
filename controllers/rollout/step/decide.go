package step

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// settle is the requeue after a transition that the next call may follow at
// once: when a step's partition equals the previous one the workload does not
// change, so no watch event would come to take the gate.
const settle = time.Second

var (
	armed   = intstr.FromString("100%")
	allPods = intstr.FromInt32(0)
)

// Decide returns what the rollout does next. It takes at most one step (a
// promote-full request jumps to the last one), and every pending request
// (promote, promote-full, abort, retry, pause, resume) is consumed:
// applied when the state allows it, otherwise reported in a RequestIgnored
// Event, so that a stale token never acts on a later rollout.
func Decide(in Input) Decision {
	d := &decider{in: in, out: Decision{Status: in.Status, Partition: armed}}
	d.trackProgress()
	d.takeRequests()
	d.decide()
	d.planBackground()
	d.planPostPromotion()
	d.rememberStable()
	d.reportIgnored()
	return d.out
}

// rememberStable puts the stable revision this decision replaced first in
// PreviousStableRevisions, so that a later downgrade to it is known to have
// been stable; the new stable revision leaves the list, and the oldest
// entries fall off past v1alpha1.MaxPreviousStableRevisions. Adopting a first
// stable revision replaces nothing. A new slice is built: the input's is
// shared with the caller.
func (d *decider) rememberStable() {
	before, s := d.in.Status.StableRevision, d.status()
	if before == "" || s.StableRevision == before {
		return
	}
	kept := make([]string, 0, v1alpha1.MaxPreviousStableRevisions)
	kept = append(kept, before)
	for _, r := range s.PreviousStableRevisions {
		if len(kept) == v1alpha1.MaxPreviousStableRevisions {
			break
		}
		if r != before && r != s.StableRevision {
			kept = append(kept, r)
		}
	}
	s.PreviousStableRevisions = kept
}

// decider is one call's scratch space: the input, the decision being built
// and the requests not yet used.
type decider struct {
	in                                 Input
	out                                Decision
	promote, promoteFull, abort, retry bool
	// restartBackground asks planBackground for a new background run.
	restartBackground bool
	// restartPostPromotion asks planPostPromotion for a new run.
	restartPostPromotion bool
}

func (d *decider) status() *Status { return &d.out.Status }

func (d *decider) event(typ, reason, format string, args ...any) {
	d.out.Events = append(d.out.Events, Event{Type: typ, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// requeue keeps the earliest of the requested delays.
func (d *decider) requeue(after time.Duration) {
	if after <= 0 {
		after = time.Millisecond
	}
	if d.out.RequeueAfter == 0 || after < d.out.RequeueAfter {
		d.out.RequeueAfter = after
	}
}

func (d *decider) paused() bool { return d.in.Paused || d.status().PauseRequested }

func (d *decider) pauseReason() (reason, by string) {
	if d.in.Paused {
		return v1alpha1.ReasonPausedBySpec, "spec.paused"
	}
	return v1alpha1.ReasonPauseRequested, "a pause request"
}

// trackProgress records a rise of updated ready Pods as progress, which
// restarts the progress deadline.
func (d *decider) trackProgress() {
	s := d.status()
	if d.in.Workload.UpdatedReadyReplicas > s.UpdatedReadyReplicas {
		s.LastProgressAt = d.in.Now
	}
	s.UpdatedReadyReplicas = d.in.Workload.UpdatedReadyReplicas
}

// takeRequests marks every request token as handled and applies pause and
// resume, which are state rather than transitions.
func (d *decider) takeRequests() {
	r, h := d.in.Requests, d.in.Status.Handled
	pending := func(v, handled string) bool { return v != "" && v != handled }
	d.promote = pending(r.Promote, h.Promote)
	d.promoteFull = pending(r.PromoteFull, h.PromoteFull)
	d.abort = pending(r.Abort, h.Abort)
	d.retry = pending(r.Retry, h.Retry)
	pause, resume := pending(r.Pause, h.Pause), pending(r.Resume, h.Resume)

	handled := &d.status().Handled
	for _, f := range []struct{ v, h *string }{
		{&r.Promote, &handled.Promote}, {&r.PromoteFull, &handled.PromoteFull}, {&r.Abort, &handled.Abort}, {&r.Retry, &handled.Retry},
		{&r.Pause, &handled.Pause}, {&r.Resume, &handled.Resume},
	} {
		if *f.v != "" {
			*f.h = *f.v
		}
	}

	s := d.status()
	if pause && resume {
		// Both arrived between two calls: the later wins when both tokens are
		// timestamps; otherwise pausing, the side that moves no Pod, wins.
		if later(r.Resume, r.Pause) {
			pause, resume = false, s.PauseRequested
		} else {
			resume = false
		}
	}
	switch {
	case pause && !s.PauseRequested:
		s.PauseRequested = true
		d.event(corev1.EventTypeNormal, v1alpha1.EventPaused, "paused by request %q: no step is taken until a resume request", r.Pause)
	case resume && s.PauseRequested:
		s.PauseRequested = false
		d.event(corev1.EventTypeNormal, v1alpha1.EventResumed, "resumed by request %q", r.Resume)
	case resume:
		d.event(corev1.EventTypeWarning, v1alpha1.EventRequestIgnored, "resume request %q ignored: not paused by a request", r.Resume)
	}
}

// later reports whether timestamp a is after timestamp b; false when either
// does not parse.
func later(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	return errA == nil && errB == nil && ta.After(tb)
}

// reportIgnored turns requests no branch used into Events.
func (d *decider) reportIgnored() {
	s, r := d.status(), d.in.Requests
	for _, q := range []struct {
		pending bool
		name    string
		token   string
	}{{d.promote, "promote", r.Promote}, {d.promoteFull, "promote-full", r.PromoteFull}, {d.abort, "abort", r.Abort}, {d.retry, "retry", r.Retry}} {
		if q.pending {
			d.event(corev1.EventTypeWarning, v1alpha1.EventRequestIgnored, "%s request %q ignored while %s: %s", q.name, q.token, s.Phase, s.Message)
		}
	}
}

func (d *decider) decide() {
	s, w := d.status(), d.in.Workload
	if len(d.in.Steps) == 0 || w.UpdateRevision == "" {
		d.hold()
		return
	}
	if s.StableRevision == "" {
		// A new Rollout adopts what the workload runs: its current revision
		// when its Pods were all on one together, else the update revision.
		s.StableRevision = w.CurrentRevision
		if s.StableRevision == "" {
			s.StableRevision = w.UpdateRevision
		}
	}
	switch {
	case w.UpdateRevision == s.StableRevision:
		d.atStable()
	case d.in.VersionViolation != "":
		d.reject()
	case d.in.Downgrade:
		d.fastPath(v1alpha1.ReasonDowngrading)
	case s.Phase == v1alpha1.RolloutAborted && s.CanaryRevision == w.UpdateRevision:
		d.aborted()
	case s.CurrentStepIndex != nil && s.CanaryRevision == w.UpdateRevision:
		d.stepping()
	default:
		d.start()
	}
}
