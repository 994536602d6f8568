package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// checkPlan asserts what every plan must satisfy, whatever the input.
func checkPlan(t *testing.T, in Input, p Plan) {
	t.Helper()
	l := resolveLimits(in)
	current := in.CurrentRevision
	if current == "" {
		current = in.UpdateRevision
	}
	byName := map[string]*Pod{}
	for i := range in.Pods {
		byName[in.Pods[i].Name] = &in.Pods[i]
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\ninput %+v\nplan %+v", fmt.Sprintf(format, args...), in, p)
	}

	if want := int32(l.replicas) - PartitionCount(in.Replicas, in.Partition); p.ExpectedUpdatedReplicas != want {
		fail("ExpectedUpdatedReplicas %d, want %d", p.ExpectedUpdatedReplicas, want)
	}

	// Every Pod is touched at most once, exists, and is not terminating.
	touched := map[string]string{}
	touch := func(name, what string) *Pod {
		t.Helper()
		if prev, ok := touched[name]; ok {
			fail("pod %s is in both %s and %s", name, prev, what)
		}
		touched[name] = what
		pd := byName[name]
		if pd == nil || pd.Terminating {
			fail("%s names %s, which is not an active Pod", what, name)
		}
		return pd
	}
	nonSpecifiedDeletes := 0
	for _, d := range p.Delete {
		pd := touch(d.Name, "Delete")
		if pd.SpecifiedDelete != (d.Reason == ReasonSpecifiedDelete) {
			fail("pod %s deleted with reason %q but SpecifiedDelete=%v", d.Name, d.Reason, pd.SpecifiedDelete)
		}
		if !pd.SpecifiedDelete {
			nonSpecifiedDeletes++
		}
	}
	for _, name := range p.Update {
		pd := touch(name, "Update")
		// A Pod mid-update may be moved again (it costs no budget).
		if pd.SpecifiedDelete || pd.Revision == in.UpdateRevision {
			fail("Update names %s, which is specified for deletion or already on the update revision", name)
		}
	}
	for _, name := range p.Rollback {
		pd := touch(name, "Rollback")
		if pd.SpecifiedDelete || pd.Revision == current || current == in.UpdateRevision {
			fail("Rollback names %s, which is specified for deletion, already current, or there is nothing to roll back to", name)
		}
	}
	for _, name := range p.Release {
		pd := touch(name, "Release")
		if !pd.Held || pd.SpecifiedDelete {
			fail("Release names %s, which is not held or is specified for deletion", name)
		}
		if pd.Revision != current && pd.Revision != in.UpdateRevision && current != in.UpdateRevision {
			fail("Release names %s, on a third revision: it must still move", name)
		}
	}
	if !slices.IsSorted(p.Release) {
		fail("Release is not sorted")
	}
	if in.Paused && len(p.Update)+len(p.Rollback) > 0 {
		fail("paused, yet Pods move")
	}

	// Never beyond budget.
	available, kept, keptUpd, keptCur := 0, 0, 0, 0
	for i := range in.Pods {
		pd := &in.Pods[i]
		if pd.Terminating {
			continue
		}
		if pd.Ready && pd.Available && !pd.Updating {
			available++
		}
		if !pd.SpecifiedDelete {
			kept++
			switch pd.Revision {
			case in.UpdateRevision:
				keptUpd++
			case current:
				keptCur++
			}
		}
	}
	cost := 0
	for name := range touched {
		if pd := byName[name]; pd.Ready && pd.Available && !pd.Updating {
			cost++
		}
	}
	if allowed := max(0, available-(l.replicas-l.maxUnavailable)); cost > allowed {
		fail("plan takes %d available Pods out of service, budget is %d", cost, allowed)
	}

	// Never below replicas, except for Pods the user named.
	if nonSpecifiedDeletes > 0 && kept-nonSpecifiedDeletes < l.replicas {
		fail("deleting %d surplus Pods leaves %d of %d replicas", nonSpecifiedDeletes, kept-nonSpecifiedDeletes, l.replicas)
	}
	creates := int(p.CreateUpdateRevision + p.CreateCurrentRevision)
	if p.CreateUpdateRevision < 0 || p.CreateCurrentRevision < 0 || (creates > 0 && kept+creates > l.replicas+l.maxSurge) {
		fail("creating %d/%d with %d kept Pods exceeds replicas %d + surge %d", p.CreateUpdateRevision, p.CreateCurrentRevision, kept, l.replicas, l.maxSurge)
	}
	if creates > 0 && nonSpecifiedDeletes > 0 {
		fail("creates and scale-down deletions in one plan")
	}

	// Moves never overshoot the partition.
	updAfter, curAfter := keptUpd+len(p.Update), keptCur+len(p.Rollback)
	for _, name := range p.Update {
		if byName[name].Revision == current {
			curAfter--
		}
	}
	for _, name := range p.Rollback {
		if byName[name].Revision == in.UpdateRevision {
			updAfter--
		}
	}
	if len(p.Update) > 0 && updAfter > max(keptUpd, l.replicas-l.partition) {
		fail("updates bring the update revision to %d, above replicas - partition %d", updAfter, l.replicas-l.partition)
	}
	if len(p.Rollback) > 0 && curAfter > max(keptCur, l.partition) {
		fail("rollbacks bring the current revision to %d, above partition %d", curAfter, l.partition)
	}

	if p.Blocked != nil && (in.Paused || len(p.Update)+len(p.Rollback) > 0 || p.Blocked.Message == "" || len(p.Blocked.Pods) == 0) {
		fail("Blocked set while paused or progressing, or without a message or Pods")
	}
}

