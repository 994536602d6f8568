package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/gitopssync"
)

// TestGitOps delivers one app from a git repository with each GitOps
// tool's way of applying, while the Rollout controller runs its releases:
// Flux's (server-side apply with fluxcd/pkg/ssa as kustomize-controller) and
// Argo CD's default (client-side apply, a three-way merge patch as
// argocd-controller). The syncer re-applies HEAD every second, so drift
// correction runs dozens of times during each release.
//
// The CloneSet in git keeps `partition: 0` from the first commit, as an
// OpenKruise manifest ported to Stepwise usually does, and nothing in the
// tools' setup ignores it: the Rollout governs the CloneSet through its own
// status (partitionGrant), and the CloneSet applies that grant whatever its
// spec says. So git's partition is the tool's alone, re-applying it
// changes nothing, no Pod moves more than once per release (count
// restarts), and nothing is reported as a conflict.
//
// Before governance (the Rollout wrote the partition of the CloneSet,
// commit 5c93a01 and earlier), these stories fail: every sync wrote git's
// 0 over the Rollout's step and the Rollout wrote its step back, so the
// canaries went forward and back once per second (issue 13 saw Pods
// restarted 84, 89 and 95 times in one release), PartitionConflict named
// the tool, and the partition belonged to stepwise-rollout by turns.
//
// Every version of the Rollout and the CloneSet is judged, as it happens,
// by kstatus (sigs.k8s.io/cli-utils, what Flux's wait uses) and by the
// Argo CD health checks in config/argocd, and must tell the truth (see
// expectGoverned): in particular a CloneSet whose new revision the Rollout
// has not acknowledged is never Current or Healthy, so no health check
// reads the app as released before the Rollout took the release up. The
// stories of one tool build on each other, as the history of one
// repository: each starts where the previous one left off. The two
// tools' histories run side by side.
func TestGitOps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kwok cluster and Prometheus")
	}
	e := newRolloutEnv(t)
	stories := []struct {
		name string
		run  func(*testing.T, *gitopsApp)
	}{
		{name: "FirstCommitIsAdoptedAndGoverned", run: testGitOpsFirstCommit},
		{name: "ReleaseWithPartitionInGitMovesEachPodOnce", run: testGitOpsRelease},
		{name: "PausedInGitHoldsTheNewRevision", run: testGitOpsPausedInGit},
		{name: "BadReleaseAbortsAndGitRevertIsHealthyWithoutAnalysis", run: testGitOpsBadReleaseRevert},
		{name: "PartitionChangedInGitMidReleaseMovesNoPod", run: testGitOpsPartitionChangedMidRelease},
	}
	for _, tool := range []struct {
		name string
		mode gitopssync.Mode
	}{{"FluxServerSideApply", gitopssync.ServerSideApply}, {"ArgoCDClientSideApply", gitopssync.ClientSideApply}} {
		t.Run(tool.name, func(t *testing.T) {
			// The two tools' apps live in their own namespaces, with their
			// own repository and syncer: they run side by side.
			t.Parallel()
			app := gitopsNewApp(t, e, tool.mode)
			t.Cleanup(func() {
				if app.syncer != nil {
					app.syncer.Stop()
				}
			})
			for _, s := range stories {
				// A later story starts from the state an earlier one left.
				if !t.Run(s.name, func(t *testing.T) { s.run(t, app) }) {
					return
				}
			}
			// The whole history of the app, once more, as one.
			app.expectGoverned(NewWithT(t), gitopsMark{})
		})
	}
}

// The first commit creates the CloneSet, partition 0 and all, and the
// Rollout; the Rollout adopts the running revision and governs the
// CloneSet. The tool owns everything git says, the partition included.
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
		lastRo, lastCs := ro[len(ro)-1], cs[len(cs)-1]
		g.Expect(lastRo.verdict()).To(Equal(gitopsCurrent), "Rollout: %s", lastRo)
		g.Expect(lastCs.verdict()).To(Equal(gitopsCurrent), "CloneSet: %s", lastCs)
		g.Expect(gitopsGrant(lastRo.obj)).To(Equal(stable+"/0"), "every Pod may run the adopted revision")
		g.Expect(gitopsGovernor(lastCs.obj)).To(Equal(stable+"/0"), "the CloneSet applies the grant")
		g.Expect(gitopsPartition(lastCs.obj)).To(Equal(gitopsPartitionInGit), "git's partition is left as it is")
		g.Expect(gitopsOwners(lastCs.obj, "spec")).To(Equal([]string{a.manager()}), "the whole spec is git's")
		g.Expect(gitopsPartitionOwners(lastCs.obj)).To(Equal([]string{a.manager()}))
		g.Expect(gitopsOwners(lastRo.obj, "spec")).To(Equal([]string{a.manager()}))
		status, reason, msg := gitopsCondition(lastCs.obj, stepwisev1.GovernedCondition)
		g.Expect(status).To(Equal(string(metav1.ConditionTrue)))
		g.Expect(reason).To(Equal(stepwisev1.ReasonGovernedByRollout))
		g.Expect(msg).To(SatisfyAll(ContainSubstring("Rollout web decides how far Pods move"),
			ContainSubstring("spec.updateStrategy.partition (0) is ignored")))
		g.Expect(a.events(g, "CloneSet", stepwisev1.EventGoverned)).To(ConsistOf(ContainSubstring("Rollout web now decides how far Pods move")))
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	a.expectGoverned(g, mark)
	// Created with git's 0 (no status yet), maybe governed before the
	// Rollout's first decision (every Pod held), then the stable revision
	// granted to every Pod: no Pod moved, there was nowhere to move to.
	g.Expect(a.health.partitions(g, mark)).To(BeElementOf([]string{"0", "100%", "0"}, []string{"0"}))
	a.health.expectImages(g, mark, repeat(gitopsReplicas, webImage("1.0.0"))...)
	g.Expect(a.restarts(g)).To(HaveEach(BeZero()))
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

