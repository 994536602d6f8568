package cli

import (
	"fmt"
	"strings"
	"time"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func stepPauseLabel(p *stepwisev1.StepPause) string {
	switch {
	case p == nil:
		return ""
	case p.Duration == nil:
		return "until promote"
	}
	return ShortDuration(p.Duration.Duration)
}

func stepAnalysisLabel(spec *stepwisev1.RolloutSpec, i int) string {
	if a := spec.Steps[i].Analysis; a != nil && a.Skip {
		return "skipped"
	}
	a, ok := spec.AnalysisForStep(i)
	if !ok {
		return ""
	}
	names := make([]string, 0, len(a.Metrics))
	for _, m := range a.Metrics {
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}

// ShortDuration prints a duration without zero units ("1m", not "1m0s"), as
// people write them in manifests.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func phaseColor(p stepwisev1.RolloutPhase) color {
	switch p {
	case stepwisev1.RolloutHealthy:
		return green
	case stepwisev1.RolloutProgressing:
		return cyan
	case stepwisev1.RolloutPaused:
		return yellow
	case stepwisev1.RolloutAborted:
		return red
	}
	return plain
}

func analysisColor(p stepwisev1.AnalysisPhase) color {
	switch p {
	case stepwisev1.AnalysisPassed:
		return green
	case stepwisev1.AnalysisFailed:
		return red
	case stepwisev1.AnalysisInconclusive:
		return yellow
	}
	return plain
}

func measurementColor(p stepwisev1.MeasurementPhase) color {
	switch p {
	case stepwisev1.MeasurementSuccessful:
		return green
	case stepwisev1.MeasurementFailed:
		return red
	case stepwisev1.MeasurementInconclusive, stepwisev1.MeasurementError:
		return yellow
	}
	return plain
}

// stepTrafficLabel is a step's weight ("20%", or "ready share" when the
// step follows the ready Pods) and how many match rules it adds.
func stepTrafficLabel(s stepwisev1.RolloutStep) string {
	label := "ready share"
	if s.Traffic != nil {
		label = fmt.Sprintf("%d%%", *s.Traffic)
	}
	if n := len(s.Matches); n > 0 {
		label += fmt.Sprintf(" + %d %s", n, plural(n, "match", "matches"))
	}
	return label
}

// trafficLine says what the routes carry now, from status.traffic.
func trafficLine(tr *stepwisev1.TrafficRouting, st *stepwisev1.TrafficStatus) string {
	if st == nil {
		return "not applied yet"
	}
	line := fmt.Sprintf("%d%% to %s, %d%% to %s", st.CanaryWeight, tr.CanaryService.Name, 100-st.CanaryWeight, tr.StableService)
	if st.Matches > 0 {
		line += fmt.Sprintf(", %d %s to %s", st.Matches, plural(int(st.Matches), "match", "matches"), tr.CanaryService.Name)
	}
	if !st.Accepted {
		line += " (not accepted by a Gateway yet)"
	}
	return line
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
