package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// DefaultMeasurements is how many of the most recent measurements the view
// shows: enough to see a trend, few enough to fit a terminal.
const DefaultMeasurements = 5

// ViewOptions are the inputs of the human view that do not come from the
// cluster. Now is a parameter so that tests render with a fixed clock.
type ViewOptions struct {
	Now   time.Time
	Color bool
	// Measurements is how many recent measurements to list; 0 means
	// DefaultMeasurements.
	Measurements int
}

// RolloutView is a Rollout as last seen and its workload. Workload is nil
// when it could not be read; WorkloadErr then says why.
type RolloutView struct {
	Rollout     *stepwisev1.Rollout
	Workload    *Workload
	WorkloadErr error
}

// RenderRollout is the human view of `kubectl stepwise get rollout`.
func RenderRollout(v RolloutView, opts ViewOptions) string {
	r := &renderer{RolloutView: v, opts: opts, p: painter{enabled: opts.Color}}
	if r.opts.Measurements <= 0 {
		r.opts.Measurements = DefaultMeasurements
	}
	var b strings.Builder
	r.header(&b)
	r.steps(&b)
	r.analysis(&b)
	r.measurements(&b)
	return b.String()
}

type renderer struct {
	RolloutView
	opts ViewOptions
	p    painter
}

// currentStep is the index of the step in progress, or -1.
func (r *renderer) currentStep() int {
	st := r.Rollout.Status
	if st.CurrentStepIndex == nil || int(*st.CurrentStepIndex) >= len(r.Rollout.Spec.Steps) || *st.CurrentStepIndex < 0 {
		return -1
	}
	return int(*st.CurrentStepIndex)
}

func (r *renderer) header(b *strings.Builder) {
	ro := r.Rollout
	st := ro.Status
	var rows [][]cell
	add := func(label string, value string, c color) {
		rows = append(rows, []cell{{text: label + ":", color: bold}, {text: value, color: c}})
	}

	add("Rollout", ro.Namespace+"/"+ro.Name, plain)
	add("Workload", r.workloadLine(), plain)

	phase := string(st.Phase)
	if phase == "" {
		phase = "Unknown"
	}
	if st.Reason != "" {
		phase += " (" + st.Reason + ")"
	}
	add("Phase", phase, phaseColor(st.Phase))
	if st.ObservedGeneration < ro.Generation {
		add("Status", fmt.Sprintf("stale: describes generation %d, spec is at generation %d", st.ObservedGeneration, ro.Generation), yellow)
	}
	if st.Message != "" {
		add("Message", st.Message, plain)
	}
	add("Canary", orDash(st.CanaryRevision), plain)
	add("Stable", orDash(st.StableRevision), plain)
	if tr := ro.Spec.TrafficRouting; tr != nil {
		add("Traffic", trafficLine(tr, st.Traffic), plain)
	}
	if i := r.currentStep(); i >= 0 {
		text, c := r.gate(i)
		add("Gate", text, c)
	}
	add("Pause", r.pause(), plain)
	for _, req := range r.pendingRequests() {
		add("Request", req, yellow)
	}
	for _, c := range st.Conditions {
		if (c.Type == stepwisev1.PartitionConflictCondition || c.Type == stepwisev1.TrafficConflictCondition) && c.Status == metav1.ConditionTrue {
			add("Warning", c.Type+": "+c.Message, red)
		}
	}
	writeTable(b, r.p, "", rows)
}

func (r *renderer) workloadLine() string {
	ref := r.Rollout.Spec.WorkloadRef
	s := fmt.Sprintf("%s %s (%s)", ref.Kind, ref.Name, ref.APIVersion)
	switch {
	case r.Workload != nil:
		partition := "none"
		if r.Workload.Partition != nil {
			partition = r.Workload.Partition.String()
		}
		s += fmt.Sprintf(", %d replicas, partition %s", r.Workload.Replicas, partition)
	case r.WorkloadErr != nil:
		s += ": " + r.WorkloadErr.Error()
	}
	return s
}