// randomInput draws an input covering the awkward corners: missing and
// surplus Pods, third revisions, every readiness state, percent and int
// limits, and revisions equal or not.
func randomInput(r *rand.Rand) Input {
	revs := []string{revOld, revNew, revStale, ""}
	in := Input{
		Replicas:        int32(r.IntN(12)),
		CurrentRevision: revOld,
		UpdateRevision:  revNew,
		Paused:          r.IntN(6) == 0,
	}
	switch r.IntN(5) {
	case 0:
		in.CurrentRevision = revNew
	case 1:
		in.CurrentRevision = ""
	}
	in.Partition = randomIntOrPercent(r)
	in.MaxUnavailable = randomIntOrPercent(r)
	in.MaxSurge = randomIntOrPercent(r)
	if r.IntN(3) == 0 {
		in.ScaleMaxUnavailable = randomIntOrPercent(r)
	}
	switch r.IntN(4) {
	case 0:
		in.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{WeightPriority: []v1alpha1.UpdatePriorityWeightTerm{
			{Weight: 50, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}},
		}}
	case 1:
		in.PriorityStrategy = &v1alpha1.UpdatePriorityStrategy{OrderPriority: []v1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "rank"}}}
	}
	if r.IntN(2) == 0 {
		in.ScatterStrategy = v1alpha1.UpdateScatterStrategy{{Key: "zone", Value: "b"}}
	}
	for i := range r.IntN(16) {
		p := pod(fmt.Sprintf("p-%02d", i), revs[r.IntN(len(revs))], age(r.IntN(30)),
			label("zone", []string{"a", "b", "c"}[r.IntN(3)], "rank", fmt.Sprint(r.IntN(4))))
		switch r.IntN(8) {
		case 0:
			notReady(&p)
		case 1:
			warming(&p)
		case 2:
			updating(&p)
		case 3:
			unscheduled(&p)
		case 4:
			// Paused, a held Pod stays out of service until resumed, so
			// the sims could not come to rest; the tables cover that.
			if !in.Paused {
				held(&p)
			}
		}
		p.Terminating = r.IntN(10) == 0
		p.SpecifiedDelete = r.IntN(10) == 0
		in.Pods = append(in.Pods, p)
	}
	return in
}

func randomIntOrPercent(r *rand.Rand) *intstr.IntOrString {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return n(r.IntN(6))
	default:
		v := intstr.FromString(fmt.Sprintf("%d%%", []int{0, 10, 20, 25, 50, 99, 100}[r.IntN(7)]))
		return &v
	}
}

// TestCalculateProperties checks the invariants on many random inputs, and
// on random rollouts replayed to the end: every round keeps the budget, and
// a rollout whose Pods all come up reaches exactly what the spec asks.
func TestCalculateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		in := randomInput(r)
		checkPlan(t, in, Calculate(in))
	}
	for i := range 2000 {
		in := randomInput(r)
		s := newSim(t, in)
		s.run(80)
		checkConverged(t, fmt.Sprintf("rollout %d", i), s)
	}
	// Rollouts where one revision never comes up: no steady state to
	// reach, but every round must still keep the invariants and the floor.
	for range 1000 {
		s := newSim(t, randomInput(r))
		s.broken = []string{revOld, revNew, revStale}[r.IntN(3)]
		for range 15 {
			s.step()
		}
	}
}

// checkConverged asserts the steady state a healthy rollout must reach.
func checkConverged(t *testing.T, name string, s *sim) {
	t.Helper()
	l := resolveLimits(s.in)
	if got := activeCount(s.in.Pods); got != l.replicas {
		t.Fatalf("%s: %d Pods at rest, want %d: %v", name, got, l.replicas, s.summary())
	}
	if s.in.Paused {
		return
	}
	current := s.in.CurrentRevision
	if current == "" || current == s.in.UpdateRevision {
		if got := s.count(s.in.UpdateRevision); got < l.replicas-l.partition {
			t.Fatalf("%s: %d Pods on the update revision, want at least %d: %v", name, got, l.replicas-l.partition, s.summary())
		}
		return
	}
	if got := s.count(s.in.UpdateRevision); got != l.replicas-l.partition {
		t.Fatalf("%s: %d Pods on the update revision, want %d: %v", name, got, l.replicas-l.partition, s.summary())
	}
	if got := s.count(current); got != l.partition {
		t.Fatalf("%s: %d Pods on the current revision, want %d: %v", name, got, l.partition, s.summary())
	}
}

// FuzzCalculate runs the same invariants on inputs drawn from fuzzed seeds:
// go test -fuzz FuzzCalculate ./controllers/cloneset/plan/
func FuzzCalculate(f *testing.F) {
	for _, seed := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(seed, seed^0x9e3779b97f4a7c15)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		in := randomInput(rand.New(rand.NewPCG(a, b)))
		checkPlan(t, in, Calculate(in))
		s := newSim(t, in)
		s.run(80)
		checkConverged(t, "fuzzed rollout", s)
	})
}