// A good release committed to git runs every step to Healthy while the
// syncer re-applies partition 0 every second. The CloneSet holds every Pod
// until the Rollout acknowledges the new revision (Reconciling,
// AwaitingRollout: no health check reads it Current), then moves them
// step by step as the grant says: each Pod restarts exactly once.
func testGitOpsRelease(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	stable := a.rollout(g).Status.StableRevision
	restarts := a.restarts(g)
	t0, mark := time.Now(), a.health.mark()
	a.commit(t, "web 1.1.0", func(m *gitopsManifests) { m.version = "1.1.0" })
	canary := a.updateRevision(t)
	a.waitHealthyAt(t, canary)

	a.expectGoverned(g, mark)
	g.Expect(a.health.partitions(g, mark)).To(Equal([]string{"0", "100%", "60%", "20%", "0"}),
		"held until the Rollout acknowledged the revision, then every step, never git's 0")
	g.Expect(a.health.grants(g, mark)).To(Equal([]string{stable + "/0", canary + "/60%", canary + "/20%", canary + "/0"}))
	a.health.expectImages(g, mark, repeat(gitopsReplicas, webImage("1.0.0"), webImage("1.1.0"))...)
	a.expectRestarts(g, restarts, 1, 1, 1, 1, 1)
	g.Expect(gitopsStripLeading(a.health.verdicts(g, mark, "Rollout"), gitopsCurrent)).To(Equal([]string{gitopsInProgress, gitopsCurrent}),
		"InProgress/Progressing from the commit to the end, then Current/Healthy")
	cloneSets := a.health.since(g, mark, "CloneSet")
	g.Expect(slices.ContainsFunc(cloneSets, func(s gitopsSample) bool {
		c, reason, _ := gitopsCondition(s.obj, meta.ReconcilingCondition)
		return gitopsObserved(s.obj) && c == string(metav1.ConditionTrue) && reason == stepwisev1.ReasonAwaitingRollout && s.verdict() == gitopsInProgress
	})).To(BeTrue(), "the CloneSet is InProgress/Progressing (AwaitingRollout) until the Rollout reacts:\n%s", gitopsJoin(cloneSets))
	g.Expect(slices.ContainsFunc(cloneSets, func(s gitopsSample) bool {
		c, _, _ := gitopsCondition(s.obj, meta.ReconcilingCondition)
		return gitopsObserved(s.obj) && gitopsAcknowledged(s.obj) && c == string(metav1.ConditionTrue) && s.verdict() == gitopsInProgress
	})).To(BeTrue(), "the CloneSet is InProgress/Progressing while its Pods update:\n%s", gitopsJoin(cloneSets))
	csVerdicts := a.health.verdicts(g, mark, "CloneSet")
	g.Expect(csVerdicts).To(gitopsInOrder(gitopsInProgress, gitopsCurrent))
	g.Expect(csVerdicts[len(csVerdicts)-1]).To(Equal(gitopsCurrent))
	a.expectSyncerChangedOnlyGit(t, g, t0, mark, 1)
	a.logTimeline(t, g, mark)
}

