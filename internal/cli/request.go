package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Action is a manual request to the Rollout controller.
type Action struct {
	// Name is the verb of the command: promote, abort, retry, pause, resume.
	Name string
	// Annotation carries the request; its value is a token that the
	// controller copies to a status.lastHandled*At field once handled.
	Annotation string
	// Effect says in words what the controller does with the request, so
	// that the command's output and help say the same thing.
	Effect string
}

// Actions are the manual requests, in the order the help lists them.
func Actions() []Action {
	return []Action{
		{"promote", stepwisev1.PromoteAtAnnotation, "ends one stage of the current step once its workload gate has passed: " +
			"a running pause, or else the analysis (running or inconclusive), so a step with both needs a second promote to skip its analysis; " +
			"a promote sent before the gate, or while paused by a request or spec.paused, is ignored"},
		{"abort", stepwisev1.AbortAtAnnotation, "aborts the rollout in progress: partition back to 100%, phase Aborted"},
		{"retry", stepwisev1.RetryAtAnnotation, "starts an aborted rollout again from step 1 with the same canary revision, or reruns an inconclusive analysis"},
		{"pause", stepwisev1.PauseAtAnnotation, "holds forward progress until a resume (rollbacks and aborts still happen)"},
		{"resume", stepwisev1.ResumeAtAnnotation, "ends a pause request"},
	}
}

// PromoteFull is promote --full.
func PromoteFull() Action {
	return Action{"promote --full", stepwisev1.PromoteFullAtAnnotation, "goes to the last step at once, skipping the pauses and analyses left, the last step's included; " +
		"the rollout completes once that step's Pods are ready. Ignored when no rollout is in progress, when Aborted (retry first), " +
		"and while paused by a request or spec.paused"}
}

// RequestToken is the annotation value for a request made at now. Nanosecond
// precision keeps two requests in the same second distinct (the controller
// ignores a value equal to the last one it handled), and it is still an RFC
// 3339 timestamp, which time.Parse(time.RFC3339, ...) reads.
func RequestToken(now time.Time) string {
	return now.UTC().Format(time.RFC3339Nano)
}

// Request writes the action's annotation with a JSON merge patch, which
// touches only that key: no read-modify-write race with the controller or
// GitOps, and no conflict error to retry. It returns the patched Rollout.
func Request(ctx context.Context, dyn dynamic.Interface, namespace, name string, a Action, token string) (*unstructured.Unstructured, error) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{a.Annotation: token}},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding %s patch: %w", a.Name, err)
	}
	u, err := dyn.Resource(RolloutResource()).Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("requesting %s of rollout %s/%s: %w", a.Name, namespace, name, err)
	}
	return u, nil
}
