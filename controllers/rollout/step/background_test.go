package step

import (
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// withBackground gives the Rollout a background analysis from step from.
func withBackground(from int32, policy v1alpha1.InconclusivePolicy) action {
	return func(s *sim) { s.in.Background = &Background{From: from, Inconclusive: policy} }
}

func bgVerdict(v Verdict, msg string) action {
	return func(s *sim) { s.in.Background.Verdict = Analysis{Verdict: v, Message: msg} }
}

func TestBackgroundAnalysis(t *testing.T) {
	// The default plan: 90% with a 1m pause, 50% with an analysis, then 0.
	scenarios := []scenario{
		{
			name:  "starts_at_the_first_steps_gate_and_runs_until_completion",
			setup: []action{withBackground(0, "")},
			calls: []call{
				{do: []action{commit("r2")}, want: want{step: "0", background: "Clear"}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, background: "Start"}},
				{do: []action{tick(30 * time.Second)}, want: want{reason: v1alpha1.ReasonStepPaused, background: "Run"}},
				{do: []action{tick(30 * time.Second)}, want: want{step: "1", background: "Run"}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonAnalysisRunning, background: "Run"}},
				{do: []action{verdict(VerdictPassed, "")}, want: want{step: "2", background: "Run"}},
				{do: []action{converge()}, want: want{phase: healthy, stable: "r2", background: "Clear", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
			},
		},
		{
			name:  "a_later_starting_step_waits_for_that_steps_gate",
			setup: []action{withBackground(1, "")},
			calls: []call{
				{do: []action{commit("r2")}, want: want{background: "Clear"}},
				{do: []action{converge()}, want: want{step: "0", background: "Clear"}},
				{do: []action{tick(time.Minute)}, want: want{step: "1", background: "Clear"}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonAnalysisRunning, background: "Start"}},
				{do: []action{verdict(VerdictRunning, "")}, want: want{background: "Run"}},
			},
		},
		{
			name:  "a_failure_aborts_during_a_pause",
			setup: []action{withBackground(0, "")},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{background: "Start"}},
				{do: []action{bgVerdict(VerdictFailed, "errors: 0.3 is above max 0.05")}, want: want{phase: aborted, reason: v1alpha1.ReasonBackgroundAnalysisFailed,
					partition: "100%", message: "background analysis failed: errors: 0.3 is above max 0.05", background: "Keep", events: ev(v1alpha1.EventRolloutAborted)}},
				{do: []action{tick(time.Hour)}, want: want{phase: aborted, background: "Keep", events: ev()}},
			},
		},
		{
			name:  "a_failure_aborts_even_while_paused_by_request",
			setup: []action{withBackground(0, "")},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{background: "Start"}},
				{do: []action{request("pause", "p1")}, want: want{phase: paused, reason: v1alpha1.ReasonPauseRequested, background: "Run"}},
				{do: []action{bgVerdict(VerdictFailed, "errors high")}, want: want{phase: aborted, reason: v1alpha1.ReasonBackgroundAnalysisFailed, background: "Keep"}},
			},
		},
		{
			name:  "inconclusive_holds_until_a_retry_restarts_the_measuring",
			setup: []action{withBackground(0, "")},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{background: "Start"}},
				{do: []action{bgVerdict(VerdictInconclusive, "errors: empty result")}, want: want{phase: paused, reason: v1alpha1.ReasonBackgroundAnalysisInconclusive,
					step: "0", partition: "90%", message: "waiting for retry or abort", background: "Keep", events: ev(v1alpha1.EventAnalysisInconclusive)}},
				{do: []action{tick(time.Hour)}, want: want{phase: paused, reason: v1alpha1.ReasonBackgroundAnalysisInconclusive, background: "Keep", events: ev()}},
				{do: []action{request("retry", "t1")}, want: want{phase: progressing, step: "1", background: "Start", events: ev(v1alpha1.EventRetried, v1alpha1.EventStepAdvanced)}},
			},
		},
		{
			name:  "inconclusive_then_an_abort_request_aborts",
			setup: []action{withBackground(0, "")},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}},
				{do: []action{bgVerdict(VerdictInconclusive, "no data")}, want: want{phase: paused}},
				{do: []action{request("abort", "a1")}, want: want{phase: aborted, reason: v1alpha1.ReasonAbortRequested, background: "Keep"}},
			},
		},
		{
			name:  "inconclusive_with_policy_abort_aborts",
			setup: []action{withBackground(0, v1alpha1.InconclusiveAbort)},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}},
				{do: []action{bgVerdict(VerdictInconclusive, "no data")}, want: want{phase: aborted, reason: v1alpha1.ReasonBackgroundAnalysisInconclusive, background: "Keep"}},
			},
		},
		{
			name:  "inconclusive_with_policy_promote_carries_on_measuring_again",
			setup: []action{withBackground(0, v1alpha1.InconclusivePromote)},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}},
				{do: []action{bgVerdict(VerdictInconclusive, "no data")}, want: want{phase: progressing, reason: v1alpha1.ReasonStepPaused, background: "Start", events: ev(v1alpha1.EventAnalysisInconclusive)}},
				{do: []action{tick(time.Minute)}, want: want{step: "1", background: "Run"}},
			},
		},
		{
			name:  "a_retry_after_a_background_abort_starts_over_from_step_1",
			setup: []action{withBackground(0, "")},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}},
				{do: []action{bgVerdict(VerdictFailed, "errors high")}, want: want{phase: aborted}},
				{do: []action{request("retry", "t1")}, want: want{phase: progressing, step: "0", background: "Clear", events: ev(v1alpha1.EventRetried, v1alpha1.EventRolloutStarted)}},
				{do: []action{converge()}, want: want{reason: v1alpha1.ReasonStepPaused, background: "Start"}},
			},
		},
		{
			name:  "promote_full_ends_the_measuring",
			setup: []action{withBackground(0, "")},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{background: "Start"}},
				{do: []action{request("promote-full", "f1")}, want: want{step: "2", full: "true", background: "Clear"}},
			},
		},
		{
			name:  "a_new_revision_mid_rollout_starts_over",
			setup: []action{withBackground(0, "")},
			calls: []call{
				{do: []action{commit("r2")}},
				{do: []action{converge()}, want: want{background: "Start"}},
				{do: []action{commit("r3")}, want: want{canary: "r3", step: "0", background: "Clear"}},
			},
		},
		{
			name: "no_background_analysis_clears_any_tally",
			calls: []call{
				{do: []action{commit("r2")}, want: want{background: "Clear"}},
				{do: []action{converge()}, want: want{background: "Clear"}},
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { run(t, sc) })
	}
}
