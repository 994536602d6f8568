package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
	"github.com/stepwise-dev/stepwise/test/gitopssync"
)

// TestGitOps delivers one app from a git repository with each GitOps
// tool's way of applying, while the Rollout controller runs its releases:
// Flux's (server-side apply with fluxcd/pkg/ssa as kustomize-controller) and
// Argo CD's default (client-side apply, a three-way merge patch as
// argocd-controller). The syncer re-applies HEAD every second, so drift
// correction runs dozens of times during each release.
//
// Every version of the Rollout and the CloneSet is judged, as it happens,
// by kstatus (sigs.k8s.io/cli-utils, what Flux's wait uses) and by the
// Argo CD health checks in config/argocd, and must tell the truth (see
// expectTruthful). The stories of one tool build on each other, as the
// history of one repository: each starts where the previous one left off.
func TestGitOps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kwok cluster and Prometheus")
	}
	e := newRolloutEnv(t)
	stories := []struct {
		name string
		run  func(*testing.T, *gitopsApp)
		// csaOnly stories are about Argo CD's options.
		csaOnly bool
	}{
		{name: "FirstCommitIsAdoptedAndArmed", run: testGitOpsFirstCommit},
		{name: "ReleaseRunsToHealthyAndSyncNeverTouchesPartition", run: testGitOpsRelease},
		{name: "PausedInGitHoldsNewTemplateArmed", run: testGitOpsPausedInGit},
		{name: "BadReleaseAbortsAndGitRevertIsHealthyWithoutAnalysis", run: testGitOpsBadReleaseRevert},
		{name: "PartitionInGitIsNamedUntilRevertedFromGit", run: testGitOpsPartitionInGit},
		{name: "IgnoreDifferencesWithRespectKeepsPartitionInGitHarmless", run: testGitOpsIgnoreDifferences, csaOnly: true},
	}
	for _, tool := range []struct {
		name string
		mode gitopssync.Mode
	}{{"FluxServerSideApply", gitopssync.ServerSideApply}, {"ArgoCDClientSideApply", gitopssync.ClientSideApply}} {
		t.Run(tool.name, func(t *testing.T) {
			app := gitopsNewApp(t, e, tool.mode)
			t.Cleanup(func() {
				if app.syncer != nil {
					app.syncer.Stop()
				}
			})
			for _, s := range stories {
				if s.csaOnly && tool.mode != gitopssync.ClientSideApply {
					continue
				}
				// A later story starts from the state an earlier one left.
				if !t.Run(s.name, func(t *testing.T) { s.run(t, app) }) {
					return
				}
			}
		})
	}
}

