package dashboard

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestPermissions(t *testing.T) {
	ready := &metav1.Time{Time: testNow}
	type want map[string]string // action -> reason ("" = allowed)
	cases := []struct {
		name   string
		change func(r *stepwisev1.Rollout)
		want   want
	}{
		{
			name:   "healthy: only pause",
			change: func(r *stepwisev1.Rollout) { healthy(r) },
			want: want{
				"promote": "no step is in progress", "abort": "no rollout in progress",
				"retry": "only an aborted rollout or an inconclusive analysis can be retried", "pause": "",
				"resume": "not paused by a request",
			},
		},
		{
			name: "waiting for Pods: abort and pause, no promote before the gate",
			change: func(r *stepwisev1.Rollout) {
				stepping(r, 0, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
			},
			want: want{
				"promote": "the step's workload gate has not passed: its updated Pods are not all ready", "abort": "", "pause": "",
				"retry":  "only an aborted rollout or an inconclusive analysis can be retried",
				"resume": "not paused by a request",
			},
		},
		{
			name: "timed pause running: promote ends it",
			change: func(r *stepwisev1.Rollout) {
				stepping(r, 0, stepwisev1.RolloutProgressing, stepwisev1.ReasonStepPaused)
				r.Status.StepReadyAt = ready
			},
			want: want{"promote": "", "abort": "", "pause": ""},
		},
		{
			name: "awaiting promotion: promote and abort",
			change: func(r *stepwisev1.Rollout) {
				stepping(r, 1, stepwisev1.RolloutPaused, stepwisev1.ReasonAwaitingPromotion)
				r.Status.StepReadyAt = ready
			},
			want: want{"promote": "", "abort": ""},
		},
		{
			name: "analysis running: promote skips it",
			change: func(r *stepwisev1.Rollout) {
				stepping(r, 0, stepwisev1.RolloutProgressing, stepwisev1.ReasonAnalysisRunning)
				r.Status.StepReadyAt = ready
			},
			want: want{"promote": "", "retry": "only an aborted rollout or an inconclusive analysis can be retried"},
		},
		{
			name: "analysis inconclusive: promote, retry or abort",
			change: func(r *stepwisev1.Rollout) {
				stepping(r, 0, stepwisev1.RolloutPaused, stepwisev1.ReasonAnalysisInconclusive)
				r.Status.StepReadyAt = ready
			},
			want: want{"promote": "", "retry": "", "abort": ""},
		},
		{
			name: "paused by a request: resume, abort; no promote",
			change: func(r *stepwisev1.Rollout) {
				stepping(r, 1, stepwisev1.RolloutPaused, stepwisev1.ReasonPauseRequested)
				r.Status.StepReadyAt = ready
				r.Status.PauseRequested = true
			},
			want: want{
				"promote": "paused by a request: resume first", "abort": "", "pause": "already paused by a request", "resume": "",
			},
		},
		{
			name: "paused by spec: no promote, no resume",
			change: func(r *stepwisev1.Rollout) {
				stepping(r, 1, stepwisev1.RolloutPaused, stepwisev1.ReasonPausedBySpec)
				r.Status.StepReadyAt = ready
				r.Spec.Paused = true
			},
			want: want{
				"promote": "paused by spec.paused: a promote is ignored while paused",
				"resume":  "paused by spec.paused: set it to false in git", "abort": "",
			},
		},
		{
			name: "new revision held by a pause before step 1: abort",
			change: func(r *stepwisev1.Rollout) {
				r.Status.Phase, r.Status.Reason = stepwisev1.RolloutPaused, stepwisev1.ReasonPauseRequested
				r.Status.PauseRequested = true
			},
			want: want{"abort": "", "promote": "no step is in progress", "resume": ""},
		},
		{
			name: "aborted by analysis: retry",
			change: func(r *stepwisev1.Rollout) {
				r.Status.Phase, r.Status.Reason = stepwisev1.RolloutAborted, stepwisev1.ReasonAnalysisFailed
			},
			want: want{"retry": "", "abort": "already aborted", "promote": "no step is in progress", "pause": ""},
		},
		{
			name: "version policy violation: no retry",
			change: func(r *stepwisev1.Rollout) {
				r.Status.Phase, r.Status.Reason = stepwisev1.RolloutAborted, stepwisev1.ReasonVersionPolicyViolation
			},
			want: want{"retry": "the revision breaks spec.versionPolicy: change the image or the policy in git"},
		},
		{
			name: "rolling back: no abort",
			change: func(r *stepwisev1.Rollout) {
				r.Status.Phase, r.Status.Reason = stepwisev1.RolloutProgressing, stepwisev1.ReasonRollingBack
				r.Status.CanaryRevision = ""
			},
			want: want{"abort": "a rollback or downgrade moves every Pod at once and cannot be aborted"},
		},
		{
			name: "a pending abort disables a second one",
			change: func(r *stepwisev1.Rollout) {
				stepping(r, 0, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
				r.Annotations = map[string]string{stepwisev1.AbortAtAnnotation: "2026-11-29T12:00:00Z"}
				r.Status.LastHandledAbortAt = "2026-11-29T11:00:00Z"
			},
			want: want{"abort": "a request to abort is pending: the controller has not handled it yet"},
		},
		{
			name: "a handled request is not pending",
			change: func(r *stepwisev1.Rollout) {
				stepping(r, 0, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
				r.Annotations = map[string]string{stepwisev1.AbortAtAnnotation: "2026-11-29T11:00:00Z"}
				r.Status.LastHandledAbortAt = "2026-11-29T11:00:00Z"
			},
			want: want{"abort": ""},
		},
		{
			name:   "no status yet",
			change: func(r *stepwisev1.Rollout) { r.Status = stepwisev1.RolloutStatus{} },
			want:   want{"pause": "the controller has not reported a phase yet", "abort": "the controller has not reported a phase yet"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRollout()
			c.change(r)
			got := map[string]ActionState{}
			var order []string
			for _, p := range Permissions(r) {
				got[p.Name] = p
				order = append(order, p.Name)
				if p.Allowed != (p.Reason == "") {
					t.Errorf("%s: allowed %v with reason %q", p.Name, p.Allowed, p.Reason)
				}
				if p.Annotation == "" || p.Effect == "" {
					t.Errorf("%s: no annotation or effect: %+v", p.Name, p)
				}
			}
			if want := []string{"promote", "abort", "retry", "pause", "resume"}; !equal(order, want) {
				t.Errorf("order %v, want the CLI's %v", order, want)
			}
			for name, reason := range c.want {
				if got[name].Reason != reason {
					t.Errorf("%s: reason %q, want %q", name, got[name].Reason, reason)
				}
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func healthy(r *stepwisev1.Rollout) {
	r.Status.Phase, r.Status.Reason = stepwisev1.RolloutHealthy, stepwisev1.ReasonStable
	r.Status.CanaryRevision, r.Status.CurrentStepIndex = "", nil
}

func stepping(r *stepwisev1.Rollout, i int32, phase stepwisev1.RolloutPhase, reason string) {
	r.Status.Phase, r.Status.Reason = phase, reason
	r.Status.CurrentStepIndex = &i
}
