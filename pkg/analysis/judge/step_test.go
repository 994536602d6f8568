package judge

import "testing"

// TestStepThresholdPassesJudgeAborts is the first story in pure
// form: a canary at 4% errors beside a stable at 1% is under a fixed
// max of 5%, and the judge aborts it.
func TestStepThresholdPassesJudgeAborts(t *testing.T) {
	canary, stable := docsExample()
	for _, v := range canary {
		if v > 0.05*1.2 {
			t.Fatalf("sample %v: the example is meant to sit near 4%%", v)
		}
	}
	rule := Compare{Direction: Increase, Tolerance: 0.25, Confidence: 0.98}
	results, out := Step([]Metric{
		{Name: "errors", Compare: rule, Weight: 2, Critical: true, Canary: canary, Stable: stable},
		{Name: "latency", Compare: rule, Weight: 1, Canary: stable, Stable: stable},
	}, DefaultPass, DefaultMarginal)
	if results[0].Verdict != Fail || results[1].Verdict != Pass {
		t.Fatalf("verdicts %s, %s", results[0].Verdict, results[1].Verdict)
	}
	if out.Decision != Abort || out.Score != 33 {
		t.Fatalf("outcome %+v", out)
	}
}

func TestStepDryRunFailureChangesNothing(t *testing.T) {
	canary, stable := docsExample()
	rule := Compare{Direction: Increase, Tolerance: 0.25, Confidence: 0.98}
	results, out := Step([]Metric{
		{Name: "errors", Compare: rule, Critical: true, DryRun: true, Canary: canary, Stable: stable},
		{Name: "latency", Compare: rule, Canary: stable, Stable: stable},
	}, DefaultPass, DefaultMarginal)
	if results[0].Verdict != Fail {
		t.Fatalf("the dryRun metric is still judged and shown: %+v", results[0])
	}
	if out.Decision != Promote || out.Score != 100 {
		t.Fatalf("outcome %+v", out)
	}
}
