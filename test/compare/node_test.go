package compare

import (
	"strings"
	"testing"
	"time"
)

func TestUnavailability(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	old := PodState{Ready: true}
	for _, tc := range []struct {
		name     string
		run      func(u *Unavailability)
		end      time.Duration
		wantN    int
		wantP50  time.Duration
		wantLast time.Duration
	}{{
		name: "in place: each Pod leaves and comes back",
		run: func(u *Unavailability) {
			u.Seed("a", old)
			u.Seed("b", old)
			u.Observe("a", PodState{GateFalse: true}, at(1))
			u.Observe("a", PodState{Ready: true, NewImage: true}, at(3))
			u.Observe("b", PodState{}, at(3))
			u.Observe("b", PodState{Ready: true, NewImage: true}, at(7))
		},
		wantN: 2, wantP50: 4 * time.Second, wantLast: 4 * time.Second,
	}, {
		name: "recreate with a surge: the new Pod is ready before the old one leaves",
		run: func(u *Unavailability) {
			u.Seed("old", old)
			u.Observe("new", PodState{}, at(1))
			u.Observe("new", PodState{Ready: true, NewImage: true}, at(2))
			u.Observe("old", PodState{Ready: true, Deleting: true}, at(3))
			u.Delete("old", at(9))
		},
		wantN: 1, wantP50: 0, wantLast: 0,
	}, {
		name: "recreate without a surge: the old Pod's slot fills when its replacement is ready",
		run: func(u *Unavailability) {
			u.Seed("old", old)
			u.Delete("old", at(2))
			u.Observe("new", PodState{Ready: true, NewImage: true}, at(5))
		},
		wantN: 1, wantP50: 3 * time.Second, wantLast: 3 * time.Second,
	}, {
		name: "a slot never filled counts until the end; a Pod new before the change never empties one",
		run: func(u *Unavailability) {
			u.Seed("old", old)
			u.Seed("already-new", PodState{Ready: true, NewImage: true})
			u.Observe("already-new", PodState{}, at(1))
			u.Observe("old", PodState{}, at(4))
		},
		end:   10 * time.Second,
		wantN: 1, wantP50: 6 * time.Second, wantLast: 6 * time.Second,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			u := NewUnavailability(start)
			tc.run(u)
			got := u.Spread(tc.end)
			if got.N != tc.wantN || got.P50 != tc.wantP50 || got.Last != tc.wantLast {
				t.Errorf("Spread = %+v, want N %d, p50 %s, last %s", got, tc.wantN, tc.wantP50, tc.wantLast)
			}
		})
	}
}

func TestWriteNodeTableAndSVG(t *testing.T) {
	results := []NodeResult{
		{Name: "Stepwise CloneSet", Pods: 40, Wall: 20 * time.Second, FirstReady: 3 * time.Second, Unavailable: Spread{P50: 3 * time.Second, P99: 5 * time.Second}, Requests: 1000},
		{Name: "Deployment", Pods: 40, Wall: 30 * time.Second, FirstReady: -1, IPsChanged: 40, SandboxesCreated: 40, Failed: 7, Requests: 990},
	}
	var table strings.Builder
	WriteNodeTable(&table, "case", results)
	for _, want := range []string{"| Stepwise CloneSet | 40 | 20.0 s | 3.0 s | 3.0 / 5.0 s | 0 | 0 | 0 | 0 | 0 of 1000 |", "| Deployment | 40 | 30.0 s | never |", "| 7 of 990 |"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var svg strings.Builder
	if err := WriteNodeSVG(&svg, "title", []NodeCase{{Title: "image on the node", Results: results}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "image on the node", "Deployment", "30.0 s", "</svg>"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}
