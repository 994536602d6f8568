package stepanalysis

import (
	"fmt"
	"strings"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

// Judged is one metric of a step as the step's verdict sees it.
type Judged struct {
	Name string
	// Verdict is the metric's tally: this round's when it was measured
	// (its message quotes the measurement), its status phase otherwise.
	Verdict analysis.Verdict
	// DryRun metrics never decide.
	DryRun bool
	// Compared metrics are scored by the judge together; the others
	// (thresholdRange) must each pass.
	Compared bool
	Critical bool
	// Weight in the score; 0 means 1.
	Weight int
}

// StepVerdict is a step's verdict and, when the judge scored its compared
// metrics, the score behind it.
type StepVerdict struct {
	analysis.Verdict
	// Scored says Outcome holds the judge's score: every counted compared
	// metric is decided, or a critical one failed.
	Scored  bool
	Outcome judge.Outcome
}

// Assess decides a step from its metrics' tallies. Threshold metrics
// decide as they always have (analysis.AssessAll: any failed fails the
// step at once, any inconclusive makes it inconclusive). Compared metrics
// are scored together (judge.Decide) once each is decided, since the score
// is a share of all of them; only a critical one that fails aborts at
// once. The judge's outcome maps onto the step's verdict: Promote passes,
// Hold is Inconclusive (the Rollout's inconclusive policy applies), Abort
// fails. A metric still running counts as inconclusive in a score taken
// early for a critical failure: it has not passed.
//
// DryRun metrics are left out. When every metric is dryRun, the step waits
// for them all to finish (so that they are measured) and then passes.
func Assess(metrics []Judged, pass, marginal int) StepVerdict {
	thresholds := map[string]analysis.Verdict{}
	var compared []Judged
	dryRunning := 0
	for _, m := range metrics {
		switch {
		case m.DryRun:
			if !m.Verdict.Phase.Done() {
				dryRunning++
			}
		case m.Compared:
			compared = append(compared, m)
		default:
			thresholds[m.Name] = m.Verdict
		}
	}
	if len(thresholds) == 0 && len(compared) == 0 {
		if dryRunning > 0 {
			return StepVerdict{Verdict: analysis.Verdict{Phase: analysis.VerdictRunning}}
		}
		return StepVerdict{Verdict: analysis.Verdict{Phase: analysis.VerdictPassed, Message: "only dryRun metrics, which never decide"}}
	}

	var parts []analysis.Verdict
	if len(thresholds) > 0 {
		parts = append(parts, analysis.AssessAll(thresholds))
	}
	var out StepVerdict
	if len(compared) > 0 {
		v, scored, outcome := assessCompared(compared, pass, marginal)
		parts = append(parts, v)
		out.Scored, out.Outcome = scored, outcome
	}
	out.Verdict = combine(parts)
	return out
}

// assessCompared scores the compared metrics once they are all decided,
// or at once when a critical one failed.
func assessCompared(metrics []Judged, pass, marginal int) (analysis.Verdict, bool, judge.Outcome) {
	scored := make([]judge.Scored, len(metrics))
	var running []string
	criticalFailed := false
	for i, m := range metrics {
		v := judge.Inconclusive
		switch m.Verdict.Phase {
		case analysis.VerdictPassed:
			v = judge.Pass
		case analysis.VerdictFailed:
			v = judge.Fail
			criticalFailed = criticalFailed || m.Critical
		case analysis.VerdictRunning:
			running = append(running, m.Name)
		}
		scored[i] = judge.Scored{Name: m.Name, Verdict: v, Weight: m.Weight, Critical: m.Critical}
	}
	if len(running) > 0 && !criticalFailed {
		return analysis.Verdict{Phase: analysis.VerdictRunning, Message: "waiting for " + strings.Join(running, ", ")}, false, judge.Outcome{}
	}
	o := judge.Decide(scored, pass, marginal)
	msg := fmt.Sprintf("judge: %s", o.Message)
	if why := describeJudged(metrics, analysis.VerdictFailed, analysis.VerdictInconclusive); why != "" {
		msg += "; " + why
	}
	phase := analysis.VerdictPassed
	switch o.Decision {
	case judge.Abort:
		phase = analysis.VerdictFailed
	case judge.Hold:
		phase = analysis.VerdictInconclusive
	}
	return analysis.Verdict{Phase: phase, Message: msg}, true, o
}

// describeJudged quotes the metrics in the given phases, for the message.
func describeJudged(metrics []Judged, phases ...analysis.VerdictPhase) string {
	var out []string
	for _, m := range metrics {
		for _, p := range phases {
			if m.Verdict.Phase == p {
				msg := m.Verdict.Message
				if msg == "" {
					msg = string(p)
				}
				out = append(out, fmt.Sprintf("metric %s: %s", m.Name, msg))
			}
		}
	}
	return strings.Join(out, "; ")
}

// combine is the step's verdict from its threshold part and its judged
// part: failed if either failed, then inconclusive, then running, passed
// when both passed.
func combine(parts []analysis.Verdict) analysis.Verdict {
	for _, phase := range []analysis.VerdictPhase{analysis.VerdictFailed, analysis.VerdictInconclusive, analysis.VerdictRunning} {
		var msgs []string
		for _, p := range parts {
			if p.Phase == phase {
				msgs = append(msgs, p.Message)
			}
		}
		if len(msgs) > 0 {
			return analysis.Verdict{Phase: phase, Message: strings.Join(msgs, "; ")}
		}
	}
	msgs := make([]string, len(parts))
	for i, p := range parts {
		msgs[i] = p.Message
	}
	return analysis.Verdict{Phase: analysis.VerdictPassed, Message: strings.Join(msgs, "; ")}
}

// judged lists a step's metrics for Assess: each with this round's verdict
// where it was measured, its status phase otherwise.
func judgedMetrics(spec []v1alpha1.Metric, statuses []v1alpha1.MetricStatus, fresh map[string]analysis.Verdict) []Judged {
	out := make([]Judged, len(statuses))
	for i, ms := range statuses {
		v, ok := fresh[ms.Name]
		if !ok {
			v = analysis.Verdict{Phase: analysis.VerdictPhase(ms.Phase)}
		}
		out[i] = Judged{Name: ms.Name, Verdict: v, DryRun: ms.DryRun}
		if i < len(spec) && spec[i].Name == ms.Name {
			m := spec[i]
			out[i].Compared, out[i].Critical, out[i].Weight = m.Compare != nil, m.Critical, int(m.WeightOrDefault())
		}
	}
	return out
}

// SidesWarning says why a step's compare metrics cannot compare canary
// with stable (judge.CheckSides: partition 0 leaves no stable Pod, a
// partition of every replica no canary), naming them; "" when they can or
// the step has none. DryRun metrics are named too: they are shown.
func SidesWarning(metrics []v1alpha1.Metric, replicas, partition int) string {
	var names []string
	for _, m := range metrics {
		if m.Compare != nil {
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	why := judge.CheckSides(replicas, partition)
	if why == "" {
		return ""
	}
	return fmt.Sprintf("metric %s compares canary with stable, but %s: Inconclusive by definition; "+
		"skip it on this step with a per-step metrics override", strings.Join(names, ", "), why)
}

// parseCompare is a metric's compare as the judge reads it.
func parseCompare(c *v1alpha1.CompareSpec) (judge.Compare, error) {
	return judge.ParseCompare(string(c.Direction), c.Tolerance, c.Confidence)
}

// recordComparison shows a compared measurement's figures in the metric's
// status, where `get` and the dashboard read them.
func recordComparison(ms *v1alpha1.MetricStatus, r judge.Result) {
	s := judge.Summarize(r)
	ms.CanaryMedian, ms.StableMedian, ms.Effect, ms.PValue = s.CanaryMedian, s.StableMedian, s.Effect, s.PValue
	ms.Verdict = string(s.Verdict)
}
