package judge_test

import (
	"fmt"

	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

// Canary Pods at about 4 % errors beside stable Pods at about 1 %, at the
// same time: worse by more than the tolerance, with confidence.
func ExampleJudge() {
	canary := []float64{0.041, 0.038, 0.044, 0.040, 0.039}
	stable := []float64{0.010, 0.011, 0.009, 0.012, 0.010}
	r := judge.Judge(canary, stable, judge.Compare{Direction: judge.Increase, Tolerance: 0.25, Confidence: 0.98})
	fmt.Println(r.Verdict, r.Message)
	// Output:
	// Fail canary differs from stable by +300.0% (tolerance +25.0%) with p=0.00596 < 0.02
}
