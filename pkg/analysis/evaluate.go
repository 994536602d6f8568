package analysis

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Phase is the outcome of one measurement.
type Phase string

const (
	// PhaseSuccessful: the query gave one finite value within the threshold.
	PhaseSuccessful Phase = "Successful"
	// PhaseFailed: the query gave one finite value outside the threshold.
	PhaseFailed Phase = "Failed"
	// PhaseInconclusive: the query answered, but not with a single finite
	// value (NaN, ±Inf, no series, several series, a non-instant type).
	PhaseInconclusive Phase = "Inconclusive"
	// PhaseError: no answer (the query failed) or the threshold is invalid.
	PhaseError Phase = "Error"
)

// Threshold is the inclusive range [Min, Max] a value must fall in; a nil
// bound is open. At least one bound must be set.
type Threshold struct {
	Min *float64
	Max *float64
}

// Validate reports a threshold that could never judge a value correctly.
// Callers should validate when the metric is defined; Evaluate checks again
// and returns an Error measurement, never a pass.
func (t Threshold) Validate() error {
	if t.Min == nil && t.Max == nil {
		// A range open at both ends passes every value, so a typo in the
		// spec would silently promote anything.
		return errors.New("invalid threshold: neither min nor max is set")
	}
	if t.Min != nil && !isFinite(*t.Min) {
		return fmt.Errorf("invalid threshold: min %v is not a finite number", *t.Min)
	}
	if t.Max != nil && !isFinite(*t.Max) {
		return fmt.Errorf("invalid threshold: max %v is not a finite number", *t.Max)
	}
	if t.Min != nil && t.Max != nil && *t.Min > *t.Max {
		lo, hi := formatPair(*t.Min, *t.Max)
		return fmt.Errorf("invalid threshold: min %s is above max %s", lo, hi)
	}
	return nil
}

// Measurement is the judged outcome of one query.
type Measurement struct {
	Phase Phase
	// Value is set when the query produced exactly one finite number, whether
	// it passed or failed. It is a pointer so that "no value" cannot be
	// mistaken for 0, and it is never NaN or ±Inf, so it can be stored in a
	// JSON status (encoding/json rejects those).
	Value *float64
	// Message explains the phase in words meant for status and events, such
	// as "value 0.2 above max 0.01".
	Message string
}

// Evaluate judges a query result against a threshold.
//
// Only a scalar or a vector with exactly one series is a value. Everything
// else is Inconclusive with a message saying what came back, and an invalid
// threshold is an Error: Evaluate never returns PhaseSuccessful without a
// finite Value.
func Evaluate(result Result, threshold Threshold) Measurement {
	if err := threshold.Validate(); err != nil {
		return Measurement{Phase: PhaseError, Message: err.Error()}
	}
	v, reason, ok := singleValue(result)
	if !ok {
		return Measurement{Phase: PhaseInconclusive, Message: reason}
	}
	value := v
	m := Measurement{Value: &value}
	switch {
	case threshold.Min != nil && v < *threshold.Min:
		m.Phase = PhaseFailed
		sv, sb := formatPair(v, *threshold.Min)
		m.Message = fmt.Sprintf("value %s below min %s", sv, sb)
	case threshold.Max != nil && v > *threshold.Max:
		m.Phase = PhaseFailed
		sv, sb := formatPair(v, *threshold.Max)
		m.Message = fmt.Sprintf("value %s above max %s", sv, sb)
	default:
		m.Phase = PhaseSuccessful
		m.Message = fmt.Sprintf("value %s within %s", formatFloat(v), describeRange(threshold))
	}
	return m
}

// singleValue extracts the one finite number of a result, or says why there
// is none.
func singleValue(result Result) (float64, string, bool) {
	var v float64
	switch result.Kind {
	case KindScalar:
		if len(result.Samples) != 1 {
			return 0, fmt.Sprintf("scalar result has %d values, want 1", len(result.Samples)), false
		}
		v = result.Samples[0].Value
	case KindVector:
		switch n := result.SeriesCount(); {
		case n == 0 || len(result.Samples) == 0:
			return 0, "query returned no series (empty vector): no data", false
		case n == 1:
			v = result.Samples[0].Value
		default:
			return 0, fmt.Sprintf("query returned %d series, want 1: aggregate them (for example with sum)", n), false
		}
	default:
		typ := result.Type
		if typ == "" {
			typ = string(result.Kind)
		}
		if typ == "" {
			typ = "an unknown type"
		}
		return 0, fmt.Sprintf("query returned %s, want a scalar or a one-element vector", typ), false
	}
	switch {
	case math.IsNaN(v):
		return 0, "value is NaN (for example 0/0: no traffic)", false
	case math.IsInf(v, 1):
		return 0, "value is +Inf", false
	case math.IsInf(v, -1):
		return 0, "value is -Inf", false
	}
	return v, "", true
}

func describeRange(t Threshold) string {
	switch {
	case t.Min != nil && t.Max != nil:
		lo, hi := formatPair(*t.Min, *t.Max)
		return fmt.Sprintf("[%s, %s]", lo, hi)
	case t.Min != nil:
		return "min " + formatFloat(*t.Min)
	default:
		return "max " + formatFloat(*t.Max)
	}
}

func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// formatFloat keeps messages short: six significant digits are plenty for a
// human reading status; the exact number stays in Measurement.Value.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }

// formatPair formats a value and the bound it is compared with. When the
// short forms would look equal ("value 0.01 above max 0.01"), both are
// printed in full so the message never contradicts itself.
func formatPair(a, b float64) (string, string) {
	sa, sb := formatFloat(a), formatFloat(b)
	if sa == sb && a != b {
		return strconv.FormatFloat(a, 'g', -1, 64), strconv.FormatFloat(b, 'g', -1, 64)
	}
	return sa, sb
}
