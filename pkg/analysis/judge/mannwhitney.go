package judge

import (
	"errors"
	"math"
	"sort"
)

// Alternative is the hypothesis a Mann-Whitney test is one- or two-sided
// towards, for the first sample (the canary) against the second (stable).
type Alternative string

const (
	// TwoSided: the canary differs from stable, either way.
	TwoSided Alternative = "two-sided"
	// Greater: the canary is stochastically greater than stable.
	Greater Alternative = "greater"
	// Less: the canary is stochastically smaller than stable.
	Less Alternative = "less"
)

// ErrEmpty is returned when either sample is empty.
var ErrEmpty = errors.New("both samples need at least one value")

// UTest is the result of a Mann-Whitney U test.
type UTest struct {
	// U is the U statistic of the first sample (scipy's U1): the number
	// of pairs (x, y) with x > y, ties counting one half.
	U float64
	// P is the p-value for the alternative asked for, in [0, 1].
	P float64
}

// MannWhitney runs the Mann-Whitney U test of x against y with the normal
// approximation, the tie-corrected variance and a continuity correction,
// matching scipy.stats.mannwhitneyu(x, y, alternative=alt,
// method="asymptotic", use_continuity=True). When every value is tied the
// variance is zero and no difference can be shown: P is 1.
// NaN values must be removed by the caller.
func MannWhitney(x, y []float64, alt Alternative) (UTest, error) {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return UTest{}, ErrEmpty
	}
	ranks, tieTerm := rank(x, y)
	var r1 float64
	for i := range n1 {
		r1 += ranks[i]
	}
	fn1, fn2 := float64(n1), float64(n2)
	n := fn1 + fn2
	u1 := r1 - fn1*(fn1+1)/2
	u2 := fn1*fn2 - u1
	mu := fn1 * fn2 / 2
	variance := fn1 * fn2 / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	res := UTest{U: u1, P: 1}
	if variance <= 0 {
		return res, nil
	}
	sd := math.Sqrt(variance)
	// As scipy does: the one-sided "less" is "greater" with U2, and
	// two-sided takes the larger U and doubles the tail.
	var u float64
	switch alt {
	case Greater:
		u = u1
	case Less:
		u = u2
	case TwoSided:
		u = math.Max(u1, u2)
	default:
		return UTest{}, errors.New("alternative must be two-sided, greater or less, not " + string(alt))
	}
	z := (u - mu - 0.5) / sd
	p := normalSF(z)
	if alt == TwoSided {
		p *= 2
	}
	res.P = math.Min(math.Max(p, 0), 1)
	return res, nil
}

// rank gives the mid-ranks (1-based) of x followed by y, and the tie term
// sum(t^3 - t) over groups of t tied values.
func rank(x, y []float64) ([]float64, float64) {
	type item struct {
		v float64
		i int
	}
	all := make([]item, 0, len(x)+len(y))
	for i, v := range x {
		all = append(all, item{v, i})
	}
	for i, v := range y {
		all = append(all, item{v, len(x) + i})
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].v < all[b].v })
	ranks := make([]float64, len(all))
	var tie float64
	for start := 0; start < len(all); {
		end := start + 1
		for end < len(all) && all[end].v == all[start].v {
			end++
		}
		// Positions start..end-1 share the mean of ranks start+1..end.
		mid := float64(start+1+end) / 2
		for k := start; k < end; k++ {
			ranks[all[k].i] = mid
		}
		t := float64(end - start)
		tie += t*t*t - t
		start = end
	}
	return ranks, tie
}

// normalSF is the survival function of the standard normal distribution.
func normalSF(z float64) float64 {
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// HodgesLehmann is the median of all pairwise differences x[i]-y[j]: the
// shift of x relative to y that the rank test measures. It returns 0 for
// an empty sample.
func HodgesLehmann(x, y []float64) float64 {
	if len(x) == 0 || len(y) == 0 {
		return 0
	}
	d := make([]float64, 0, len(x)*len(y))
	for _, a := range x {
		for _, b := range y {
			d = append(d, a-b)
		}
	}
	return Median(d)
}

// Median is the middle value of v (the mean of the two middle values for
// an even count), 0 for an empty v. v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
