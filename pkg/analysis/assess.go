package analysis

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// VerdictPhase is the state of an analysis run for one metric, or for all
// metrics of a step.
type VerdictPhase string

const (
	// VerdictRunning: more measurements are needed.
	VerdictRunning VerdictPhase = "Running"
	// VerdictPassed: Count measurements with a value were taken, at least
	// one was Successful and no limit was broken.
	VerdictPassed VerdictPhase = "Passed"
	// VerdictFailed: more than FailureLimit measurements Failed (or Count
	// was reached without a single Successful one).
	VerdictFailed VerdictPhase = "Failed"
	// VerdictInconclusive: the data cannot decide (too many Inconclusive
	// measurements or too many errors in a row). The rollout's
	// inconclusive policy (Pause, Abort or Promote) applies.
	VerdictInconclusive VerdictPhase = "Inconclusive"
)

// Done reports whether no further measurement can change the verdict.
func (p VerdictPhase) Done() bool { return p != VerdictRunning }

// DefaultConsecutiveErrorLimit is the number of errors in a row tolerated
// when Limits.ConsecutiveErrorLimit is nil: a Prometheus restart or a
// dropped connection should not stop a rollout, a Prometheus that stays
// down should.
const DefaultConsecutiveErrorLimit = 4

// DefaultInconclusiveLimit is the number of inconclusive measurements in a
// row tolerated when Limits.InconclusiveLimit is nil: one early empty
// answer (a series not scraped yet) should not stop a rollout, a canary
// that keeps answering nothing should.
const DefaultInconclusiveLimit = 2

// Limits says how many measurements a run takes and how many bad ones it
// tolerates. Negative values count as 0 and a Count below 1 counts as 1, so
// that no configuration can pass without a measurement.
type Limits struct {
	// Count is the number of measurements with a value (Successful or
	// Failed) after which the run is decided. Errors and tolerated
	// Inconclusive measurements do not count: a flaky backend makes a run
	// longer, never shorter.
	Count int
	// FailureLimit is the number of Failed measurements tolerated; one more
	// fails the run at once.
	FailureLimit int
	// InconclusiveLimit is the number of Inconclusive measurements in a row
	// tolerated; one more makes the run Inconclusive at once. A measurement
	// with a value resets the streak; an error does not, since it is no
	// evidence either. Nil means DefaultInconclusiveLimit.
	InconclusiveLimit *int
	// ConsecutiveErrorLimit is the number of Error measurements in a row
	// tolerated; one more makes the run Inconclusive. Any other measurement
	// resets the streak. Nil means DefaultConsecutiveErrorLimit.
	ConsecutiveErrorLimit *int
}

// Counts tallies the measurements of a run up to the verdict.
type Counts struct {
	Successful   int
	Failed       int
	Inconclusive int
	Error        int
	// ConsecutiveErrors is the current streak of Error measurements.
	ConsecutiveErrors int
	// ConsecutiveInconclusive is the current streak of Inconclusive
	// measurements, not broken by errors.
	ConsecutiveInconclusive int
}

// Taken is the number of measurements counted.
func (c Counts) Taken() int { return c.Successful + c.Failed + c.Inconclusive + c.Error }

// Verdict is the assessed state of a run.
type Verdict struct {
	Phase VerdictPhase
	// Message explains the phase; for a Failed or Inconclusive verdict it
	// quotes the measurement that decided it, for status and events.
	Message string
	Counts  Counts
}

// Assess decides a run from its measurements, oldest first, by counting
// them one by one with Next: the first broken limit decides, so the
// verdict is the one the controller saw when the deciding measurement was
// taken, whatever was appended after it.
//
// After an Inconclusive verdict paused the rollout, resuming should start a
// new run (an empty history): replaying the old one gives the same verdict.
func Assess(measurements []Measurement, limits Limits) Verdict {
	var c Counts
	for _, m := range measurements {
		var v Verdict
		if c, v = Next(c, m, limits); v.Phase.Done() {
			return v
		}
	}
	return running(c, limits)
}

// Next counts one more measurement into the tally of a run that is still
// Running and judges the run. Limits are checked in this order:
//   - Failed beyond FailureLimit → Failed.
//   - Inconclusive in a row beyond InconclusiveLimit → Inconclusive.
//   - Errors in a row beyond ConsecutiveErrorLimit → Inconclusive.
//   - Count measurements with a value → Passed if at least one was
//     Successful, else Failed.
//
// Otherwise the run is Running. A measurement with an unknown phase is
// counted as an Error, never as a success. The tally is all a controller
// needs to keep between measurements, so a restart judges the next
// measurement as it would have been judged without one.
func Next(c Counts, m Measurement, limits Limits) (Counts, Verdict) {
	count := max(limits.Count, 1)
	failureLimit := max(limits.FailureLimit, 0)
	inconclusiveLimit := limitOr(limits.InconclusiveLimit, DefaultInconclusiveLimit)
	errorLimit := limitOr(limits.ConsecutiveErrorLimit, DefaultConsecutiveErrorLimit)

	n := c.Taken() + 1 // measurements are numbered from 1 in messages
	switch m.Phase {
	case PhaseSuccessful:
		c.Successful++
		c.ConsecutiveErrors, c.ConsecutiveInconclusive = 0, 0
	case PhaseFailed:
		c.Failed++
		c.ConsecutiveErrors, c.ConsecutiveInconclusive = 0, 0
		if c.Failed > failureLimit {
			return c, Verdict{Phase: VerdictFailed, Counts: c, Message: fmt.Sprintf(
				"measurement %d failed: %s (%d failed, failureLimit %d)", n, m.Message, c.Failed, failureLimit)}
		}
	case PhaseInconclusive:
		c.Inconclusive++
		c.ConsecutiveInconclusive++
		c.ConsecutiveErrors = 0
		if c.ConsecutiveInconclusive > inconclusiveLimit {
			return c, Verdict{Phase: VerdictInconclusive, Counts: c, Message: fmt.Sprintf(
				"measurement %d inconclusive: %s (%d in a row, inconclusiveLimit %d)", n, m.Message, c.ConsecutiveInconclusive, inconclusiveLimit)}
		}
	default: // PhaseError, and any phase this version does not know
		c.Error++
		c.ConsecutiveErrors++
		if c.ConsecutiveErrors > errorLimit {
			return c, Verdict{Phase: VerdictInconclusive, Counts: c, Message: fmt.Sprintf(
				"%d errors in a row (consecutiveErrorLimit %d), last: measurement %d: %s", c.ConsecutiveErrors, errorLimit, n, describeError(m))}
		}
	}
	if valued := c.Successful + c.Failed; valued >= count {
		if c.Successful == 0 {
			return c, Verdict{Phase: VerdictFailed, Counts: c, Message: fmt.Sprintf(
				"no successful measurement among %d (failureLimit %d lets every one fail)", valued, failureLimit)}
		}
		return c, Verdict{Phase: VerdictPassed, Counts: c, Message: fmt.Sprintf(
			"%d of %d measurements successful (%d failed, failureLimit %d)", c.Successful, valued, c.Failed, failureLimit)}
	}
	return c, running(c, limits)
}