// gate describes the workload gate of step i: observedGeneration current and
// updatedReadyReplicas >= replicas - partition.
func (r *renderer) gate(i int) (string, color) {
	st := r.Rollout.Status
	if st.StepReadyAt != nil {
		return "passed " + r.ago(st.StepReadyAt.Time), green
	}
	if r.Workload == nil {
		return "waiting (workload not readable)", yellow
	}
	if !r.Workload.GenerationObserved() {
		return fmt.Sprintf("waiting: workload generation %d not observed yet (observed %d)",
			r.Workload.Generation, r.Workload.ObservedGeneration), yellow
	}
	ready, target, ok := r.progress(i)
	if !ok {
		return "waiting", yellow
	}
	if ready >= target {
		return fmt.Sprintf("open: %d/%d updated pods ready", ready, target), green
	}
	return fmt.Sprintf("waiting: %d/%d updated pods ready", ready, target), yellow
}

// progress is updatedReadyReplicas against replicas - partition for step i.
func (r *renderer) progress(i int) (ready, target int32, ok bool) {
	ready = r.Rollout.Status.UpdatedReadyReplicas
	if r.Workload == nil {
		return ready, 0, false
	}
	if r.Workload.UpdatedReadyReplicas != nil {
		ready = *r.Workload.UpdatedReadyReplicas
	}
	target, _, err := StepTarget(r.Workload.Replicas, r.Rollout.Spec.Steps[i].Partition)
	if err != nil {
		return ready, 0, false
	}
	return ready, target, true
}

