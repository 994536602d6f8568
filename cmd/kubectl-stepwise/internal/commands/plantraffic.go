package commands

import (
	"fmt"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/traffic"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// planStepTraffic is what the routes carry once each step of r is reached,
// for a workload of replicas Pods that all become ready: the controller's
// own decision (traffic.Decide), step after step, so that plan never
// re-derives it. It lives in cmd because internal/cli sits below controllers.
func planStepTraffic(r *stepwisev1.Rollout, replicas int32) (*cli.TrafficPlan, error) {
	if r.Spec.TrafficRouting == nil {
		return nil, nil
	}
	out := &cli.TrafficPlan{Replicas: replicas}
	var previous int32
	for i := range r.Spec.Steps {
		stable, err := stepwisev1.ResolvePartition(&r.Spec.Steps[i].Partition, replicas)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		p := traffic.Decide(traffic.Input{
			Mode: traffic.Stepping, Step: &r.Spec.Steps[i], StepReady: true,
			StableReady: stable, CanaryReady: replicas - stable, Previous: previous,
			StableRevision: "stable", CanaryRevision: "canary", StepKeepsNoStablePod: stable == 0,
		})
		previous = p.CanaryWeight
		out.Steps = append(out.Steps, cli.StepTraffic{Weight: p.CanaryWeight, Matches: p.Matches, Why: p.Why})
	}
	return out, nil
}
