package stepanalysis

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

func TestDecideJob(t *testing.T) {
	created := at(0)
	cond := func(typ batchv1.JobConditionType, status corev1.ConditionStatus, reason, msg string) batchv1.JobStatus {
		return batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: typ, Status: status, Reason: reason, Message: msg}}}
	}
	tests := []struct {
		name        string
		status      batchv1.JobStatus
		now         float64
		wantDone    bool
		wantPhase   analysis.Phase
		wantMessage string
		wantRecheck time.Duration
	}{
		{name: "no condition yet runs on until the deadline plus grace", now: 60,
			wantRecheck: 10*time.Minute + JobGrace - time.Minute},
		{name: "complete passes", status: cond(batchv1.JobComplete, corev1.ConditionTrue, "", ""), now: 60,
			wantDone: true, wantPhase: analysis.PhaseSuccessful, wantMessage: "job succeeded"},
		{name: "success criteria met passes before Complete", status: cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "CompletionsReached", ""), now: 60,
			wantDone: true, wantPhase: analysis.PhaseSuccessful},
		{name: "failed fails, naming the reason and message", status: cond(batchv1.JobFailed, corev1.ConditionTrue, "BackoffLimitExceeded", "Job has reached the specified backoff limit"), now: 60,
			wantDone: true, wantPhase: analysis.PhaseFailed, wantMessage: "job failed: BackoffLimitExceeded: Job has reached the specified backoff limit"},
		{name: "failure target fails before Failed", status: cond(batchv1.JobFailureTarget, corev1.ConditionTrue, "PodFailurePolicy", ""), now: 60,
			wantDone: true, wantPhase: analysis.PhaseFailed},
		{name: "a deadline exceeded is inconclusive, not a failure", status: cond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"), now: 600,
			wantDone: true, wantPhase: analysis.PhaseInconclusive, wantMessage: "job ran past its deadline of 10m"},
		{name: "a condition that is not true does not count", status: cond(batchv1.JobFailed, corev1.ConditionFalse, "", ""), now: 60,
			wantRecheck: 10*time.Minute + JobGrace - time.Minute},
		{name: "suspended runs on", status: cond(batchv1.JobSuspended, corev1.ConditionTrue, "", ""), now: 60,
			wantRecheck: 10*time.Minute + JobGrace - time.Minute},
		{name: "no outcome past deadline and grace is inconclusive", now: 630,
			wantDone: true, wantPhase: analysis.PhaseInconclusive, wantMessage: "job has no outcome 30s after its deadline of 10m"},
		{name: "just before deadline and grace runs on", now: 629,
			wantRecheck: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DecideJob(tt.status, created, 10*time.Minute, at(tt.now))
			if o.Done != tt.wantDone {
				t.Fatalf("done = %v, want %v (%+v)", o.Done, tt.wantDone, o)
			}
			if !o.Done {
				if o.RecheckAfter != tt.wantRecheck {
					t.Errorf("recheck after %s, want %s", o.RecheckAfter, tt.wantRecheck)
				}
				return
			}
			if o.Measurement.Phase != tt.wantPhase {
				t.Errorf("phase = %s, want %s", o.Measurement.Phase, tt.wantPhase)
			}
			if tt.wantMessage != "" && o.Measurement.Message != tt.wantMessage {
				t.Errorf("message = %q, want %q", o.Measurement.Message, tt.wantMessage)
			}
		})
	}
}

func TestJobNameIsStableDistinctAndValid(t *testing.T) {
	k := JobKey{Rollout: "checkout", Revision: "web-2", Step: 1, StartedAt: at(0), Metric: "smoke", Index: 0}
	// Pinned: a name that changed between releases would make an
	// upgraded manager run a measurement's Job a second time.
	if got := JobName(k); got != pinnedJobName {
		t.Errorf("name %q, want %q", got, pinnedJobName)
	}
	if !strings.HasPrefix(JobName(k), "checkout-smoke-") {
		t.Errorf("name %q does not say whose it is", JobName(k))
	}
	seen := map[string]string{JobName(k): "base"}
	for what, mutate := range map[string]func(*JobKey){
		"index":    func(k *JobKey) { k.Index = 1 },
		"step":     func(k *JobKey) { k.Step = 2 },
		"revision": func(k *JobKey) { k.Revision = "web-3" },
		"run":      func(k *JobKey) { k.StartedAt = at(60) },
		"metric":   func(k *JobKey) { k.Metric = "load" },
		"rollout":  func(k *JobKey) { k.Rollout = "cart" },
	} {
		other := k
		mutate(&other)
		n := JobName(other)
		if prev, ok := seen[n]; ok {
			t.Errorf("changing the %s gives the name of %s: %s", what, prev, n)
		}
		seen[n] = what
	}
	long := JobKey{Rollout: strings.Repeat("a.b", 80), Metric: "Very_Long_Metric_" + strings.Repeat("x", 40)}
	for _, key := range []JobKey{k, long} {
		n := JobName(key)
		if len(n) > maxJobName {
			t.Errorf("name %q is %d long, want at most %d", n, len(n), maxJobName)
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("name %q: %v", n, errs)
		}
	}
	if v := JobLabelValue(long.Rollout); len(v) > 63 || len(validation.IsValidLabelValue(v)) > 0 {
		t.Errorf("label value %q is not valid", v)
	}
}

