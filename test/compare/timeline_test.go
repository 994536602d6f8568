package compare

import (
	"strings"
	"testing"
	"time"
)

func TestTimelineInPlace(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tl := NewTimeline(t0)
	old := PodState{Ready: true, Bound: true, GateTrue: true}
	tl.Seed("a", old)
	tl.Seed("b", old)

	// a goes the whole way; b only leaves service.
	tl.Observe("a", PodState{Bound: true, GateFalse: true}, at(100))
	tl.Observe("a", PodState{Bound: true, GateFalse: true, SpecNewImage: true}, at(150))
	tl.Observe("a", PodState{Bound: true, GateFalse: true, SpecNewImage: true}, at(170)) // no change: nothing new
	tl.Observe("a", PodState{Bound: true, GateFalse: true, SpecNewImage: true, NewImage: true}, at(1150))
	tl.Observe("a", PodState{Bound: true, GateTrue: true, SpecNewImage: true, NewImage: true}, at(1200))
	tl.Observe("a", PodState{Ready: true, Bound: true, GateTrue: true, SpecNewImage: true, NewImage: true}, at(1230))
	tl.Observe("b", PodState{Bound: true, GateFalse: true}, at(300))

	s := tl.Summary()
	if _, ok := s.Reached[Bound]; ok {
		t.Error("Bound was reached before the change: it must not be timed")
	}
	if _, ok := s.Reached[Created]; ok {
		t.Error("no Pod was created after the change")
	}
	want := map[Milestone]Spread{
		OutOfService:  {N: 2, First: 100 * time.Millisecond, P50: 300 * time.Millisecond, P99: 300 * time.Millisecond, Last: 300 * time.Millisecond},
		ImagePatched:  {N: 1, First: 150 * time.Millisecond, P50: 150 * time.Millisecond, P99: 150 * time.Millisecond, Last: 150 * time.Millisecond},
		BackInService: {N: 1, First: 1200 * time.Millisecond, P50: 1200 * time.Millisecond, P99: 1200 * time.Millisecond, Last: 1200 * time.Millisecond},
		ReadyNew:      {N: 1, First: 1230 * time.Millisecond, P50: 1230 * time.Millisecond, P99: 1230 * time.Millisecond, Last: 1230 * time.Millisecond},
	}
	for m, sp := range want {
		if s.Reached[m] != sp {
			t.Errorf("%s: got %+v, want %+v", m, s.Reached[m], sp)
		}
	}
	if got := s.Stretches[Stretch{ImagePatched, Restarted}]; got.N != 1 || got.P50 != time.Second {
		t.Errorf("image patched to running: got %+v, want one Pod at 1 s", got)
	}
	if got := s.Stretches[Stretch{OutOfService, ReadyNew}]; got.N != 1 || got.P50 != 1130*time.Millisecond {
		t.Errorf("out of service to ready: got %+v, want only a, 1.13 s", got)
	}
}

func TestTimelineRecreate(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tl := NewTimeline(t0)
	tl.Seed("old", PodState{Ready: true, Bound: true})
	tl.Observe("old", PodState{Bound: true, Deleting: true}, at(50))
	tl.Delete("old", at(80))
	tl.Delete("never-seen", at(90)) // a Pod that came and went unseen: nothing to time
	tl.Observe("new", PodState{}, at(100))
	tl.Observe("new", PodState{Bound: true}, at(140))
	tl.Observe("new", PodState{Bound: true, SpecNewImage: true, NewImage: true, Ready: true}, at(200))

	s := tl.Summary()
	for m, d := range map[Milestone]time.Duration{Deleting: 50, Gone: 80, Created: 100, Bound: 140, ReadyNew: 200} {
		if got := s.Reached[m]; got.N != 1 || got.First != d*time.Millisecond {
			t.Errorf("%s: got %+v, want one Pod at %d ms", m, got, d)
		}
	}
	if got := s.Stretches[Stretch{Created, ReadyNew}]; got.P50 != 100*time.Millisecond {
		t.Errorf("created to ready: got %+v, want 100 ms", got)
	}
	var out strings.Builder
	WriteTimeline(&out, "Deployment:", s)
	for _, want := range []string{"| created | 1 | 0.10 | 0.10 | 0.10 | 0.10 |", "| deletion requested → gone | 1 | 0.03 | 0.03 | 0.03 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
