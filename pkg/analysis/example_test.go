package analysis_test

import (
	"fmt"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// A query template is rendered for one rollout, its answer judged against
// a threshold, and the measurements so far assessed against the limits.
func Example() {
	query, err := analysis.Render(
		`sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code=~"5.."}[1m]))`,
		analysis.Vars{Namespace: "shop", CanaryPods: analysis.PodRegex([]string{"web-x2k9f", "web-p7q4d"})})
	if err != nil {
		panic(err)
	}
	fmt.Println(query)

	maxRate := 0.01
	answer := analysis.Result{Kind: analysis.KindScalar, Samples: []analysis.Sample{{Value: 0.002}}}
	m := analysis.Evaluate(answer, analysis.Threshold{Max: &maxRate})
	fmt.Println(m.Phase, m.Message)

	v := analysis.Assess([]analysis.Measurement{m, m}, analysis.Limits{Count: 2})
	fmt.Println(v.Phase, v.Message)
	// Output:
	// sum(rate(http_requests_total{namespace="shop",pod=~"web-p7q4d|web-x2k9f",code=~"5.."}[1m]))
	// Successful value 0.002 within max 0.01
	// Passed 2 of 2 measurements successful (0 failed, failureLimit 0)
}
