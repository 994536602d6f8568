package traffic

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

var testerHeader = v1alpha1.TrafficMatch{Header: &v1alpha1.StringMatch{Name: "x-canary", Value: "1"}}

func TestDecide(t *testing.T) {
	withTraffic := func(w int32, m ...v1alpha1.TrafficMatch) *v1alpha1.RolloutStep {
		return &v1alpha1.RolloutStep{Traffic: ptr.To(w), Matches: m}
	}
	cases := []struct {
		name        string
		in          Input
		weight      int32
		matches     int
		stable, can string
	}{
		{"idle sends all to stable and leaves both Services as git wrote them", Input{Mode: Idle, StableReady: 10, StableRevision: "a", CanaryRevision: "b", Previous: 30}, 0, 0, "", ""},
		{"a rollback moving every Pod: the Services select them all", Input{Mode: Idle, StableReady: 6, StableRevision: "a", CanaryPods: 3, Previous: 0}, 0, 0, "", ""},
		{"the round that starts a release pins both Services before any Pod moves", Input{Mode: Stepping, Step: withTraffic(20), StableReady: 10, StableRevision: "a", CanaryRevision: "b"}, 0, 0, "a", "b"},
		{"a ready step takes its traffic", Input{Mode: Stepping, Step: withTraffic(20, testerHeader), StepReady: true, StableReady: 9, CanaryReady: 1, CanaryPods: 1, Previous: 0, StableRevision: "a", CanaryRevision: "b"}, 20, 1, "a", "b"},
		{"a step waits for its Pods before raising the weight", Input{Mode: Stepping, Step: withTraffic(50), StableReady: 8, CanaryReady: 1, CanaryPods: 2, Previous: 20, StableRevision: "a", CanaryRevision: "b"}, 20, 0, "a", "b"},
		{"matches come with the step, before its weight", Input{Mode: Stepping, Step: withTraffic(50, testerHeader), StableReady: 9, CanaryReady: 1, CanaryPods: 1, StableRevision: "a", CanaryRevision: "b"}, 0, 1, "a", "b"},
		{"no ready canary: no weight, no match", Input{Mode: Stepping, Step: withTraffic(10, testerHeader), StepReady: true, StableReady: 10, CanaryReady: 0, CanaryPods: 1, Previous: 10, StableRevision: "a", CanaryRevision: "b"}, 0, 0, "a", "b"},
		{"a step without traffic follows the ready Pods", Input{Mode: Stepping, Step: &v1alpha1.RolloutStep{}, StepReady: true, StableReady: 7, CanaryReady: 3, CanaryPods: 3, StableRevision: "a", CanaryRevision: "b"}, 30, 0, "a", "b"},
		{"the share rounds up for the canary", Input{Mode: Stepping, Step: &v1alpha1.RolloutStep{}, StepReady: true, StableReady: 2, CanaryReady: 1, CanaryPods: 1, StableRevision: "a", CanaryRevision: "b"}, 34, 0, "a", "b"},
		{"a step that keeps no stable Pod sends all to the ready canary before the stable Pods drain", Input{Mode: Stepping, Step: &v1alpha1.RolloutStep{}, StepKeepsNoStablePod: true, StableReady: 2, CanaryReady: 2, CanaryPods: 2, Previous: 50, StableRevision: "a", CanaryRevision: "b"}, 100, 0, "a", "b"},
		{"a step that keeps no stable Pod, with no ready canary yet: all stays on stable", Input{Mode: Stepping, Step: &v1alpha1.RolloutStep{}, StepKeepsNoStablePod: true, StableReady: 4, CanaryReady: 0, CanaryPods: 1, Previous: 0, StableRevision: "a", CanaryRevision: "b"}, 0, 0, "a", "b"},
		{"a ready step that keeps no stable Pod sends all to the canary whatever its traffic", Input{Mode: Stepping, Step: withTraffic(50), StepReady: true, StepKeepsNoStablePod: true, StableReady: 1, CanaryReady: 3, CanaryPods: 3, Previous: 50, StableRevision: "a", CanaryRevision: "b"}, 100, 0, "a", "b"},
		{"an abort ignores what the step it left would keep", Input{Mode: Aborted, StepKeepsNoStablePod: true, StableReady: 5, CanaryReady: 5, CanaryPods: 5, Previous: 10, StableRevision: "a", CanaryRevision: "b"}, 10, 0, "a", "b"},
		{"no stable Pod left: all to the canary", Input{Mode: Stepping, Step: withTraffic(100), StepReady: false, StableReady: 0, CanaryReady: 10, CanaryPods: 10, Previous: 50, StableRevision: "a", CanaryRevision: "b"}, 100, 0, "a", "b"},
		{"completed leaves both Services as git wrote them: the stable one selects the new revision", Input{Mode: Completed, StableReady: 0, CanaryReady: 10, CanaryPods: 10, Previous: 100, StableRevision: "a", CanaryRevision: "b"}, 0, 0, "", ""},
		{"abort drops matches and keeps a lower weight", Input{Mode: Aborted, StableReady: 5, CanaryReady: 5, CanaryPods: 5, Previous: 10, StableRevision: "a", CanaryRevision: "b"}, 10, 0, "a", "b"},
		{"abort lowers the weight to the canary's ready share", Input{Mode: Aborted, StableReady: 9, CanaryReady: 1, CanaryPods: 1, Previous: 50, StableRevision: "a", CanaryRevision: "b"}, 10, 0, "a", "b"},
		{"abort with no ready Pod keeps the weights", Input{Mode: Aborted, CanaryPods: 2, Previous: 40, StableRevision: "a", CanaryRevision: "b"}, 0, 0, "a", "b"},
		{"abort keeps the revision key while a canary Pod restarts", Input{Mode: Aborted, StableReady: 9, CanaryPods: 1, Previous: 10, StableRevision: "a", CanaryRevision: "b"}, 0, 0, "a", "b"},
		{"an abort that moved every Pod back leaves both Services as git wrote them", Input{Mode: Aborted, StableReady: 10, Previous: 10, StableRevision: "a", CanaryRevision: "b"}, 0, 0, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.in)
			if p.CanaryWeight != tc.weight || len(p.Matches) != tc.matches || p.StableSelects != tc.stable || p.CanarySelects != tc.can {
				t.Fatalf("Decide = weight %d, %d matches, stable selects %q, canary %q (%s); want %d, %d, %q, %q",
					p.CanaryWeight, len(p.Matches), p.StableSelects, p.CanarySelects, p.Why, tc.weight, tc.matches, tc.stable, tc.can)
			}
		})
	}
}

