package rollout_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout"
)

// A job metric runs a Job in the Rollout's namespace for each step's
// measurement: a Complete Job promotes, a Failed Job aborts, and each Job
// is deleted once its outcome is recorded.
//
// envtest runs no job controller (nor a scheduler or kubelet): the test
// plays the job controller, writing each Job's terminal status conditions
// as it would when the Job's Pod exits, and the Rollout controller reads
// them through its watch on the Jobs it owns.
func TestJobMetricPromotesAndAborts(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(1)
	ro.Spec.Analysis.Args = stepwisev1.ArgsFromMap(map[string]string{"target": "checkout"})
	ro.Spec.Analysis.Metrics[0] = stepwisev1.Metric{
		Name: "smoke",
		Job: &stepwisev1.JobMetric{
			ActiveDeadline: &metav1.Duration{Duration: 2 * time.Minute},
			Spec: batchv1.JobSpec{
				BackoffLimit: new(int32(0)),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "smoke", Image: "registry.example.com/curl:8",
						Args: []string{"-f", "http://{{ .Args.target }}.{{ .Namespace }}/healthz"}}},
				}},
			},
		},
	}
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	job := waitForJob(t, ns)
	if !metav1.IsControlledBy(&job, getRollout(t, ns, "web")) {
		t.Errorf("Job %s is not controlled by its Rollout: %+v", job.Name, job.OwnerReferences)
	}
	if got := job.Labels[stepwisev1.AnalysisMetricLabel]; got != "smoke" {
		t.Errorf("Job labels %v, want the metric named", job.Labels)
	}
	if args := job.Spec.Template.Spec.Containers[0].Args; args[1] != "http://checkout."+ns+"/healthz" {
		t.Errorf("Job args %v, want the Rollout's arg and namespace rendered", args)
	}
	if d := job.Spec.ActiveDeadlineSeconds; d == nil || *d != 120 {
		t.Errorf("activeDeadlineSeconds %v, want the metric's 120", d)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventAnalysisJob, "job "+job.Name+" created")

	// Each step's Job completes; the rollout is promoted.
	finished := map[string]bool{}
	done := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		finishJobs(t, g, ns, true, finished)
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	if got := measurementsOf(done); got[0] != 1 || got[1] != 1 {
		t.Errorf("measurements by step = %v, want 1 in each step", got)
	}
	if !finished[job.Name] || len(finished) != 2 {
		t.Errorf("Jobs finished %v, want the first step's %s and one for the last step", finished, job.Name)
	}
	waitForNoJobs(t, ns)

	// A failing Job aborts the next release.
	commit(t, ns, "web", "3.0.0")
	clear(finished)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		finishJobs(t, g, ns, false, finished)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Message).To(ContainSubstring("job failed: BackoffLimitExceeded"))
	})
	if len(finished) != 1 {
		t.Errorf("Jobs failed %v, want the first step's only", finished)
	}
	waitForNoJobs(t, ns)
}

// A manager restarted while a measurement's Job runs finds that Job again
// by its name and waits for it, rather than starting the test a second
// time.
func TestJobMetricSurvivesARestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createCloneSet(t, newCloneSet(ns, "web", 10, "1.0.0"))
	autopilot(t, ns, "web")
	first := startController(t, ns)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0), skipAnalysis()))
	ro.Spec.Analysis = errorRate(1)
	ro.Spec.Analysis.Metrics[0] = loadJobMetric()
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	job := waitForJob(t, ns)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Message).To(ContainSubstring("metric load: job " + job.Name + " running"))
	})
	first.Stop()
	startController(t, ns)
	// The new manager's first rounds find the Job by its name: no second
	// one appears. (Were the name not the same, the first round after the
	// restart would create another at once.)
	NewWithT(t).Consistently(func(g Gomega) {
		jobs, err := analysisJobs(testContext(t), ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(jobs).To(HaveLen(1))
		g.Expect(jobs[0].UID).To(Equal(job.UID))
	}).WithTimeout(3 * time.Second).WithPolling(poll).Should(Succeed())
	finished := map[string]bool{}
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		finishJobs(t, g, ns, true, finished)
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	if len(finished) != 1 || !finished[job.Name] {
		t.Errorf("Jobs finished %v, want only %s", finished, job.Name)
	}
	waitForNoJobs(t, ns)
}

