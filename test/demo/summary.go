package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// summary is the story's evidence: the Pods at three moments and the two
// releases as the Rollout recorded them.
type summary struct {
	analysis                 bool
	steps                    int
	before, afterV2, afterV3 map[string]podState
	v2, v3                   *followed
}

// Verdict texts the demo's test looks for.
const (
	verdictV2 = "v2 promoted through every step"
	verdictV3 = "v3 aborted at step %d, canary Pods rolled back in place"
)

// write prints the tables and the verdicts and returns the expectations
// that failed.
func (s *summary) write(out io.Writer, color bool) []string {
	s.writePods(out)
	for _, f := range []*followed{s.v2, s.v3} {
		s.writeMeasurements(out, f)
	}
	var failures []string
	check := func(ok bool, text string) {
		mark := "✓"
		if !ok {
			mark = "✗"
			failures = append(failures, text)
		}
		if color {
			if ok {
				mark = "\x1b[32m" + mark + "\x1b[0m"
			} else {
				mark = "\x1b[31m" + mark + "\x1b[0m"
			}
		}
		_, _ = fmt.Fprintf(out, "  %s %s\n", mark, text)
	}
	_, _ = fmt.Fprintln(out, "\nVerdict:")
	ok, detail := s.v2Promoted()
	check(ok, verdictV2+detail)
	step, ok, detail := s.v3Aborted()
	text := fmt.Sprintf(verdictV3, step)
	if step <= 0 {
		text = strings.Replace(text, fmt.Sprintf(" at step %d", step), "", 1)
	}
	check(ok, text+detail)
	ok, detail = s.samePods()
	check(ok, "every Pod kept its name and UID through both releases"+detail)
	ok, detail = s.backOnV2()
	check(ok, "every Pod runs "+imageV2+" again, ready"+detail)
	return failures
}

func (s *summary) writePods(out io.Writer) {
	names := map[string]bool{}
	for _, m := range []map[string]podState{s.before, s.afterV2, s.afterV3} {
		for name := range m {
			names[name] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)

	_, _ = fmt.Fprintln(out, "Pods (UIDs shortened; restarts are container restarts, each an in-place image change):")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "  NAME\tUID BEFORE v2\tUID AFTER v2\tUID AFTER v3\tIMAGE AFTER v3\tRESTARTS v1/v2/v3")
	for _, name := range sorted {
		b, v2, v3 := s.before[name], s.afterV2[name], s.afterV3[name]
		_, _ = fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s/%s/%s\n", name, shortUID(b), shortUID(v2), shortUID(v3), orDash(v3.Image),
			restarts(b, s.before, name), restarts(v2, s.afterV2, name), restarts(v3, s.afterV3, name))
	}
	_ = w.Flush()
}

func (s *summary) writeMeasurements(out io.Writer, f *followed) {
	_, _ = fmt.Fprintf(out, "\n%s (%s): %s, after %s\n", f.label, f.image, f.verdict.Summary, f.took.Round(100*time.Millisecond))
	if len(f.measurements) == 0 {
		if s.analysis {
			_, _ = fmt.Fprintln(out, "  no measurements")
		} else {
			_, _ = fmt.Fprintln(out, "  no measurements: no Prometheus, workload gate only")
		}
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "  STEP\tMETRIC\tVALUE\tPHASE\tMESSAGE")
	for _, m := range f.measurements {
		_, _ = fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%s\n", m.Step+1, m.Metric, orDash(m.Value), m.Phase, m.Message)
	}
	_ = w.Flush()
}

// v2Promoted: Healthy on v2's revision, each step seen, and with analysis,
// each step measured successfully and never failed.
func (s *summary) v2Promoted() (bool, string) {
	f := s.v2
	st := f.last.Status
	var problems []string
	if f.verdict.Outcome != cli.Done || st.Phase != stepwisev1.RolloutHealthy {
		problems = append(problems, "ended "+f.verdict.Summary)
	}
	passed := map[int]bool{}
	for _, m := range f.measurements {
		switch m.Phase {
		case stepwisev1.MeasurementSuccessful:
			passed[int(m.Step)] = true
		default:
			problems = append(problems, fmt.Sprintf("step %d measured %s %s", m.Step+1, m.Value, m.Phase))
		}
	}
	for i := range s.steps {
		if !f.stepsSeen[i] {
			problems = append(problems, fmt.Sprintf("step %d never seen", i+1))
		}
		if s.analysis && !passed[i] {
			problems = append(problems, fmt.Sprintf("step %d has no successful measurement", i+1))
		}
	}
	if len(problems) > 0 {
		return false, ": " + strings.Join(problems, "; ")
	}
	return true, fmt.Sprintf(" (%d of %d; stable revision %s)", len(f.stepsSeen), s.steps, st.StableRevision)
}

// v3Aborted: Aborted, at the step the analysis (or the request) stopped,
// and the canary Pods rolled back. It returns the step, 1-based as the view
// shows, 0 when the rollout did not abort.
func (s *summary) v3Aborted() (int, bool, string) {
	f := s.v3
	st := f.last.Status
	if f.verdict.Outcome != cli.Failed || st.Phase != stepwisev1.RolloutAborted {
		return 0, false, ": ended " + f.verdict.Summary
	}
	step := f.lastStep
	if st.Analysis != nil && st.Analysis.Phase == stepwisev1.AnalysisFailed {
		step = int(st.Analysis.StepIndex)
	}
	want := stepwisev1.ReasonAnalysisFailed
	if !s.analysis {
		want = stepwisev1.ReasonAbortRequested
	}
	if st.Reason != want {
		return step + 1, false, fmt.Sprintf(": aborted for %s, want %s", st.Reason, want)
	}
	if ok, _ := s.backOnV2(); !ok {
		return step + 1, false, ": Pods not back on " + imageV2
	}
	return step + 1, true, fmt.Sprintf(" (%s: %s)", st.Reason, st.Message)
}

func (s *summary) samePods() (bool, string) {
	var problems []string
	for name, b := range s.before {
		for label, m := range map[string]map[string]podState{"v2": s.afterV2, "v3": s.afterV3} {
			switch now, ok := m[name]; {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s gone after %s", name, label))
			case now.UID != b.UID:
				problems = append(problems, fmt.Sprintf("%s recreated during %s (UID %s, was %s)", name, label, now.UID, b.UID))
			}
		}
	}
	for _, m := range []map[string]podState{s.afterV2, s.afterV3} {
		if len(m) != len(s.before) {
			problems = append(problems, fmt.Sprintf("%d Pods, was %d", len(m), len(s.before)))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return false, ": " + strings.Join(problems, "; ")
	}
	return true, fmt.Sprintf(" (%d Pods)", len(s.before))
}

func (s *summary) backOnV2() (bool, string) {
	var problems []string
	for name, p := range s.afterV3 {
		if p.Image != imageV2 || !p.Ready {
			problems = append(problems, fmt.Sprintf("%s on %s, ready %t", name, p.Image, p.Ready))
		}
	}
	if len(problems) > 0 || len(s.afterV3) == 0 {
		sort.Strings(problems)
		return false, ": " + strings.Join(problems, "; ")
	}
	return true, ""
}

func shortUID(p podState) string {
	if p.UID == "" {
		return "-"
	}
	return p.UID[:min(8, len(p.UID))]
}

func restarts(p podState, m map[string]podState, name string) string {
	if _, ok := m[name]; !ok {
		return "-"
	}
	return fmt.Sprint(p.Restarts)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
