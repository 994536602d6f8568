package analysis

import (
	"strings"
	"testing"
	"time"
)

func intp(i int) *int { return &i }

// seq builds measurements from a compact string: S Successful, F Failed,
// I Inconclusive, E Error, ? a phase this version does not know.
func seq(s string) []Measurement {
	out := make([]Measurement, 0, len(s))
	for i, c := range s {
		m := Measurement{Message: "m" + string(rune('0'+i%10))}
		switch c {
		case 'S':
			m.Phase, m.Value = PhaseSuccessful, ptr(0.001)
		case 'F':
			m.Phase, m.Value = PhaseFailed, ptr(0.2)
			m.Message = "value 0.2 above max 0.01"
		case 'I':
			m.Phase = PhaseInconclusive
			m.Message = "value is NaN"
		case 'E':
			m.Phase = PhaseError
			m.Message = "connection refused"
		case '?':
			m.Phase = "Surprising"
		}
		out = append(out, m)
	}
	return out
}

func TestAssess(t *testing.T) {
	five := Limits{Count: 5, FailureLimit: 1}
	tests := []struct {
		name         string
		measurements string
		limits       Limits
		want         VerdictPhase
		wantMessage  string // substring
		wantCounts   *Counts
	}{
		{name: "no measurements yet", measurements: "", limits: five, want: VerdictRunning, wantMessage: "0 of 5 measurements taken"},
		{name: "some successful, need more", measurements: "SSS", limits: five, want: VerdictRunning, wantMessage: "3 of 5"},
		{name: "count successful passes", measurements: "SSSSS", limits: five, want: VerdictPassed, wantMessage: "5 of 5 measurements successful",
			wantCounts: &Counts{Successful: 5}},
		{name: "failures up to the limit still pass", measurements: "SFSSS", limits: five, want: VerdictPassed, wantMessage: "4 of 5 measurements successful (1 failed, failureLimit 1)"},
		{name: "failure beyond the limit fails at once", measurements: "SFF", limits: five, want: VerdictFailed,
			wantMessage: "measurement 3 failed: value 0.2 above max 0.01 (2 failed, failureLimit 1)"},
		{name: "failureLimit 0 fails on the first failure", measurements: "SSF", limits: Limits{Count: 5}, want: VerdictFailed, wantMessage: "measurement 3 failed"},
		{name: "the first broken limit decides, later measurements are ignored", measurements: "FFSSSSS", limits: five, want: VerdictFailed, wantMessage: "measurement 2 failed"},
		{name: "passed verdict is kept when more measurements follow", measurements: "SSSSSFF", limits: five, want: VerdictPassed},
		{name: "two inconclusive in a row are tolerated by default", measurements: "SII", limits: five, want: VerdictRunning,
			wantMessage: "1 of 5 measurements taken (2 inconclusive in a row, inconclusiveLimit 2)"},
		{name: "a third inconclusive in a row decides by default", measurements: "SIII", limits: five, want: VerdictInconclusive,
			wantMessage: "measurement 4 inconclusive: value is NaN (3 in a row, inconclusiveLimit 2)"},
		{name: "inconclusiveLimit 0 makes the first inconclusive decide", measurements: "I", limits: Limits{Count: 5, InconclusiveLimit: intp(0)}, want: VerdictInconclusive,
			wantMessage: "measurement 1 inconclusive: value is NaN (1 in a row, inconclusiveLimit 0)"},
		{name: "a value resets the inconclusive streak", measurements: "IISIISIIS", limits: five, want: VerdictRunning,
			wantCounts: &Counts{Successful: 3, Inconclusive: 6}},
		{name: "errors do not reset the inconclusive streak", measurements: "IEIEI", limits: five, want: VerdictInconclusive,
			wantMessage: "measurement 5 inconclusive"},
		{name: "a canary that keeps answering nothing never passes", measurements: "IIIIIIII", limits: Limits{Count: 1, InconclusiveLimit: intp(100)}, want: VerdictRunning},
		{name: "tolerated inconclusive does not count towards count", measurements: "SISSS", limits: Limits{Count: 5, InconclusiveLimit: intp(1)}, want: VerdictRunning, wantMessage: "4 of 5"},
		{name: "tolerated inconclusive then pass", measurements: "SISSSS", limits: Limits{Count: 5, InconclusiveLimit: intp(1)}, want: VerdictPassed,
			wantCounts: &Counts{Successful: 5, Inconclusive: 1}},
		{name: "inconclusive in a row beyond its limit", measurements: "SISII", limits: Limits{Count: 5, InconclusiveLimit: intp(1)}, want: VerdictInconclusive, wantMessage: "measurement 5 inconclusive"},
		{name: "failure beats a later inconclusive", measurements: "FI", limits: Limits{Count: 5}, want: VerdictFailed},
		{name: "inconclusive beats a later failure", measurements: "IF", limits: Limits{Count: 5, InconclusiveLimit: intp(0)}, want: VerdictInconclusive},
		{name: "errors up to the default limit keep running", measurements: "SEEEE", limits: five, want: VerdictRunning,
			wantMessage: "1 of 5 measurements taken (4 errors in a row, consecutiveErrorLimit 4)"},
		{name: "errors beyond the default limit are inconclusive", measurements: "SEEEEE", limits: five, want: VerdictInconclusive,
			wantMessage: "5 errors in a row (consecutiveErrorLimit 4), last: measurement 6: connection refused",
			wantCounts:  &Counts{Successful: 1, Error: 5, ConsecutiveErrors: 5}},
		{name: "a measurement with a value resets the error streak", measurements: "EEEESEEEES", limits: five, want: VerdictRunning,
			wantCounts: &Counts{Successful: 2, Error: 8}},
		{name: "an inconclusive tolerated measurement resets the error streak", measurements: "EEEEIEEEE", limits: Limits{Count: 5, InconclusiveLimit: intp(1)}, want: VerdictRunning},
		{name: "errors do not count towards count", measurements: "SESESESES", limits: five, want: VerdictPassed, wantCounts: &Counts{Successful: 5, Error: 4}},
		{name: "all errors never pass", measurements: "EEEEE", limits: Limits{Count: 1}, want: VerdictInconclusive},
		{name: "explicit error limit", measurements: "EE", limits: Limits{Count: 5, ConsecutiveErrorLimit: intp(1)}, want: VerdictInconclusive, wantMessage: "2 errors in a row (consecutiveErrorLimit 1)"},
		{name: "error limit 0 makes the first error inconclusive", measurements: "SE", limits: Limits{Count: 5, ConsecutiveErrorLimit: intp(0)}, want: VerdictInconclusive},
		{name: "negative error limit counts as 0", measurements: "E", limits: Limits{Count: 5, ConsecutiveErrorLimit: intp(-3)}, want: VerdictInconclusive},
		{name: "unknown phase counts as an error, never a success", measurements: "?", limits: Limits{Count: 1, ConsecutiveErrorLimit: intp(0)}, want: VerdictInconclusive,
			wantMessage: `unknown measurement phase "Surprising"`},
		{name: "unknown phases cannot reach count", measurements: "??", limits: Limits{Count: 1}, want: VerdictRunning},
		{name: "count 0 counts as 1: no pass without a measurement", measurements: "", limits: Limits{}, want: VerdictRunning, wantMessage: "0 of 1"},
		{name: "count 0 passes after one success", measurements: "S", limits: Limits{}, want: VerdictPassed},
		{name: "negative failure limit counts as 0", measurements: "F", limits: Limits{Count: 3, FailureLimit: -1}, want: VerdictFailed},
		{name: "count reached with only failures is failed, never passed", measurements: "FFF", limits: Limits{Count: 3, FailureLimit: 5}, want: VerdictFailed,
			wantMessage: "no successful measurement among 3"},
		{name: "failures within a generous limit with one success pass", measurements: "FFS", limits: Limits{Count: 3, FailureLimit: 5}, want: VerdictPassed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Assess(seq(tt.measurements), tt.limits)
			if got.Phase != tt.want {
				t.Errorf("Assess(%s) = %s (%q), want %s", tt.measurements, got.Phase, got.Message, tt.want)
			}
			if !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.wantMessage)
			}
			if tt.wantCounts != nil && got.Counts != *tt.wantCounts {
				t.Errorf("Counts = %+v, want %+v", got.Counts, *tt.wantCounts)
			}
		})
	}
}

