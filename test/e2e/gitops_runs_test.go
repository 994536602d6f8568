package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/test/gitopssync"
)

// events returns the notes of the Events about an object of kind with reason.
func (a *gitopsApp) events(g Gomega, kind, reason string) []string {
	var list eventsv1.EventList
	g.Expect(a.e.client.List(context.Background(), &list, client.InNamespace(a.ns))).To(Succeed())
	var notes []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == kind && ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// runsSince returns the syncer's applies that started at or after t0.
func (a *gitopsApp) runsSince(t0 time.Time) []gitopssync.Run {
	var out []gitopssync.Run
	for _, r := range a.syncer.Runs() {
		if !r.Started.Before(t0) {
			out = append(out, r)
		}
	}
	return out
}

// expectNoSyncErrors fails on any apply that failed since t0: a syncer that
// silently stopped applying would make every other assertion hollow.
func (a *gitopsApp) expectNoSyncErrors(g Gomega, t0 time.Time) []gitopssync.Run {
	runs := a.runsSince(t0)
	for _, r := range runs {
		g.Expect(r.Err).NotTo(HaveOccurred(), "apply %s", r)
	}
	return runs
}

// reapplies splits the applies since t0 that re-applied the revision of the
// apply before them (drift correction) by whether they changed the CloneSet.
func (a *gitopsApp) reapplies(t0 time.Time) (unchanged, changed []gitopssync.Run) {
	all := a.syncer.Runs()
	for i := 1; i < len(all); i++ {
		r := all[i]
		if r.Started.Before(t0) || r.Revision != all[i-1].Revision {
			continue
		}
		if r.Actions["CloneSet/web"] == "unchanged" {
			unchanged = append(unchanged, r)
		} else {
			changed = append(changed, r)
		}
	}
	return unchanged, changed
}

// expectSyncerChangedOnlyGit asserts what the syncer did since t0 and
// mark: no apply failed, re-applies ran and changed nothing, and the
// CloneSet's spec changed exactly commits times. The partition in git is
// the tool's and nobody else writes it, so a re-apply finds nothing to
// correct, with either tool.
func (a *gitopsApp) expectSyncerChangedOnlyGit(t *testing.T, g Gomega, t0 time.Time, mark gitopsMark, commits int) {
	t.Helper()
	a.expectNoSyncErrors(g, t0)
	unchanged, changed := a.reapplies(t0)
	g.Expect(len(unchanged)+len(changed)).To(BeNumerically(">=", 3), "the syncer kept re-applying")
	g.Expect(a.health.specChanges(g, mark)).To(Equal(commits), "spec changes of the CloneSet")
	g.Expect(changed).To(BeEmpty(), "a re-apply of the same commit changed the CloneSet")
	t.Logf("%d re-applies of an applied commit, none changed the CloneSet", len(unchanged))
}