// spec.paused committed to git holds the next release: the Rollout
// acknowledges the new revision with every Pod held, and no Pod moves
// whatever git's partition says. The Rollout is Suspended for Argo CD (and
// InProgress for kstatus) while the CloneSet, holding every Pod where the
// Rollout wants it, is Current/Healthy. Unpausing in git releases it.
func testGitOpsPausedInGit(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	stable := a.rollout(g).Status.StableRevision
	restarts := a.restarts(g)
	t0, mark := time.Now(), a.health.mark()
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
		g.Expect(gitopsGovernor(cs)).To(Equal(canary+"/100%"), "acknowledged, every Pod held")
		g.Expect(gitopsPartition(cs)).To(Equal(gitopsPartitionInGit), "git's partition, ignored")
		g.Expect(gitopsInt(cs, "status", "updatedReplicas")).To(BeZero())
		g.Expect(gitopsInt(cs, "status", "readyReplicas")).To(BeEquivalentTo(gitopsReplicas))
	}
	a.waitRollout(t, "the new revision waits", held)
	g.Consistently(func(g Gomega) { held(g, a.rollout(g)) }, holdFor, rolloutPoll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		ro := a.health.since(g, mark, "Rollout")
		g.Expect(ro[len(ro)-1].verdict()).To(Equal(gitopsSuspended), "%s", ro[len(ro)-1])
		cs := a.health.since(g, mark, "CloneSet")
		last := cs[len(cs)-1]
		g.Expect(gitopsHeldIdle(last.obj)).To(BeTrue(), "held and idle: %s", last)
		g.Expect(last.verdict()).To(Equal(gitopsCurrent), "%s", last)
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	a.health.expectImages(g, mark, repeat(gitopsReplicas, webImage("1.1.0"))...)

	a.commit(t, "resume releases of web", func(m *gitopsManifests) { m.paused = false })
	a.waitHealthyAt(t, canary)
	a.expectGoverned(g, mark)
	g.Expect(a.health.verdicts(g, mark, "Rollout")).To(gitopsInOrder(gitopsCurrent, gitopsSuspended, gitopsInProgress, gitopsCurrent))
	g.Expect(a.health.partitions(g, mark)).To(Equal([]string{"0", "100%", "60%", "20%", "0"}), "no Pod moved while paused")
	a.health.expectImages(g, mark, repeat(gitopsReplicas, webImage("1.1.0"), webImage("1.2.0"))...)
	a.expectRestarts(g, restarts, 1, 1, 1, 1, 1)
	a.expectSyncerChangedOnlyGit(t, g, t0, mark, 1)
	a.logTimeline(t, g, mark)
}

// A bad release aborts by itself: Failed/Degraded, the canaries back in
// place (each went forward and back once, no other Pod moved), the
// CloneSet holding every Pod on the stable revision with the bad template,
// Current/Healthy. `git revert` of the bad commit brings the Rollout back
// to Healthy at once, without an analysis, and moves no Pod.
func testGitOpsBadReleaseRevert(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	stable := a.rollout(g).Status.StableRevision
	restarts := a.restarts(g)
	t0, mark := time.Now(), a.health.mark()
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
		g.Expect(gitopsHeldIdle(last.obj)).To(BeTrue(), "canaries rolled back: %s", last)
		g.Expect(gitopsGovernor(last.obj)).To(Equal(canary + "/100%"))
		g.Expect(last.verdict()).To(Equal(gitopsCurrent), "%s", last)
		ro := a.health.since(g, mark, "Rollout")
		g.Expect(ro[len(ro)-1].verdict()).To(Equal(gitopsFailed), "%s", ro[len(ro)-1])
		g.Expect(ro[len(ro)-1].luaMessage).To(ContainSubstring("analysis failed"))
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	a.waitPodsRun(t, webImage("1.2.0"))
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
	a.expectGoverned(g, mark)
	g.Expect(a.health.verdicts(g, mark, "Rollout")).To(gitopsInOrder(gitopsInProgress, gitopsFailed, gitopsCurrent))
	g.Expect(gitopsStripLeading(a.health.verdicts(g, revertMark, "Rollout"), gitopsFailed)).To(Equal([]string{gitopsCurrent}),
		"from Failed/Degraded straight to Current/Healthy")
	g.Expect(a.health.partitions(g, mark)).To(Equal([]string{"0", "100%", "60%", "100%", "0"}),
		"aborted at the first step; the revert is held until the Rollout takes it up, then it is all stable")
	g.Expect(a.health.grants(g, mark)).To(Equal([]string{stable + "/0", canary + "/60%", canary + "/100%", stable + "/0"}))
	canaries := repeat(2, webImage("1.2.0"), webImage("1.3.0-bad"), webImage("1.2.0"))
	a.health.expectImages(g, mark, append(canaries, repeat(gitopsReplicas-2, webImage("1.2.0"))...)...)
	a.expectRestarts(g, restarts, 0, 0, 0, 2, 2)
	a.expectSyncerChangedOnlyGit(t, g, t0, mark, 2)
	a.logTimeline(t, g, mark)
	// The next story's canaries may be these Pods again, their errors still
	// in Prometheus: the next release is judged on its own traffic all the
	// same.
}

