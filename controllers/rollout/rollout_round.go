package rollout

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/traffic"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// round is one reconcile's observations and results, from fetch to status.
type round struct {
	ro  *v1alpha1.Rollout
	now time.Time
	// wl is the workload the Rollout drives and obs what this round read of
	// it; unset until it was read.
	wl  workload.Workload
	obs workload.Observation
	// input is what the step decision read.
	input step.Input
	// pods are the workload's Pods, the cache's own objects (read only),
	// listed once a round by the first step that needs them
	// (workloadPods); podsRead says they were.
	pods     []*corev1.Pod
	podsRead bool
	// decision is the step decision; nil when none could be taken.
	decision *step.Decision
	// spanning are the spanning analyses resolved before the decision
	// (checkSpanning), by spanning.of.
	spanning map[string]*v1alpha1.AnalysisSpec
	// problem is why no decision could be taken, when it is not an error to retry.
	problem *problem
	// writers are the field managers other than ours found owning the
	// partition this round; empty when none were, or none were looked for.
	writers []string
	// apply is the partition to write to the workload once the status that
	// decided it is written; nil when the workload holds it already (or is
	// governed by the grant in status).
	apply *partitionApply
	// events to record after the decision's, once the status is written.
	events []step.Event
	// measured are this round's measurements, for the Prometheus metrics.
	measured []measured
	// rolloutStart is the canary revision's creation when this round ends
	// the rollout (completed or aborted), for the duration metric.
	rolloutStart time.Time
	// notify is the phase transition to post once the status that records
	// it is written; nil when none.
	notify *notifyJob
	// trafficWrites are the Services' and routes' writes to make once the
	// status that records them (status.traffic.written) is written.
	trafficWrites []traffic.Write
	// canaryDeletion is the canary Pods an abort's rollback deletes once
	// the status that says so is written; nil when none.
	canaryDeletion *canaryDeletion
}

// workloadPods lists the workload's Pods the first time a step of the
// round asks (an abort's rollback, the traffic weights), and gives the
// same list to the next.
func (rd *round) workloadPods(ctx context.Context) ([]*corev1.Pod, error) {
	if !rd.podsRead {
		pods, err := rd.wl.Pods(ctx, rd.obs)
		if err != nil {
			return nil, err
		}
		rd.pods, rd.podsRead = pods, true
	}
	return rd.pods, nil
}

// problem is a condition that prevented a decision. A terminal one sets
// Stalled: only a change of the Rollout or the workload can clear it.
type problem struct {
	reason, message string
	terminal        bool
	// requeue is when to look again at a problem that no watched change
	// clears (not terminal); 0 for none.
	requeue time.Duration
}

// stallError is returned by phases for a problem to report rather than retry.
type stallError struct{ problem }

func (e *stallError) Error() string { return e.message }

func stall(reason, format string, args ...any) error {
	return &stallError{problem{reason: reason, message: fmt.Sprintf(format, args...), terminal: true}}
}
