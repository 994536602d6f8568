package analysis

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

func ptr(f float64) *float64 { return &f }

func scalar(v float64) Result {
	return Result{Kind: KindScalar, Type: "scalar", Samples: []Sample{{Value: v}}}
}

func vector(values ...float64) Result {
	r := Result{Kind: KindVector, Type: "vector", Samples: []Sample{}}
	for i, v := range values {
		r.Samples = append(r.Samples, Sample{Labels: map[string]string{"pod": "web-" + string(rune('0'+i))}, Value: v})
	}
	return r
}

func TestEvaluate(t *testing.T) {
	maxOnly := Threshold{Max: ptr(0.01)}
	minOnly := Threshold{Min: ptr(0.5)}
	both := Threshold{Min: ptr(0.9), Max: ptr(1)}
	tests := []struct {
		name        string
		result      Result
		threshold   Threshold
		wantPhase   Phase
		wantValue   *float64
		wantMessage string // substring
	}{
		{"scalar within max", scalar(0.005), maxOnly, PhaseSuccessful, ptr(0.005), "value 0.005 within max 0.01"},
		{"scalar equal to max passes, bounds inclusive", scalar(0.01), maxOnly, PhaseSuccessful, ptr(0.01), "within max 0.01"},
		{"scalar above max fails", scalar(0.2), maxOnly, PhaseFailed, ptr(0.2), "value 0.2 above max 0.01"},
		{"scalar below min fails", scalar(0.25), minOnly, PhaseFailed, ptr(0.25), "value 0.25 below min 0.5"},
		{"scalar equal to min passes", scalar(0.5), minOnly, PhaseSuccessful, ptr(0.5), "within min 0.5"},
		{"zero is a value, not missing data", scalar(0), maxOnly, PhaseSuccessful, ptr(0), "value 0 within"},
		{"negative value below min", scalar(-1), minOnly, PhaseFailed, ptr(-1), "value -1 below min 0.5"},
		{"within both bounds", scalar(0.95), both, PhaseSuccessful, ptr(0.95), "within [0.9, 1]"},
		{"above both bounds", scalar(1.5), both, PhaseFailed, ptr(1.5), "above max 1"},
		{"below both bounds", scalar(0.1), both, PhaseFailed, ptr(0.1), "below min 0.9"},
		{"one-element vector is a value", vector(0.001), maxOnly, PhaseSuccessful, ptr(0.001), "within max 0.01"},
		{"one-element vector above max", vector(0.3), maxOnly, PhaseFailed, ptr(0.3), "value 0.3 above max 0.01"},
		{"nearly equal numbers are printed in full", scalar(0.0100000001), maxOnly, PhaseFailed, ptr(0.0100000001), "value 0.0100000001 above max 0.01"},
		{"empty vector is inconclusive", vector(), maxOnly, PhaseInconclusive, nil, "no series"},
		{"nil samples vector is inconclusive", Result{Kind: KindVector}, maxOnly, PhaseInconclusive, nil, "no series"},
		{"several series are inconclusive", vector(0.001, 0.002, 0.003), maxOnly, PhaseInconclusive, nil, "3 series, want 1"},
		{"several series counted, the first kept, are inconclusive", Result{Kind: KindVector, Samples: []Sample{{Value: 0.001}}, Series: 70000}, maxOnly, PhaseInconclusive, nil, "70000 series, want 1"},
		{"a count of one is the value kept", Result{Kind: KindVector, Samples: []Sample{{Value: 0.001}}, Series: 1}, maxOnly, PhaseSuccessful, ptr(0.001), "within max 0.01"},
		{"a count without the sample is no data", Result{Kind: KindVector, Series: 1}, maxOnly, PhaseInconclusive, nil, "no series"},
		{"NaN scalar is inconclusive", scalar(math.NaN()), maxOnly, PhaseInconclusive, nil, "NaN"},
		{"NaN in vector is inconclusive", vector(math.NaN()), maxOnly, PhaseInconclusive, nil, "NaN"},
		{"+Inf is inconclusive", scalar(math.Inf(1)), maxOnly, PhaseInconclusive, nil, "+Inf"},
		{"-Inf is inconclusive even with only a max", vector(math.Inf(-1)), maxOnly, PhaseInconclusive, nil, "-Inf"},
		{"matrix is inconclusive", Result{Kind: KindOther, Type: "matrix"}, maxOnly, PhaseInconclusive, nil, "returned matrix, want a scalar or a one-element vector"},
		{"string is inconclusive", Result{Kind: KindOther, Type: "string"}, maxOnly, PhaseInconclusive, nil, "returned string"},
		{"other kind with samples is still inconclusive", Result{Kind: KindOther, Type: "histogram vector", Samples: []Sample{{Value: 0}}}, maxOnly, PhaseInconclusive, nil, "histogram vector"},
		{"zero result is inconclusive", Result{}, maxOnly, PhaseInconclusive, nil, "unknown type"},
		{"scalar without a value is inconclusive", Result{Kind: KindScalar}, maxOnly, PhaseInconclusive, nil, "0 values"},
		{"no bounds is an error, never a pass", scalar(0), Threshold{}, PhaseError, nil, "neither min nor max"},
		{"min above max is an error", scalar(0.5), Threshold{Min: ptr(1), Max: ptr(0)}, PhaseError, nil, "min 1 is above max 0"},
		{"NaN bound is an error", scalar(0.5), Threshold{Max: ptr(math.NaN())}, PhaseError, nil, "max NaN is not a finite number"},
		{"infinite bound is an error", scalar(0.5), Threshold{Min: ptr(math.Inf(-1))}, PhaseError, nil, "min -Inf is not a finite number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Evaluate(tt.result, tt.threshold)
			if got.Phase != tt.wantPhase {
				t.Errorf("Phase = %s, want %s (message %q)", got.Phase, tt.wantPhase, got.Message)
			}
			switch {
			case tt.wantValue == nil && got.Value != nil:
				t.Errorf("Value = %v, want none", *got.Value)
			case tt.wantValue != nil && got.Value == nil:
				t.Errorf("Value = none, want %v", *tt.wantValue)
			case tt.wantValue != nil && *got.Value != *tt.wantValue:
				t.Errorf("Value = %v, want %v", *got.Value, *tt.wantValue)
			}
			if !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tt.wantMessage)
			}
			// The invariant the whole package exists for.
			if got.Phase == PhaseSuccessful && (got.Value == nil || math.IsNaN(*got.Value) || math.IsInf(*got.Value, 0)) {
				t.Errorf("Successful without a finite value: %+v", got)
			}
		})
	}
}

