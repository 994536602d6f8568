package compare

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Milestone is one step a Pod passes on its way to the new image, as a
// watch sees it. In place: OutOfService, ImagePatched, Restarted, BackInService,
// ReadyNew. Recreate: Deleting and Gone for the old Pods; Created, Bound,
// Restarted (the first start on the new image) and ReadyNew for the new.
type Milestone string

const (
	Deleting      Milestone = "deletion requested"
	Gone          Milestone = "gone"
	Created       Milestone = "created"
	Bound         Milestone = "bound to a node"
	OutOfService  Milestone = "gate False"
	ImagePatched  Milestone = "image patched"
	Restarted     Milestone = "running new image"
	BackInService Milestone = "gate True"
	ReadyNew      Milestone = "Ready on new image"
)

// milestoneOrder is the order the table lists them in.
var milestoneOrder = []Milestone{Deleting, Gone, Created, Bound, OutOfService, ImagePatched, Restarted, BackInService, ReadyNew}

// Stretch is the time a Pod spends between two milestones.
type Stretch struct{ From, To Milestone }

// stretches are the per-Pod durations the table reports, when both ends
// were reached by the same Pod.
var stretches = []Stretch{
	{OutOfService, ImagePatched}, {ImagePatched, Restarted}, {Restarted, BackInService}, {BackInService, ReadyNew},
	{OutOfService, ReadyNew},
	{Created, Bound}, {Bound, Restarted}, {Restarted, ReadyNew}, {Created, ReadyNew},
	{Deleting, Gone},
}

// Timeline records when each Pod first reached each milestone after a
// change began. A milestone a Pod had already reached when the pass was
// seeded (an old Pod is bound; nothing about it is new) is never timed.
type Timeline struct {
	Start   time.Time
	reached map[string]map[Milestone]time.Duration // by Pod UID; -1: before the start
}

// NewTimeline starts a timeline for a change that began at start.
func NewTimeline(start time.Time) *Timeline {
	return &Timeline{Start: start, reached: map[string]map[Milestone]time.Duration{}}
}

// milestones lists what a Pod's state shows it has reached; created says
// the Pod was first seen after the start.
func milestones(s PodState) []Milestone {
	var out []Milestone
	add := func(ok bool, m Milestone) {
		if ok {
			out = append(out, m)
		}
	}
	add(s.Deleting, Deleting)
	add(s.Bound, Bound)
	add(s.GateFalse, OutOfService)
	add(s.SpecNewImage, ImagePatched)
	add(s.NewImage, Restarted)
	add(s.GateTrue && s.NewImage, BackInService)
	add(s.Ready && s.NewImage, ReadyNew)
	return out
}

// Seed records a Pod as it was when the change began: what it shows is
// not timed.
func (t *Timeline) Seed(uid string, s PodState) {
	seen := map[Milestone]time.Duration{}
	for _, m := range milestones(s) {
		seen[m] = -1
	}
	t.reached[uid] = seen
}

// Observe records a Pod's state seen at a moment.
func (t *Timeline) Observe(uid string, s PodState, at time.Time) {
	since := max(at.Sub(t.Start), 0)
	seen, ok := t.reached[uid]
	if !ok {
		seen = map[Milestone]time.Duration{Created: since}
		t.reached[uid] = seen
	}
	for _, m := range milestones(s) {
		if _, done := seen[m]; !done {
			seen[m] = since
		}
	}
}

// Delete records that a Pod is gone.
func (t *Timeline) Delete(uid string, at time.Time) {
	seen, ok := t.reached[uid]
	if !ok {
		return
	}
	if _, done := seen[Gone]; !done {
		seen[Gone] = max(at.Sub(t.Start), 0)
	}
}

// Spread is a distribution of durations: how many, and its quantiles.
type Spread struct {
	N                     int
	First, P50, P99, Last time.Duration
}

func spreadOf(ds []time.Duration) Spread {
	if len(ds) == 0 {
		return Spread{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(int(q*float64(len(ds))), len(ds)-1)] }
	return Spread{N: len(ds), First: ds[0], P50: at(0.5), P99: at(0.99), Last: ds[len(ds)-1]}
}

// TimelineSummary is what a Timeline shows: when the Pods reached each
// milestone (time since the change), and how long each Pod spent between
// two.
type TimelineSummary struct {
	Reached   map[Milestone]Spread
	Stretches map[Stretch]Spread
}

// Summary sums the timeline up; milestones and stretches no Pod reached
// are left out.
func (t *Timeline) Summary() TimelineSummary {
	reached := map[Milestone][]time.Duration{}
	spans := map[Stretch][]time.Duration{}
	for _, seen := range t.reached {
		for m, d := range seen {
			if d >= 0 {
				reached[m] = append(reached[m], d)
			}
		}
		for _, s := range stretches {
			from, ok1 := seen[s.From]
			to, ok2 := seen[s.To]
			if ok1 && ok2 && from >= 0 && to >= from {
				spans[s] = append(spans[s], to-from)
			}
		}
	}
	out := TimelineSummary{Reached: map[Milestone]Spread{}, Stretches: map[Stretch]Spread{}}
	for m, ds := range reached {
		out.Reached[m] = spreadOf(ds)
	}
	for s, ds := range spans {
		out.Stretches[s] = spreadOf(ds)
	}
	return out
}

// WriteTimeline prints a summary as two Markdown tables: when the Pods
// reached each milestone, and how long they spent between them.
func WriteTimeline(w io.Writer, title string, s TimelineSummary) {
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }
	_, _ = fmt.Fprintf(w, "\n%s\n\n| Milestone | Pods | First | Median | p99 | Last |\n|---|---|---|---|---|---|\n", title)
	for _, m := range milestoneOrder {
		if sp, ok := s.Reached[m]; ok {
			_, _ = fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", m, sp.N, sec(sp.First), sec(sp.P50), sec(sp.P99), sec(sp.Last))
		}
	}
	_, _ = fmt.Fprint(w, "\n| Per Pod, from → to | Pods | Median s | p99 s | Longest s |\n|---|---|---|---|---|\n")
	for _, st := range stretches {
		if sp, ok := s.Stretches[st]; ok {
			_, _ = fmt.Fprintf(w, "| %s → %s | %d | %s | %s | %s |\n", st.From, st.To, sp.N, sec(sp.P50), sec(sp.P99), sec(sp.Last))
		}
	}
}
