package rollout_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// A partition kept in git (applied by a GitOps tool at every sync) moves
// no Pod of a CloneSet a Rollout governs: the CloneSet applies the
// Rollout's grant, the Rollout never writes the CloneSet, and there is no
// conflict to report.
func TestPartitionInGitIsIgnoredByAGovernedCloneSet(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	createRollout(t, newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0))))
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
	})

	// What kustomize-controller does with a manifest that keeps partition: 0.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workload.CloneSetGVK)
	u.SetNamespace(ns)
	u.SetName("web")
	_ = unstructured.SetNestedField(u.Object, int64(0), "spec", "updateStrategy", "partition")
	if err := env.client.Apply(testContext(t), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("flux-kustomize"), client.ForceOwnership); err != nil {
		t.Fatalf("applying partition as flux-kustomize: %v", err)
	}
	consistently(t, ns, "web", 2*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(condition(ro, stepwisev1.PartitionConflictCondition)).To(BeNil())
		cs := getCloneSet(t, ns, "web")
		g.Expect(cs.Status.Rollout).NotTo(BeNil())
		g.Expect(cs.Status.Rollout.Partition.String()).To(Equal("50%"), "git's 0 is not applied")
		g.Expect(cs.Status.UpdatedReplicas).To(BeEquivalentTo(5))
	})

	annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	cs := getCloneSet(t, ns, "web")
	if got := managersOfPartition(cs, "spec", "updateStrategy", "partition"); !slices.Equal(got, []string{"flux-kustomize"}) {
		t.Errorf("spec.updateStrategy.partition owned by %v, want git's tool only", got)
	}
	if n := len(events(t, ns, "web", stepwisev1.EventPartitionConflict)); n != 0 {
		t.Errorf("%d PartitionConflict Events, want none", n)
	}
}

