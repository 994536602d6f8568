package judge

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func seq(start, step float64, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = start + step*float64(i)
	}
	return v
}

func TestJudge(t *testing.T) {
	stable := seq(100, 1, 10) // 100..109, median 104.5
	cases := []struct {
		name    string
		canary  []float64
		stable  []float64
		compare Compare
		want    Verdict
		msg     string
	}{
		{"equal_passes", seq(100, 1, 10), stable, Compare{Direction: Increase, Tolerance: 0.1, Confidence: 0.95}, Pass, "no significant"},
		{"large_increase_fails", seq(150, 1, 10), stable, Compare{Direction: Increase, Tolerance: 0.25, Confidence: 0.98}, Fail, "tolerance"},
		{"increase_within_tolerance_passes", seq(110, 1, 10), stable, Compare{Direction: Increase, Tolerance: 0.25, Confidence: 0.98}, Pass, "within tolerance"},
		{"decrease_is_not_bad_when_increase_is", seq(50, 1, 10), stable, Compare{Direction: Increase, Tolerance: 0.1, Confidence: 0.95}, Pass, ""},
		{"decrease_fails_when_decrease_is_bad", seq(50, 1, 10), stable, Compare{Direction: Decrease, Tolerance: 0.1, Confidence: 0.95}, Fail, ""},
		{"increase_is_not_bad_when_decrease_is", seq(150, 1, 10), stable, Compare{Direction: Decrease, Tolerance: 0.1, Confidence: 0.95}, Pass, ""},
		{"either_fails_down", seq(50, 1, 10), stable, Compare{Direction: Either, Tolerance: 0.1, Confidence: 0.95}, Fail, ""},
		{"either_fails_up", seq(150, 1, 10), stable, Compare{Direction: Either, Tolerance: 0.1, Confidence: 0.95}, Fail, ""},
		{"too_few_canary_samples_is_inconclusive_even_if_far_worse", seq(1000, 1, 4), stable, Compare{Direction: Increase, Confidence: 0.95}, Inconclusive, "too few"},
		{"no_stable_is_inconclusive", seq(100, 1, 10), nil, Compare{Direction: Increase, Confidence: 0.95}, Inconclusive, "stable 0"},
		{"nan_values_do_not_count", append(seq(100, 1, 4), math.NaN(), math.Inf(1)), stable, Compare{Direction: Increase, Confidence: 0.95}, Inconclusive, "canary 4"},
		{"min_samples_lowered", seq(150, 1, 4), seq(100, 1, 4), Compare{Direction: Increase, Tolerance: 0.1, Confidence: 0.95, MinSamples: 4}, Fail, ""},
		{"errors_from_zero_fail", []float64{0.01, 0.02, 0.01, 0.03, 0.02, 0.01}, []float64{0, 0, 0, 0, 0, 0}, Compare{Direction: Increase, Tolerance: 10, Confidence: 0.95}, Fail, "stable median is 0"},
		{"both_zero_passes", []float64{0, 0, 0, 0, 0}, []float64{0, 0, 0, 0, 0}, Compare{Direction: Increase, Confidence: 0.95}, Pass, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Judge(c.canary, c.stable, c.compare)
			if got.Verdict != c.want {
				t.Fatalf("verdict %s, want %s (%+v)", got.Verdict, c.want, got)
			}
			if !strings.Contains(got.Message, c.msg) {
				t.Errorf("message %q does not say %q", got.Message, c.msg)
			}
			if got.Verdict == Inconclusive && got.P != 1 {
				t.Errorf("inconclusive with p=%v", got.P)
			}
		})
	}
}

func TestJudgeReportsMediansAndEffect(t *testing.T) {
	got := Judge(seq(150, 1, 10), seq(100, 1, 10), Compare{Direction: Increase, Tolerance: 0.25, Confidence: 0.98})
	if got.CanaryMedian != 154.5 || got.StableMedian != 104.5 || got.Shift != 50 {
		t.Fatalf("medians/shift: %+v", got)
	}
	if math.Abs(got.Effect-50/104.5) > 1e-12 {
		t.Fatalf("effect %v, want %v", got.Effect, 50/104.5)
	}
	if got.P >= 0.02 {
		t.Fatalf("p %v", got.P)
	}
}

func TestParseCompare(t *testing.T) {
	c, err := ParseCompare("", "", "")
	if err != nil || c.Direction != Increase || c.Confidence != 0.95 || c.Tolerance != 0 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = ParseCompare("either", "0.25", "0.98")
	if err != nil || c.Direction != Either || c.Tolerance != 0.25 || c.Confidence != 0.98 {
		t.Fatalf("parsed: %+v %v", c, err)
	}
	for _, bad := range [][3]string{{"up", "", ""}, {"", "-1", ""}, {"", "x", ""}, {"", "NaN", ""}, {"", "", "1"}, {"", "", "0"}, {"", "", "98%"}} {
		if _, err := ParseCompare(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("ParseCompare%q accepted", bad)
		} else if !strings.Contains(err.Error(), "compare.") {
			t.Errorf("error %q does not name the field", err)
		}
	}
}

// TestJudgeProperty is the promise, over seeded runs: two samples
// from one distribution pass in at least 95% of runs, and a shift of twice
// the tolerance fails in at least 95%. The samples look like per-Pod
// error ratios of a step with 20 Pods a side and 20% relative noise
// between Pods. With 10 Pods a side the two-sided test (either) finds a
// 2x-tolerance shift in only about 91% of runs: the figures are in
// docs/analysis.md, "How many samples".
func TestJudgeProperty(t *testing.T) {
	const runs = 1000
	c := Compare{Direction: Increase, Tolerance: 0.25, Confidence: 0.98}
	draw := func(r *rand.Rand, mean float64, n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = mean * (1 + 0.2*r.NormFloat64())
		}
		return v
	}
	for _, dir := range []Direction{Increase, Decrease, Either} {
		c.Direction = dir
		sign := 1.0
		if dir == Decrease {
			sign = -1
		}
		var samePass, shiftFail int
		for seed := range uint64(runs) {
			r := rand.New(rand.NewPCG(seed, 37))
			if Judge(draw(r, 0.01, 20), draw(r, 0.01, 20), c).Verdict == Pass {
				samePass++
			}
			if Judge(draw(r, 0.01*(1+sign*2*c.Tolerance), 20), draw(r, 0.01, 20), c).Verdict == Fail {
				shiftFail++
			}
		}
		t.Logf("%s: same distribution passed %d/%d, shift of 2x tolerance failed %d/%d", dir, samePass, runs, shiftFail, runs)
		if samePass < runs*95/100 {
			t.Errorf("%s: same distribution passed only %d/%d", dir, samePass, runs)
		}
		if shiftFail < runs*95/100 {
			t.Errorf("%s: a shift of twice the tolerance failed only %d/%d", dir, shiftFail, runs)
		}
	}
}