func TestExpectedJobsAreTheRunningMetricsNextMeasurements(t *testing.T) {
	a := &v1alpha1.AnalysisStatus{StepIndex: 1, Revision: "web-2", Phase: v1alpha1.AnalysisRunning,
		Metrics: []v1alpha1.MetricStatus{
			{Name: "smoke", Phase: v1alpha1.AnalysisRunning, Count: 2},
			{Name: "load", Phase: v1alpha1.AnalysisPassed, Count: 1},
		}}
	a.StartedAt.Time = at(0)
	key := JobKey{Rollout: "web", Revision: "web-2", Step: 1, StartedAt: at(0), Metric: "smoke"}
	got := ExpectedJobs("web", a)
	key.Index = 2
	if len(got) != 1 || !got[JobName(key)] {
		t.Errorf("expected %v, want only smoke's third Job", got)
	}
	key.Index = 1
	if got[JobName(key)] {
		t.Error("a recorded measurement's Job is still expected")
	}
	a.Phase = v1alpha1.AnalysisFailed
	if got := ExpectedJobs("web", a); len(got) != 0 {
		t.Errorf("a decided analysis expects %v, want none", got)
	}
	if got := ExpectedJobs("web", nil); len(got) != 0 {
		t.Errorf("no analysis expects %v, want none", got)
	}
}

func TestRenderJobRendersArgsAndBoundsTheDeadline(t *testing.T) {
	m := v1alpha1.JobMetric{Spec: batchv1.JobSpec{
		ActiveDeadlineSeconds: new(int64(3600)),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "smoke", Image: "curl:{{ .Args.tag }}",
			Args: []string{"-f", "http://{{ .Args.service }}.{{ .Namespace }}/healthz"},
		}}}},
	}, ActiveDeadline: dur(90 * time.Second)}
	spec, deadline, err := RenderJob(m, analysis.Vars{Namespace: "shop", Args: map[string]string{"tag": "8.5", "service": "checkout"}})
	if err != nil {
		t.Fatal(err)
	}
	c := spec.Template.Spec.Containers[0]
	if c.Image != "curl:8.5" || c.Args[1] != "http://checkout.shop/healthz" {
		t.Errorf("rendered container %+v", c)
	}
	if deadline != 90*time.Second || *spec.ActiveDeadlineSeconds != 90 {
		t.Errorf("deadline %s, activeDeadlineSeconds %d, want 90s both", deadline, *spec.ActiveDeadlineSeconds)
	}
	if m.Spec.Template.Spec.Containers[0].Image != "curl:{{ .Args.tag }}" {
		t.Error("rendering changed the metric's template")
	}

	_, deadline, _ = RenderJob(v1alpha1.JobMetric{}, analysis.Vars{})
	if deadline != DefaultJobDeadline {
		t.Errorf("default deadline %s, want %s", deadline, DefaultJobDeadline)
	}
	_, _, err = RenderJob(v1alpha1.JobMetric{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Image: "x:{{ .Args.missing }}"}}}}}}, analysis.Vars{Args: map[string]string{}})
	if err == nil || !strings.Contains(err.Error(), "job.spec.template.spec.containers[0].image") {
		t.Errorf("missing arg: %v, want an error naming the field", err)
	}
}

func TestRunWaitsForAJobWithoutTallyingAndRecordsItsOutcome(t *testing.T) {
	jobMetric := v1alpha1.Metric{Name: "smoke", Job: &v1alpha1.JobMetric{ActiveDeadline: dur(time.Minute)}}
	s := spec(func(a *v1alpha1.AnalysisSpec) { a.Count = new(int32(1)); a.ScrapeMargin = dur(time.Second) }, jobMetric)
	in := input(s)
	in.Rollout = "web"
	f := &fakeMeasurer{jobs: map[string]JobOutcome{}}
	res := rounds(t, in, f, 0, 1, 5)
	if len(f.runs) != 2 || f.runs[0].Name != f.runs[1].Name {
		t.Fatalf("Jobs asked for: %+v, want the same one twice (at 1s and 5s)", f.queries)
	}
	name := f.runs[0].Name
	if f.runs[0].Deadline != time.Minute {
		t.Errorf("deadline %s, want 1m", f.runs[0].Deadline)
	}
	for _, r := range res[1:] {
		if len(r.Measurements) != 0 || r.Status.Metrics[0].Count != 0 || r.Status.Phase != v1alpha1.AnalysisRunning {
			t.Fatalf("a running Job was tallied: %+v", r.Status)
		}
		if r.RequeueAfter != time.Minute {
			t.Errorf("requeue after %s while the Job runs, want its recheck (1m), not a hot loop", r.RequeueAfter)
		}
		if !strings.Contains(r.Waiting, "metric smoke: job "+name+" running") {
			t.Errorf("waiting = %q", r.Waiting)
		}
	}
	if !ExpectedJobs("web", &res[2].Status)[name] {
		t.Error("the running Job is not expected, so it would be deleted")
	}

	f.jobs[name] = JobOutcome{Done: true, Measurement: analysis.Measurement{Phase: analysis.PhaseFailed, Message: "job failed: BackoffLimitExceeded"}}
	in.Status, in.Start, in.Now = res[2].Status.DeepCopy(), false, at(9)
	last, err := Run(t.Context(), in, f)
	if err != nil {
		t.Fatal(err)
	}
	if last.Status.Phase != v1alpha1.AnalysisFailed || len(last.Measurements) != 1 || last.Measurements[0].Message != "job failed: BackoffLimitExceeded" {
		t.Errorf("after the Job failed: %s, measurements %+v", last.Status.Phase, last.Measurements)
	}
	if ExpectedJobs("web", &last.Status)[name] {
		t.Error("the Job whose outcome is recorded is still expected")
	}
}

// pinnedJobName is JobName of the key in TestJobNameIsStableDistinctAndValid.
const pinnedJobName = "checkout-smoke-20db0d4146"
