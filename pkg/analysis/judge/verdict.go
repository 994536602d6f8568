package judge

import (
	"fmt"
	"math"
	"strconv"
)

// Direction is the way a metric gets worse: the judge only fails a canary
// that moves that way.
type Direction string

const (
	// Increase: higher is worse (errors, latency).
	Increase Direction = "increase"
	// Decrease: lower is worse (throughput, success ratio).
	Decrease Direction = "decrease"
	// Either: any change beyond the tolerance is worse.
	Either Direction = "either"
)

// DefaultMinSamples is the fewest values per side the judge decides on.
// Below it the normal approximation is poor and no difference can reach
// usual confidences anyway, so the metric is Inconclusive.
const DefaultMinSamples = 5

// Compare is a metric's comparison rule, parsed.
type Compare struct {
	Direction Direction
	// Tolerance is the largest relative effect (shift / stable median)
	// in the bad direction that still passes, >= 0.
	Tolerance float64
	// Confidence is 1 minus the significance level of the test, in (0, 1).
	Confidence float64
	// MinSamples per side; 0 means DefaultMinSamples.
	MinSamples int
}

// ParseCompare parses the API's strings. Empty direction means Increase,
// empty confidence 0.95, empty tolerance 0; the messages name the field.
func ParseCompare(direction, tolerance, confidence string) (Compare, error) {
	c := Compare{Direction: Direction(direction), Confidence: 0.95}
	switch c.Direction {
	case "":
		c.Direction = Increase
	case Increase, Decrease, Either:
	default:
		return Compare{}, fmt.Errorf("compare.direction must be increase, decrease or either, not %q", direction)
	}
	if tolerance != "" {
		t, err := strconv.ParseFloat(tolerance, 64)
		if err != nil || math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
			return Compare{}, fmt.Errorf("compare.tolerance must be a number >= 0 (0.25 is 25%% of the stable median), not %q", tolerance)
		}
		c.Tolerance = t
	}
	if confidence != "" {
		v, err := strconv.ParseFloat(confidence, 64)
		if err != nil || !(v > 0 && v < 1) {
			return Compare{}, fmt.Errorf("compare.confidence must be a number strictly between 0 and 1 (for example 0.98), not %q", confidence)
		}
		c.Confidence = v
	}
	return c, nil
}

// Verdict of one compared metric.
type Verdict string

const (
	// Pass: no significant, large enough change in the bad direction.
	Pass Verdict = "Pass"
	// Fail: the canary is significantly and materially worse.
	Fail Verdict = "Fail"
	// Inconclusive: too few samples on a side; never a pass.
	Inconclusive Verdict = "Inconclusive"
)

// Result is the judge's reading of one metric, what status shows.
type Result struct {
	Verdict      Verdict
	CanaryMedian float64
	StableMedian float64
	// Shift is the Hodges-Lehmann shift canary - stable, in the metric's unit.
	Shift float64
	// Effect is Shift relative to the stable median (0.25 = 25% higher).
	// With a stable median of 0 it is 0 when Shift is 0 and ±Inf
	// otherwise: any shift from nothing is unbounded relative to it.
	Effect float64
	// P is the p-value of the test in the bad direction (two-sided for
	// Either); 1 when inconclusive.
	P float64
	// CanaryN and StableN are the sample counts.
	CanaryN, StableN int
	// Message says why, in a sentence for status and Events.
	Message string
}

// Judge compares the canary samples with the stable samples under c.
// NaN and ±Inf values are dropped first (a Pod with no traffic has no rate).
func Judge(canary, stable []float64, c Compare) Result {
	canary, stable = finite(canary), finite(stable)
	r := Result{P: 1, CanaryN: len(canary), StableN: len(stable),
		CanaryMedian: Median(canary), StableMedian: Median(stable)}
	minN := c.MinSamples
	if minN <= 0 {
		minN = DefaultMinSamples
	}
	if len(canary) < minN || len(stable) < minN {
		r.Verdict = Inconclusive
		r.Message = fmt.Sprintf("too few samples to compare: canary %d, stable %d, at least %d each", len(canary), len(stable), minN)
		return r
	}
	r.Shift = HodgesLehmann(canary, stable)
	r.Effect = relative(r.Shift, r.StableMedian)
	alt := TwoSided
	switch c.Direction {
	case Increase, "":
		alt = Greater
	case Decrease:
		alt = Less
	}
	t, err := MannWhitney(canary, stable, alt)
	if err != nil {
		r.Verdict = Inconclusive
		r.Message = err.Error()
		return r
	}
	r.P = t.P
	alpha := 1 - c.Confidence
	significant := t.P < alpha
	var large bool
	switch c.Direction {
	case Decrease:
		large = r.Effect < -c.Tolerance
	case Either:
		large = math.Abs(r.Effect) > c.Tolerance
	default:
		large = r.Effect > c.Tolerance
	}
	switch {
	case significant && large:
		r.Verdict = Fail
		r.Message = fmt.Sprintf("canary differs from stable by %s (tolerance %s) with p=%.3g < %.3g", pct(r.Effect), pct(c.Tolerance), t.P, alpha)
	case significant:
		r.Verdict = Pass
		r.Message = fmt.Sprintf("significant difference (p=%.3g) of %s, within tolerance %s", t.P, pct(r.Effect), pct(c.Tolerance))
	default:
		r.Verdict = Pass
		r.Message = fmt.Sprintf("no significant difference in the bad direction (p=%.3g >= %.3g), effect %s", t.P, alpha, pct(r.Effect))
	}
	return r
}

func relative(shift, base float64) float64 {
	if base == 0 {
		switch {
		case shift > 0:
			return math.Inf(1)
		case shift < 0:
			return math.Inf(-1)
		}
		return 0
	}
	return shift / math.Abs(base)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "?"
	}
	if math.IsInf(v, 0) {
		if v > 0 {
			return "+inf% (stable median is 0)"
		}
		return "-inf% (stable median is 0)"
	}
	return fmt.Sprintf("%+.1f%%", v*100)
}

func finite(v []float64) []float64 {
	out := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			out = append(out, x)
		}
	}
	return out
}
