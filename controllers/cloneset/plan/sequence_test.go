package plan

import (
	"testing"
)

// Sequences replay plans over several rounds: apply the plan to the Pods,
// let updates finish and Pods start, plan again. sim.step checks the
// invariants and the availability floor on every round.

// outcome is the state a sequence must end in, and what it may cost. A
// counter set to -1 is not checked.
type outcome struct {
	counts map[string]int
	// maxUnavailable bounds replicas - available Pods, checked every round
	// right after the plan is applied.
	maxUnavailable int
	peak           int
	created        int
	deleted        int
	inPlace        int
	rounds         int
}

func (w outcome) check(t *testing.T, s *sim) {
	t.Helper()
	for rev, c := range w.counts {
		if got := s.count(rev); got != c {
			t.Errorf("%d Pods on %s, want %d (all: %v)", got, rev, c, s.summary())
		}
	}
	if got := activeCount(s.in.Pods); got != sum(w.counts) {
		t.Errorf("%d Pods, want %d (all: %v)", got, sum(w.counts), s.summary())
	}
	if s.maxUnavailableObserved > w.maxUnavailable {
		t.Errorf("%d replicas unavailable in some round, want at most %d", s.maxUnavailableObserved, w.maxUnavailable)
	}
	check := func(name string, got, want int) {
		if want >= 0 && got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	check("peak", s.peak, w.peak)
	check("created", s.created, w.created)
	check("deleted", s.deleted, w.deleted)
	check("in-place moves", s.inPlace, w.inPlace)
	check("rounds", s.rounds, w.rounds)
}

func sum(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

func TestSequence(t *testing.T) {
	t.Run("rolling_update_one_at_a_time", func(t *testing.T) {
		s := newSim(t, input(5, pods("a", revOld, 5), maxUnavailable(n(1))))
		s.run(20)
		outcome{counts: map[string]int{revNew: 5}, maxUnavailable: 1, peak: 5, created: 0, deleted: 0, inPlace: 5, rounds: 6}.check(t, s)
	})

	t.Run("partition_3_of_5_stops_at_2_updated", func(t *testing.T) {
		s := newSim(t, input(5, pods("a", revOld, 5), partition(n(3)), maxUnavailable(n(1))))
		for round := 1; round <= 2; round++ {
			if p := s.step(); len(p.Update) != 1 {
				t.Fatalf("round %d: Update %v, want one Pod", round, p.Update)
			}
		}
		s.run(10)
		outcome{counts: map[string]int{revOld: 3, revNew: 2}, maxUnavailable: 1, peak: 5, created: 0, deleted: 0, inPlace: 2, rounds: 3}.check(t, s)
	})

	t.Run("rollback_from_4_new_to_partition_4", func(t *testing.T) {
		s := newSim(t, input(5, join(pods("a", revOld, 1), pods("b", revNew, 4)), partition(n(4)), maxUnavailable(n(1))))
		s.run(20)
		outcome{counts: map[string]int{revOld: 4, revNew: 1}, maxUnavailable: 1, peak: 5, created: 0, deleted: 0, inPlace: 3, rounds: 4}.check(t, s)
		if s.count(revNew) != 1 || !hasPod(s, "b-0", revNew) {
			t.Errorf("want b-0, the first updated by name, to stay updated: %+v", s.in.Pods)
		}
	})

	t.Run("lowering_then_raising_partition_returns_the_same_pods", func(t *testing.T) {
		s := newSim(t, input(6, pods("a", revOld, 6), partition(n(3)), maxUnavailable(n(6)),
			withPriority(weights(10, "zone", "b"))))
		for i, z := range []string{"a", "b", "a", "b", "a", "b"} {
			s.in.Pods[i].Labels = map[string]string{"zone": z}
		}
		s.run(10)
		s.in.Partition = n(5)
		s.run(10)
		s.in.Partition = n(3)
		s.run(10)
		for _, name := range []string{"a-1", "a-3", "a-5"} {
			if !hasPod(s, name, revNew) {
				t.Errorf("want %s (zone b, heaviest) on the update revision: %+v", name, s.in.Pods)
			}
		}
	})

	t.Run("max_surge_with_in_place", func(t *testing.T) {
		// Kruise's outcome: maxSurge new Pods, the rest updated in place,
		// the surplus old Pods deleted rather than updated.
		s := newSim(t, input(5, pods("a", revOld, 5), maxSurge(n(2))))
		s.run(20)
		outcome{counts: map[string]int{revNew: 5}, maxUnavailable: 1, peak: 7, created: 2, deleted: 2, inPlace: 3, rounds: 4}.check(t, s)
	})

	t.Run("max_surge_lets_max_unavailable_0_update_in_place", func(t *testing.T) {
		s := newSim(t, input(5, pods("a", revOld, 5), maxSurge(n(1)), maxUnavailable(n(0))))
		s.run(20)
		outcome{counts: map[string]int{revNew: 5}, maxUnavailable: 0, peak: 6, created: 1, deleted: 1, inPlace: 4, rounds: 7}.check(t, s)
	})

	t.Run("abort_by_raising_partition_mid_rollout_with_surge", func(t *testing.T) {
		s := newSim(t, input(5, pods("a", revOld, 5), maxSurge(n(1)), maxUnavailable(n(0))))
		s.step()
		s.step()
		s.step()
		s.in.Partition = pct("100%")
		s.run(20)
		outcome{counts: map[string]int{revOld: 5}, maxUnavailable: 0, peak: 6, created: -1, deleted: -1, inPlace: -1, rounds: -1}.check(t, s)
	})

	t.Run("recreate_with_surge_behaves_like_a_deployment", func(t *testing.T) {
		s := newSim(t, input(5, pods("a", revOld, 5), maxSurge(n(1)), maxUnavailable(n(0))))
		s.recreate = true
		s.run(30)
		outcome{counts: map[string]int{revNew: 5}, maxUnavailable: 0, peak: 6, created: 5, deleted: 5, inPlace: 0, rounds: -1}.check(t, s)
	})

	t.Run("recreate_without_surge", func(t *testing.T) {
		s := newSim(t, input(4, pods("a", revOld, 4), maxUnavailable(n(2))))
		s.recreate = true
		s.run(30)
		outcome{counts: map[string]int{revNew: 4}, maxUnavailable: 2, peak: 4, created: 4, deleted: 4, inPlace: 0, rounds: -1}.check(t, s)
	})

	t.Run("broken_new_version_stops_at_max_unavailable_and_reports_blocked", func(t *testing.T) {
		s := newSim(t, input(5, pods("a", revOld, 5), maxUnavailable(n(1))))
		s.broken = revNew
		for range 5 {
			s.step()
		}
		p := s.step()
		if p.Blocked == nil || len(p.Update) != 0 {
			t.Fatalf("want Blocked and no update, got %+v", p)
		}
		if got := p.Blocked.Pods; len(got) != 1 || !hasPod(s, got[0], revNew) {
			t.Errorf("Blocked.Pods = %v, want the one broken updated Pod", got)
		}
		outcome{counts: map[string]int{revOld: 4, revNew: 1}, maxUnavailable: 1, peak: 5, created: 0, deleted: 0, inPlace: 1, rounds: 6}.check(t, s)
	})

	t.Run("broken_pods_on_the_old_side_are_updated_first", func(t *testing.T) {
		s := newSim(t, input(5, set(pods("a", revOld, 5), names("a-3", "a-4"), notReady), maxUnavailable(n(1))))
		s.broken = revOld
		p := s.step()
		if want := names("a-3", "a-4"); !equalNames(p.Update, want) {
			t.Fatalf("first round Update %v, want %v", p.Update, want)
		}
		s.run(20)
		outcome{counts: map[string]int{revNew: 5}, maxUnavailable: 2, peak: 5, created: 0, deleted: 0, inPlace: 5, rounds: -1}.check(t, s)
	})

	t.Run("scale_up_during_update", func(t *testing.T) {
		s := newSim(t, input(5, pods("a", revOld, 5), maxUnavailable(n(1))))
		s.step()
		s.in.Replicas = 8
		s.run(20)
		outcome{counts: map[string]int{revNew: 8}, maxUnavailable: 3, peak: 8, created: 3, deleted: 0, inPlace: 5, rounds: -1}.check(t, s)
	})

	t.Run("scale_down_during_update_deletes_old_pods", func(t *testing.T) {
		s := newSim(t, input(6, pods("a", revOld, 6), maxUnavailable(n(1))))
		s.step()
		s.in.Replicas = 3
		s.run(20)
		outcome{counts: map[string]int{revNew: 3}, maxUnavailable: 1, peak: 6, created: 0, deleted: 3, inPlace: 3, rounds: -1}.check(t, s)
	})

	t.Run("template_change_mid_update_moves_third_revision_pods", func(t *testing.T) {
		// v1 -> v0 half done, then the template changes again: v0 is now
		// a third revision, v2 the update. Partition 2 keeps exactly the
		// two v1 Pods.
		s := newSim(t, input(4, pods("a", revOld, 4), revisions(revOld, revStale), maxUnavailable(n(1))))
		s.step()
		s.step()
		s.in.UpdateRevision = revNew
		s.in.Partition = n(2)
		s.run(20)
		outcome{counts: map[string]int{revOld: 2, revNew: 2}, maxUnavailable: 1, peak: 4, created: 0, deleted: 0, inPlace: 4, rounds: -1}.check(t, s)
	})

	t.Run("specified_delete_replaced_without_breaking_the_floor", func(t *testing.T) {
		s := newSim(t, input(5, set(pods("b", revNew, 5), names("b-1", "b-3"), toDelete), revisions(revNew, revNew),
			maxUnavailable(n(1))))
		s.run(20)
		outcome{counts: map[string]int{revNew: 5}, maxUnavailable: 1, peak: 6, created: 2, deleted: 2, inPlace: 0, rounds: 3}.check(t, s)
	})

	t.Run("paused_mid_update_still_scales_and_resumes", func(t *testing.T) {
		s := newSim(t, input(5, pods("a", revOld, 5), maxUnavailable(n(1))))
		s.step()
		s.in.Paused = true
		s.in.Replicas = 6
		s.run(10)
		if got := s.count(revNew); got != 2 {
			t.Fatalf("paused: %d Pods on the update revision, want the 1 updated + 1 created", got)
		}
		s.in.Paused = false
		s.run(20)
		outcome{counts: map[string]int{revNew: 6}, maxUnavailable: 1, peak: 6, created: 1, deleted: 0, inPlace: 5, rounds: -1}.check(t, s)
	})
}

func hasPod(s *sim, name, rev string) bool {
	for _, p := range s.in.Pods {
		if p.Name == name && p.Revision == rev && !p.Terminating {
			return true
		}
	}
	return false
}

func equalNames(a, b []string) bool {
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
