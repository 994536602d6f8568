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

		// Abort and what follows it.
		{
			name: "an_aborted_rollout_holds_until_git_changes",
			calls: seq(startR2, toAnalysis, abortOnFailure, []call{
				{do: []action{tick(time.Hour), converge()}, want: want{phase: aborted, partition: "100%", canary: "r2", requeue: "0s", events: ev()}},
			}),
		},
		{
			name: "reverting_git_after_an_abort_is_healthy_at_once",
			calls: seq(startR2, toAnalysis, abortOnFailure, []call{
				{do: []action{revert("r1", replicas)}, want: want{phase: healthy, stable: "r1", canary: "-", partition: "100%", events: ev(v1alpha1.EventRollingBack, v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name: "a_new_commit_after_an_abort_starts_a_new_rollout",
			calls: seq(startR2, toAnalysis, abortOnFailure, []call{
				{do: []action{commit("r3")}, want: want{phase: progressing, step: "0", canary: "r3", stable: "r1", partition: "90%", events: ev(v1alpha1.EventRolloutStarted)}},
			}),
		},
		{
			name: "retry_starts_the_aborted_canary_again_from_step_0",
			calls: seq(startR2, toAnalysis, abortOnFailure, []call{
				{do: []action{request("retry", "r1")}, want: want{phase: progressing, step: "0", canary: "r2", partition: "90%", analysis: "Clear", events: ev(v1alpha1.EventRetried, v1alpha1.EventRolloutStarted)}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, events: ev(v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "abort_request_mid_rollout",
			calls: seq(startR2, []call{
				{do: []action{request("abort", "a1")}, want: want{phase: aborted, reason: v1alpha1.ReasonAbortRequested, partition: "100%", message: "aborted at step 1/3: aborted by request", events: ev(v1alpha1.EventRolloutAborted)}},
				{do: []action{tick(time.Minute)}, want: want{phase: aborted, events: ev()}},
			}),
		},
		{
			name: "requests_that_do_not_apply_are_reported_not_kept",
			calls: []call{
				{do: []action{request("abort", "a1"), request("promote", "p1"), request("retry", "r1")},
					want: want{phase: healthy, events: ev(v1alpha1.EventRequestIgnored, v1alpha1.EventRequestIgnored, v1alpha1.EventRequestIgnored)}},
				{do: []action{commit("r2")}, want: want{phase: progressing, step: "0", events: ev(v1alpha1.EventRolloutStarted)}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, events: ev(v1alpha1.EventStepReady)}},
			},
		},

		// New revisions, rollbacks, downgrades.
		{
			name: "a_newer_commit_mid_rollout_restarts_at_step_0",
			calls: seq(startR2, toAnalysis, []call{
				{do: []action{commit("r3")}, want: want{phase: progressing, step: "0", canary: "r3", stable: "r1", partition: "90%", analysis: "Clear", events: ev(v1alpha1.EventRolloutRestarted)}},
			}),
		},
		{
			name: "reverting_git_mid_rollout_rolls_back_at_once",
			calls: seq(startR2, toAnalysis, []call{
				{do: []action{revert("r1", 5)}, want: want{phase: progressing, reason: v1alpha1.ReasonRollingBack, step: "-", partition: "0", canary: "-", analysis: "Clear", requeue: "10m0s", events: ev(v1alpha1.EventRollingBack)}},
				{do: []action{ready(8)}, want: want{reason: v1alpha1.ReasonRollingBack, partition: "0", events: ev()}},
				{do: []action{observed(), ready(replicas)}, want: want{phase: healthy, stable: "r1", partition: "100%", events: ev(v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name: "the_fast_path_does_not_depend_on_the_recorded_reason",
			calls: seq(startR2, toAnalysis, []call{
				{do: []action{revert("r1", 5)}, want: want{reason: v1alpha1.ReasonRollingBack, requeue: "10m0s", events: ev(v1alpha1.EventRollingBack)}},
				{do: []action{tick(time.Minute), status(func(s *Status) { s.Reason = "ReconciliationFailed" })}, want: want{reason: v1alpha1.ReasonRollingBack, requeue: "9m0s", events: ev()}},
			}),
		},
		{
			name: "a_semver_downgrade_skips_steps_and_analysis",
			calls: []call{
				{do: []action{commit("r0"), downgrade(true)}, want: want{phase: progressing, reason: v1alpha1.ReasonDowngrading, step: "-", partition: "0", canary: "r0", stable: "r1", events: ev(v1alpha1.EventDowngrading)}},
				{do: []action{observed(), ready(4)}, want: want{reason: v1alpha1.ReasonDowngrading, events: ev()}},
				{do: []action{ready(replicas)}, want: want{phase: healthy, stable: "r0", canary: "-", events: ev(v1alpha1.EventRolloutCompleted)}},
				{want: want{phase: healthy, stable: "r0", events: ev()}},
			},
		},
		{
			name: "completed_rollouts_remember_the_stable_revisions_they_replaced",
			calls: seq(startR2, toAnalysis, []call{
				{do: []action{verdict(VerdictPassed, "")}, want: want{step: "2", previous: "-"}},
				{do: []action{converge()}, want: want{phase: healthy, stable: "r2", previous: "r1", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
				// A trusted downgrade back to r1 swaps them.
				{do: []action{commit("r1"), downgrade(true)}, want: want{reason: v1alpha1.ReasonDowngrading, stable: "r2", previous: "r1"}},
				{do: []action{observed(), ready(replicas)}, want: want{phase: healthy, stable: "r1", previous: "r2"}},
			}),
		},
		{
			name:  "a_rollback_to_the_stable_revision_changes_no_history",
			setup: []action{status(func(s *Status) { s.PreviousStableRevisions = []string{"r0"} })},
			calls: seq(startR2, []call{
				{do: []action{revert("r1", replicas)}, want: want{phase: healthy, stable: "r1", previous: "r0", events: ev(v1alpha1.EventRollingBack, v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name: "the_history_is_bounded_and_never_lists_the_stable_revision",
			setup: []action{status(func(s *Status) {
				s.PreviousStableRevisions = []string{"a", "b", "c", "d", "e", "r0", "f", "g", "h", "i"}
			})},
			calls: []call{
				{do: []action{commit("r0"), downgrade(true), ready(replicas)}, want: want{phase: healthy, stable: "r0", previous: "r1,a,b,c,d,e,f,g,h,i"}},
				{do: []action{commit("r9"), downgrade(true), ready(replicas)}, want: want{phase: healthy, stable: "r9", previous: "r0,r1,a,b,c,d,e,f,g,h"}},
			},
		},
		{
			name: "progress_deadline_on_a_rollback_keeps_going_and_stalls",
			calls: seq(startR2, toAnalysis, []call{
				{do: []action{revert("r1", 5)}, want: want{reason: v1alpha1.ReasonRollingBack, requeue: "10m0s"}},
				{do: []action{tick(10 * time.Minute), observed()}, want: want{phase: progressing, reason: v1alpha1.ReasonProgressDeadlineExceeded, partition: "0", events: ev(v1alpha1.EventProgressDeadlineExceeded)}},
				{do: []action{tick(time.Minute)}, want: want{reason: v1alpha1.ReasonProgressDeadlineExceeded, events: ev()}},
				{do: []action{ready(replicas)}, want: want{phase: healthy, stable: "r1", events: ev(v1alpha1.EventRolloutCompleted)}},
			}),
		},

		// Progress deadline on steps.
		{
			name: "progress_deadline_aborts_a_step_without_progress",
			calls: seq(startR2[:1], []call{
				{do: []action{tick(5 * time.Minute), observed(), ready(0)}, want: want{reason: v1alpha1.ReasonWaitingForPods, requeue: "5m0s", events: ev()}},
				{do: []action{tick(5 * time.Minute)}, want: want{phase: aborted, reason: v1alpha1.ReasonProgressDeadlineExceeded, message: "no progress for 10m0s", events: ev(v1alpha1.EventRolloutAborted)}},
			}),
		},
		{
			name:  "progress_restarts_the_deadline",
			setup: []action{steps(step(num(5)), step(num(0)))},
			calls: []call{
				{do: []action{commit("r2")}, want: want{step: "0", partition: "5"}},
				{do: []action{tick(9 * time.Minute), observed(), ready(2)}, want: want{reason: v1alpha1.ReasonWaitingForPods, requeue: "10m0s"}},
				{do: []action{tick(9 * time.Minute)}, want: want{reason: v1alpha1.ReasonWaitingForPods, requeue: "1m0s"}},
				{do: []action{tick(time.Minute)}, want: want{phase: aborted, reason: v1alpha1.ReasonProgressDeadlineExceeded}},
			},
		},

		// Pauses.
		{
			name: "pause_request_holds_a_step_and_resume_continues_it",
			calls: seq(startR2[:1], []call{
				{do: []action{request("pause", "p1")}, want: want{phase: paused, reason: v1alpha1.ReasonPauseRequested, step: "0", partition: "90%", analysis: "Keep", events: ev(v1alpha1.EventPaused)}},
				{do: []action{tick(30 * time.Minute), converge()}, want: want{phase: paused, step: "0", events: ev()}},
				{do: []action{request("resume", "r1"), stale()}, want: want{phase: progressing, reason: v1alpha1.ReasonWaitingForPods, requeue: "10m0s", events: ev(v1alpha1.EventResumed)}},
				{do: []action{observed()}, want: want{reason: v1alpha1.ReasonStepPaused, events: ev(v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "promote_while_paused_is_ignored",
			calls: seq(startR2, []call{
				{do: []action{request("pause", "p1")}, want: want{phase: paused}},
				{do: []action{request("promote", "x1")}, want: want{phase: paused, step: "0", events: ev(v1alpha1.EventRequestIgnored)}},
			}),
		},
		{
			name:  "spec_paused_holds_a_new_commit_at_100_percent",
			setup: []action{specPaused(true)},
			calls: []call{
				{want: want{phase: healthy, message: "paused by spec.paused", events: ev()}},
				{do: []action{commit("r2")}, want: want{phase: paused, reason: v1alpha1.ReasonPausedBySpec, step: "-", partition: "100%", canary: "r2", events: ev()}},
				{do: []action{tick(time.Hour)}, want: want{phase: paused, events: ev()}},
				{do: []action{specPaused(false)}, want: want{phase: progressing, step: "0", partition: "90%", events: ev(v1alpha1.EventRolloutStarted)}},
			},
		},
		{
			name: "spec_paused_holds_a_step_in_progress",
			calls: seq(startR2[:1], []call{
				{do: []action{specPaused(true), converge()}, want: want{phase: paused, reason: v1alpha1.ReasonPausedBySpec, step: "0", partition: "90%", events: ev()}},
				{do: []action{specPaused(false)}, want: want{phase: progressing, reason: v1alpha1.ReasonStepPaused, events: ev(v1alpha1.EventResumed, v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "a_rollback_is_not_held_by_a_pause",
			calls: seq(startR2, []call{
				{do: []action{specPaused(true)}, want: want{phase: paused}},
				{do: []action{revert("r1", 9)}, want: want{phase: progressing, reason: v1alpha1.ReasonRollingBack, partition: "0", events: ev(v1alpha1.EventRollingBack)}},
			}),
		},
		{
			name:  "abort_a_revision_waiting_behind_a_pause",
			setup: []action{specPaused(true)},
			calls: []call{
				{do: []action{commit("r2")}, want: want{phase: paused, canary: "r2"}},
				{do: []action{request("abort", "a1")}, want: want{phase: aborted, reason: v1alpha1.ReasonAbortRequested, canary: "r2", events: ev(v1alpha1.EventRolloutAborted)}},
				{do: []action{specPaused(false)}, want: want{phase: aborted, events: ev()}},
			},
		},
		{
			name: "pause_and_resume_together_the_later_timestamp_wins",
			calls: []call{
				{do: []action{request("pause", "2026-03-04T05:00:00Z"), request("resume", "2026-03-04T06:00:00Z")}, want: want{phase: healthy, events: ev()}},
				{do: []action{request("pause", "2026-03-04T07:00:00Z"), request("resume", "2026-03-04T06:30:00Z")}, want: want{message: "paused by a pause request", events: ev(v1alpha1.EventPaused)}},
			},
		},
		{
			name: "pause_and_resume_together_without_timestamps_pause_wins",
			calls: []call{
				{do: []action{request("pause", "a"), request("resume", "b")}, want: want{message: "paused by a pause request", events: ev(v1alpha1.EventPaused)}},
			},
		},
		{
			name: "resume_without_a_pause_is_ignored",
			calls: []call{
				{do: []action{request("resume", "r1")}, want: want{phase: healthy, events: ev(v1alpha1.EventRequestIgnored)}},
			},
		},

		// Version policy.
		{
			name: "a_version_policy_violation_moves_no_pod",
			calls: []call{
				{do: []action{commit("r2"), violation("2.1.0 does not meet <2.0.0")}, want: want{phase: aborted, reason: v1alpha1.ReasonVersionPolicyViolation, step: "-", partition: "100%", canary: "r2", message: "2.1.0 does not meet <2.0.0", events: ev(v1alpha1.EventVersionPolicyViolation)}},
				{do: []action{request("retry", "r1")}, want: want{phase: aborted, events: ev(v1alpha1.EventRequestIgnored)}},
				{do: []action{violation("")}, want: want{phase: progressing, step: "0", canary: "r2", events: ev(v1alpha1.EventRolloutStarted)}},
			},
		},
		{
			name: "a_violation_mid_rollout_aborts_it",
			calls: seq(startR2, []call{
				{do: []action{violation("constraint changed")}, want: want{phase: aborted, reason: v1alpha1.ReasonVersionPolicyViolation, partition: "100%", events: ev(v1alpha1.EventVersionPolicyViolation)}},
			}),
		},

		// Plan edits and odd workloads.
		{
			name: "steps_removed_mid_rollout_continue_at_the_last_step",
			calls: seq(startR2, toAnalysis, []call{
				{do: []action{steps(step(num(0)))}, want: want{step: "0", partition: "0", reason: v1alpha1.ReasonPartitionMismatch, analysis: "Clear", events: ev()}},
				{do: []action{converge()}, want: want{phase: healthy, stable: "r2", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name: "an_edited_partition_mid_step_takes_the_gate_again",
			calls: seq(startR2, []call{
				{do: []action{steps(step(pct("80%"), pause(time.Minute)), step(pct("50%"), analysed("")), step(num(0)))},
					want: want{step: "0", partition: "80%", reason: v1alpha1.ReasonPartitionMismatch, events: ev()}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, requeue: "1m0s", events: ev(v1alpha1.EventStepReady)}},
			}),
		},
		{
			name: "a_workload_losing_its_revisions_mid_rollout_keeps_the_step_partition",
			calls: seq(startR2, []call{
				{do: []action{workload(func(w *Workload) { w.UpdateRevision = "" })}, want: want{phase: progressing, reason: v1alpha1.ReasonWaitingForWorkload, step: "0", partition: "90%", events: ev()}},
			}),
		},
		{
			name: "an_empty_workload_walks_its_steps",
			setup: []action{
				workload(func(w *Workload) { w.Replicas, w.UpdatedReadyReplicas, w.Partition = 0, 0, 0 }),
				steps(Step{Partition: pct("50%")}, Step{Partition: num(0)}),
			},
			calls: []call{
				{do: []action{commit("r2")}, want: want{step: "0"}},
				{do: []action{observed()}, want: want{step: "1", events: ev(v1alpha1.EventStepReady, v1alpha1.EventStepAdvanced)}},
				{do: []action{observed()}, want: want{phase: healthy, stable: "r2", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
			},
		},
		{
			name:  "no_progress_deadline_never_aborts",
			setup: []action{deadline(0)},
			calls: seq(startR2[:1], []call{
				{do: []action{tick(24 * time.Hour), observed(), ready(0)}, want: want{phase: progressing, reason: v1alpha1.ReasonWaitingForPods, requeue: "0s"}},
			}),
		},
	}
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
