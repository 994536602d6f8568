package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

func ptr[T any](v T) *T { return &v }

// measurementOf builds a measurement from one letter: S Successful,
// F Failed, I Inconclusive, E Error.
func measurementOf(c byte) analysis.Measurement {
	switch c {
	case 'S':
		return analysis.Measurement{Phase: analysis.PhaseSuccessful, Value: ptr(0.001), Message: "ok"}
	case 'F':
		return analysis.Measurement{Phase: analysis.PhaseFailed, Value: ptr(0.5), Message: "value 0.5 above max 0.01"}
	case 'I':
		return analysis.Measurement{Phase: analysis.PhaseInconclusive, Message: "no data"}
	}
	return analysis.Measurement{Phase: analysis.PhaseError, Message: "connection refused"}
}

// TestTallyReplaysLikeTheFullHistory takes measurements one by one as the
// runner does across reconciles, keeping only the tally in between, and
// checks that every verdict equals the one analysis.Assess gives on the
// full history: the counters in status are enough to resume after a
// restart.
func TestTallyReplaysLikeTheFullHistory(t *testing.T) {
	limits := func(count, failures, errors int) analysis.Limits {
		return analysis.Limits{Count: count, FailureLimit: failures, ConsecutiveErrorLimit: ptr(errors)}
	}
	tests := []struct {
		name   string
		seq    string
		limits analysis.Limits
		want   analysis.VerdictPhase
	}{
		{"healthy canary passes", "SSSSS", limits(5, 0, 4), analysis.VerdictPassed},
		{"a failure beyond the limit fails", "SSF", limits(5, 0, 4), analysis.VerdictFailed},
		{"failures within the limit pass", "SFSFSSS", limits(5, 2, 4), analysis.VerdictPassed},
		{"inconclusive decides at once", "SSI", limits(5, 0, 4), analysis.VerdictInconclusive},
		{"separated error streaks keep running then pass", "EESEESEESEESEES", limits(5, 2, 2), analysis.VerdictPassed},
		{"a streak beyond the limit is inconclusive", "EESEEE", limits(5, 0, 2), analysis.VerdictInconclusive},
		{"streaks at the limit with error limit 1", "ESESESESES", limits(5, 0, 1), analysis.VerdictPassed},
		{"errors then failures", "EEFEEF", limits(5, 1, 2), analysis.VerdictFailed},
		{"only failures within a generous limit fail at count", "FFF", limits(3, 5, 4), analysis.VerdictFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ms v1alpha1.MetricStatus
			var full []analysis.Measurement
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var got analysis.Verdict
			for i := range len(tt.seq) {
				m := measurementOf(tt.seq[i])
				got = analysis.Assess(append(history(ms, tt.limits), m), tt.limits)
				full = append(full, m)
				want := analysis.Assess(full, tt.limits)
				if got.Phase != want.Phase || got.Counts != want.Counts {
					t.Fatalf("after %s: replayed %s %+v, full history %s %+v", tt.seq[:i+1], got.Phase, got.Counts, want.Phase, want.Counts)
				}
				if got.Phase.Done() && got.Message != want.Message {
					t.Errorf("message %q, full history says %q", got.Message, want.Message)
				}
				tally(&ms, m, got, now)
				if got.Phase.Done() {
					break
				}
			}
			if got.Phase != tt.want {
				t.Errorf("verdict %s (%s), want %s", got.Phase, got.Message, tt.want)
			}
			if int(ms.Count) != len(full) || ms.Phase != v1alpha1.AnalysisPhase(got.Phase) {
				t.Errorf("tally %+v after %d measurements with verdict %s", ms, len(full), got.Phase)
			}
		})
	}
}

func TestAppendMeasurementKeepsTheNewest(t *testing.T) {
	var st v1alpha1.RolloutStatus
	for i := range v1alpha1.MaxMeasurements + 5 {
		appendMeasurement(&st, v1alpha1.Measurement{Metric: "m", Step: int32(i)})
	}
	if len(st.Measurements) != v1alpha1.MaxMeasurements {
		t.Fatalf("%d measurements kept, want %d", len(st.Measurements), v1alpha1.MaxMeasurements)
	}
	if first, last := st.Measurements[0].Step, st.Measurements[len(st.Measurements)-1].Step; first != 5 || last != int32(v1alpha1.MaxMeasurements+4) {
		t.Errorf("kept steps %d..%d, want the newest, 5..%d", first, last, v1alpha1.MaxMeasurements+4)
	}
}

func TestSyncMetricStatusesFollowsTheSpec(t *testing.T) {
	a := &v1alpha1.AnalysisStatus{Metrics: []v1alpha1.MetricStatus{
		{Name: "removed", Count: 3, Phase: v1alpha1.AnalysisRunning},
		{Name: "latency", Count: 2, Phase: v1alpha1.AnalysisPassed},
	}}
	syncMetricStatuses(a, []v1alpha1.Metric{{Name: "error-rate"}, {Name: "latency"}})
	if len(a.Metrics) != 2 || a.Metrics[0].Name != "error-rate" || a.Metrics[1].Name != "latency" {
		t.Fatalf("metrics = %+v, want error-rate then latency", a.Metrics)
	}
	if a.Metrics[0].Phase != v1alpha1.AnalysisRunning || a.Metrics[0].Count != 0 {
		t.Errorf("new metric = %+v, want an empty running tally", a.Metrics[0])
	}
	if a.Metrics[1].Count != 2 || a.Metrics[1].Phase != v1alpha1.AnalysisPassed {
		t.Errorf("kept metric = %+v, want its tally kept", a.Metrics[1])
	}
}

func TestNextMeasurementIsTheEarliestDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	at := func(s int) *metav1.Time { return timePtr(now.Add(time.Duration(s) * time.Second)) }
	a := &v1alpha1.AnalysisStatus{Metrics: []v1alpha1.MetricStatus{
		{Name: "a", Phase: v1alpha1.AnalysisRunning, LastMeasuredAt: at(-5)},
		{Name: "b", Phase: v1alpha1.AnalysisRunning, LastMeasuredAt: at(-20)},
		{Name: "c", Phase: v1alpha1.AnalysisPassed, LastMeasuredAt: at(-29)},
	}}
	// b, measured 20s ago in a second stored to its start, is due 11s from
	// now; passed metric c is not measured again.
	if got := nextMeasurement(a, 30*time.Second, now); got != 11*time.Second {
		t.Errorf("next = %s, want 11s", got)
	}
}
