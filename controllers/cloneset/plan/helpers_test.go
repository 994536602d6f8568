package plan

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Revisions used by the tests: v1 is current, v2 the update, v0 a third
// revision left by an earlier template change.
const (
	revOld   = "v1"
	revNew   = "v2"
	revStale = "v0"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type podOpt func(*Pod)

func notReady(p *Pod) { p.Ready, p.Available = false, false }
func warming(p *Pod)  { p.Ready, p.Available = true, false }
func updating(p *Pod) { p.Updating, p.Ready, p.Available = true, false, false }
func toDelete(p *Pod) { p.SpecifiedDelete = true }

// held is a Pod its inPlaceUpdate hook took aside (PreparingUpdate) and,
// with markPodNotReady, out of service.
func held(p *Pod)      { p.Held, p.Updating, p.Ready, p.Available = true, true, false, false }
func terminate(p *Pod) { p.Terminating = true }
func unscheduled(p *Pod) {
	p.Scheduled, p.Ready, p.Available = false, false, false
}
func age(minutes int) podOpt {
	return func(p *Pod) { p.CreationTimestamp = t0.Add(time.Duration(minutes) * time.Minute) }
}
func label(kv ...string) podOpt {
	return func(p *Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// pod is one healthy Pod: scheduled, ready, available.
func pod(name, rev string, opts ...podOpt) Pod {
	p := Pod{Name: name, Revision: rev, CreationTimestamp: t0, Scheduled: true, Ready: true, Available: true}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// pods is n healthy Pods prefix-0 ... prefix-(n-1), each a minute younger
// than the one before.
func pods(prefix, rev string, n int) []Pod {
	out := make([]Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("%s-%d", prefix, i), rev, age(i))
	}
	return out
}

// set applies opts to the named Pods of ps, in place, and returns ps.
func set(ps []Pod, names []string, opts ...podOpt) []Pod {
	for i := range ps {
		if slices.Contains(names, ps[i].Name) {
			for _, o := range opts {
				o(&ps[i])
			}
		}
	}
	return ps
}

func join(groups ...[]Pod) []Pod { return slices.Concat(groups...) }

func n(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }

func pct(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }

type inOpt func(*Input)

func partition(v *intstr.IntOrString) inOpt      { return func(in *Input) { in.Partition = v } }
func maxUnavailable(v *intstr.IntOrString) inOpt { return func(in *Input) { in.MaxUnavailable = v } }
func maxSurge(v *intstr.IntOrString) inOpt       { return func(in *Input) { in.MaxSurge = v } }
func scaleLimit(v *intstr.IntOrString) inOpt     { return func(in *Input) { in.ScaleMaxUnavailable = v } }
func paused(in *Input)                           { in.Paused = true }
func revisions(current, update string) inOpt {
	return func(in *Input) { in.CurrentRevision, in.UpdateRevision = current, update }
}

// input is an update from v1 to v2 unless revisions says otherwise.
func input(replicas int32, ps []Pod, opts ...inOpt) Input {
	in := Input{Replicas: replicas, CurrentRevision: revOld, UpdateRevision: revNew, Pods: ps}
	for _, o := range opts {
		o(&in)
	}
	return in
}

// diffPlan describes how got differs from want, field by field; "" when
// equal. Blocked.Message is checked for presence only: its wording is not
// the contract.
func diffPlan(got, want Plan) string {
	var b strings.Builder
	field := func(name string, g, w any) {
		if !reflect.DeepEqual(g, w) {
			fmt.Fprintf(&b, "\n  %s: got %v, want %v", name, g, w)
		}
	}
	field("ExpectedUpdatedReplicas", got.ExpectedUpdatedReplicas, want.ExpectedUpdatedReplicas)
	field("CreateUpdateRevision", got.CreateUpdateRevision, want.CreateUpdateRevision)
	field("CreateCurrentRevision", got.CreateCurrentRevision, want.CreateCurrentRevision)
	field("Delete", got.Delete, want.Delete)
	field("Update", got.Update, want.Update)
	field("Rollback", got.Rollback, want.Rollback)
	field("Release", got.Release, want.Release)
	switch {
	case (got.Blocked == nil) != (want.Blocked == nil):
		fmt.Fprintf(&b, "\n  Blocked: got %+v, want %+v", got.Blocked, want.Blocked)
	case got.Blocked != nil:
		g, w := *got.Blocked, *want.Blocked
		if g.Message == "" {
			b.WriteString("\n  Blocked.Message is empty")
		}
		g.Message, w.Message = "", ""
		field("Blocked", g, w)
	}
	return b.String()
}

// sim is a tiny cluster: it applies plans to its Pods the way the
// reconciler and the kubelet would, one round at a time, and checks the
// invariants on every round.
type sim struct {
	t  *testing.T
	in Input
	// recreate applies Update and Rollback by deleting the Pod, as the
	// ReCreate strategy does; the planner then creates the replacement.
	recreate bool
	// broken Pods on this revision never become ready.
	broken string

	nextID, rounds         int
	created, deleted       int
	inPlace, peak          int
	maxUnavailableObserved int
	lastPlan               Plan
}

func newSim(t *testing.T, in Input) *sim {
	return &sim{t: t, in: in, maxUnavailableObserved: -1 << 31}
}

// step plans, checks, applies the plan, then lets the cluster settle:
// in-place updates finish, new Pods start, terminating Pods go.
func (s *sim) step() Plan {
	s.t.Helper()
	s.rounds++
	p := Calculate(s.in)
	checkPlan(s.t, s.in, p)
	l := resolveLimits(s.in)
	before := availableCount(s.in.Pods)
	s.apply(p)
	after := availableCount(s.in.Pods)
	if floor := l.replicas - l.maxUnavailable; after < min(before, floor) {
		s.t.Fatalf("round %d: available %d -> %d, below the floor %d\nplan %+v", s.rounds, before, after, floor, p)
	}
	s.maxUnavailableObserved = max(s.maxUnavailableObserved, l.replicas-after)
	s.peak = max(s.peak, activeCount(s.in.Pods))
	s.settle()
	s.lastPlan = p
	return p
}

// run steps until the cluster is at rest and a round plans nothing, and
// fails after limit rounds.
func (s *sim) run(limit int) {
	s.t.Helper()
	for range limit {
		settled := s.settled()
		if p := s.step(); isEmpty(p) && settled {
			return
		}
	}
	s.t.Fatalf("no steady state after %d rounds; pods %+v", limit, s.summary())
}

// settled: nothing in flight, every Pod that can be ready is.
func (s *sim) settled() bool {
	for _, p := range s.in.Pods {
		if p.Held || p.Terminating || p.Updating || (!p.Available && (s.broken == "" || p.Revision != s.broken)) {
			return false
		}
	}
	return true
}

func (s *sim) apply(p Plan) {
	byName := map[string]*Pod{}
	for i := range s.in.Pods {
		byName[s.in.Pods[i].Name] = &s.in.Pods[i]
	}
	for _, d := range p.Delete {
		byName[d.Name].Terminating = true
		s.deleted++
	}
	move := func(names []string, rev string) {
		for _, name := range names {
			pd := byName[name]
			if s.recreate {
				pd.Terminating = true
				s.deleted++
				continue
			}
			pd.Revision = rev
			pd.Held = false
			updating(pd)
			s.inPlace++
		}
	}
	current := s.in.CurrentRevision
	if current == "" {
		current = s.in.UpdateRevision
	}
	move(p.Update, s.in.UpdateRevision)
	move(p.Rollback, current)
	for _, name := range p.Release {
		// Back to Normal and in service: ready in settle.
		byName[name].Held = false
	}
	add := func(k int32, rev string) {
		for range k {
			s.nextID++
			s.in.Pods = append(s.in.Pods, Pod{
				Name:              fmt.Sprintf("new-%02d", s.nextID),
				Revision:          rev,
				CreationTimestamp: t0.Add(time.Duration(1000+s.nextID) * time.Minute),
			})
			s.created++
		}
	}
	add(p.CreateUpdateRevision, s.in.UpdateRevision)
	add(p.CreateCurrentRevision, current)
}

func (s *sim) settle() {
	kept := s.in.Pods[:0]
	for _, p := range s.in.Pods {
		if p.Terminating {
			continue
		}
		if p.Held {
			// Waits for its move or its release.
			kept = append(kept, p)
			continue
		}
		if !p.Ready || !p.Available || p.Updating {
			ok := s.broken == "" || p.Revision != s.broken
			p.Scheduled, p.Updating, p.Ready, p.Available = true, false, ok, ok
		}
		kept = append(kept, p)
	}
	s.in.Pods = kept
}

// count is how many active Pods are on rev.
func (s *sim) count(rev string) int {
	c := 0
	for _, p := range s.in.Pods {
		if !p.Terminating && p.Revision == rev {
			c++
		}
	}
	return c
}

func (s *sim) summary() map[string]int {
	m := map[string]int{}
	for _, p := range s.in.Pods {
		if !p.Terminating {
			m[p.Revision]++
		}
	}
	return m
}

func availableCount(ps []Pod) int {
	c := 0
	for _, p := range ps {
		if !p.Terminating && p.Ready && p.Available && !p.Updating {
			c++
		}
	}
	return c
}

func activeCount(ps []Pod) int {
	c := 0
	for _, p := range ps {
		if !p.Terminating {
			c++
		}
	}
	return c
}
