package cli

import (
	"context"
	"fmt"
	"io"

	"k8s.io/client-go/dynamic"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Outcome is what `kubectl stepwise status` waits for.
type Outcome int

const (
	// Waiting: neither healthy nor aborted yet, or the status is stale.
	Waiting Outcome = iota
	// Done: Healthy for the current generation and the workload's revision.
	Done
	// Failed: Aborted for the current generation and the workload's revision.
	Failed
	// Deleted: the Rollout is gone.
	Deleted
)

// Verdict is what a snapshot means to someone waiting for the rollout.
type Verdict struct {
	Outcome Outcome
	// Summary says where the rollout is, in one line.
	Summary string
	// key changes when a progress line is worth printing: on a new phase,
	// step or reason, not on every message or measurement.
	key string
}

// Judge decides whether a rollout is finished. A Healthy or Aborted phase
// counts only when it is current: the controller has observed the Rollout's
// generation, and when the workload can be read, the workload has observed
// its own generation and its update revision is the one the phase is about.
// Without the workload check, `status` run right after applying a new
// template would return on the Healthy phase of the previous revision.
func Judge(s Snapshot) Verdict {
	r := s.Rollout
	if r == nil {
		return Verdict{Outcome: Deleted, Summary: "the rollout was deleted", key: "deleted"}
	}
	st := &r.Status
	if st.ObservedGeneration < r.Generation {
		return Verdict{Summary: fmt.Sprintf("waiting for the controller to observe generation %d (status is for %d)", r.Generation, st.ObservedGeneration),
			key: "generation"}
	}
	wl := s.Workload
	if wl != nil && !wl.GenerationObserved() {
		return Verdict{Summary: fmt.Sprintf("waiting for %s %s to observe generation %d (observed %d)", wl.Kind, wl.Name, wl.Generation, wl.ObservedGeneration),
			key: "workload-generation"}
	}
	switch st.Phase {
	case stepwisev1.RolloutHealthy:
		if wl != nil && wl.UpdateRevision != "" && st.StableRevision != wl.UpdateRevision {
			return Verdict{Summary: fmt.Sprintf("waiting for the controller to pick up revision %s (stable is %s)", wl.UpdateRevision, orDash(st.StableRevision)),
				key: "new-revision"}
		}
		return Verdict{Outcome: Done, Summary: "Healthy, stable revision " + orDash(st.StableRevision), key: "healthy"}
	case stepwisev1.RolloutAborted:
		if wl != nil && wl.UpdateRevision != "" && st.CanaryRevision != "" && st.CanaryRevision != wl.UpdateRevision {
			return Verdict{Summary: fmt.Sprintf("waiting for the controller to pick up revision %s (aborted %s)", wl.UpdateRevision, st.CanaryRevision),
				key: "new-revision"}
		}
		msg := "Aborted"
		if st.Reason != "" {
			msg += " (" + st.Reason + ")"
		}
		if st.Message != "" {
			msg += ": " + st.Message
		}
		return Verdict{Outcome: Failed, Summary: msg, key: "aborted"}
	}
	return Verdict{Summary: progressSummary(r), key: fmt.Sprintf("%s/%v/%s", st.Phase, derefIndex(st.CurrentStepIndex), st.Reason)}
}

func progressSummary(r *stepwisev1.Rollout) string {
	st := &r.Status
	s := string(st.Phase)
	if s == "" {
		s = "waiting for the controller to report a phase"
	}
	if i := derefIndex(st.CurrentStepIndex); i >= 0 && i < len(r.Spec.Steps) {
		s += fmt.Sprintf(", step %d/%d (partition %s)", i+1, len(r.Spec.Steps), r.Spec.Steps[i].Partition.String())
	}
	if st.Reason != "" {
		s += ", " + st.Reason
	}
	if st.Message != "" {
		s += ": " + st.Message
	}
	return s
}

func derefIndex(p *int32) int {
	if p == nil {
		return -1
	}
	return int(*p)
}

// Wait follows the rollout until Judge says Done, Failed or Deleted, writing
// a line to progress whenever the phase, step or reason changes. It returns
// the last verdict, and ctx's error when ctx ends first: the caller owns the
// timeout and tells it from an interruption.
func Wait(ctx context.Context, dyn dynamic.Interface, namespace, name string, progress io.Writer) (Verdict, error) {
	var last Verdict
	err := Follow(ctx, dyn, namespace, name, func(s Snapshot) (bool, error) {
		v := Judge(s)
		if v.key != last.key {
			if _, err := fmt.Fprintf(progress, "rollout %s/%s: %s\n", namespace, name, v.Summary); err != nil {
				return false, fmt.Errorf("writing progress: %w", err)
			}
		}
		last = v
		return v.Outcome != Waiting, nil
	})
	return last, err
}
