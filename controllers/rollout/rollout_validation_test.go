package rollout

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TestRoundsRenderOncePerGeneration: a round validates the Rollout's
// queries through the reconciler's memory of verdicts, so later rounds of
// the same generation render nothing, and a spec change renders again.
// The check refuses the spec, so each round ends at it.
func TestRoundsRenderOncePerGeneration(t *testing.T) {
	renders := 0
	r := &Reconciler{}
	r.mem.validations.Check = func(*v1alpha1.RolloutSpec) error {
		renders++
		return errors.New("spec.analysis.metrics[0].prometheus.query: refused")
	}
	ro := &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u", Generation: 3}}
	reconcile := func(want int) {
		t.Helper()
		_, err := r.reconcileRollout(context.Background(), &round{ro: ro.DeepCopy(), now: time.Now()})
		var se *stallError
		if !errors.As(err, &se) || se.reason != v1alpha1.ReasonInvalidAnalysis {
			t.Fatalf("round: %v, want the InvalidAnalysis stall", err)
		}
		if renders != want {
			t.Fatalf("generation %d: %d renders, want %d", ro.Generation, renders, want)
		}
	}
	reconcile(1)
	reconcile(1)
	reconcile(1)
	ro.Generation++
	reconcile(2)
	reconcile(2)
}
