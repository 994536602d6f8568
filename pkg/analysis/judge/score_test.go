package judge

import "testing"

func TestDecide(t *testing.T) {
	p := func(name string, w int) Scored { return Scored{Name: name, Verdict: Pass, Weight: w} }
	f := func(name string, w int) Scored { return Scored{Name: name, Verdict: Fail, Weight: w} }
	i := func(name string, w int) Scored { return Scored{Name: name, Verdict: Inconclusive, Weight: w} }
	cases := []struct {
		name    string
		metrics []Scored
		score   int
		want    Decision
	}{
		{"all_pass_promotes", []Scored{p("a", 1), p("b", 2)}, 100, Promote},
		{"weighted_share", []Scored{p("a", 9), f("b", 1)}, 90, Promote},
		{"marginal_holds", []Scored{p("a", 4), f("b", 1)}, 80, Hold},
		{"below_marginal_aborts", []Scored{p("a", 1), f("b", 1)}, 50, Abort},
		{"critical_fail_aborts_whatever_the_score", []Scored{p("a", 100), {Name: "c", Verdict: Fail, Weight: 1, Critical: true}}, 99, Abort},
		{"critical_inconclusive_does_not_abort", []Scored{p("a", 1), {Name: "c", Verdict: Inconclusive, Critical: true}}, 50, Hold},
		{"inconclusive_never_promotes", []Scored{i("a", 1)}, 0, Hold},
		{"inconclusive_and_failures_below_marginal_abort", []Scored{f("a", 1), f("b", 1), i("c", 1)}, 0, Abort},
		{"dry_run_failures_do_not_count", []Scored{p("a", 1), {Name: "d", Verdict: Fail, Critical: true, DryRun: true}}, 100, Promote},
		{"only_dry_run_holds", []Scored{{Name: "d", Verdict: Pass, DryRun: true}}, 0, Hold},
		{"zero_weight_counts_one", []Scored{p("a", 0), f("b", 0)}, 50, Abort},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.metrics, DefaultPass, DefaultMarginal)
			if got.Score != c.score || got.Decision != c.want {
				t.Fatalf("got %+v, want score %d %s", got, c.score, c.want)
			}
			if got.Message == "" {
				t.Error("no message")
			}
		})
	}
}

func TestValidateThresholds(t *testing.T) {
	if err := ValidateThresholds(90, 75); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]int{{101, 75}, {70, 75}, {90, -1}} {
		if ValidateThresholds(bad[0], bad[1]) == nil {
			t.Errorf("accepted pass %d marginal %d", bad[0], bad[1])
		}
	}
}