// The partition in git changes in the middle of a release, while the
// Rollout waits for a promote at 60%: pinned to 100%, reverted to 0,
// dropped, put back. Each commit is applied and re-applied every second;
// none moves a Pod, none is a conflict, and the CloneSet names what it
// ignores in its Governed condition. The promote then finishes the release.
func testGitOpsPartitionChangedMidRelease(t *testing.T, a *gitopsApp) {
	g := NewWithT(t)
	t0 := time.Now()
	a.commit(t, "web: wait for a promote at 60%", func(m *gitopsManifests) { m.plan = gitopsPromotePlan })
	a.waitRollout(t, "new plan observed", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.ObservedGeneration).To(Equal(ro.Generation))
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
	})
	restarts := a.restarts(g)
	mark := a.health.mark()
	a.commit(t, "web 1.4.0", func(m *gitopsManifests) { m.version = "1.4.0" })
	canary := a.updateRevision(t)
	awaiting := func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAwaitingPromotion))
		g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
	}
	a.waitRollout(t, "waiting for a promote at 60%", awaiting)
	a.e.waitSettled(t, a.ns, "web", gitopsReplicas, 2, settleTimeout)
	a.waitPodsRun(t, "")
	g.Eventually(func(g Gomega) {
		ro := a.health.since(g, mark, "Rollout")
		g.Expect(ro[len(ro)-1].verdict()).To(Equal(gitopsSuspended), "%s", ro[len(ro)-1])
	}, rolloutTimeout, rolloutPoll).Should(Succeed())
	atStep := a.restarts(g)
	stepMark := a.health.mark()

	// held checks, for a few syncs after a commit set git's partition to
	// inGit, that nothing moved and the CloneSet says what it ignores.
	held := func(inGit string) {
		t.Helper()
		ignored := "spec.updateStrategy.partition (" + inGit + ") is ignored"
		if inGit == "" {
			ignored = "spec.updateStrategy.partition (unset) is ignored"
		}
		check := func(g Gomega) {
			awaiting(g, a.rollout(g))
			cs := a.cloneSet(g)
			g.Expect(gitopsObserved(cs)).To(BeTrue())
			g.Expect(gitopsPartition(cs)).To(Equal(inGit), "git's partition is applied as it is")
			g.Expect(gitopsGovernor(cs)).To(Equal(canary+"/60%"), "the Rollout's step applies")
			g.Expect(gitopsInt(cs, "status", "updatedReadyReplicas")).To(BeEquivalentTo(2))
			_, _, msg := gitopsCondition(cs, stepwisev1.GovernedCondition)
			g.Expect(msg).To(ContainSubstring(ignored))
		}
		NewWithT(t).Eventually(check, rolloutTimeout, rolloutPoll).Should(Succeed())
		// A few syncs: each re-applies the commit.
		NewWithT(t).Consistently(check, 3*gitopsSyncInterval, rolloutPoll).Should(Succeed())
	}
	pin := a.commit(t, "web: pin partition 100%", func(m *gitopsManifests) { m.partition = "100%" })
	held("100%")
	a.revert(t, pin, func(m *gitopsManifests) { m.partition = gitopsPartitionInGit })
	held(gitopsPartitionInGit)
	// With client-side apply, the drop sends partition: null (the last
	// applied manifest had it); with server-side apply the tool stops
	// owning the field, which goes. Either way it moves no Pod.
	a.commit(t, "web: drop the partition", func(m *gitopsManifests) { m.partition = "" })
	held("")
	a.commit(t, "web: partition 0 again", func(m *gitopsManifests) { m.partition = gitopsPartitionInGit })
	held(gitopsPartitionInGit)
	g.Expect(a.health.partitions(g, stepMark)).To(Equal([]string{"60%"}), "whatever git said")
	g.Expect(a.restarts(g)).To(Equal(atStep), "no Pod restarted while git changed the partition")
	a.health.expectImages(g, stepMark, append(repeat(2, webImage("1.4.0")), repeat(gitopsReplicas-2, webImage("1.2.0"))...)...)
	a.expectGoverned(g, stepMark)

	a.promote(t)
	a.waitHealthyAt(t, canary)
	a.expectGoverned(g, mark)
	g.Expect(a.health.partitions(g, mark)).To(Equal([]string{"0", "100%", "60%", "0"}))
	a.health.expectImages(g, mark, repeat(gitopsReplicas, webImage("1.2.0"), webImage("1.4.0"))...)
	a.expectRestarts(g, restarts, 1, 1, 1, 1, 1)
	// The release, then four commits that changed only the partition.
	a.expectSyncerChangedOnlyGit(t, g, t0, mark, 5)
	a.logTimeline(t, g, mark)
}
