package dashboard

import (
	"fmt"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// ActionState is one button of the Rollout page: whether the controller
// would act on the request now, and if not, why.
type ActionState struct {
	// Name is the CLI verb: promote, abort, retry, pause, resume.
	Name string `json:"name"`
	// Annotation is what the button writes, as the CLI does.
	Annotation string `json:"annotation"`
	// Effect is the CLI's own words for what the controller does.
	Effect  string `json:"effect"`
	Allowed bool   `json:"allowed"`
	// Reason says why the button is disabled; empty when allowed.
	Reason string `json:"reason,omitempty"`
}

// Permissions says, for each manual request in the CLI's order, whether the
// controller would act on it given the Rollout as last seen. It mirrors the
// step decision (controllers/rollout/step): a request that does not apply
// when the controller next looks is ignored with a RequestIgnored Event and
// never acts later, so a button that would only produce that Event is
// disabled, with the reason. The controller remains the judge: the state may
// change between this view and the request.
func Permissions(r *stepwisev1.Rollout) []ActionState {
	var out []ActionState
	for _, a := range cli.Actions() {
		s := ActionState{Name: a.Name, Annotation: a.Annotation, Effect: a.Effect}
		s.Reason = denied(r, a)
		s.Allowed = s.Reason == ""
		out = append(out, s)
	}
	return out
}

// denied is why action a would be ignored now, or "" if it would act.
func denied(r *stepwisev1.Rollout, a cli.Action) string {
	st := &r.Status
	if v := r.Annotations[a.Annotation]; v != "" && v != handled(st, a.Name) {
		return fmt.Sprintf("a request to %s is pending: the controller has not handled it yet", a.Name)
	}
	if st.Phase == "" {
		return "the controller has not reported a phase yet"
	}
	stepping := st.CurrentStepIndex != nil
	switch a.Name {
	case "promote":
		switch {
		case !stepping:
			return "no step is in progress"
		case r.Spec.Paused:
			return "paused by spec.paused: a promote is ignored while paused"
		case st.PauseRequested:
			return "paused by a request: resume first"
		case st.StepReadyAt == nil:
			return "the step's workload gate has not passed: its updated Pods are not all ready"
		}
		switch st.Reason {
		case stepwisev1.ReasonStepPaused, stepwisev1.ReasonAwaitingPromotion,
			stepwisev1.ReasonAnalysisRunning, stepwisev1.ReasonAnalysisInconclusive:
			return ""
		}
		return "the step has no pause or analysis left to end"
	case "abort":
		switch {
		case st.Phase == stepwisev1.RolloutAborted:
			return "already aborted"
		case stepping:
			return ""
		case st.Phase == stepwisev1.RolloutPaused && st.CanaryRevision != "":
			// A new revision held before its first step (start() in the
			// step decision aborts it on request).
			return ""
		case st.Phase == stepwisev1.RolloutProgressing:
			return "a rollback or downgrade moves every Pod at once and cannot be aborted"
		}
		return "no rollout in progress"
	case "retry":
		switch {
		case st.Phase == stepwisev1.RolloutAborted && st.Reason == stepwisev1.ReasonVersionPolicyViolation:
			return "the revision breaks spec.versionPolicy: change the image or the policy in git"
		case st.Phase == stepwisev1.RolloutAborted:
			return ""
		case stepping && st.Reason == stepwisev1.ReasonAnalysisInconclusive:
			return ""
		}
		return "only an aborted rollout or an inconclusive analysis can be retried"
	case "pause":
		if st.PauseRequested {
			return "already paused by a request"
		}
		return ""
	case "resume":
		switch {
		case st.PauseRequested:
			return ""
		case r.Spec.Paused:
			return "paused by spec.paused: set it to false in git"
		}
		return "not paused by a request"
	}
	return "unknown request"
}

// handled is the status field that records the last request of that name.
func handled(st *stepwisev1.RolloutStatus, name string) string {
	switch name {
	case "promote":
		return st.LastHandledPromoteAt
	case "abort":
		return st.LastHandledAbortAt
	case "retry":
		return st.LastHandledRetryAt
	case "pause":
		return st.LastHandledPauseAt
	case "resume":
		return st.LastHandledResumeAt
	}
	return ""
}

// Action looks a CLI action up by name.
func Action(name string) (cli.Action, bool) {
	for _, a := range cli.Actions() {
		if a.Name == name {
			return a, true
		}
	}
	return cli.Action{}, false
}
