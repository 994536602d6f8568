package step

import (
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TestPromoteFull: a promote-full request skips every pause and analysis
// left, goes to the last step at once and completes the rollout once that
// step's gate passes. It never promotes an aborted or paused rollout, and
// it ends with the rollout it promoted.
func TestPromoteFull(t *testing.T) {
	// lastAnalysed analyses after every step, the last one included, as
	// spec.analysis does.
	lastAnalysed := steps(step(pct("90%"), pause(time.Minute), analysed("")), step(pct("50%"), analysed("")), step(num(0), analysed("")))
	scenarios := []scenario{
		{
			name: "mid_rollout_it_goes_to_the_last_step_and_completes_on_its_gate",
			calls: seq(startR2, []call{
				{do: []action{request("promote-full", "f1")}, want: want{phase: progressing, reason: v1alpha1.ReasonWaitingForPods, step: "2", partition: "0", analysis: "Clear", full: "true",
					message: "promoted in full: no pause or analysis follows", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
				{do: []action{observed(), ready(7)}, want: want{reason: v1alpha1.ReasonWaitingForPods, step: "2", message: "7/10 updated Pods ready; promoted in full", events: ev()}},
				{do: []action{converge()}, want: want{phase: healthy, stable: "r2", canary: "-", partition: "100%", full: "false", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name:  "the_last_steps_analysis_is_skipped_too",
			setup: []action{lastAnalysed},
			calls: []call{
				{do: []action{commit("r2")}, want: want{step: "0"}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused}},
				{do: []action{request("promote-full", "f1")}, want: want{step: "2", partition: "0", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
				{do: []action{converge()}, want: want{phase: healthy, stable: "r2", analysis: "Clear", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
			},
		},
		{
			name: "a_running_analysis_is_dropped",
			calls: seq(startR2, toAnalysis, []call{
				{do: []action{request("promote-full", "f1")}, want: want{step: "2", partition: "0", analysis: "Clear", full: "true", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
			}),
		},
		{
			name: "before_the_gate_it_applies_at_once",
			calls: seq(startR2[:1], []call{
				{do: []action{request("promote-full", "f1"), observed(), ready(0)}, want: want{step: "2", partition: "0", full: "true", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
			}),
		},
		{
			name: "an_inconclusive_analysis_is_promoted",
			calls: seq(startR2, toAnalysis, inconclusivePause, []call{
				{do: []action{request("promote-full", "f1")}, want: want{phase: progressing, step: "2", partition: "0", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
			}),
		},
		{
			name:  "at_the_last_step_it_ends_a_manual_pause_and_skips_the_analysis",
			setup: []action{steps(step(pct("50%")), step(num(0), pause(0), analysed("")))},
			calls: []call{
				{do: []action{commit("r2")}, want: want{step: "0"}},
				{do: []action{converge()}, want: want{step: "1", events: ev(v1alpha1.EventStepReady, v1alpha1.EventStepAdvanced)}},
				{do: []action{converge()}, want: want{phase: paused, reason: v1alpha1.ReasonAwaitingPromotion, step: "1", events: ev(v1alpha1.EventStepReady)}},
				{do: []action{request("promote-full", "f1")}, want: want{phase: healthy, stable: "r2", full: "false", events: ev(v1alpha1.EventPromoted, v1alpha1.EventRolloutCompleted)}},
			},
		},
		{
			name:  "at_the_last_step_before_its_gate_it_still_waits_for_the_pods",
			setup: []action{steps(step(pct("50%")), step(num(0), pause(0)))},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{step: "1", events: ev(v1alpha1.EventStepReady, v1alpha1.EventStepAdvanced)}},
				{do: []action{request("promote-full", "f1"), observed(), ready(6)}, want: want{phase: progressing, reason: v1alpha1.ReasonWaitingForPods, step: "1", full: "true", events: ev(v1alpha1.EventPromoted)}},
				{do: []action{converge()}, want: want{phase: healthy, stable: "r2", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
			},
		},
		{
			name: "an_aborted_rollout_is_not_promoted",
			calls: seq(startR2, toAnalysis, abortOnFailure, []call{
				{do: []action{request("promote-full", "f1")}, want: want{phase: aborted, partition: "100%", full: "false", events: ev(v1alpha1.EventRequestIgnored)}},
				// Nor later, by the same token, once retried.
				{do: []action{request("retry", "r1")}, want: want{phase: progressing, step: "0", full: "false", events: ev(v1alpha1.EventRetried, v1alpha1.EventRolloutStarted)}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, step: "0", events: ev(v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "a_paused_rollout_is_not_promoted",
			calls: seq(startR2, []call{
				{do: []action{request("pause", "p1")}, want: want{phase: paused}},
				{do: []action{request("promote-full", "f1")}, want: want{phase: paused, step: "0", full: "false", events: ev(v1alpha1.EventRequestIgnored)}},
				{do: []action{request("resume", "r1")}, want: want{phase: progressing, reason: v1alpha1.ReasonStepPaused, step: "0", events: ev(v1alpha1.EventResumed)}},
			}),
		},
		{
			name: "an_idle_rollout_ignores_it",
			calls: []call{
				{do: []action{request("promote-full", "f1")}, want: want{phase: healthy, full: "false", events: ev(v1alpha1.EventRequestIgnored)}},
				{do: []action{commit("r2")}, want: want{step: "0", events: ev(v1alpha1.EventRolloutStarted)}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, events: ev(v1alpha1.EventStepReady)}},
			},
		},
		{
			name: "a_newer_revision_is_not_promoted_by_it",
			calls: seq(startR2, []call{
				{do: []action{request("promote-full", "f1")}, want: want{step: "2", full: "true"}},
				{do: []action{commit("r3")}, want: want{step: "0", canary: "r3", partition: "90%", full: "false", events: ev(v1alpha1.EventRolloutRestarted)}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, step: "0", events: ev(v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "a_rollback_ends_it",
			calls: seq(startR2, []call{
				{do: []action{request("promote-full", "f1")}, want: want{step: "2", full: "true"}},
				{do: []action{revert("r1", 4)}, want: want{reason: v1alpha1.ReasonRollingBack, step: "-", full: "false", events: ev(v1alpha1.EventRollingBack)}},
			}),
		},
		{
			name: "with_a_promote_it_is_one_request",
			calls: seq(startR2, []call{
				{do: []action{request("promote", "p1"), request("promote-full", "f1")}, want: want{step: "2", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
			}),
		},
		{
			name: "an_abort_sent_with_it_wins",
			calls: seq(startR2, []call{
				{do: []action{request("abort", "a1"), request("promote-full", "f1")}, want: want{phase: aborted, reason: v1alpha1.ReasonAbortRequested, full: "false", events: ev(v1alpha1.EventRolloutAborted, v1alpha1.EventRequestIgnored)}},
			}),
		},
		{
			name: "with_traffic_routing_the_last_step_waits_for_its_routes",
			calls: seq(startR2[:1], []call{
				{do: []action{routed(ptrTo(0)), converge()}, want: want{reason: v1alpha1.ReasonStepPaused, step: "0"}},
				{do: []action{request("promote-full", "f1")}, want: want{step: "2", partition: "0"}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonWaitingForTraffic, step: "2", events: ev()}},
				{do: []action{routed(ptrTo(2))}, want: want{phase: healthy, stable: "r2", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
			}),
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { run(t, sc) })
	}
}