// The first commit creates the CloneSet and the Rollout; the Rollout adopts
// the running revision and arms the partition. The tool owns what git says,
// the Rollout controller the partition.
func testGitOpsFirstCommit(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	t0, mark := time.Now(), a.health.mark()
	a.commit(t, "web 1.0.0 with a Rollout", func(*gitopsManifests) {})
	a.e.waitSettled(t, a.ns, "web", gitopsReplicas, gitopsReplicas, settleTimeout)
	stable := a.updateRevision(t)
	a.waitHealthyAt(t, stable)
	a.waitRates(t)

	g.Eventually(func(g Gomega) {
		ro := a.health.since(g, mark, "Rollout")
		cs := a.health.since(g, mark, "CloneSet")
		g.Expect(ro).NotTo(BeEmpty())
		g.Expect(cs).NotTo(BeEmpty())
		g.Expect(ro[len(ro)-1].verdict()).To(Equal(gitopsCurrent), "Rollout: %s", ro[len(ro)-1])
		g.Expect(cs[len(cs)-1].verdict()).To(Equal(gitopsCurrent), "CloneSet: %s", cs[len(cs)-1])
		last := cs[len(cs)-1].obj
		g.Expect(gitopsPartitionOwners(last)).To(Equal([]string{workload.FieldManager}))
		g.Expect(gitopsOwners(last, "spec", "template")).To(Equal([]string{a.manager()}), "git's fields belong to the tool")
		g.Expect(gitopsOwners(ro[len(ro)-1].obj, "spec", "steps")).To(Equal([]string{a.manager()}))
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	a.health.expectTruthful(g, mark)
	a.health.expectPartitionOursOnly(g, mark)
	g.Expect(a.health.partitions(g, mark)).To(Equal([]string{"", "100%"}), "created without one, then armed")
	a.expectNoSyncErrors(g, t0)
	a.logTimeline(t, g, mark)
	t.Logf("objects without status yet, as judged: %v", gitopsNoStatus(a.health.since(g, mark, "")))
}

// gitopsNoStatus lists the verdicts given to objects not yet reconciled.
func gitopsNoStatus(samples []gitopsSample) []string {
	var out []string
	for _, s := range samples {
		if !gitopsHasStatus(s.obj) {
			out = append(out, s.kind()+": "+s.verdict())
		}
	}
	return out
}

// A good release committed to git runs every step to Healthy. The syncer
// re-applies the commit every second meanwhile and never changes the
// CloneSet: the partition is not in git, so it is not drift. Throughout,
// only the Rollout controller owns the partition.
func testGitOpsRelease(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	t0, mark := time.Now(), a.health.mark()
	a.commit(t, "web 1.1.0", func(m *gitopsManifests) { m.version = "1.1.0" })
	canary := a.updateRevision(t)
	a.waitHealthyAt(t, canary)

	g.Expect(a.health.partitions(g, mark)).To(Equal([]string{"100%", "60%", "20%", "0", "100%"}), "every step, nothing else")
	a.health.expectPartitionOursOnly(g, mark)
	a.health.expectTruthful(g, mark)
	g.Expect(gitopsStripLeading(a.health.verdicts(g, mark, "Rollout"), gitopsCurrent)).To(Equal([]string{gitopsInProgress, gitopsCurrent}),
		"InProgress/Progressing from the commit to the end, then Current/Healthy")
	cloneSets := a.health.since(g, mark, "CloneSet")
	updating := slices.ContainsFunc(cloneSets, func(s gitopsSample) bool {
		c, _, _ := gitopsCondition(s.obj, meta.ReconcilingCondition)
		return gitopsObserved(s.obj) && c == string(metav1.ConditionTrue) && s.verdict() == gitopsInProgress
	})
	g.Expect(updating).To(BeTrue(), "the CloneSet is InProgress/Progressing while its Pods update:\n%s", gitopsJoin(cloneSets))
	csVerdicts := a.health.verdicts(g, mark, "CloneSet")
	g.Expect(csVerdicts).To(gitopsInOrder(gitopsInProgress, gitopsCurrent))
	g.Expect(csVerdicts[len(csVerdicts)-1]).To(Equal(gitopsCurrent))

	a.expectSyncerChangedOnlyGit(t, g, t0, mark, 1)
	gitopsLogPremature(t, g, a, mark)
	a.logTimeline(t, g, mark)
}

// gitopsLogPremature reports how long a health check could have seen the
// whole app Current/Healthy before the Rollout took up a new template.
func gitopsLogPremature(t *testing.T, g Gomega, a *gitopsApp, mark int) {
	spans := a.health.premature(g, mark)
	t.Logf("spans where every object was Current/Healthy before the Rollout reacted to the new template: %v", spans)
	for _, d := range spans {
		// The Rollout reacts to the CloneSet's status write through a watch
		// within milliseconds; seconds would mean it waited for a resync.
		g.Expect(d).To(BeNumerically("<", 2*time.Second), "premature Current lasted %s", d)
	}
}

// spec.paused committed to git holds the next release: the new template is
// recorded but no Pod moves, the Rollout is Suspended for Argo CD (and
// InProgress for kstatus) while the CloneSet, armed at 100% with a template
// none of its Pods run, is Current/Healthy. Unpausing in git releases it.
func testGitOpsPausedInGit(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	t0, mark := time.Now(), a.health.mark()
	stable := a.rollout(g).Status.StableRevision
	// Pause first, in its own commit: in one commit with the new template,
	// the CloneSet could be applied (and the release started) before the
	// Rollout's pause.
	a.commit(t, "pause releases of web", func(m *gitopsManifests) { m.paused = true })
	a.waitRollout(t, "idle and paused", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.Message).To(ContainSubstring("paused by spec.paused"))
	})
	a.commit(t, "web 1.2.0", func(m *gitopsManifests) { m.version = "1.2.0" })
	canary := a.updateRevision(t)
	held := func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonPausedBySpec))
		g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
		g.Expect(ro.Status.StableRevision).To(Equal(stable))
		cs := a.cloneSet(g)
		g.Expect(cs.Spec.UpdateStrategy.Partition.String()).To(Equal("100%"))
		g.Expect(cs.Status.UpdatedReplicas).To(BeZero())
		g.Expect(cs.Status.ReadyReplicas).To(BeEquivalentTo(gitopsReplicas))
	}
	a.waitRollout(t, "the new revision waits", held)
	g.Consistently(func(g Gomega) { held(g, a.rollout(g)) }, holdFor, rolloutPoll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		ro := a.health.since(g, mark, "Rollout")
		g.Expect(ro[len(ro)-1].verdict()).To(Equal(gitopsSuspended), "%s", ro[len(ro)-1])
		cs := a.health.since(g, mark, "CloneSet")
		last := cs[len(cs)-1]
		g.Expect(gitopsArmedIdle(last.obj)).To(BeTrue(), "armed and idle: %s", last)
		g.Expect(last.verdict()).To(Equal(gitopsCurrent), "%s", last)
	}, rolloutTimeout, rolloutPoll).Should(Succeed())

	a.commit(t, "resume releases of web", func(m *gitopsManifests) { m.paused = false })
	a.waitHealthyAt(t, canary)
	a.health.expectTruthful(g, mark)
	a.health.expectPartitionOursOnly(g, mark)
	g.Expect(a.health.verdicts(g, mark, "Rollout")).To(gitopsInOrder(gitopsCurrent, gitopsSuspended, gitopsInProgress, gitopsCurrent))
	g.Expect(a.health.partitions(g, mark)).To(Equal([]string{"100%", "60%", "20%", "0", "100%"}), "no Pod moved while paused")
	a.expectSyncerChangedOnlyGit(t, g, t0, mark, 1)
	a.logTimeline(t, g, mark)
}