// An abort after any step, with the canary Pods rolling back one at a time
// (each ready under neither Service while it restarts): the stable Pods
// never get more traffic than the larger of what they carried a moment
// before and their share of ready Pods, the canary weight never rises, no
// match is kept, and the weight reaches 0 once no canary Pod is left.
func TestDecide_AbortNeverOverloadsTheStablePods(t *testing.T) {
	for replicas := int32(1); replicas <= 12; replicas++ {
		for canary := int32(1); canary <= replicas; canary++ {
			for _, before := range []int32{0, 1, 5, 10, 33, 50, 90, 100} {
				weight := before
				if canary == replicas {
					weight = 100
				}
				trace := []int32{weight}
				for c := canary; c >= 0; c-- {
					for _, restarting := range []int32{1, 0} {
						if c == 0 && restarting == 1 {
							continue
						}
						cr, sr := c-restarting, replicas-c
						p := Decide(Input{Mode: Aborted, StableReady: sr, CanaryReady: cr, CanaryPods: c, Previous: weight, StableRevision: "a", CanaryRevision: "b"})
						trace = append(trace, p.CanaryWeight)
						if p.CanaryWeight > weight && sr > 0 {
							t.Fatalf("replicas %d canary %d before %d: canary weight rose: %v", replicas, canary, before, trace)
						}
						if sr > 0 {
							share := 100 * sr / (sr + cr)
							if got, bound := 100-p.CanaryWeight, max(100-weight, share); got > bound {
								t.Fatalf("replicas %d canary %d before %d: stable weight %d over %d (%d of %d ready Pods stable): %v", replicas, canary, before, got, bound, sr, sr+cr, trace)
							}
						}
						if len(p.Matches) != 0 {
							t.Fatal("an abort kept matches")
						}
						weight = p.CanaryWeight
					}
				}
				if weight != 0 {
					t.Fatalf("replicas %d canary %d before %d: weight %d after every Pod rolled back: %v", replicas, canary, before, weight, trace)
				}
			}
		}
	}
}

func TestPlanShifted(t *testing.T) {
	if (Plan{}).Shifted() || !(Plan{CanaryWeight: 1}).Shifted() || !(Plan{Matches: []v1alpha1.TrafficMatch{testerHeader}}).Shifted() {
		t.Fatal("Shifted is wrong")
	}
}

func TestPlanAtRest(t *testing.T) {
	cases := []struct {
		name string
		plan Plan
		want bool
	}{
		{"nothing set", Plan{}, true},
		{"a weight", Plan{CanaryWeight: 5}, false},
		{"a match", Plan{Matches: []v1alpha1.TrafficMatch{testerHeader}}, false},
		{"the stable Service pinned at weight 0", Plan{StableSelects: "a"}, false},
		{"the canary Service pinned", Plan{CanarySelects: "b"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.plan.AtRest(); got != tc.want {
				t.Fatalf("AtRest = %v, want %v", got, tc.want)
			}
		})
	}
}
