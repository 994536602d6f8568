package dashboard

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestSummarize(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Source)
		want   Summary
	}{
		{
			name: "second step of three, workload read",
			change: func(s *Source) {
				stepping(s.Rollout, 1, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
			},
			want: Summary{Namespace: "shop", Name: "web", Phase: "Progressing", Reason: "WaitingForPods", Step: "2/3",
				Canary: "web-7c9d8", Stable: "web-5f6b4", Replicas: 10, Updated: 5, Ready: 9},
		},
		{
			name: "healthy, no step",
			change: func(s *Source) {
				healthy(s.Rollout)
				s.Rollout.Status.Message = "revision web-5f6b4 is stable"
			},
			want: Summary{Namespace: "shop", Name: "web", Phase: "Healthy", Reason: "Stable", Message: "revision web-5f6b4 is stable",
				Step: "-", Stable: "web-5f6b4", Replicas: 10, Updated: 5, Ready: 9},
		},
		{
			name: "a step index past the plan shows no step",
			change: func(s *Source) {
				stepping(s.Rollout, 7, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
			},
			want: Summary{Namespace: "shop", Name: "web", Phase: "Progressing", Reason: "WaitingForPods", Step: "-",
				Canary: "web-7c9d8", Stable: "web-5f6b4", Replicas: 10, Updated: 5, Ready: 9},
		},
		{
			name: "workload not readable: why, instead of counts",
			change: func(s *Source) {
				s.Rollout.Status = stepwisev1.RolloutStatus{}
				s.Workload, s.WorkloadErr = nil, errors.New("cannot watch clonesets.stepwise.dev: forbidden")
			},
			want: Summary{Namespace: "shop", Name: "web", Phase: "Unknown", Step: "-", WorkloadNote: "cannot watch clonesets.stepwise.dev: forbidden"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Source{Rollout: newTestRollout(), Workload: newTestWorkload(10, 5, 5, 9)}
			c.change(&s)
			if got := Summarize(s); got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestListSortsByNamespaceThenName(t *testing.T) {
	var sources []Source
	for _, k := range []string{"b/web", "a/zeta", "a/alpha"} {
		r := newTestRollout()
		r.Namespace, r.Name, _ = strings.Cut(k, "/")
		sources = append(sources, Source{Rollout: r})
	}
	var got []string
	for _, s := range List(sources) {
		got = append(got, s.Namespace+"/"+s.Name)
	}
	if want := []string{"a/alpha", "a/zeta", "b/web"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestBuildDetailSteps(t *testing.T) {
	cases := []struct {
		name   string
		change func(r *stepwisev1.Rollout)
		states []string
	}{
		{"first step", func(r *stepwisev1.Rollout) {
			stepping(r, 0, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
		},
			[]string{"current", "pending", "pending"}},
		{"last step", func(r *stepwisev1.Rollout) {
			stepping(r, 2, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
		},
			[]string{"done", "done", "current"}},
		{"healthy", func(r *stepwisev1.Rollout) { healthy(r) }, []string{"pending", "pending", "pending"}},
		{"aborted by the second step's analysis", func(r *stepwisev1.Rollout) {
			r.Status.Phase, r.Status.Reason = stepwisev1.RolloutAborted, stepwisev1.ReasonAnalysisFailed
			r.Status.Analysis = &stepwisev1.AnalysisStatus{StepIndex: 1, Phase: stepwisev1.AnalysisFailed}
		}, []string{"pending", "failed", "pending"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newTestRollout()
			c.change(r)
			d := BuildDetail(Source{Rollout: r, Workload: newTestWorkload(10, 5, 5, 10)}, testNow)
			var states []string
			for _, s := range d.Steps {
				states = append(states, s.State)
			}
			if !reflect.DeepEqual(states, c.states) {
				t.Errorf("states %v, want %v", states, c.states)
			}
		})
	}

	r := newTestRollout()
	stepping(r, 1, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
	d := BuildDetail(Source{Rollout: r, Workload: newTestWorkload(10, 5, 4, 9)}, testNow)
	want := []StepView{
		{Number: 1, Partition: "90%", Pause: "1m", Analysis: "error-rate", State: "done"},
		{Number: 2, Partition: "50%", Pause: "until promote", Analysis: "error-rate", State: "current"},
		{Number: 3, Partition: "0", Analysis: "skipped", State: "pending"},
	}
	if !reflect.DeepEqual(d.Steps, want) {
		t.Errorf("steps\n got  %+v\n want %+v", d.Steps, want)
	}
	if d.Progress == nil || *d.Progress != (Progress{Ready: 4, Target: 5}) {
		t.Errorf("progress %+v, want 4 of 5 (10 replicas, partition 50%%)", d.Progress)
	}
	if d.Gate != "waiting: 4/5 updated pods ready" {
		t.Errorf("gate %q: the CLI's words are expected", d.Gate)
	}
	if !strings.HasPrefix(d.Workload, "CloneSet web (stepwise.dev/v1alpha1), 10 replicas") {
		t.Errorf("workload line %q", d.Workload)
	}
}

// TestDetailListsAreNeverNull: the page reads every list of the JSON
// without a null check, and a Rollout that was never measured, has no Pod
// and no Event is the common first sight.
func TestDetailListsAreNeverNull(t *testing.T) {
	r := newTestRollout()
	healthy(r)
	data, err := json.Marshal(BuildDetail(Source{Rollout: r}, testNow))
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range []string{"steps", "pods", "charts", "actions", "events"} {
		if !strings.Contains(string(data), `"`+list+`":[`) {
			t.Errorf("%s is not a list in %s", list, data)
		}
	}
}

func TestBuildDetailPendingAndStale(t *testing.T) {
	r := newTestRollout()
	stepping(r, 0, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
	r.Generation = 3
	r.Annotations = map[string]string{stepwisev1.PromoteAtAnnotation: testNow.Add(-5 * time.Second).Format(time.RFC3339)}
	d := BuildDetail(Source{Rollout: r}, testNow)
	if want := "the status describes generation 2; the spec is at generation 3"; d.Stale != want {
		t.Errorf("stale %q, want %q", d.Stale, want)
	}
	if want := []string{"promote requested 5s ago, not handled yet"}; !reflect.DeepEqual(d.Pending, want) {
		t.Errorf("pending %q, want %q", d.Pending, want)
	}
	if d.Progress != nil {
		t.Errorf("progress %+v without a workload", d.Progress)
	}
}

func TestBuildDetailPods(t *testing.T) {
	r := newTestRollout()
	pod := func(name, rev string, ready, updating bool, restarts int32) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}}}
		p.Spec.NodeName = "node-1"
		p.Status.Phase = corev1.PodRunning
		status := func(b bool) corev1.ConditionStatus {
			if b {
				return corev1.ConditionTrue
			}
			return corev1.ConditionFalse
		}
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status(ready)},
			{Type: stepwisev1.InPlaceUpdateReady, Status: status(!updating)},
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: restarts}, {Name: "sidecar", RestartCount: 1}}
		return p
	}
	gone := pod("web-gone", "web-5f6b4", true, false, 0)
	gone.DeletionTimestamp = &metav1.Time{Time: testNow}
	d := BuildDetail(Source{Rollout: r, Pods: []corev1.Pod{
		pod("web-c", "web-old", true, false, 0),
		pod("web-b", "web-5f6b4", true, false, 0),
		pod("web-a", "web-7c9d8", false, true, 1),
		gone,
	}}, testNow)
	want := []PodView{
		{Name: "web-a", Revision: "web-7c9d8", Role: "canary", Ready: false, Updating: true, Restarts: 2, Phase: "Running", Node: "node-1"},
		{Name: "web-b", Revision: "web-5f6b4", Role: "stable", Ready: true, Restarts: 1, Phase: "Running", Node: "node-1"},
		{Name: "web-c", Revision: "web-old", Ready: true, Restarts: 1, Phase: "Running", Node: "node-1"},
	}
	if !reflect.DeepEqual(d.Pods, want) {
		t.Errorf("pods\n got  %+v\n want %+v", d.Pods, want)
	}
}

func TestCharts(t *testing.T) {
	r := newTestRollout()
	// Step 2 measures latency too, with its own band.
	r.Spec.Steps[1].Analysis = &stepwisev1.StepAnalysis{AnalysisSpec: stepwisev1.AnalysisSpec{Metrics: []stepwisev1.Metric{
		r.Spec.Analysis.Metrics[0],
		{Name: "latency", Prometheus: r.Spec.Analysis.Metrics[0].Prometheus, ThresholdRange: &stepwisev1.ThresholdRange{Min: "0.1", Max: "0.5"}},
	}}}
	history := []stepwisev1.Measurement{
		{Metric: "error-rate", Step: 0, Value: "0", Phase: stepwisev1.MeasurementSuccessful, Time: at(-40 * time.Second)},
		{Metric: "error-rate", Step: 0, Value: "", Phase: stepwisev1.MeasurementError, Message: "connection refused", Time: at(-30 * time.Second)},
		{Metric: "latency", Step: 1, Value: "NaN", Phase: stepwisev1.MeasurementInconclusive, Time: at(-20 * time.Second)},
		{Metric: "error-rate", Step: 1, Value: "0.2", Phase: stepwisev1.MeasurementFailed, Time: at(-10 * time.Second)},
	}
	got := Charts(r, history)
	f := func(v float64) *float64 { return &v }
	want := []Chart{
		{Metric: "error-rate", Max: f(0.01), Points: []Point{
			{Time: testNow.Add(-40 * time.Second), Step: 1, Value: f(0), Text: "0", Phase: "Successful"},
			{Time: testNow.Add(-30 * time.Second), Step: 1, Phase: "Error", Message: "connection refused"},
			{Time: testNow.Add(-10 * time.Second), Step: 2, Value: f(0.2), Text: "0.2", Phase: "Failed"},
		}},
		{Metric: "latency", Min: f(0.1), Max: f(0.5), Points: []Point{
			{Time: testNow.Add(-20 * time.Second), Step: 2, Text: "NaN", Phase: "Inconclusive"},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("charts\n got  %s\n want %s", dump(got), dump(want))
	}
	if got := Charts(r, nil); len(got) != 0 {
		t.Errorf("charts without measurements: %+v", got)
	}
}

func dump(charts []Chart) string {
	var b strings.Builder
	for _, c := range charts {
		b.WriteString(c.Metric + " [")
		if c.Min != nil {
			b.WriteString("min ")
		}
		if c.Max != nil {
			b.WriteString("max ")
		}
		for _, p := range c.Points {
			v := "nil"
			if p.Value != nil {
				v = "set"
			}
			b.WriteString(p.Time.Format(time.TimeOnly) + ":" + p.Phase + ":" + v + " ")
		}
		b.WriteString("] ")
	}
	return b.String()
}

func TestMergeMeasurements(t *testing.T) {
	m := func(metric string, step int32, sec int) stepwisev1.Measurement {
		return stepwisev1.Measurement{Metric: metric, Step: step, Value: "0", Phase: stepwisev1.MeasurementSuccessful, Time: at(time.Duration(sec) * time.Second)}
	}
	names := func(list []stepwisev1.Measurement) []string {
		var out []string
		for _, x := range list {
			out = append(out, x.Metric+"@"+x.Time.Time.Sub(testNow).String())
		}
		return out
	}
	type round struct {
		status []stepwisev1.Measurement
		want   []string
	}
	cases := []struct {
		name   string
		rounds []round
	}{
		{"first sight takes the status", []round{
			{[]stepwisev1.Measurement{m("a", 0, 1), m("a", 0, 2)}, []string{"a@1s", "a@2s"}},
		}},
		{"the status drops the oldest: the history keeps them", []round{
			{[]stepwisev1.Measurement{m("a", 0, 1), m("a", 0, 2)}, []string{"a@1s", "a@2s"}},
			{[]stepwisev1.Measurement{m("a", 0, 2), m("a", 0, 3)}, []string{"a@1s", "a@2s", "a@3s"}},
		}},
		{"the same status twice adds nothing", []round{
			{[]stepwisev1.Measurement{m("a", 0, 1)}, []string{"a@1s"}},
			{[]stepwisev1.Measurement{m("a", 0, 1)}, []string{"a@1s"}},
		}},
		{"two metrics at the same second are two points", []round{
			{[]stepwisev1.Measurement{m("a", 0, 1), m("b", 0, 1)}, []string{"a@1s", "b@1s"}},
		}},
		{"a later round is sorted in by time", []round{
			{[]stepwisev1.Measurement{m("a", 0, 5)}, []string{"a@5s"}},
			{[]stepwisev1.Measurement{m("b", 0, 3), m("a", 0, 5)}, []string{"b@3s", "a@5s"}},
		}},
		{"an empty status (a restarted rollout) keeps the history", []round{
			{[]stepwisev1.Measurement{m("a", 0, 1)}, []string{"a@1s"}},
			{nil, []string{"a@1s"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var history []stepwisev1.Measurement
			for i, r := range c.rounds {
				before := names(history)
				next := MergeMeasurements(history, r.status)
				if !reflect.DeepEqual(names(history), before) {
					t.Fatalf("round %d changed its input", i)
				}
				history = next
				if got := names(history); !reflect.DeepEqual(got, r.want) {
					t.Errorf("round %d: %v, want %v", i, got, r.want)
				}
			}
		})
	}

	t.Run("bounded by MaxHistory, the oldest go", func(t *testing.T) {
		var history, more []stepwisev1.Measurement
		for i := range MaxHistory {
			history = append(history, m("a", 0, i))
		}
		for i := range 10 {
			more = append(more, m("a", 0, MaxHistory+i))
		}
		history = MergeMeasurements(history, more)
		if len(history) != MaxHistory || history[0].Time.Time != testNow.Add(10*time.Second) {
			t.Errorf("%d kept, first at %s", len(history), history[0].Time.Sub(testNow))
		}
	})
}

func TestEventsNewestFirst(t *testing.T) {
	ev := func(reason string, d time.Duration) corev1.Event {
		return corev1.Event{Reason: reason, Type: corev1.EventTypeNormal, EventTime: metav1.MicroTime{Time: testNow.Add(d)}}
	}
	series := ev("MeasurementError", -50*time.Second)
	series.Series = &corev1.EventSeries{Count: 3, LastObservedTime: metav1.MicroTime{Time: testNow.Add(-time.Second)}}
	old := corev1.Event{Reason: "Legacy", LastTimestamp: metav1.Time{Time: testNow.Add(-time.Hour)}, Count: 2}
	got := events([]corev1.Event{ev("StepReady", -30*time.Second), old, series, ev("RolloutStarted", -40*time.Second)})
	var reasons []string
	for _, e := range got {
		reasons = append(reasons, e.Reason)
	}
	if want := []string{"MeasurementError", "StepReady", "RolloutStarted", "Legacy"}; !reflect.DeepEqual(reasons, want) {
		t.Errorf("order %v, want %v", reasons, want)
	}
	if got[0].Count != 3 || got[3].Count != 2 {
		t.Errorf("counts %d and %d, want 3 (series) and 2", got[0].Count, got[3].Count)
	}
}

// TestAnalysisJudgeFigure: a compared metric carries its line and a
// picture, an SVG data: URI showing both sides; a threshold metric none.
func TestAnalysisJudgeFigure(t *testing.T) {
	r := newTestRollout()
	r.Status.Analysis = &stepwisev1.AnalysisStatus{Phase: stepwisev1.AnalysisFailed, Metrics: []stepwisev1.MetricStatus{
		{Name: "errors", Phase: stepwisev1.AnalysisFailed, CanaryMedian: "0.0419", StableMedian: "0.00987", Effect: "3.22", PValue: "3.4e-08", Verdict: "Fail"},
		{Name: "threshold", Phase: stepwisev1.AnalysisRunning, LastValue: "0.1"},
	}}
	v := analysis(r)
	if len(v.Metrics) != 2 {
		t.Fatalf("%d metrics", len(v.Metrics))
	}
	judged := v.Metrics[0]
	if judged.Judge != "canary 0.0419 vs stable 0.00987, effect +322.0%, p=3.4e-08: Fail" {
		t.Errorf("judge line %q", judged.Judge)
	}
	const prefix = "data:image/svg+xml;base64,"
	if !strings.HasPrefix(judged.Figure, prefix) {
		t.Fatalf("figure %.40q is not an SVG data URI", judged.Figure)
	}
	svg, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(judged.Figure, prefix))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", ">stable<", "median 0.0419", `stroke-width="2.5"`, "median 0.00987", "Fail"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("figure lacks %q", want)
		}
	}
	if n := strings.Count(string(svg), `stroke-width="2.5"`); n != 2 {
		t.Errorf("%d median bars, want canary and stable", n)
	}
	if v.Metrics[1].Judge != "" || v.Metrics[1].Figure != "" {
		t.Errorf("a threshold metric got a judge view: %+v", v.Metrics[1])
	}
}