// For a workload the Rollout does not govern (a StatefulSet, an OpenKruise
// CloneSet), a GitOps tool that applies a manifest setting the partition
// fights the controller: the Rollout names it in PartitionConflict and a
// Warning Event, and takes the field back.
func TestPartitionWrittenByAnotherFieldManagerIsReported(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	if err := env.client.Create(testContext(t), newStatefulSet(ns, "db", 4, "1.0.0")); err != nil {
		t.Fatalf("creating StatefulSet: %v", err)
	}
	reportStatefulSet(t, ns, "db", func(st *appsv1.StatefulSetStatus) {
		st.UpdateRevision, st.CurrentRevision = "db-r1", "db-r1"
		st.ReadyReplicas, st.UpdatedReplicas, st.CurrentReplicas = 4, 4, 4
	})
	startController(t, ns)
	ref := stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	createRollout(t, newRollout(ns, "db", ref, stepAt(num(2), pauseForPromote()), stepAt(num(0))))
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	reportStatefulSet(t, ns, "db", func(st *appsv1.StatefulSetStatus) {
		st.UpdateRevision, st.UpdatedReplicas, st.CurrentReplicas = "db-r2", 0, 4
	})
	waitStatefulSetPartition(t, ns, "db", 2)
	reportStatefulSet(t, ns, "db", func(st *appsv1.StatefulSetStatus) {
		st.UpdatedReplicas, st.CurrentReplicas = 2, 2
	})
	eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(condition(ro, stepwisev1.PartitionConflictCondition)).To(BeNil())
	})

	// What kustomize-controller does with a manifest that sets partition: 4.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(workload.StatefulSetGVK)
	u.SetNamespace(ns)
	u.SetName("db")
	_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "updateStrategy", "rollingUpdate", "partition")
	if err := env.client.Apply(testContext(t), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("flux-kustomize"), client.ForceOwnership); err != nil {
		t.Fatalf("applying partition as flux-kustomize: %v", err)
	}

	ro := eventually(t, ns, "db", func(g Gomega, ro *stepwisev1.Rollout) {
		c := condition(ro, stepwisev1.PartitionConflictCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(BeEquivalentTo("True"))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonFieldManagerConflict))
		g.Expect(c.Message).To(ContainSubstring(`"flux-kustomize"`))
	})
	msg := condition(ro, stepwisev1.PartitionConflictCondition).Message
	for _, fix := range []string{"remove the partition from the manifest in git", "ignoreDifferences", "/spec/updateStrategy/rollingUpdate/partition"} {
		if !strings.Contains(msg, fix) {
			t.Errorf("condition message %q does not tell the fix %q", msg, fix)
		}
	}
	waitForEvent(t, ns, "db", stepwisev1.EventPartitionConflict, `"flux-kustomize"`)

	// The controller took the field back.
	NewWithT(t).Eventually(func(g Gomega) {
		got := getStatefulSet(t, ns, "db")
		g.Expect(*got.Spec.UpdateStrategy.RollingUpdate.Partition).To(BeEquivalentTo(2))
		g.Expect(managersOfPartition(got, "spec", "updateStrategy", "rollingUpdate", "partition")).To(Equal([]string{workload.FieldManager}))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	if n := len(events(t, ns, "db", stepwisev1.EventPartitionConflict)); n != 1 {
		t.Errorf("%d PartitionConflict Events, want 1 for one conflicting write", n)
	}
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
// condition and no Pod moved; an allowed one rolls out. A lower version
// takes the fast path only back to a revision that was stable before: a
// hotfix pre-release below its release is new code and walks the steps.
func TestVersionPolicy(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0)))
	// "-0" lets pre-releases in: Masterminds/semver leaves them out of a
	// range that names none.
	ro.Spec.VersionPolicy = &stepwisev1.VersionPolicy{Container: "app", Constraint: ">=1.0.0-0 <2.0.0"}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	held := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonVersionPolicyViolation))
		kstatusStalled(g, ro)
	})
	if ready := condition(held, meta.ReadyCondition); !strings.Contains(ready.Message, `outside constraint ">=1.0.0-0 <2.0.0"`) || ready.Reason != stepwisev1.ReasonVersionPolicyViolation {
		t.Errorf("Ready = %s %q, want the violation explained", ready.Reason, ready.Message)
	}
	if p := partitionOf(t, ns, "web"); p != "100%" {
		t.Fatalf("partition = %s, want 100%%: no Pod moves to a rejected version", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventVersionPolicyViolation, "2.0.0")

	// rollOut walks a version through the steps with a promote.
	rollOut := func(version, revision string) {
		t.Helper()
		commit(t, ns, "web", version)
		eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
			stepIs(g, ro, 0)
			g.Expect(ro.Status.CanaryRevision).To(Equal(revision))
			g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		})
		annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
		eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
			kstatusHealthy(g, ro)
			g.Expect(ro.Status.StableRevision).To(Equal(revision))
		})
	}
	rollOut("1.5.0", "web-1-5-0")

	// 1.5.0-hotfix.1 sorts below 1.5.0, but it never ran here.
	rollOut("1.5.0-hotfix.1", "web-1-5-0-hotfix-1")
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutStarted, "web-1-5-0-hotfix-1", "was never stable here, so it takes the steps")
	if n := len(events(t, ns, "web", stepwisev1.EventDowngrading)); n != 0 {
		t.Errorf("%d Downgrading Events, want none for a version never stable", n)
	}
	if got := getRollout(t, ns, "web").Status.PreviousStableRevisions; !slices.Equal(got, []string{"web-1-5-0", "web-1-0-0"}) {
		t.Errorf("previousStableRevisions = %v, want [web-1-5-0 web-1-0-0]", got)
	}

	// 1.0.0 was stable before: back to it at once, without analysis.
	commit(t, ns, "web", "1.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
		g.Expect(ro.Status.PreviousStableRevisions).To(Equal([]string{"web-1-5-0-hotfix-1", "web-1-5-0"}))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventDowngrading, "web-1-0-0")
	if n := len(events(t, ns, "web", stepwisev1.EventRolloutStarted)); n != 2 {
		t.Errorf("%d RolloutStarted Events, want 2: the downgrade takes no steps", n)
	}
}

// spec.versionPolicy.trustedDowngrades trusts a downgrade to a version that
// never ran here; one that is not a constraint is refused by the API server.
func TestTrustedDowngrades(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	bad := newRollout(ns, "bad", cloneSetRef("web"), stepAt(num(0)))
	bad.Spec.VersionPolicy = &stepwisev1.VersionPolicy{Container: "app", TrustedDowngrades: ">=1.0.0; rm -rf /"}
	err := env.client.Create(testContext(t), bad)
	if err == nil || !strings.Contains(err.Error(), "versionPolicy.trustedDowngrades must be a semantic version constraint") {
		t.Fatalf("creating a Rollout with trustedDowngrades %q: %v, want it refused naming the field", bad.Spec.VersionPolicy.TrustedDowngrades, err)
	}

	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%"), pauseForPromote()), stepAt(num(0)))
	ro.Spec.VersionPolicy = &stepwisev1.VersionPolicy{Container: "app", TrustedDowngrades: ">=0.9.0"}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	commit(t, ns, "web", "0.9.5")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-0-9-5"))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventDowngrading, "web-0-9-5")

	commit(t, ns, "web", "0.9.5-rc.1")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-0-9-5-rc-1"))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutStarted, `does not meet spec.versionPolicy.trustedDowngrades ">=0.9.0"`)
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