// pause says what holds the rollout besides the workload: spec.paused, a
// pause request, and the current step's own pause.
func (r *renderer) pause() string {
	ro := r.Rollout
	var parts []string
	if ro.Spec.Paused {
		parts = append(parts, "paused by spec.paused")
	}
	if ro.Status.PauseRequested {
		parts = append(parts, "paused on request (kubectl stepwise resume "+ro.Name+")")
	}
	if ro.Status.PromotedFull {
		return strings.Join(append(parts, "promoted in full: no pause or analysis is left"), "; ")
	}
	if i := r.currentStep(); i >= 0 {
		if s := r.stepPause(ro.Spec.Steps[i].Pause); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func (r *renderer) stepPause(p *stepwisev1.StepPause) string {
	readyAt := r.Rollout.Status.StepReadyAt
	switch {
	case p == nil:
		return ""
	case p.Duration == nil && readyAt == nil:
		return "waits for promote once the gate passes"
	case p.Duration == nil:
		return "waiting for promote (kubectl stepwise promote " + r.Rollout.Name + ")"
	case readyAt == nil:
		return ShortDuration(p.Duration.Duration) + " once the gate passes"
	}
	left := readyAt.Add(p.Duration.Duration).Sub(r.opts.Now).Round(time.Second)
	if left <= 0 {
		return ShortDuration(p.Duration.Duration) + ", over"
	}
	return ShortDuration(left) + " left of " + ShortDuration(p.Duration.Duration)
}

// requestAnnotations pairs each manual-action annotation with the status
// field that records the last value handled.
func requestAnnotations(st *stepwisev1.RolloutStatus) []struct {
	action, key, handled string
} {
	return []struct{ action, key, handled string }{
		{"promote", stepwisev1.PromoteAtAnnotation, st.LastHandledPromoteAt},
		{"promote --full", stepwisev1.PromoteFullAtAnnotation, st.LastHandledPromoteFullAt},
		{"abort", stepwisev1.AbortAtAnnotation, st.LastHandledAbortAt},
		{"retry", stepwisev1.RetryAtAnnotation, st.LastHandledRetryAt},
		{"pause", stepwisev1.PauseAtAnnotation, st.LastHandledPauseAt},
		{"resume", stepwisev1.ResumeAtAnnotation, st.LastHandledResumeAt},
	}
}

// pendingRequests lists manual actions written but not handled yet, which is
// what someone wonders about right after `kubectl stepwise promote`.
func (r *renderer) pendingRequests() []string {
	var out []string
	for _, a := range requestAnnotations(&r.Rollout.Status) {
		v := r.Rollout.Annotations[a.key]
		if v == "" || v == a.handled {
			continue
		}
		when := v
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			when = r.ago(t)
		}
		out = append(out, fmt.Sprintf("%s requested %s, not handled yet", a.action, when))
	}
	return out
}

func (r *renderer) steps(b *strings.Builder) {
	ro := r.Rollout
	cur := r.currentStep()
	failed := -1
	if ro.Status.Phase == stepwisev1.RolloutAborted && ro.Status.Analysis != nil && ro.Status.Analysis.Phase == stepwisev1.AnalysisFailed {
		failed = int(ro.Status.Analysis.StepIndex)
	}
	// PAUSE and ANALYSIS are left out when no step has one: an empty
	// column under a heading reads as missing data.
	hasPause, hasAnalysis := false, false
	for i, s := range ro.Spec.Steps {
		hasPause = hasPause || s.Pause != nil
		hasAnalysis = hasAnalysis || stepAnalysisLabel(&ro.Spec, i) != ""
	}
	header := []cell{{text: " "}, {text: "#", color: faint}, {text: "PARTITION", color: faint}}
	routed := ro.Spec.TrafficRouting != nil
	if routed {
		header = append(header, cell{text: "TRAFFIC", color: faint})
	}
	if hasPause {
		header = append(header, cell{text: "PAUSE", color: faint})
	}
	if hasAnalysis {
		header = append(header, cell{text: "ANALYSIS", color: faint})
	}
	rows := [][]cell{header}
	for i, s := range ro.Spec.Steps {
		marker := cell{text: " "}
		switch {
		case i == cur:
			marker = cell{text: "▶", color: cyan}
		case i == failed:
			marker = cell{text: "✗", color: red}
		case cur >= 0 && i < cur:
			marker = cell{text: "✓", color: green}
		}
		row := []cell{marker, {text: strconv.Itoa(i + 1)}, {text: s.Partition.String()}}
		if routed {
			row = append(row, cell{text: stepTrafficLabel(s)})
		}
		if hasPause {
			row = append(row, cell{text: stepPauseLabel(s.Pause)})
		}
		if hasAnalysis {
			row = append(row, cell{text: stepAnalysisLabel(&ro.Spec, i)})
		}
		rows = append(rows, row)
	}
	var table strings.Builder
	writeTable(&table, r.p, "  ", rows)
	fmt.Fprintf(b, "\n%s\n", r.p.paint(bold, "Steps:"))
	lines := strings.SplitAfter(table.String(), "\n")
	for i, line := range lines {
		b.WriteString(line)
		// The progress bar goes under the current step, where the eye
		// already is, aligned with the partition it measures.
		if i == cur+1 && cur >= 0 {
			indent := strings.Repeat(" ", 2+1+2+len(strconv.Itoa(len(ro.Spec.Steps)))+2)
			b.WriteString(indent + r.bar(cur) + "\n")
		}
	}
}

// barWidth keeps the bar line within 60 columns.
const barWidth = 20

// bar is the current step's progress: updated ready Pods against replicas
// minus the step's partition.
func (r *renderer) bar(i int) string {
	ready, target, ok := r.progress(i)
	if !ok {
		return fmt.Sprintf("%d updated pods ready (workload not readable)", ready)
	}
	filled := barWidth
	if target > 0 {
		filled = int(min(max(ready, 0), target)) * barWidth / int(target)
	}
	c := yellow
	if ready >= target {
		c = green
	}
	return fmt.Sprintf("[%s%s] %d/%d updated pods ready", r.p.paint(c, strings.Repeat("#", filled)),
		strings.Repeat(".", barWidth-filled), ready, target)
}

// ago is a kubectl-style age ("2m10s ago"). Clock skew between the cluster
// and this machine can put a time in the future; that reads as "just now".
func (r *renderer) ago(t time.Time) string {
	d := r.opts.Now.Sub(t)
	if d < time.Second {
		return "just now"
	}
	return duration.HumanDuration(d) + " ago"
}