// running describes a run that needs more measurements.
func running(c Counts, limits Limits) Verdict {
	msg := fmt.Sprintf("%d of %d measurements taken", c.Successful+c.Failed, max(limits.Count, 1))
	if c.ConsecutiveErrors > 0 {
		msg += fmt.Sprintf(" (%d errors in a row, consecutiveErrorLimit %d)", c.ConsecutiveErrors, limitOr(limits.ConsecutiveErrorLimit, DefaultConsecutiveErrorLimit))
	}
	if c.ConsecutiveInconclusive > 0 {
		msg += fmt.Sprintf(" (%d inconclusive in a row, inconclusiveLimit %d)", c.ConsecutiveInconclusive, limitOr(limits.InconclusiveLimit, DefaultInconclusiveLimit))
	}
	return Verdict{Phase: VerdictRunning, Counts: c, Message: msg}
}

// limitOr reads an optional limit: nil is the default, negative is 0.
func limitOr(limit *int, def int) int {
	if limit == nil {
		return def
	}
	return max(*limit, 0)
}

func describeError(m Measurement) string {
	if m.Phase != PhaseError {
		return fmt.Sprintf("unknown measurement phase %q: %s", m.Phase, m.Message)
	}
	return m.Message
}

// AssessAll combines the verdicts of a step's metrics: any Failed fails the
// step, else any Inconclusive makes it Inconclusive, else it passes when all
// passed and keeps running otherwise. Failed wins over Inconclusive because
// a value known to be bad is stronger evidence than missing data. The
// message names the deciding metrics in sorted order, so it is stable
// across reconciles. No metrics at all is Inconclusive, never a pass.
func AssessAll(perMetric map[string]Verdict) Verdict {
	if len(perMetric) == 0 {
		return Verdict{Phase: VerdictInconclusive, Message: "no metrics to assess"}
	}
	names := make([]string, 0, len(perMetric))
	for name := range perMetric {
		names = append(names, name)
	}
	slices.Sort(names)

	var total Counts
	byPhase := map[VerdictPhase][]string{}
	for _, name := range names {
		v := perMetric[name]
		total.Successful += v.Counts.Successful
		total.Failed += v.Counts.Failed
		total.Inconclusive += v.Counts.Inconclusive
		total.Error += v.Counts.Error
		total.ConsecutiveErrors = max(total.ConsecutiveErrors, v.Counts.ConsecutiveErrors)
		phase := v.Phase
		switch phase {
		case VerdictPassed, VerdictFailed, VerdictInconclusive, VerdictRunning:
		default:
			// An unknown phase cannot be trusted to mean a pass.
			phase = VerdictInconclusive
		}
		byPhase[phase] = append(byPhase[phase], name)
	}

	describe := func(names []string) string {
		parts := make([]string, 0, len(names))
		for _, name := range names {
			msg := perMetric[name].Message
			if msg == "" {
				msg = string(perMetric[name].Phase)
			}
			parts = append(parts, fmt.Sprintf("metric %s: %s", name, msg))
		}
		return strings.Join(parts, "; ")
	}
	switch {
	case len(byPhase[VerdictFailed]) > 0:
		return Verdict{Phase: VerdictFailed, Counts: total, Message: describe(byPhase[VerdictFailed])}
	case len(byPhase[VerdictInconclusive]) > 0:
		return Verdict{Phase: VerdictInconclusive, Counts: total, Message: describe(byPhase[VerdictInconclusive])}
	case len(byPhase[VerdictRunning]) > 0:
		return Verdict{Phase: VerdictRunning, Counts: total, Message: "waiting for " + strings.Join(byPhase[VerdictRunning], ", ")}
	default:
		return Verdict{Phase: VerdictPassed, Counts: total, Message: fmt.Sprintf("all %d metrics passed", len(names))}
	}
}

// NextMeasurementAt returns when the measurement after the one taken at last
// is due; the caller compares it with its own clock (due when
// !now.Before(next)) and requeues for the difference. A zero last (no
// measurement yet) or a non-positive interval means due at once, which is
// returned as last itself.
func NextMeasurementAt(last time.Time, interval time.Duration) time.Time {
	if last.IsZero() || interval <= 0 {
		return last
	}
	return last.Add(interval)
}
