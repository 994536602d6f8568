package step

import (
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

const (
	healthy     = v1alpha1.RolloutHealthy
	progressing = v1alpha1.RolloutProgressing
	paused      = v1alpha1.RolloutPaused
	aborted     = v1alpha1.RolloutAborted
)

func ev(reasons ...string) []string { return append([]string{}, reasons...) }

func TestDecide(t *testing.T) {
	scenarios := []scenario{
		// Idle and adoption.
		{
			name: "idle_rollout_stays_armed_and_quiet",
			calls: []call{
				{want: want{phase: healthy, reason: v1alpha1.ReasonStable, step: "-", partition: "100%", stable: "r1", canary: "-", requeue: "0s", events: ev()}},
				{do: []action{tick(time.Hour)}, want: want{phase: healthy, partition: "100%", events: ev()}},
			},
		},
		{
			name:  "new_rollout_adopts_the_workload_revision_as_stable",
			setup: []action{status(func(s *Status) { *s = Status{} })},
			calls: []call{{want: want{phase: healthy, stable: "r1", partition: "100%", events: ev()}}},
		},
		{
			name: "new_rollout_waits_for_workload_revisions_then_adopts_quietly",
			setup: []action{status(func(s *Status) { *s = Status{} }), workload(func(w *Workload) {
				w.UpdateRevision, w.CurrentRevision = "", ""
			})},
			calls: []call{
				{want: want{reason: v1alpha1.ReasonWaitingForWorkload, partition: "100%", events: ev()}},
				{do: []action{workload(func(w *Workload) { w.UpdateRevision, w.CurrentRevision = "r1", "r1" })},
					want: want{phase: healthy, stable: "r1", events: ev()}},
			},
		},
		{
			name: "new_rollout_over_a_workload_mid_update_adopts_current_and_starts",
			setup: []action{status(func(s *Status) { *s = Status{} }), workload(func(w *Workload) {
				w.UpdateRevision, w.UpdatedReadyReplicas = "r2", 3
			})},
			calls: []call{{want: want{phase: progressing, step: "0", partition: "90%", stable: "r1", canary: "r2", events: ev(v1alpha1.EventRolloutStarted)}}},
		},

		// The cycle.
		{
			name: "full_rollout_walks_every_step_and_rearms",
			calls: seq(startR2, toAnalysis, []call{
				{do: []action{verdict(VerdictPassed, "")}, want: want{phase: progressing, reason: v1alpha1.ReasonWaitingForPods, step: "2", partition: "0", analysis: "Clear", events: ev(v1alpha1.EventStepAdvanced)}},
				{do: []action{converge()}, want: want{phase: healthy, reason: v1alpha1.ReasonStable, step: "-", partition: "100%", stable: "r2", canary: "-", analysis: "Clear", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
				{do: []action{observed(), ready(replicas)}, want: want{phase: healthy, stable: "r2", requeue: "0s", events: ev()}},
			}),
		},
		{
			name: "with_traffic_routing_a_step_is_reached_once_the_routes_carry_it",
			calls: seq(startR2[:1], []call{
				{do: []action{routed(nil), converge()}, want: want{phase: progressing, reason: v1alpha1.ReasonWaitingForTraffic, step: "0", message: "waiting for the routes", events: ev()}},
				{do: []action{routed(ptrTo(1))}, want: want{reason: v1alpha1.ReasonWaitingForTraffic, events: ev()}},
				{do: []action{routed(ptrTo(0))}, want: want{reason: v1alpha1.ReasonStepPaused, step: "0", events: ev(v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "gate_waits_for_the_workload_to_observe_its_spec",
			calls: seq(startR2[:1], []call{
				{do: []action{ready(1)}, want: want{reason: v1alpha1.ReasonWaitingForPods, message: "observe its spec", events: ev()}},
				{do: []action{observed()}, want: want{reason: v1alpha1.ReasonStepPaused, events: ev(v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "gate_waits_while_the_workload_runs_another_partition",
			calls: seq(startR2[:1], []call{
				{do: []action{converge(), workload(func(w *Workload) { w.Partition, w.UpdatedReadyReplicas = 0, replicas })},
					want: want{reason: v1alpha1.ReasonPartitionMismatch, partition: "90%", message: "runs partition 0, the step needs 9", events: ev()}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, events: ev(v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "gate_needs_replicas_minus_partition_updated_pods_ready",
			calls: seq(startR2, []call{
				{do: []action{tick(time.Minute)}, want: want{step: "1", partition: "50%"}},
				{do: []action{observed(), ready(4)}, want: want{reason: v1alpha1.ReasonWaitingForPods, message: "4/5 updated Pods ready", events: ev()}},
				{do: []action{ready(5)}, want: want{reason: v1alpha1.ReasonAnalysisRunning, events: ev(v1alpha1.EventStepReady, v1alpha1.EventAnalysisStarted)}},
			}),
		},
		{
			name: "timed_pause_requeues_for_the_time_left",
			calls: seq(startR2, []call{
				{do: []action{tick(20 * time.Second)}, want: want{reason: v1alpha1.ReasonStepPaused, requeue: "40s", events: ev()}},
				{do: []action{tick(40 * time.Second)}, want: want{step: "1", events: ev(v1alpha1.EventStepAdvanced)}},
			}),
		},
		{
			name:  "manual_pause_waits_for_a_promote_request",
			setup: []action{steps(step(pct("80%"), pause(0)), step(num(0)))},
			calls: []call{
				{do: []action{commit("r2")}, want: want{step: "0", partition: "80%"}},
				{do: []action{converge()}, want: want{phase: paused, reason: v1alpha1.ReasonAwaitingPromotion, requeue: "0s", events: ev(v1alpha1.EventStepReady)}},
				{do: []action{tick(time.Hour)}, want: want{phase: paused, reason: v1alpha1.ReasonAwaitingPromotion, events: ev()}},
				{do: []action{request("promote", "p1")}, want: want{phase: progressing, step: "1", partition: "0", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
			},
		},
		{
			name:  "promote_ends_a_manual_pause_and_the_analysis_still_runs",
			setup: []action{steps(step(pct("80%"), pause(0), analysed("")), step(num(0)))},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonAwaitingPromotion}},
				{do: []action{request("promote", "p1")}, want: want{reason: v1alpha1.ReasonAnalysisRunning, step: "0", analysis: "Start", events: ev(v1alpha1.EventPromoted, v1alpha1.EventAnalysisStarted)}},
			},
		},
		{
			name:  "promote_during_a_timed_pause_skips_the_pause_only",
			setup: []action{steps(step(pct("80%"), pause(time.Minute), analysed("")), step(num(0)))},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused}},
				{do: []action{tick(10 * time.Second), request("promote", "p1")}, want: want{step: "0", reason: v1alpha1.ReasonAnalysisRunning, analysis: "Start", events: ev(v1alpha1.EventPromoted, v1alpha1.EventAnalysisStarted)}},
			},
		},
		{
			name:  "promote_after_a_timed_pause_ended_skips_the_analysis",
			setup: []action{steps(step(pct("80%"), pause(time.Minute), analysed("")), step(num(0)))},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused}},
				{do: []action{tick(2 * time.Minute), request("promote", "p1")}, want: want{step: "1", partition: "0", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
			},
		},
		{
			name: "promote_skips_a_running_analysis",
			calls: seq(startR2, toAnalysis, []call{
				{do: []action{request("promote", "p1")}, want: want{step: "2", partition: "0", analysis: "Clear", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
			}),
		},
		{
			name: "promote_before_the_gate_is_ignored_and_never_applies_later",
			calls: seq(startR2[:1], []call{
				{do: []action{request("promote", "p1"), observed(), ready(0)}, want: want{reason: v1alpha1.ReasonWaitingForPods, step: "0", events: ev(v1alpha1.EventRequestIgnored)}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, step: "0", events: ev(v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "a_promote_token_is_handled_once",
			calls: seq(startR2, []call{
				{do: []action{request("promote", "p1")}, want: want{step: "1", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}},
				{do: []action{converge()}, want: want{step: "1", reason: v1alpha1.ReasonAnalysisRunning, events: ev(v1alpha1.EventStepReady, v1alpha1.EventAnalysisStarted)}},
			}),
		},
		{
			name:  "at_most_one_step_per_call_even_with_nothing_to_wait_for",
			setup: []action{steps(step(pct("50%")), step(pct("50%")), step(num(0)))},
			calls: []call{
				{do: []action{commit("r2")}, want: want{step: "0"}},
				{do: []action{converge()}, want: want{step: "1", requeue: "1s", events: ev(v1alpha1.EventStepReady, v1alpha1.EventStepAdvanced)}},
				{want: want{step: "2", partition: "0", events: ev(v1alpha1.EventStepReady, v1alpha1.EventStepAdvanced)}},
				{do: []action{converge()}, want: want{phase: healthy, stable: "r2", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
			},
		},

		// Analysis verdicts.
		{
			name:  "failed_analysis_aborts_with_the_measurement_in_the_message",
			calls: seq(startR2, toAnalysis, abortOnFailure),
		},
		{
			name:  "inconclusive_analysis_pauses_by_default_then_promote_advances",
			calls: seq(startR2, toAnalysis, inconclusivePause, []call{{do: []action{request("promote", "p1")}, want: want{step: "2", events: ev(v1alpha1.EventPromoted, v1alpha1.EventStepAdvanced)}}}),
		},
		{
			name: "retry_reruns_an_inconclusive_analysis",
			calls: seq(startR2, toAnalysis, inconclusivePause, []call{
				{do: []action{request("retry", "r1")}, want: want{phase: progressing, reason: v1alpha1.ReasonAnalysisRunning, step: "1", analysis: "Start", events: ev(v1alpha1.EventRetried)}},
				{do: []action{verdict(VerdictRunning, "")}, want: want{analysis: "Run", events: ev()}},
				{do: []action{verdict(VerdictPassed, "")}, want: want{step: "2", events: ev(v1alpha1.EventStepAdvanced)}},
			}),
		},
		{
			name:  "inconclusive_analysis_aborts_when_the_policy_says_abort",
			setup: []action{steps(step(pct("50%"), analysed(v1alpha1.InconclusiveAbort)), step(num(0)))},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{analysis: "Start"}},
				{do: []action{verdict(VerdictInconclusive, "latency: NaN")}, want: want{phase: aborted, reason: v1alpha1.ReasonAnalysisInconclusive, partition: "100%", message: "latency: NaN", events: ev(v1alpha1.EventRolloutAborted)}},
			},
		},
		{
			name:  "inconclusive_analysis_promotes_when_the_policy_says_promote",
			setup: []action{steps(step(pct("50%"), analysed(v1alpha1.InconclusivePromote)), step(num(0)))},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{analysis: "Start"}},
				{do: []action{verdict(VerdictInconclusive, "latency: NaN")}, want: want{phase: progressing, step: "1", partition: "0", events: ev(v1alpha1.EventAnalysisInconclusive, v1alpha1.EventStepAdvanced)}},
			},
		},
		{
			name: "a_restarted_controller_resumes_without_redoing_a_passed_analysis",
			setup: []action{
				status(func(s *Status) {
					i := int32(1)
					s.Phase, s.Reason, s.CurrentStepIndex, s.CanaryRevision = progressing, v1alpha1.ReasonAnalysisRunning, &i, "r2"
					s.StepStartedAt, s.StepReadyAt, s.AnalysisStartedAt, s.LastProgressAt = t0.Add(-5*time.Minute), t0.Add(-4*time.Minute), t0.Add(-4*time.Minute), t0.Add(-4*time.Minute)
				}),
				workload(func(w *Workload) { w.UpdateRevision, w.Partition, w.UpdatedReadyReplicas = "r2", 5, 5 }),
				verdict(VerdictPassed, ""),
			},
			calls: []call{{want: want{step: "2", partition: "0", analysis: "Clear", events: ev(v1alpha1.EventStepAdvanced)}}},
		},
		{
			name: "a_restarted_controller_finishes_a_timed_pause_it_had_begun",
			setup: []action{
				status(func(s *Status) {
					i := int32(0)
					s.Phase, s.Reason, s.CurrentStepIndex, s.CanaryRevision = progressing, v1alpha1.ReasonStepPaused, &i, "r2"
					s.StepStartedAt, s.StepReadyAt, s.LastProgressAt = t0.Add(-time.Minute), t0.Add(-30*time.Second), t0.Add(-30*time.Second)
				}),
				workload(func(w *Workload) { w.UpdateRevision, w.Partition, w.UpdatedReadyReplicas = "r2", 9, 1 }),
			},
			calls: []call{{want: want{step: "0", reason: v1alpha1.ReasonStepPaused, requeue: "30s", events: ev()}}},
		},
	}
	scenarios = append(scenarios, abortScenarios()...)
	scenarios = append(scenarios, waitScenarios()...)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { run(t, sc) })
	}
}

// inconclusivePause makes step 1's analysis inconclusive under the default policy.
var inconclusivePause = []call{
	{do: []action{verdict(VerdictInconclusive, "error-rate: empty result")}, want: want{phase: paused, reason: v1alpha1.ReasonAnalysisInconclusive, step: "1", partition: "50%", analysis: "Keep", message: "empty result", events: ev(v1alpha1.EventAnalysisInconclusive)}},
	{do: []action{tick(time.Hour)}, want: want{phase: paused, reason: v1alpha1.ReasonAnalysisInconclusive, events: ev()}},
}

// TestAnUntrustedDowngradeSaysWhyItTakesTheSteps: a lower version that was
// never stable is rolled out like any other revision, and the RolloutStarted
// Event says why it did not take the fast path.
func TestAnUntrustedDowngradeSaysWhyItTakesTheSteps(t *testing.T) {
	s := newSim()
	commit("r0")(s)
	s.in.UntrustedDowngrade = "1.4.0-hotfix.1 is lower than 1.4.0 but was never stable here"
	d := Decide(s.in)
	if d.Status.CurrentStepIndex == nil || *d.Status.CurrentStepIndex != 0 || d.Partition.String() != "90%" {
		t.Fatalf("decision %+v, want step 0 at 90%%", d)
	}
	if len(d.Events) != 1 || d.Events[0].Reason != v1alpha1.EventRolloutStarted ||
		!strings.Contains(d.Events[0].Message, "; 1.4.0-hotfix.1 is lower than 1.4.0 but was never stable here") {
		t.Errorf("events %+v, want RolloutStarted naming why the downgrade is not trusted", d.Events)
	}
}

// routed turns traffic routing on, the routes carrying step (nil: none).
func routed(step *int32) action {
	return func(s *sim) { s.in.TrafficRouted, s.in.TrafficStep = true, step }
}

func ptrTo(i int32) *int32 { return &i }
