package traffic

import (
	"fmt"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Mode is where the Rollout stands, as far as traffic is concerned.
type Mode int

const (
	// Idle: no rollout in progress; everything goes to the stable revision.
	Idle Mode = iota
	// Stepping: a step of spec.steps is in progress.
	Stepping
	// Completed: every Pod runs the canary revision and the last step
	// passed; the stable Service moves to it and the canary is emptied.
	Completed
	// Aborted: the canary Pods roll back in place.
	Aborted
)

// Input is what Decide needs, all values.
type Input struct {
	Mode Mode
	// Step is the step in progress (Stepping only).
	Step *v1alpha1.RolloutStep
	// StepReady: the step's workload gate passed (its Pods are updated and
	// ready). Until then the step's own weight and matches wait.
	StepReady bool
	// StableReady and CanaryReady count the ready Pods of each revision.
	StableReady, CanaryReady int32
	// Previous is the canary weight the routes carry now.
	Previous int32
	// StableRevision and CanaryRevision (empty when there is no canary).
	StableRevision, CanaryRevision string
	// CanaryPods counts the Pods on the canary revision, ready or not: an
	// abort is over once it is 0.
	CanaryPods int32
	// StepKeepsNoStablePod: the step's partition leaves no Pod on the
	// stable revision (partition 0), so every stable Pod is about to leave.
	StepKeepsNoStablePod bool
}

// Plan is what the routes and Services must carry.
type Plan struct {
	// CanaryWeight is the percent of requests for the canary Service; the
	// stable Service gets the rest.
	CanaryWeight int32
	// Matches send matching requests to the canary Service.
	Matches []v1alpha1.TrafficMatch
	// StableSelects and CanarySelects are the revisions each Service
	// selects. Empty: the Service's own selector without the revision key
	// (git's, every Pod of the workload), which is what a Service carries
	// at rest.
	StableSelects, CanarySelects string
	// Why says how the weight was chosen, for logs and Events.
	Why string
}

// Shifted reports whether any request may reach the canary Service.
func (p Plan) Shifted() bool { return p.CanaryWeight > 0 || len(p.Matches) > 0 }

// Decide returns the traffic for in. Rules, in order:
//   - Idle: all to stable, no matches, and both Services at rest: their
//     own selectors without the revision key, as git wrote them (no Pod
//     runs another revision than the stable one, or, in a rollback or a
//     downgrade, every Pod moves to it at once and must stay selected).
//   - Completed: every Pod runs the canary revision and the last step
//     passed: the canary weight is 0, the matches go, and both Services
//     are at rest again, which makes the stable Service select the new
//     revision.
//   - Aborted: no matches; the canary weight never rises, and falls with
//     the canary's share of ready Pods (rounded up) as its Pods roll back:
//     the stable Pods never carry more than the larger of what they carried
//     before the abort and their share of ready Pods. With no ready Pod at
//     all, the weights stay. The Services keep the revision key until no
//     Pod is left on the canary revision, then are at rest.
//   - Stepping: the stable Service selects the stable revision and the
//     canary Service the canary one, from the round that starts the first
//     step, before any Pod moves. Once the step is ready, its traffic
//     (unset: the canary's share of ready Pods) and matches; before that,
//     the weight the routes carry (a step never raises the weight before
//     its Pods are ready) and the step's matches.
//   - Whatever the above, no Service gets requests that the Pods staying
//     behind it cannot serve: no weight and no match for a canary without
//     a ready Pod, and all weight to it when no ready stable Pod stays,
//     either none is ready or the step keeps none (partition 0: from the
//     round that starts it, before the stable Pods drain; waiting for them
//     to become unready left the stable Service without a ready endpoint
//     while the route still sent it requests, and Traefik answered 503 on
//     the real node).
func Decide(in Input) Plan {
	stable := in.StableRevision
	canary := in.CanaryRevision
	if canary == "" {
		canary = stable
	}
	p := Plan{StableSelects: stable, CanarySelects: canary}
	atRest := func(why string) Plan { return Plan{Why: why} }
	switch in.Mode {
	case Idle:
		return atRest("no rollout in progress")
	case Completed:
		return atRest("promoted: every Pod runs the new revision")
	case Aborted:
		if in.CanaryPods == 0 {
			return atRest("aborted: every Pod is back on the stable revision")
		}
		p.CanaryWeight = in.Previous
		if total := in.StableReady + in.CanaryReady; total > 0 {
			p.CanaryWeight = min(in.Previous, share(in.CanaryReady, total))
		}
		p.Why = fmt.Sprintf("aborted: %d of %d ready Pods still on the canary", in.CanaryReady, in.StableReady+in.CanaryReady)
	case Stepping:
		p.CanaryWeight = in.Previous
		p.Why = "waiting for the step's Pods"
		if in.Step != nil {
			p.Matches = in.Step.Matches
			if in.StepReady {
				switch {
				case in.Step.Traffic != nil:
					p.CanaryWeight = *in.Step.Traffic
					p.Why = "the step's traffic"
				case in.StableReady+in.CanaryReady > 0:
					p.CanaryWeight = share(in.CanaryReady, in.StableReady+in.CanaryReady)
					p.Why = "the canary's share of ready Pods"
				}
			}
		}
	}
	// No Service gets requests that the Pods staying behind it cannot
	// serve: a step that keeps no stable Pod leaves none behind the stable
	// Service, ready or not yet drained.
	stableStaying := in.StableReady
	if in.Mode == Stepping && in.StepKeepsNoStablePod {
		stableStaying = 0
	}
	switch {
	case in.CanaryReady == 0:
		p.CanaryWeight, p.Matches = 0, nil
		p.Why += "; no ready canary Pod"
	case stableStaying == 0:
		p.CanaryWeight = 100
		p.Why += "; no ready stable Pod"
	}
	return p
}

// AtRest reports whether p leaves every object as git wrote it: no
// weight, no match, and no revision key in either Service's selector.
func (p Plan) AtRest() bool {
	return !p.Shifted() && p.StableSelects == "" && p.CanarySelects == ""
}

// share is part/total in percent, rounded up, so that a ready Pod always
// counts.
func share(part, total int32) int32 {
	return int32((int64(part)*100 + int64(total) - 1) / int64(total))
}
