package stepanalysis

import (
	"testing"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

func TestAssessLeavesDryRunOut(t *testing.T) {
	ms := func(name string, phase v1alpha1.AnalysisPhase, dry bool) v1alpha1.MetricStatus {
		return v1alpha1.MetricStatus{Name: name, Phase: phase, DryRun: dry}
	}
	cases := []struct {
		name    string
		metrics []v1alpha1.MetricStatus
		want    analysis.VerdictPhase
	}{
		{"a failed dryRun metric beside a passed one passes",
			[]v1alpha1.MetricStatus{ms("a", v1alpha1.AnalysisPassed, false), ms("b", v1alpha1.AnalysisFailed, true)}, analysis.VerdictPassed},
		{"a running dryRun metric does not hold the step",
			[]v1alpha1.MetricStatus{ms("a", v1alpha1.AnalysisPassed, false), ms("b", v1alpha1.AnalysisRunning, true)}, analysis.VerdictPassed},
		{"the same metric without dryRun fails",
			[]v1alpha1.MetricStatus{ms("a", v1alpha1.AnalysisPassed, false), ms("b", v1alpha1.AnalysisFailed, false)}, analysis.VerdictFailed},
		{"only dryRun metrics wait for them",
			[]v1alpha1.MetricStatus{ms("b", v1alpha1.AnalysisRunning, true)}, analysis.VerdictRunning},
		{"only dryRun metrics, done, pass whatever they say",
			[]v1alpha1.MetricStatus{ms("b", v1alpha1.AnalysisFailed, true)}, analysis.VerdictPassed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Assess(judgedMetrics(nil, tc.metrics, nil), 90, 75); got.Phase != tc.want {
				t.Fatalf("verdict %s (%s), want %s", got.Phase, got.Message, tc.want)
			}
		})
	}
}

func TestRecordKeepsRetention(t *testing.T) {
	var ms v1alpha1.MetricStatus
	for i := range 25 {
		record(&ms, v1alpha1.Measurement{Metric: "m", Step: int32(i)}, 10)
	}
	if len(ms.Measurements) != 10 || ms.Measurements[0].Step != 15 || ms.Measurements[9].Step != 24 {
		t.Fatalf("kept %d, first step %d: want the newest 10 (15..24)", len(ms.Measurements), ms.Measurements[0].Step)
	}
	var spec v1alpha1.AnalysisSpec
	if spec.Retention() != v1alpha1.DefaultMeasurementRetention {
		t.Fatalf("default retention %d", spec.Retention())
	}
}