// TestAssessReplay appends measurements one by one, as the controller does
// across reconciles, and checks the verdict after each one and that a
// decided verdict never changes afterwards.
func TestAssessReplay(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		// steps[i] is the measurement appended at step i and the verdict
		// expected after it.
		steps []struct {
			m    string
			want VerdictPhase
		}
	}{
		{
			name:   "healthy canary",
			limits: Limits{Count: 3, FailureLimit: 1},
			steps: []struct {
				m    string
				want VerdictPhase
			}{{"S", VerdictRunning}, {"F", VerdictRunning}, {"E", VerdictRunning}, {"S", VerdictPassed}, {"F", VerdictPassed}},
		},
		{
			name:   "bad canary",
			limits: Limits{Count: 3, FailureLimit: 1},
			steps: []struct {
				m    string
				want VerdictPhase
			}{{"S", VerdictRunning}, {"F", VerdictRunning}, {"F", VerdictFailed}, {"S", VerdictFailed}},
		},
		{
			name:   "prometheus down",
			limits: Limits{Count: 3, ConsecutiveErrorLimit: intp(2)},
			steps: []struct {
				m    string
				want VerdictPhase
			}{{"S", VerdictRunning}, {"E", VerdictRunning}, {"E", VerdictRunning}, {"E", VerdictInconclusive}, {"S", VerdictInconclusive}},
		},
		{
			name:   "no traffic",
			limits: Limits{Count: 3},
			steps: []struct {
				m    string
				want VerdictPhase
			}{{"S", VerdictRunning}, {"I", VerdictRunning}, {"I", VerdictRunning}, {"I", VerdictInconclusive}, {"S", VerdictInconclusive}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			history := ""
			for i, step := range tt.steps {
				history += step.m
				if got := Assess(seq(history), tt.limits); got.Phase != step.want {
					t.Fatalf("after step %d (%s): %s (%q), want %s", i, history, got.Phase, got.Message, step.want)
				}
			}
		})
	}
}

