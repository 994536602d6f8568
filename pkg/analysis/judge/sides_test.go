package judge

import (
	"math"
	"strings"
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

func TestSidesRenderOneQueryForEachSide(t *testing.T) {
	v := analysis.Vars{Namespace: "shop", CanaryPods: "web-0|web-1", StablePods: "web-2|web-3|web-4"}
	c, s := Sides(v)
	q := `sum by (pod) (rate(errors{namespace="{{ .Namespace }}",pod=~"{{ .Pods }}"}[1m]))`
	cq, err := analysis.Render(q, c)
	if err != nil {
		t.Fatal(err)
	}
	sq, err := analysis.Render(q, s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cq, `pod=~"web-0|web-1"`) || !strings.Contains(sq, `pod=~"web-2|web-3|web-4"`) {
		t.Fatalf("canary %q, stable %q", cq, sq)
	}
}

func TestSamples(t *testing.T) {
	vec := func(vals ...float64) analysis.Result {
		r := analysis.Result{Kind: analysis.KindVector, Type: "vector"}
		for _, v := range vals {
			r.Samples = append(r.Samples, analysis.Sample{Value: v})
		}
		return r
	}
	got, err := Samples(vec(1, math.NaN(), 2, math.Inf(1)))
	if err != nil || len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("got %v, %v", got, err)
	}
	truncated := vec(1)
	truncated.Series = 5
	if _, err := Samples(truncated); err == nil || !strings.Contains(err.Error(), "1 of 5") {
		t.Fatalf("a truncated vector was accepted: %v", err)
	}
	if _, err := Samples(analysis.Result{Kind: analysis.KindOther, Type: "matrix"}); err == nil || !strings.Contains(err.Error(), "matrix") {
		t.Fatalf("a matrix was accepted: %v", err)
	}
}

func TestCheckSides(t *testing.T) {
	for _, c := range []struct {
		replicas, partition int
		ok                  bool
	}{{10, 5, true}, {10, 1, true}, {10, 9, true}, {10, 0, false}, {10, 10, false}, {0, 0, false}} {
		if got := CheckSides(c.replicas, c.partition); (got == "") != c.ok {
			t.Errorf("CheckSides(%d, %d) = %q", c.replicas, c.partition, got)
		}
	}
}
