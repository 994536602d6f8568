package dashboard

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
)

// Summary is one row of the list page.
type Summary struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	// Step is "2/3" while a step is in progress, "-" otherwise.
	Step   string `json:"step"`
	Canary string `json:"canary,omitempty"`
	Stable string `json:"stable,omitempty"`
	// Pods is "updated/replicas updated, ready/replicas ready" in numbers.
	Replicas     int32  `json:"replicas"`
	Updated      int32  `json:"updated"`
	Ready        int32  `json:"ready"`
	WorkloadNote string `json:"workloadNote,omitempty"`
}

// Source is what the views are computed from: a Rollout and, when readable,
// its workload, Pods and Events.
type Source struct {
	Rollout     *stepwisev1.Rollout
	Workload    *cli.Workload
	WorkloadErr error
	// Pods are the workload's Pods (matched by its selector).
	Pods []corev1.Pod
	// Events are the Events about the Rollout.
	Events []corev1.Event
	// History is every measurement seen since the dashboard started, merged
	// with status.measurements (MergeMeasurements), oldest first.
	History []stepwisev1.Measurement
}

// Summarize is the list row of one Rollout.
func Summarize(s Source) Summary {
	r := s.Rollout
	out := Summary{
		Namespace: r.Namespace, Name: r.Name,
		Phase:   orUnknown(string(r.Status.Phase)),
		Reason:  r.Status.Reason,
		Message: r.Status.Message,
		Step:    stepLabel(r),
		Canary:  r.Status.CanaryRevision,
		Stable:  r.Status.StableRevision,
	}
	switch {
	case s.Workload != nil:
		out.Replicas, out.Updated, out.Ready = s.Workload.Replicas, s.Workload.UpdatedReplicas, s.Workload.ReadyReplicas
	case s.WorkloadErr != nil:
		out.WorkloadNote = s.WorkloadErr.Error()
	}
	return out
}

// stepLabel is "n/m" (one-based) while a step is in progress.
func stepLabel(r *stepwisev1.Rollout) string {
	if i := currentStep(r); i >= 0 {
		return fmt.Sprintf("%d/%d", i+1, len(r.Spec.Steps))
	}
	return "-"
}