func TestAssessAll(t *testing.T) {
	passed := Verdict{Phase: VerdictPassed, Message: "ok", Counts: Counts{Successful: 5}}
	running := Verdict{Phase: VerdictRunning, Message: "2 of 5", Counts: Counts{Successful: 2}}
	failed := Verdict{Phase: VerdictFailed, Message: "measurement 2 failed: value 0.2 above max 0.01", Counts: Counts{Failed: 2}}
	inconclusive := Verdict{Phase: VerdictInconclusive, Message: "measurement 1 inconclusive: value is NaN", Counts: Counts{Inconclusive: 1}}
	tests := []struct {
		name        string
		perMetric   map[string]Verdict
		want        VerdictPhase
		wantMessage string
	}{
		{"no metrics is inconclusive, never passed", nil, VerdictInconclusive, "no metrics"},
		{"one passed", map[string]Verdict{"error-rate": passed}, VerdictPassed, "all 1 metrics passed"},
		{"all passed", map[string]Verdict{"error-rate": passed, "latency": passed}, VerdictPassed, "all 2 metrics passed"},
		{"one still running", map[string]Verdict{"error-rate": passed, "latency": running}, VerdictRunning, "waiting for latency"},
		{"running ones listed sorted", map[string]Verdict{"b": running, "a": running}, VerdictRunning, "waiting for a, b"},
		{"any failed fails", map[string]Verdict{"error-rate": failed, "latency": running}, VerdictFailed,
			"metric error-rate: measurement 2 failed: value 0.2 above max 0.01"},
		{"failed beats inconclusive", map[string]Verdict{"error-rate": inconclusive, "latency": failed}, VerdictFailed, "metric latency:"},
		{"inconclusive beats passed and running", map[string]Verdict{"a": passed, "b": running, "c": inconclusive}, VerdictInconclusive, "metric c: measurement 1 inconclusive"},
		{"several failed named in order", map[string]Verdict{"z": failed, "a": failed}, VerdictFailed, "metric a: measurement 2 failed: value 0.2 above max 0.01; metric z:"},
		{"unknown verdict phase is inconclusive", map[string]Verdict{"a": passed, "b": {Phase: "Weird"}}, VerdictInconclusive, "metric b: Weird"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AssessAll(tt.perMetric)
			if got.Phase != tt.want {
				t.Errorf("AssessAll() = %s (%q), want %s", got.Phase, got.Message, tt.want)
			}
			if !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.wantMessage)
			}
		})
	}
	t.Run("counts are summed", func(t *testing.T) {
		got := AssessAll(map[string]Verdict{"a": passed, "b": failed, "c": inconclusive})
		want := Counts{Successful: 5, Failed: 2, Inconclusive: 1}
		if got.Counts != want {
			t.Errorf("Counts = %+v, want %+v", got.Counts, want)
		}
	})
}

func TestVerdictPhaseDone(t *testing.T) {
	for phase, want := range map[VerdictPhase]bool{VerdictRunning: false, VerdictPassed: true, VerdictFailed: true, VerdictInconclusive: true} {
		if got := phase.Done(); got != want {
			t.Errorf("%s.Done() = %v, want %v", phase, got, want)
		}
	}
}

func TestNextMeasurementAt(t *testing.T) {
	last := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		last     time.Time
		interval time.Duration
		want     time.Time
	}{
		{"interval after the last measurement", last, 30 * time.Second, last.Add(30 * time.Second)},
		{"no measurement yet is due at once", time.Time{}, 30 * time.Second, time.Time{}},
		{"zero interval is due at once", last, 0, last},
		{"negative interval is due at once", last, -time.Minute, last},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NextMeasurementAt(tt.last, tt.interval); !got.Equal(tt.want) {
				t.Errorf("NextMeasurementAt() = %v, want %v", got, tt.want)
			}
		})
	}
}
