package step

import (
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// abortScenarios are TestDecide's: aborts and what follows them, new
// revisions, rollbacks and downgrades.
func abortScenarios() []scenario {
	return []scenario{
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
	}
}

// waitScenarios are TestDecide's: progress deadlines, pauses, the version
// policy, plan edits and odd workloads.
func waitScenarios() []scenario {
	return []scenario{
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
}