// A bad release aborts by itself: Failed/Degraded, canaries back in place,
// the CloneSet armed with the bad template and Current/Healthy. `git revert`
// of the bad commit brings the Rollout back to Healthy at once, without an
// analysis.
func testGitOpsBadReleaseRevert(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	t0, mark := time.Now(), a.health.mark()
	stable := a.rollout(g).Status.StableRevision
	bad := a.commit(t, "web 1.3.0-bad", func(m *gitopsManifests) { m.version = "1.3.0-bad" })
	canary := a.updateRevision(t)
	a.waitRollout(t, "aborted by the analysis", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisFailed))
		g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
	})
	g.Eventually(func(g Gomega) {
		cs := a.health.since(g, mark, "CloneSet")
		last := cs[len(cs)-1]
		g.Expect(gitopsArmedIdle(last.obj)).To(BeTrue(), "canaries rolled back: %s", last)
		g.Expect(last.verdict()).To(Equal(gitopsCurrent), "%s", last)
		ro := a.health.since(g, mark, "Rollout")
		g.Expect(ro[len(ro)-1].verdict()).To(Equal(gitopsFailed), "%s", ro[len(ro)-1])
		g.Expect(ro[len(ro)-1].luaMessage).To(ContainSubstring("analysis failed"))
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	measured := a.rollout(g).Status.Measurements

	revertMark := a.health.mark()
	a.revert(t, bad, func(m *gitopsManifests) { m.version = "1.2.0" })
	g.Expect(a.updateRevision(t)).To(Equal(stable), "the revert brings the stable template back")
	ro := a.waitHealthyAt(t, stable)
	g.Expect(ro.Status.Measurements).To(Equal(measured), "no measurement after the revert")
	for _, s := range a.health.since(g, revertMark, "Rollout") {
		g.Expect(gitopsString(s.obj, "status", "reason")).To(BeElementOf(
			stepwisev1.ReasonAnalysisFailed, stepwisev1.ReasonRollingBack, stepwisev1.ReasonStable), "no step, no analysis: %s", s)
	}
	a.health.expectTruthful(g, mark)
	a.health.expectPartitionOursOnly(g, mark)
	g.Expect(a.health.verdicts(g, mark, "Rollout")).To(gitopsInOrder(gitopsInProgress, gitopsFailed, gitopsCurrent))
	g.Expect(gitopsStripLeading(a.health.verdicts(g, revertMark, "Rollout"), gitopsFailed)).To(Equal([]string{gitopsCurrent}),
		"from Failed/Degraded straight to Current/Healthy")
	partitions := a.health.partitions(g, mark)
	g.Expect(len(partitions)).To(BeNumerically(">=", 3), "partitions %v", partitions)
	g.Expect(partitions[:3]).To(Equal([]string{"100%", "60%", "100%"}), "aborted at the first step")
	g.Expect(partitions[len(partitions)-1]).To(Equal("100%"))
	a.expectSyncerChangedOnlyGit(t, g, t0, mark, 2)
	gitopsLogPremature(t, g, a, mark)
	a.logTimeline(t, g, mark)
	// The next story's canaries are these Pods again, their errors still in
	// Prometheus: the next release is judged on its own traffic all the same.
}

// A manifest that sets the partition fights the Rollout: every sync writes
// git's value back over the step's, and the Rollout names the tool's field
// manager in PartitionConflict and a Warning Event. Reverting that commit
// ends the fight; the release then completes and the condition goes.
//
// With client-side apply the revert itself deletes the partition once:
// kubectl apply removes a field the last applied manifest had and the new
// one lacks, whoever owns it now.
func testGitOpsPartitionInGit(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	t0 := time.Now()
	a.commit(t, "web: wait for a promote at 60%", func(m *gitopsManifests) { m.plan = gitopsPromotePlan })
	a.waitRollout(t, "new plan observed", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
	})
	mark := a.health.mark()
	a.commit(t, "web 1.4.0", func(m *gitopsManifests) { m.version = "1.4.0" })
	canary := a.updateRevision(t)
	awaiting := func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
	}
	a.waitRollout(t, "waiting for a promote at 60%", awaiting)
	g.Eventually(func(g Gomega) {
		ro := a.health.since(g, mark, "Rollout")
		g.Expect(ro[len(ro)-1].verdict()).To(Equal(gitopsSuspended), "%s", ro[len(ro)-1])
	}, rolloutTimeout, rolloutPoll).Should(Succeed())

	pinMark, pinTime := a.health.mark(), time.Now()
	pin := a.commit(t, "web: pin partition 100%", func(m *gitopsManifests) { m.partition = "100%" })
	named := `field manager "` + a.manager() + `"`
	a.waitRollout(t, "PartitionConflict names "+a.manager(), func(g Gomega, ro *stepwisev1.Rollout) {
		c := apimeta.FindStatusCondition(ro.Status.Conditions, stepwisev1.PartitionConflictCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(stepwisev1.ReasonFieldManagerConflict))
		g.Expect(c.Message).To(SatisfyAll(ContainSubstring(named), ContainSubstring("spec.updateStrategy.partition"),
			ContainSubstring("ignoreDifferences")))
	})
	g.Eventually(func(g Gomega) {
		g.Expect(a.events(g, stepwisev1.EventPartitionConflict)).To(ContainElement(ContainSubstring(named)))
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	// Let the fight go on for a few syncs, to see it.
	time.Sleep(3 * gitopsSyncInterval)
	fought := slices.ContainsFunc(a.health.since(g, pinMark, "CloneSet"), func(s gitopsSample) bool {
		return slices.Contains(gitopsPartitionOwners(s.obj), a.manager()) && gitopsPartition(s.obj) == "100%"
	})
	g.Expect(fought).To(BeTrue(), "the tool took the partition over at least once")
	_, changed := a.reapplies(pinTime)
	g.Expect(changed).NotTo(BeEmpty(), "re-applies of the pinning commit wrote the partition back")
	t.Logf("partition while git pins it: %v", a.health.partitions(g, pinMark))

	revertMark := a.health.mark()
	a.revert(t, pin, func(m *gitopsManifests) { m.partition = "" })
	revertDone := time.Now()
	a.waitRollout(t, "back at 60%, waiting for a promote", func(g Gomega, ro *stepwisev1.Rollout) {
		awaiting(g, ro)
		g.Expect(a.cloneSet(g).Spec.UpdateStrategy.Partition.String()).To(Equal("60%"))
	})
	afterRevert := a.health.partitions(g, revertMark)
	t.Logf("partition after the revert: %v", afterRevert)
	if a.mode == gitopssync.ClientSideApply {
		g.Expect(afterRevert).To(ContainElement(""),
			"client-side apply deletes the partition: the last applied manifest had it, the reverted one has not")
	}
	// The fight is over: re-applies change nothing, the partition stays ours.
	holdMark := a.health.mark()
	g.Consistently(func(g Gomega) {
		g.Expect(a.cloneSet(g).Spec.UpdateStrategy.Partition.String()).To(Equal("60%"))
	}, holdFor, rolloutPoll).Should(Succeed())
	a.health.expectPartitionOursOnly(g, holdMark)
	_, changed = a.reapplies(revertDone.Add(gitopsSyncInterval))
	g.Expect(changed).To(BeEmpty(), "re-applies after the revert changed the CloneSet")

	a.promote(t)
	ro := a.waitHealthyAt(t, canary)
	g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, stepwisev1.PartitionConflictCondition)).To(BeNil(),
		"PartitionConflict is dropped once Healthy and not fought over")
	a.health.expectTruthful(g, mark)
	a.expectNoSyncErrors(g, t0)
	a.logTimeline(t, g, mark)
}