// currentStep is the index of the step in progress, or -1.
func currentStep(r *stepwisev1.Rollout) int {
	p := r.Status.CurrentStepIndex
	if p == nil || *p < 0 || int(*p) >= len(r.Spec.Steps) {
		return -1
	}
	return int(*p)
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

// List sorts summaries by namespace, then name, so the page is stable.
func List(sources []Source) []Summary {
	out := make([]Summary, 0, len(sources))
	for _, s := range sources {
		out = append(out, Summarize(s))
	}
	slices.SortFunc(out, func(a, b Summary) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Detail is the Rollout page.
type Detail struct {
	Summary
	Stale    string        `json:"stale,omitempty"`
	Workload string        `json:"workload"`
	Gate     string        `json:"gate,omitempty"`
	Pause    string        `json:"pause"`
	Pending  []string      `json:"pending,omitempty"`
	Steps    []StepView    `json:"steps"`
	Progress *Progress     `json:"progress,omitempty"`
	Pods     []PodView     `json:"pods"`
	Analysis *AnalysisView `json:"analysis,omitempty"`
	Charts   []Chart       `json:"charts"`
	Actions  []ActionState `json:"actions"`
	Events   []EventView   `json:"events"`
}

// StepView is one step. State is done, current, failed or pending.
type StepView struct {
	Number    int    `json:"number"`
	Partition string `json:"partition"`
	Pause     string `json:"pause,omitempty"`
	Analysis  string `json:"analysis,omitempty"`
	State     string `json:"state"`
}

// Progress is the current step's updated ready Pods against its target.
type Progress struct {
	Ready  int32 `json:"ready"`
	Target int32 `json:"target"`
}

// PodView is one Pod of the workload.
type PodView struct {
	Name     string `json:"name"`
	Revision string `json:"revision"`
	// Role is canary or stable when the revision is one of the Rollout's.
	Role     string `json:"role,omitempty"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
	Phase    string `json:"phase"`
	// Updating is true while the Pod is out of endpoints for an in-place update.
	Updating bool   `json:"updating,omitempty"`
	Node     string `json:"node,omitempty"`
}

// AnalysisView is the tally of the current (or aborting) analysis.
type AnalysisView struct {
	Step    int          `json:"step"`
	Phase   string       `json:"phase"`
	Message string       `json:"message,omitempty"`
	Metrics []MetricView `json:"metrics"`
}

// MetricView is one metric's tally.
type MetricView struct {
	Name         string `json:"name"`
	Phase        string `json:"phase"`
	Count        int32  `json:"count"`
	Of           int32  `json:"of,omitempty"`
	Successful   int32  `json:"successful"`
	Failed       int32  `json:"failed"`
	Inconclusive int32  `json:"inconclusive"`
	Errors       int32  `json:"errors"`
	Last         string `json:"last,omitempty"`
	// Judge is a compared metric's last comparison in one line, and
	// Figure the same as a picture (canary and stable side by side), an
	// SVG data: URI for an <img>, which runs no script whatever it holds.
	Judge  string `json:"judge,omitempty"`
	Figure string `json:"figure,omitempty"`
}

// Chart is one metric's measurements over time against its threshold band.
type Chart struct {
	Metric string `json:"metric"`
	// Min and Max bound the successful band; nil when open on that side.
	Min    *float64 `json:"min,omitempty"`
	Max    *float64 `json:"max,omitempty"`
	Points []Point  `json:"points"`
}

// Point is one measurement. Value is nil when there was none (an error,
// or NaN/±Inf), so the page marks it at the chart's edge.
type Point struct {
	Time    time.Time `json:"time"`
	Step    int       `json:"step"`
	Value   *float64  `json:"value"`
	Text    string    `json:"text"`
	Phase   string    `json:"phase"`
	Message string    `json:"message,omitempty"`
}

// EventView is one Event about the Rollout, newest first in Detail.Events.
type EventView struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count,omitempty"`
}

// MaxEvents bounds the Events shown: the newest are kept.
const MaxEvents = 50

// BuildDetail is the Rollout page of s at now.
func BuildDetail(s Source, now time.Time) Detail {
	r := s.Rollout
	d := Detail{Summary: Summarize(s), Actions: Permissions(r)}
	if r.Status.ObservedGeneration < r.Generation {
		d.Stale = fmt.Sprintf("the status describes generation %d; the spec is at generation %d", r.Status.ObservedGeneration, r.Generation)
	}
	// The CLI's own wording for the lines both show, so that the page and
	// `kubectl stepwise get` never disagree.
	text := cli.RenderRollout(cli.RolloutView{Rollout: r, Workload: s.Workload, WorkloadErr: s.WorkloadErr}, cli.ViewOptions{Now: now})
	d.Workload = headerLine(text, "Workload")
	d.Gate = headerLine(text, "Gate")
	d.Pause = headerLine(text, "Pause")
	d.Pending = headerLines(text, "Request")
	d.Steps = steps(r)
	if i := currentStep(r); i >= 0 && s.Workload != nil {
		if target, _, err := cli.StepTarget(s.Workload.Replicas, r.Spec.Steps[i].Partition); err == nil {
			ready := r.Status.UpdatedReadyReplicas
			if s.Workload.UpdatedReadyReplicas != nil {
				ready = *s.Workload.UpdatedReadyReplicas
			}
			d.Progress = &Progress{Ready: ready, Target: target}
		}
	}
	d.Pods = pods(r, s.Pods)
	d.Analysis = analysis(r)
	d.Charts = Charts(r, s.History)
	d.Events = events(s.Events)
	return d
}

// headerLine reads one "Label:  value" line of the CLI's header.
func headerLine(text, label string) string {
	if v := headerLines(text, label); len(v) > 0 {
		return v[0]
	}
	return ""
}

func headerLines(text, label string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, label+":"); ok {
			out = append(out, strings.TrimSpace(v))
		}
		if line == "" {
			break // the header ends at the first blank line
		}
	}
	return out
}

func steps(r *stepwisev1.Rollout) []StepView {
	cur := currentStep(r)
	failed := -1
	if a := r.Status.Analysis; r.Status.Phase == stepwisev1.RolloutAborted && a != nil && a.Phase == stepwisev1.AnalysisFailed {
		failed = int(a.StepIndex)
	}
	out := make([]StepView, 0, len(r.Spec.Steps))
	for i, st := range r.Spec.Steps {
		v := StepView{Number: i + 1, Partition: st.Partition.String(), State: "pending"}
		switch {
		case st.Pause == nil:
		case st.Pause.Duration == nil:
			v.Pause = "until promote"
		default:
			v.Pause = cli.ShortDuration(st.Pause.Duration.Duration)
		}
		if a := st.Analysis; a != nil && a.Skip {
			v.Analysis = "skipped"
		} else if spec, ok := r.Spec.AnalysisForStep(i); ok {
			names := make([]string, 0, len(spec.Metrics))
			for _, m := range spec.Metrics {
				names = append(names, m.Name)
			}
			v.Analysis = strings.Join(names, ", ")
		}
		switch {
		case i == cur:
			v.State = "current"
		case i == failed:
			v.State = "failed"
		case cur >= 0 && i < cur:
			v.State = "done"
		}
		out = append(out, v)
	}
	return out
}

func pods(r *stepwisev1.Rollout, list []corev1.Pod) []PodView {
	out := make([]PodView, 0, len(list))
	for _, p := range list {
		if p.DeletionTimestamp != nil {
			continue
		}
		v := PodView{
			Name:     p.Name,
			Revision: p.Labels[appsv1.ControllerRevisionHashLabelKey],
			Phase:    string(p.Status.Phase),
			Node:     p.Spec.NodeName,
		}
		switch v.Revision {
		case "":
		case r.Status.CanaryRevision:
			v.Role = "canary"
		case r.Status.StableRevision:
			v.Role = "stable"
		}
		for _, c := range p.Status.Conditions {
			switch {
			case c.Type == corev1.PodReady:
				v.Ready = c.Status == corev1.ConditionTrue
			case c.Type == stepwisev1.InPlaceUpdateReady && c.Status == corev1.ConditionFalse:
				v.Updating = true
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			v.Restarts += c.RestartCount
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b PodView) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func analysis(r *stepwisev1.Rollout) *AnalysisView {
	a := r.Status.Analysis
	if a == nil {
		return nil
	}
	v := &AnalysisView{Step: int(a.StepIndex) + 1, Phase: string(a.Phase), Message: a.Message}
	if v.Phase == "" {
		v.Phase = "Pending"
	}
	var of int32
	if spec, ok := r.Spec.AnalysisForStep(int(a.StepIndex)); ok && spec.Count != nil {
		of = *spec.Count
	}
	for _, m := range a.Metrics {
		v.Metrics = append(v.Metrics, MetricView{
			Name: m.Name, Phase: string(m.Phase), Count: m.Count, Of: of,
			Successful: m.Successful, Failed: m.Failed, Inconclusive: m.Inconclusive, Errors: m.Errors,
			Last: m.LastValue,
		})
		if m.Verdict != "" {
			sum := judge.Summary{Verdict: judge.Verdict(m.Verdict), CanaryMedian: m.CanaryMedian,
				StableMedian: m.StableMedian, Effect: m.Effect, PValue: m.PValue}
			mv := &v.Metrics[len(v.Metrics)-1]
			mv.Judge = sum.Line()
			mv.Figure = "data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString([]byte(judge.Figure(m.Name, nil, nil, sum.Result())))
		}
	}
	return v
}

func events(list []corev1.Event) []EventView {
	out := make([]EventView, 0, len(list))
	for _, e := range list {
		count := e.Count
		if e.Series != nil {
			count = e.Series.Count
		}
		out = append(out, EventView{Time: eventTime(&e).UTC(), Type: e.Type, Reason: e.Reason, Message: e.Message, Count: count})
	}
	slices.SortStableFunc(out, func(a, b EventView) int { return b.Time.Compare(a.Time) })
	if len(out) > MaxEvents {
		out = out[:MaxEvents]
	}
	return out
}

// eventTime is when an Event last happened: events.k8s.io writers set
// eventTime and, for repeats, series; older writers the timestamps.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.FirstTimestamp.Time
}
