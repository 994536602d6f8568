package step

import (
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// withPostPromotion gives the Rollout a post-promotion analysis.
func withPostPromotion(window time.Duration, policy v1alpha1.InconclusivePolicy) action {
	return func(s *sim) { s.in.PostPromotion = &PostPromotion{Window: window, Inconclusive: policy} }
}

func postVerdict(v Verdict, msg string) action {
	return func(s *sim) { s.in.PostPromotion.Verdict = Analysis{Verdict: v, Message: msg} }
}

// toLastStep takes r2 through the default plan to its last step's gate:
// every Pod on r2, the post-promotion window begun.
var toLastStep = seq(startR2, toAnalysis, []call{
	{do: []action{verdict(VerdictPassed, "")}, want: want{step: "2", partition: "0"}},
	{do: []action{converge()}, want: want{phase: progressing, reason: v1alpha1.ReasonPostPromotionAnalysis, step: "2", partition: "0",
		stable: "r1", canary: "r2", post: "Start", requeue: "10m0s", events: ev(v1alpha1.EventStepReady, v1alpha1.EventAnalysisStarted)}},
})

func TestPostPromotionAnalysis(t *testing.T) {
	scenarios := []scenario{
		{
			name:  "the_window_ends_and_the_canary_is_made_stable",
			setup: []action{withPostPromotion(10*time.Minute, "")},
			calls: seq(toLastStep, []call{
				{do: []action{tick(4 * time.Minute)}, want: want{reason: v1alpha1.ReasonPostPromotionAnalysis, stable: "r1", post: "Run", requeue: "6m0s", events: ev()}},
				{do: []action{tick(6 * time.Minute)}, want: want{phase: healthy, stable: "r2", canary: "-", partition: "100%", post: "Clear", previous: "r1",
					message: "revision r2 is stable", events: ev(v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name:  "a_failure_aborts_and_every_pod_goes_back_to_stable",
			setup: []action{withPostPromotion(10*time.Minute, "")},
			calls: seq(toLastStep, []call{
				{do: []action{tick(time.Minute), postVerdict(VerdictFailed, "errors: 0.2 above max 0.01")}, want: want{phase: aborted,
					reason: v1alpha1.ReasonPostPromotionAnalysisFailed, stable: "r1", canary: "r2", partition: "100%", post: "Keep",
					message: "post-promotion analysis failed: errors: 0.2 above max 0.01", events: ev(v1alpha1.EventRolloutAborted)}},
				{do: []action{tick(time.Hour)}, want: want{phase: aborted, post: "Keep", events: ev()}},
			}),
		},
		{
			name:  "a_failure_aborts_even_while_paused_by_request",
			setup: []action{withPostPromotion(10*time.Minute, "")},
			calls: seq(toLastStep, []call{
				{do: []action{request("pause", "p1")}, want: want{phase: paused, reason: v1alpha1.ReasonPauseRequested, post: "Run"}},
				{do: []action{tick(20 * time.Minute)}, want: want{phase: paused, stable: "r1", post: "Run"}},
				{do: []action{postVerdict(VerdictFailed, "errors high")}, want: want{phase: aborted, reason: v1alpha1.ReasonPostPromotionAnalysisFailed}},
			}),
		},
		{
			name:  "inconclusive_holds_then_retry_restarts_the_window",
			setup: []action{withPostPromotion(10*time.Minute, "")},
			calls: seq(toLastStep, []call{
				{do: []action{tick(time.Minute), postVerdict(VerdictInconclusive, "no data")}, want: want{phase: paused,
					reason: v1alpha1.ReasonPostPromotionAnalysisInconclusive, partition: "0", post: "Keep", events: ev(v1alpha1.EventAnalysisInconclusive)}},
				{do: []action{tick(time.Hour)}, want: want{phase: paused, stable: "r1", events: ev()}},
				{do: []action{request("retry", "t1")}, want: want{phase: progressing, reason: v1alpha1.ReasonPostPromotionAnalysis, post: "Start",
					requeue: "10m0s", events: ev(v1alpha1.EventRetried)}},
			}),
		},
		{
			name:  "inconclusive_then_promote_makes_it_stable",
			setup: []action{withPostPromotion(10*time.Minute, "")},
			calls: seq(toLastStep, []call{
				{do: []action{postVerdict(VerdictInconclusive, "no data")}, want: want{phase: paused}},
				{do: []action{request("promote", "p1")}, want: want{phase: healthy, stable: "r2", post: "Clear", events: ev(v1alpha1.EventPromoted, v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name:  "inconclusive_with_policy_abort_aborts",
			setup: []action{withPostPromotion(10*time.Minute, v1alpha1.InconclusiveAbort)},
			calls: seq(toLastStep, []call{
				{do: []action{postVerdict(VerdictInconclusive, "no data")}, want: want{phase: aborted, reason: v1alpha1.ReasonPostPromotionAnalysisInconclusive, partition: "100%"}},
			}),
		},
		{
			name:  "inconclusive_with_policy_promote_makes_it_stable",
			setup: []action{withPostPromotion(10*time.Minute, v1alpha1.InconclusivePromote)},
			calls: seq(toLastStep, []call{
				{do: []action{postVerdict(VerdictInconclusive, "no data")}, want: want{phase: healthy, stable: "r2", events: ev(v1alpha1.EventAnalysisInconclusive, v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name:  "a_promote_request_ends_the_window_early",
			setup: []action{withPostPromotion(10*time.Minute, "")},
			calls: seq(toLastStep, []call{
				{do: []action{request("promote", "p1")}, want: want{phase: healthy, stable: "r2", events: ev(v1alpha1.EventPromoted, v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name:  "promote_full_skips_the_window",
			setup: []action{withPostPromotion(10*time.Minute, "")},
			calls: seq(startR2, []call{
				{do: []action{request("promote-full", "f1")}, want: want{step: "2", full: "true"}},
				{do: []action{converge()}, want: want{phase: healthy, stable: "r2", post: "Clear", events: ev(v1alpha1.EventStepReady, v1alpha1.EventRolloutCompleted)}},
			}),
		},
		{
			name:  "a_new_revision_during_the_window_starts_over",
			setup: []action{withPostPromotion(10*time.Minute, "")},
			calls: seq(toLastStep, []call{
				{do: []action{commit("r3")}, want: want{canary: "r3", step: "0", stable: "r1", post: "Clear", events: ev(v1alpha1.EventRolloutRestarted)}},
			}),
		},
		{
			name:  "a_revert_during_the_window_rolls_back_at_once",
			setup: []action{withPostPromotion(10*time.Minute, "")},
			calls: seq(toLastStep, []call{
				{do: []action{revert("r1", 0)}, want: want{reason: v1alpha1.ReasonRollingBack, step: "-", stable: "r1", post: "Clear"}},
			}),
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { run(t, sc) })
	}
}