// TestEvaluateNeverPassesWithoutOneFiniteValue sweeps shapes and values
// against a threshold that every finite value meets, so only the shape can
// make the difference.
func TestEvaluateNeverPassesWithoutOneFiniteValue(t *testing.T) {
	anything := Threshold{Min: ptr(-math.MaxFloat64), Max: ptr(math.MaxFloat64)}
	values := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, 1}
	for _, kind := range []Kind{KindScalar, KindVector, KindOther, ""} {
		for _, v := range values {
			for n := 0; n <= 3; n++ {
				r := Result{Kind: kind}
				for range n {
					r.Samples = append(r.Samples, Sample{Value: v})
				}
				got := Evaluate(r, anything)
				wantPass := (kind == KindScalar || kind == KindVector) && n == 1 && !math.IsNaN(v) && !math.IsInf(v, 0)
				if (got.Phase == PhaseSuccessful) != wantPass {
					t.Errorf("Evaluate(kind %q, %d samples of %v) = %s %q, want pass=%v", kind, n, v, got.Phase, got.Message, wantPass)
				}
			}
		}
	}
}

type fakeProvider struct {
	result Result
	err    error
	calls  int
	query  string
}

func (f *fakeProvider) Query(_ context.Context, query string) (Result, error) {
	f.calls++
	f.query = query
	return f.result, f.err
}

func TestMeasure(t *testing.T) {
	maxOnly := Threshold{Max: ptr(0.01)}
	t.Run("query error is an Error measurement with the cause", func(t *testing.T) {
		p := &fakeProvider{err: errors.New("connection refused"), result: scalar(0)}
		got := Measure(context.Background(), p, "q", maxOnly)
		if got.Phase != PhaseError || got.Value != nil || !strings.Contains(got.Message, "connection refused") {
			t.Errorf("Measure() = %+v, want Error without value mentioning the cause", got)
		}
	})
	t.Run("result is evaluated", func(t *testing.T) {
		p := &fakeProvider{result: vector(0.2)}
		got := Measure(context.Background(), p, "sum(x)", maxOnly)
		if got.Phase != PhaseFailed || p.query != "sum(x)" {
			t.Errorf("Measure() = %+v after query %q, want Failed after sum(x)", got, p.query)
		}
	})
	t.Run("invalid threshold does not query", func(t *testing.T) {
		p := &fakeProvider{result: scalar(0)}
		got := Measure(context.Background(), p, "q", Threshold{})
		if got.Phase != PhaseError || p.calls != 0 {
			t.Errorf("Measure() = %+v with %d calls, want Error and no query", got, p.calls)
		}
	})
}
