package rollout_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// A GitOps tool that applies a manifest setting the partition fights the
// controller: the Rollout names it in PartitionConflict and a Warning
// Event, and takes the field back.
func TestPartitionWrittenByAnotherFieldManagerIsReported(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	createRollout(t, newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0))))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(condition(ro, stepwisev1.PartitionConflictCondition)).To(BeNil())
	})

	// What kustomize-controller does with a manifest that sets partition: 100%.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workload.CloneSetGVK)
	u.SetNamespace(ns)
	u.SetName("web")
	_ = unstructured.SetNestedField(u.Object, "100%", "spec", "updateStrategy", "partition")
	if err := env.client.Apply(testContext(t), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("flux-kustomize"), client.ForceOwnership); err != nil {
		t.Fatalf("applying partition as flux-kustomize: %v", err)
	}

	ro := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		c := condition(ro, stepwisev1.PartitionConflictCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(BeEquivalentTo("True"))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonFieldManagerConflict))
		g.Expect(c.Message).To(ContainSubstring(`"flux-kustomize"`))
	})
	msg := condition(ro, stepwisev1.PartitionConflictCondition).Message
	for _, fix := range []string{"remove the partition from the manifest in git", "ignoreDifferences", "/spec/updateStrategy/partition"} {
		if !strings.Contains(msg, fix) {
			t.Errorf("condition message %q does not tell the fix %q", msg, fix)
		}
	}
	waitForEvent(t, ns, "web", stepwisev1.EventPartitionConflict, `"flux-kustomize"`)

	// The controller took the field back, and the rollout goes on.
	NewWithT(t).Eventually(func(g Gomega) {
		cs := getCloneSet(t, ns, "web")
		g.Expect(cs.Spec.UpdateStrategy.Partition.String()).To(Equal("50%"))
		g.Expect(managersOfPartition(cs, "spec", "updateStrategy", "partition")).To(Equal([]string{workload.FieldManager}))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
	if n := len(events(t, ns, "web", stepwisev1.EventPartitionConflict)); n != 1 {
		t.Errorf("%d PartitionConflict Events, want 1 for one conflicting write", n)
	}

	// The conflict is kept on show for the rest of the rollout, and dropped
	// once it completed without another fight.
	annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(condition(ro, stepwisev1.PartitionConflictCondition)).To(BeNil())
	})
}

// spec.paused (the git way to pause) holds a new revision with no Pod
// moved; unpausing starts the rollout.
func TestSpecPausedHoldsANewRevision(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0)))
	ro.Spec.Paused = true
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.Message).To(ContainSubstring("paused by spec.paused"))
	})

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonPausedBySpec))
		g.Expect(ro.Status.CurrentStepIndex).To(BeNil())
		kstatusProgressing(g, ro)
	})
	consistently(t, ns, "web", time.Second, func(g Gomega, _ *stepwisev1.Rollout) {
		g.Expect(partitionOf(t, ns, "web")).To(Equal("100%"))
	})

	updateRollout(t, ns, "web", func(ro *stepwisev1.Rollout) { ro.Spec.Paused = false })
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-2-0-0"))
		g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
	})
	if p := partitionOf(t, ns, "web"); p != "50%" {
		t.Fatalf("partition = %s, want step 0's 50%%", p)
	}
}

// A version outside spec.versionPolicy's constraint is held with a clear
// condition and no Pod moved; an allowed one rolls out; a semver downgrade
// takes the fast path.
func TestVersionPolicy(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0)))
	ro.Spec.VersionPolicy = &stepwisev1.VersionPolicy{Container: "app", Constraint: ">=1.0.0 <2.0.0"}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	held := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonVersionPolicyViolation))
		kstatusStalled(g, ro)
	})
	if ready := condition(held, meta.ReadyCondition); !strings.Contains(ready.Message, `outside constraint ">=1.0.0 <2.0.0"`) || ready.Reason != stepwisev1.ReasonVersionPolicyViolation {
		t.Errorf("Ready = %s %q, want the violation explained", ready.Reason, ready.Message)
	}
	if p := partitionOf(t, ns, "web"); p != "100%" {
		t.Fatalf("partition = %s, want 100%%: no Pod moves to a rejected version", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventVersionPolicyViolation, "2.0.0")

	commit(t, ns, "web", "1.5.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-1-5-0"))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})
	annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-5-0"))
	})

	commit(t, ns, "web", "1.2.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-2-0"))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventDowngrading, "web-1-2-0")
	if n := len(events(t, ns, "web", stepwisev1.EventRolloutStarted)); n != 1 {
		t.Errorf("%d RolloutStarted Events, want 1: the downgrade takes no steps", n)
	}
}

// Flux's reconcile.fluxcd.io/requestedAt is honoured: the token handled is
// reported in status.lastHandledReconcileAt.
func TestReconcileRequestIsHandled(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	createRollout(t, newRollout(ns, "web", cloneSetRef("web"), stepAt(num(0))))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	token := annotate(t, ns, "web", meta.ReconcileRequestAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.LastHandledReconcileAt).To(Equal(token))
		kstatusHealthy(g, ro)
	})
}
