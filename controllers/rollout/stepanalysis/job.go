package stepanalysis

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// A job metric's measurement outlives a round: the Job is created in one
// round and read in the later ones, which a watch on the Rollout's Jobs
// wakes. Nothing waits in a reconcile. The Job's name is derived from what
// identifies the measurement, so a restarted manager (or a round whose
// status write was lost) finds the Job again instead of running the test
// twice.

// DefaultJobDeadline is a job metric's activeDeadline when it sets none.
const DefaultJobDeadline = 10 * time.Minute

// JobGrace is how long after its deadline a Job that no job controller
// marked is judged Inconclusive by the Rollout itself: the job controller
// normally fails it with DeadlineExceeded first.
const JobGrace = 30 * time.Second

// JobKey identifies one measurement of a job metric.
type JobKey struct {
	Rollout  string
	Revision string
	Step     int32
	// StartedAt is the analysis run's start: a retried step's run gets
	// new Jobs.
	StartedAt time.Time
	Metric    string
	// Index is the metric's count of measurements taken in the run.
	Index int32
}

// maxJobName leaves room in the Job name for the suffixes the job
// controller adds to its Pods' names, and keeps it a label value.
const maxJobName = 52

// JobName is the Job of one measurement: a readable prefix (Rollout and
// metric, cut to fit) and a hash of the whole key.
func JobName(k JobKey) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{k.Rollout, k.Revision, strconv.Itoa(int(k.Step)),
		k.StartedAt.UTC().Format(time.RFC3339), k.Metric, strconv.Itoa(int(k.Index))}, "\x00")))
	hash := hex.EncodeToString(sum[:])[:10]
	prefix := strings.ToLower(k.Rollout + "-" + k.Metric)
	prefix = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, prefix)
	if len(prefix) > maxJobName-len(hash)-1 {
		prefix = prefix[:maxJobName-len(hash)-1]
	}
	prefix = strings.Trim(prefix, "-")
	return prefix + "-" + hash
}

// ExpectedJobs are the Jobs the analysis in status still waits for: one
// per running metric of a running analysis, at its next measurement's
// index. Every other Job a Rollout owns is done with (its measurement is
// recorded, or its run is over) and is deleted. Names are computed for
// every running metric, job or not: a name no Job bears costs nothing.
func ExpectedJobs(rollout string, a *v1alpha1.AnalysisStatus) map[string]bool {
	out := map[string]bool{}
	if a == nil || (a.Phase != "" && a.Phase != v1alpha1.AnalysisRunning) {
		return out
	}
	for _, ms := range a.Metrics {
		if ms.Phase != "" && ms.Phase != v1alpha1.AnalysisRunning {
			continue
		}
		out[JobName(JobKey{Rollout: rollout, Revision: a.Revision, Step: a.StepIndex,
			StartedAt: a.StartedAt.Time, Metric: ms.Name, Index: ms.Count})] = true
	}
	return out
}

// JobRun is what the Measurer needs to create a measurement's Job.
type JobRun struct {
	Name string
	// Spec is the metric's template with its strings rendered and the
	// deadline applied.
	Spec     batchv1.JobSpec
	Deadline time.Duration
}

// JobOutcome is what a Job's status says of its measurement.
type JobOutcome struct {
	// Done: the measurement is taken (Measurement); otherwise the Job
	// still runs, and RecheckAfter bounds the wait for its next change
	// (which the watch on Jobs normally delivers first).
	Done         bool
	Measurement  analysis.Measurement
	RecheckAfter time.Duration
	// Note says where the Job is (running, waiting for room), for
	// status.message; Event, what became of it this round (created), for
	// an Event. Either may be empty.
	Note, Event string
}

// JobLabelValue is a name as the value of a Job's label: itself when it
// fits, else cut and made unique by a hash.
func JobLabelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:52], "-._") + "-" + hex.EncodeToString(sum[:])[:10]
}

// DecideJob turns a Job's status into its measurement: Complete passes,
// DeadlineExceeded (the job controller's, or ours past the deadline plus
// JobGrace, should no job controller act) is Inconclusive, any other
// failure fails, and anything else runs on. created is the Job's
// creation.
func DecideJob(status batchv1.JobStatus, created time.Time, deadline time.Duration, now time.Time) JobOutcome {
	for _, c := range status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			return JobOutcome{Done: true, Measurement: analysis.Measurement{Phase: analysis.PhaseSuccessful,
				Message: "job succeeded"}}
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			if c.Reason == batchv1.JobReasonDeadlineExceeded {
				return JobOutcome{Done: true, Measurement: analysis.Measurement{Phase: analysis.PhaseInconclusive,
					Message: "job ran past its deadline of " + analysis.FormatDuration(deadline)}}
			}
			return JobOutcome{Done: true, Measurement: analysis.Measurement{Phase: analysis.PhaseFailed,
				Message: jobFailure(c)}}
		}
	}
	end := created.Add(deadline + JobGrace)
	if !now.Before(end) {
		return JobOutcome{Done: true, Measurement: analysis.Measurement{Phase: analysis.PhaseInconclusive,
			Message: fmt.Sprintf("job has no outcome %s after its deadline of %s", analysis.FormatDuration(JobGrace), analysis.FormatDuration(deadline))}}
	}
	return JobOutcome{RecheckAfter: end.Sub(now)}
}

func jobFailure(c batchv1.JobCondition) string {
	msg := "job failed"
	if c.Reason != "" {
		msg += ": " + c.Reason
	}
	if c.Message != "" {
		msg += ": " + c.Message
	}
	return msg
}

// RenderJob renders every string of a job metric's spec with vars (Args
// and the query variables) and applies the deadline: the Job's own
// activeDeadlineSeconds is never longer than the metric's.
func RenderJob(m v1alpha1.JobMetric, vars analysis.Vars) (batchv1.JobSpec, time.Duration, error) {
	deadline := DefaultJobDeadline
	if m.ActiveDeadline != nil {
		deadline = m.ActiveDeadline.Duration
	}
	raw, err := json.Marshal(m.Spec)
	if err != nil {
		return batchv1.JobSpec{}, 0, fmt.Errorf("job.spec: %w", err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return batchv1.JobSpec{}, 0, fmt.Errorf("job.spec: %w", err)
	}
	if tree, err = renderStrings(tree, vars, "job.spec"); err != nil {
		return batchv1.JobSpec{}, 0, err
	}
	if raw, err = json.Marshal(tree); err != nil {
		return batchv1.JobSpec{}, 0, fmt.Errorf("job.spec: %w", err)
	}
	var spec batchv1.JobSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return batchv1.JobSpec{}, 0, fmt.Errorf("job.spec after rendering: %w", err)
	}
	seconds := int64((deadline + time.Second - 1) / time.Second)
	if spec.ActiveDeadlineSeconds == nil || *spec.ActiveDeadlineSeconds > seconds {
		spec.ActiveDeadlineSeconds = &seconds
	}
	return spec, deadline, nil
}

// renderStrings renders the templates among a decoded JSON tree's strings;
// path names the field in errors.
func renderStrings(v any, vars analysis.Vars, path string) (any, error) {
	switch t := v.(type) {
	case string:
		if !strings.Contains(t, "{{") {
			return t, nil
		}
		out, err := analysis.Render(t, vars)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return out, nil
	case map[string]any:
		for k, e := range t {
			r, err := renderStrings(e, vars, path+"."+k)
			if err != nil {
				return nil, err
			}
			t[k] = r
		}
	case []any:
		for i, e := range t {
			r, err := renderStrings(e, vars, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			t[i] = r
		}
	}
	return v, nil
}
