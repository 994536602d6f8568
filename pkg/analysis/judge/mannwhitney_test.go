package judge

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"
)

type vector struct {
	Name          string    `json:"name"`
	X             []float64 `json:"x"`
	Y             []float64 `json:"y"`
	Alternative   string    `json:"alternative"`
	U             float64   `json:"u"`
	P             float64   `json:"p"`
	HodgesLehmann float64   `json:"hodgesLehmann"`
}

// TestMannWhitneyMatchesScipy checks U, p and the Hodges-Lehmann shift
// against scipy.stats.mannwhitneyu (hack/judge/vectors.py).
func TestMannWhitneyMatchesScipy(t *testing.T) {
	raw, err := os.ReadFile("testdata/mannwhitney.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Scipy string   `json:"scipy"`
		Cases []vector `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 30 {
		t.Fatalf("only %d reference cases", len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(fmt.Sprintf("%s/%s", c.Name, c.Alternative), func(t *testing.T) {
			got, err := MannWhitney(c.X, c.Y, Alternative(c.Alternative))
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.U-c.U) > 1e-9 {
				t.Errorf("U = %v, scipy %s says %v", got.U, file.Scipy, c.U)
			}
			if math.Abs(got.P-c.P) > 1e-12+1e-9*c.P {
				t.Errorf("p = %.17g, scipy %s says %.17g", got.P, file.Scipy, c.P)
			}
			if hl := HodgesLehmann(c.X, c.Y); math.Abs(hl-c.HodgesLehmann) > 1e-12 {
				t.Errorf("Hodges-Lehmann = %v, numpy says %v", hl, c.HodgesLehmann)
			}
		})
	}
}

func TestMannWhitneyEdges(t *testing.T) {
	t.Run("empty_sample_is_an_error", func(t *testing.T) {
		if _, err := MannWhitney(nil, []float64{1}, TwoSided); err == nil {
			t.Fatal("no error for an empty sample")
		}
	})
	t.Run("all_tied_gives_p_1", func(t *testing.T) {
		got, err := MannWhitney([]float64{3, 3, 3}, []float64{3, 3}, Greater)
		if err != nil || got.P != 1 {
			t.Fatalf("got %+v, %v; want p=1", got, err)
		}
	})
	t.Run("unknown_alternative_is_an_error", func(t *testing.T) {
		if _, err := MannWhitney([]float64{1, 2}, []float64{3, 4}, "bigger"); err == nil {
			t.Fatal("no error for an unknown alternative")
		}
	})
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1}, 2}, {[]float64{5, 1, 3}, 3}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