// Argo CD's ignoreDifferences on the partition with RespectIgnoreDifferences=true
// makes a partition in git harmless: syncs keep the live value, so there is
// no fight, no PartitionConflict, and dropping it from git deletes nothing.
func testGitOpsIgnoreDifferences(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	a.syncOpts.IgnoreDifferences = []string{"/spec/updateStrategy/partition"}
	a.syncOpts.RespectIgnoreDifferences = true
	a.startSyncer(t)
	t0, mark := time.Now(), a.health.mark()
	a.commit(t, "web: pin partition 100%", func(m *gitopsManifests) { m.partition = "100%" })
	a.commit(t, "web 1.5.0", func(m *gitopsManifests) { m.version = "1.5.0" })
	canary := a.updateRevision(t)
	a.waitRollout(t, "waiting for a promote at 60%", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
	})
	g.Consistently(func(g Gomega) {
		ro := a.rollout(g)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(apimeta.FindStatusCondition(ro.Status.Conditions, stepwisev1.PartitionConflictCondition)).To(BeNil())
		g.Expect(a.cloneSet(g).Spec.UpdateStrategy.Partition.String()).To(Equal("60%"))
	}, holdFor, rolloutPoll).Should(Succeed())
	// Not a revert: 1.5.0 changed the same file since, and this small
	// repository does not merge.
	a.commit(t, "web: drop the pinned partition", func(m *gitopsManifests) { m.partition = "" })
	a.promote(t)
	a.waitHealthyAt(t, canary)

	g.Expect(a.health.partitions(g, mark)).To(Equal([]string{"100%", "60%", "0", "100%"}), "git's partition never written, never deleted")
	a.health.expectPartitionOursOnly(g, mark)
	a.health.expectTruthful(g, mark)
	a.expectSyncerChangedOnlyGit(t, g, t0, mark, 1)
	a.logTimeline(t, g, mark)
}
