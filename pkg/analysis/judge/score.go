package judge

import (
	"fmt"
	"math"
)

// Default score thresholds, Kayenta's and Argo Rollouts' usual values.
const (
	DefaultPass     = 90
	DefaultMarginal = 75
)

// Scored is one metric as the score sees it.
type Scored struct {
	Name     string
	Verdict  Verdict
	Weight   int // 0 means 1
	Critical bool
	// DryRun metrics are measured and shown but never count.
	DryRun bool
}

// Decision is what the score means for the step.
type Decision string

const (
	// Promote: the score is at or above pass.
	Promote Decision = "Promote"
	// Hold: the score is between marginal and pass, or below marginal
	// only because of inconclusive metrics; the rollout's inconclusive
	// policy applies.
	Hold Decision = "Inconclusive"
	// Abort: a critical metric failed, or failures alone put the score
	// below marginal.
	Abort Decision = "Abort"
)

// Outcome is the step's judgement.
type Outcome struct {
	// Score is 100 * the weight of passing metrics / the weight of all
	// counted (non-dryRun) metrics, rounded down. Inconclusive metrics
	// count in the total but not as passing.
	Score    int
	Decision Decision
	Message  string
}

// Decide scores the metrics against pass and marginal (0 <= marginal <=
// pass <= 100; use ValidateThresholds). A critical metric that fails
// aborts at once. Below marginal aborts only when the failures alone
// explain it: a score pulled down by inconclusive metrics is held, never
// promoted and never aborted for missing data. No counted metric: held.
func Decide(metrics []Scored, pass, marginal int) Outcome {
	var total, passed, failed int
	critical := ""
	for _, m := range metrics {
		if m.DryRun {
			continue
		}
		w := max(m.Weight, 1)
		total += w
		switch m.Verdict {
		case Pass:
			passed += w
		case Fail:
			failed += w
			if m.Critical && critical == "" {
				critical = m.Name
			}
		}
	}
	if total == 0 {
		return Outcome{Decision: Hold, Message: "no compared metric counts (all are dryRun)"}
	}
	s := int(math.Floor(100 * float64(passed) / float64(total)))
	// The best the score could be if every inconclusive metric passed.
	best := int(math.Floor(100 * float64(total-failed) / float64(total)))
	switch {
	case critical != "":
		return Outcome{Score: s, Decision: Abort, Message: fmt.Sprintf("critical metric %q failed", critical)}
	case s >= pass:
		return Outcome{Score: s, Decision: Promote, Message: fmt.Sprintf("score %d >= pass %d", s, pass)}
	case s >= marginal:
		return Outcome{Score: s, Decision: Hold, Message: fmt.Sprintf("score %d is marginal (%d <= score < %d)", s, marginal, pass)}
	case best >= marginal:
		return Outcome{Score: s, Decision: Hold, Message: fmt.Sprintf("score %d < marginal %d because of inconclusive metrics", s, marginal)}
	default:
		return Outcome{Score: s, Decision: Abort, Message: fmt.Sprintf("score %d < marginal %d", s, marginal)}
	}
}

// ValidateThresholds checks judge.pass and judge.marginal.
func ValidateThresholds(pass, marginal int) error {
	if pass < 0 || pass > 100 || marginal < 0 || marginal > pass {
		return fmt.Errorf("judge needs 0 <= marginal <= pass <= 100, got pass %d, marginal %d", pass, marginal)
	}
	return nil
}
