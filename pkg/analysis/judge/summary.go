package judge

import (
	"fmt"
	"math"
	"strconv"
)

// Summary is a Result as status keeps it: numbers as strings (the API
// holds no floats), 6 significant digits, "+Inf"/"-Inf" for an effect
// from a stable median of 0, and the sample counts for the figure.
type Summary struct {
	Verdict      Verdict
	CanaryMedian string
	StableMedian string
	Effect       string
	PValue       string
	CanaryN      int
	StableN      int
}

// Summarize is r for status.
func Summarize(r Result) Summary {
	return Summary{Verdict: r.Verdict, CanaryMedian: num(r.CanaryMedian), StableMedian: num(r.StableMedian),
		Effect: num(r.Effect), PValue: num(r.P), CanaryN: r.CanaryN, StableN: r.StableN}
}

// Result reads a Summary back, for Figure on the dashboard; a field that
// does not parse reads as NaN, which Figure leaves out.
func (s Summary) Result() Result {
	return Result{Verdict: s.Verdict, CanaryMedian: parse(s.CanaryMedian), StableMedian: parse(s.StableMedian),
		Effect: parse(s.Effect), P: parse(s.PValue), CanaryN: s.CanaryN, StableN: s.StableN}
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func parse(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// Line is a Summary in one line, for `kubectl stepwise get` and Events:
// "canary 0.0419 vs stable 0.00987 (n=20/20), effect +322.2%, p=3.4e-08: Fail";
// the counts are left out when unknown (status does not keep them).
func (s Summary) Line() string {
	r := s.Result()
	n := ""
	if s.CanaryN > 0 || s.StableN > 0 {
		n = fmt.Sprintf(" (n=%d/%d)", s.CanaryN, s.StableN)
	}
	return fmt.Sprintf("canary %s vs stable %s%s, effect %s, p=%s: %s",
		short(r.CanaryMedian), short(r.StableMedian), n, pct(r.Effect), short(r.P), s.Verdict)
}
