package judge

import (
	"math"
	"strings"
	"testing"
)

func TestSummaryRoundTrip(t *testing.T) {
	r := Result{Verdict: Fail, CanaryMedian: 0.0419115, StableMedian: 0.00987, Effect: math.Inf(1), P: 3.4e-8, CanaryN: 20, StableN: 20}
	s := Summarize(r)
	if s.CanaryMedian != "0.0419115" || s.Effect != "+Inf" || s.PValue != "3.4e-08" {
		t.Fatalf("summary %+v", s)
	}
	back := s.Result()
	if back.CanaryMedian != 0.0419115 || !math.IsInf(back.Effect, 1) || back.P != 3.4e-8 || back.CanaryN != 20 {
		t.Fatalf("read back %+v", back)
	}
	// A summary with a broken field still draws, without that number.
	s.StableMedian = "garbage"
	svg := Figure("errors", nil, nil, s.Result())
	if strings.Contains(svg, "NaN") {
		t.Fatalf("figure shows NaN:\n%s", svg)
	}
}

func TestSummaryLine(t *testing.T) {
	canary, stable := docsExample()
	s := Summarize(Judge(canary, stable, Compare{Direction: Increase, Tolerance: 0.25, Confidence: 0.98}))
	got := s.Line()
	want := "canary 0.04191 vs stable 0.009874 (n=20/20), effect +322.2%, p=3.398e-08: Fail"
	if got != want {
		t.Fatalf("Line() = %q, want %q", got, want)
	}
}
