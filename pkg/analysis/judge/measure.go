package judge

import (
	"context"
	"fmt"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// Measurement is a judgement as the analysis package counts it, so a
// compared metric goes through the same tally (failureLimit,
// inconclusiveLimit, consecutiveErrorLimit) as a threshold one: Pass is
// Successful, Fail is Failed, Inconclusive stays Inconclusive. Value is
// the effect when finite, so the measurement history shows it.
func Measurement(r Result) analysis.Measurement {
	m := analysis.Measurement{Message: r.Message}
	switch r.Verdict {
	case Pass:
		m.Phase = analysis.PhaseSuccessful
	case Fail:
		m.Phase = analysis.PhaseFailed
	default:
		m.Phase = analysis.PhaseInconclusive
	}
	if e := r.Effect; r.Verdict != Inconclusive && finiteValue(e) {
		m.Value = &e
	}
	return m
}

// Measure renders queryTemplate for each side (Sides), runs both through
// p, and judges the samples. The two queries run one after the other, a
// few milliseconds apart, and read the same window. A query that fails,
// or an answer that gives no samples, is an Error measurement (counted
// against consecutiveErrorLimit), never a pass.
func Measure(ctx context.Context, p analysis.Provider, queryTemplate string, vars analysis.Vars, c Compare) (Result, analysis.Measurement) {
	canaryVars, stableVars := Sides(vars)
	var sides [2][]float64
	for i, v := range []analysis.Vars{canaryVars, stableVars} {
		name := [2]string{"canary", "stable"}[i]
		q, err := analysis.Render(queryTemplate, v)
		if err != nil {
			return Result{}, analysis.Measurement{Phase: analysis.PhaseError, Message: fmt.Sprintf("%s query: %v", name, err)}
		}
		res, err := p.Query(ctx, q)
		if err != nil {
			return Result{}, analysis.Measurement{Phase: analysis.PhaseError, Message: fmt.Sprintf("%s query failed: %v", name, err)}
		}
		s, err := Samples(res)
		if err != nil {
			return Result{}, analysis.Measurement{Phase: analysis.PhaseError, Message: fmt.Sprintf("%s query: %v", name, err)}
		}
		sides[i] = s
	}
	r := Judge(sides[0], sides[1], c)
	return r, Measurement(r)
}

func finiteValue(v float64) bool { return len(finite([]float64{v})) == 1 }