// A namespace holds at most MaxAnalysisJobs analysis Jobs at once: one
// more measurement waits, saying so, and starts once there is room.
func TestJobMetricWaitsForRoomInTheNamespace(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	ctx := testContext(t)
	// Other analysis Jobs of the namespace (of Rollouts not running here,
	// so nothing deletes them but the test).
	for i := range rollout.MaxAnalysisJobs {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("other-%d", i),
				Labels: map[string]string{stepwisev1.AnalysisRolloutLabel: "other"}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "registry.example.com/load:1"}}}}},
		}
		if err := env.client.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(1)
	ro.Spec.Analysis.Metrics[0] = loadJobMetric()
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Message).To(ContainSubstring(fmt.Sprintf("metric load: waiting for room: %d analysis Jobs exist in namespace %s, at most %d",
			rollout.MaxAnalysisJobs, ns, rollout.MaxAnalysisJobs)))
	})
	if jobs, err := analysisJobs(ctx, ns); err != nil || len(jobs) != rollout.MaxAnalysisJobs {
		t.Fatalf("analysis Jobs %d (%v), want only the %d others", len(jobs), err, rollout.MaxAnalysisJobs)
	}
	if err := env.client.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-0"}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	// The Job going away wakes the Rollout that waits for its room (the
	// retry, a minute, is longer than the wait allowed here).
	NewWithT(t).Eventually(func(g Gomega) {
		var list batchv1.JobList
		g.Expect(env.client.List(ctx, &list, client.InNamespace(ns),
			client.MatchingLabels{stepwisev1.AnalysisRolloutLabel: "web"})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// loadJobMetric is a job metric named load whose Job runs one container.
func loadJobMetric() stepwisev1.Metric {
	return stepwisev1.Metric{Name: "load", Job: &stepwisev1.JobMetric{Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "load", Image: "registry.example.com/load:1"}}}}}}}
}

// analysisJobs lists the namespace's analysis Jobs from the API server.
func analysisJobs(ctx context.Context, ns string) ([]batchv1.Job, error) {
	var jobs batchv1.JobList
	err := env.client.List(ctx, &jobs, client.InNamespace(ns), client.HasLabels{stepwisev1.AnalysisRolloutLabel})
	return jobs.Items, err
}

func waitForJob(t *testing.T, ns string) batchv1.Job {
	t.Helper()
	var job batchv1.Job
	NewWithT(t).Eventually(func(g Gomega) {
		jobs, err := analysisJobs(testContext(t), ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(jobs).To(HaveLen(1))
		job = jobs[0]
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return job
}

func waitForNoJobs(t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		jobs, err := analysisJobs(testContext(t), ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(jobs).To(BeEmpty(), "analysis Jobs left once their outcomes are recorded")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// finishJobs plays the job controller: every analysis Job without an
// outcome gets the status conditions the job controller writes when its
// Pod succeeds (complete) or fails past its backoff limit. Finished Jobs
// are added to finished.
func finishJobs(t *testing.T, g Gomega, ns string, complete bool, finished map[string]bool) {
	ctx := testContext(t)
	jobs, err := analysisJobs(ctx, ns)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range jobs {
		job := &jobs[i]
		if len(job.Status.Conditions) > 0 || !job.DeletionTimestamp.IsZero() {
			continue
		}
		now := metav1.Now()
		start := metav1.NewTime(now.Add(-time.Second))
		job.Status.StartTime = &start
		cond := func(typ batchv1.JobConditionType, reason, msg string) batchv1.JobCondition {
			return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg,
				LastProbeTime: now, LastTransitionTime: now}
		}
		if complete {
			job.Status.Succeeded = 1
			job.Status.CompletionTime = &now
			job.Status.Conditions = []batchv1.JobCondition{
				cond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
				cond(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
			}
		} else {
			job.Status.Failed = 1
			job.Status.Conditions = []batchv1.JobCondition{
				cond(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
				cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
			}
		}
		err := env.client.Status().Update(ctx, job)
		if err != nil && strings.Contains(err.Error(), "not found") {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		finished[job.Name] = true
	}
}
