package judge

import (
	"encoding/xml"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// docsExample is the worked example of docs/analysis.md: per-Pod error
// ratios of 20 stable Pods around 1% and 20 canary Pods around 4% (40
// replicas at partition 20), one measurement.
func docsExample() (canary, stable []float64) {
	r := rand.New(rand.NewPCG(37, 37))
	for range 20 {
		stable = append(stable, 0.01*(1+0.2*r.NormFloat64()))
		canary = append(canary, 0.04*(1+0.2*r.NormFloat64()))
	}
	return canary, stable
}

// TestDocsFigure keeps docs/images/judge-example.svg what Figure draws for
// the worked example. Regenerate with
// STEPWISE_UPDATE_FIGURES=1 go test ./pkg/analysis/judge -run TestDocsFigure
func TestDocsFigure(t *testing.T) {
	canary, stable := docsExample()
	r := Judge(canary, stable, Compare{Direction: Increase, Tolerance: 0.25, Confidence: 0.98})
	if r.Verdict != Fail {
		t.Fatalf("the worked example should fail: %+v", r)
	}
	got := Figure("errors (5xx ratio per Pod)", canary, stable, r)
	const path = "../../../docs/images/judge-example.svg"
	if os.Getenv("STEPWISE_UPDATE_FIGURES") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Fatalf("%s is stale; regenerate it (see the test's comment)", path)
	}
	t.Logf("worked example: %+v", r)
}

func TestFigureIsWellFormedAndShowsTheNumbers(t *testing.T) {
	for _, c := range []struct {
		name           string
		canary, stable []float64
	}{
		{"normal", seq(150, 1, 10), seq(100, 1, 10)},
		{"empty_canary", nil, seq(100, 1, 10)},
		{"all_equal", []float64{0, 0, 0}, []float64{0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Judge(c.canary, c.stable, Compare{Direction: Increase, Tolerance: 0.1, Confidence: 0.95, MinSamples: 2})
			svg := Figure(`a <b> & "c"`, c.canary, c.stable, r)
			d := xml.NewDecoder(strings.NewReader(svg))
			for {
				if _, err := d.Token(); err != nil {
					if err.Error() == "EOF" {
						break
					}
					t.Fatalf("not well-formed: %v\n%s", err, svg)
				}
			}
			for _, want := range []string{string(r.Verdict), "canary (n=", "stable (n=", "p=", "a &lt;b&gt;"} {
				if !strings.Contains(svg, want) {
					t.Errorf("figure lacks %q", want)
				}
			}
			if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
				t.Errorf("figure holds NaN:\n%s", svg)
			}
		})
	}
}

// TestFigureFromStatusDrawsMedians: status keeps medians and counts, not
// samples; the figure still shows both sides.
func TestFigureFromStatusDrawsMedians(t *testing.T) {
	r := Result{Verdict: Fail, CanaryMedian: 0.04, StableMedian: 0.01, CanaryN: 10, StableN: 10, Effect: 3, P: 1e-4}
	svg := Figure("errors", nil, nil, r)
	if n := strings.Count(svg, `stroke-width="2.5"`); n != 2 {
		t.Fatalf("%d median bars, want 2:\n%s", n, svg)
	}
	if strings.Contains(svg, "<circle") {
		t.Error("dots drawn without samples")
	}
	for _, want := range []string{"canary (n=10)", "median 0.04", "median 0.01"} {
		if !strings.Contains(svg, want) {
			t.Errorf("figure lacks %q", want)
		}
	}
}
