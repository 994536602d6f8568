package rollout

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/stepanalysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// Jobs: a job metric's Job is created in the Rollout's namespace, read
// from the cache (which holds only Jobs labelled AnalysisRolloutLabel),
// and deleted once its measurement is recorded. Jobs the Rollout owns
// are watched, so a Job's end wakes its Rollout.
//
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete

// MaxAnalysisJobs bounds the analysis Jobs that exist at once in one
// namespace, whatever its Rollouts ask: one more waits for room (a load
// test per metric per Rollout could otherwise fill a namespace's quota).
const MaxAnalysisJobs = 10

// jobRoomRetry is when a job metric waiting for room looks again should
// no event come: an analysis Job going away wakes the namespace's
// Rollouts that are analysing (rolloutsAwaitingJobRoom).
const jobRoomRetry = time.Minute

// rolloutsAwaitingJobRoom maps an analysis Job that went away to the
// Rollouts of its namespace with an analysis in progress: one of them may
// wait for the room it leaves. The cache holds only analysis Jobs, and a
// namespace's Rollouts are few, so this stays bounded per namespace.
func (r *Reconciler) rolloutsAwaitingJobRoom(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.RolloutList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		logf.FromContext(ctx).Error(err, "listing the Rollouts that may wait for room for an analysis Job")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Status.Analysis != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// jobGone passes only an analysis Job's deletion: the event that makes room.
var jobGone = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// Job creates the measurement's Job unless it exists, and decides from
// its status (stepanalysis.DecideJob). Every failure to create or read it
// is an Error measurement, as for a query.
func (m *measurer) Job(ctx context.Context, metric v1alpha1.Metric, run stepanalysis.JobRun) stepanalysis.JobOutcome {
	fail := func(format string, args ...any) stepanalysis.JobOutcome {
		return stepanalysis.JobOutcome{Done: true, Measurement: analysis.Measurement{Phase: analysis.PhaseError, Message: fmt.Sprintf(format, args...)}}
	}
	ns := m.ro.Namespace
	var job batchv1.Job
	err := m.r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: run.Name}, &job)
	switch {
	case err == nil:
		return m.decideJob(&job, run)
	case !apierrors.IsNotFound(err):
		return fail("reading Job %s: %v", run.Name, err)
	}
	var jobs batchv1.JobList
	if err := m.r.Client.List(ctx, &jobs, client.InNamespace(ns), client.HasLabels{v1alpha1.AnalysisRolloutLabel}); err != nil {
		return fail("listing analysis Jobs: %v", err)
	}
	if n := len(jobs.Items); n >= MaxAnalysisJobs {
		return stepanalysis.JobOutcome{RecheckAfter: jobRoomRetry,
			Note: fmt.Sprintf("waiting for room: %d analysis Jobs exist in namespace %s, at most %d", n, ns, MaxAnalysisJobs)}
	}
	job = batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: run.Name, Labels: map[string]string{
			v1alpha1.AnalysisRolloutLabel: stepanalysis.JobLabelValue(m.ro.Name),
			v1alpha1.AnalysisMetricLabel:  stepanalysis.JobLabelValue(metric.Name),
		}},
		Spec: run.Spec,
	}
	// Owned, for the watch and the garbage collector, without
	// blockOwnerDeletion: that would need update on rollouts/finalizers
	// where the OwnerReferencesPermissionEnforcement plugin runs, as for
	// the canary Service.
	ref := metav1.NewControllerRef(m.ro, v1alpha1.GroupVersion.WithKind("Rollout"))
	ref.BlockOwnerDeletion = ptr.To(false)
	job.OwnerReferences = []metav1.OwnerReference{*ref}
	switch err := m.r.Client.Create(ctx, &job); {
	case apierrors.IsAlreadyExists(err):
		// The cache has not seen it yet, or it is not ours: read it fresh.
		if err := m.r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: run.Name}, &job); err != nil {
			return fail("reading Job %s: %v", run.Name, err)
		}
		return m.decideJob(&job, run)
	case err != nil:
		return fail("creating Job %s: %v", run.Name, err)
	}
	return stepanalysis.JobOutcome{RecheckAfter: run.Deadline + stepanalysis.JobGrace,
		Note: fmt.Sprintf("job %s running", run.Name), Event: fmt.Sprintf("job %s created", run.Name)}
}

func (m *measurer) decideJob(job *batchv1.Job, run stepanalysis.JobRun) stepanalysis.JobOutcome {
	if !metav1.IsControlledBy(job, m.ro) {
		return stepanalysis.JobOutcome{Done: true, Measurement: analysis.Measurement{Phase: analysis.PhaseError,
			Message: fmt.Sprintf("a Job named %s exists and is not this Rollout's", run.Name)}}
	}
	o := stepanalysis.DecideJob(job.Status, job.CreationTimestamp.Time, run.Deadline, m.now)
	if !o.Done {
		o.Note = fmt.Sprintf("job %s running", run.Name)
	}
	return o
}

// cleanJobs deletes the Rollout's analysis Jobs that no measurement of
// read (status.analysis as the round read it, that is as last written)
// waits for: their measurement is recorded, or their run is over. A Job
// whose outcome was read this round is kept until that outcome is
// written, so a lost status write finds it again rather than running it
// twice. Background propagation: the Job goes at once, its Pods after.
// A failure is logged, not retried: the next round tries again, and the
// owner reference removes every Job with its Rollout.
func (r *Reconciler) cleanJobs(ctx context.Context, ro *v1alpha1.Rollout, read *v1alpha1.AnalysisStatus) {
	var jobs batchv1.JobList
	if err := r.Client.List(ctx, &jobs, client.InNamespace(ro.Namespace),
		client.MatchingLabels{v1alpha1.AnalysisRolloutLabel: stepanalysis.JobLabelValue(ro.Name)}); err != nil {
		logf.FromContext(ctx).Error(err, "listing the Rollout's analysis Jobs")
		return
	}
	if len(jobs.Items) == 0 {
		return
	}
	expected := stepanalysis.ExpectedJobs(ro.Name, read)
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if expected[job.Name] || !job.DeletionTimestamp.IsZero() || !metav1.IsControlledBy(job, ro) {
			continue
		}
		err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &job.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			logf.FromContext(ctx).Error(err, "deleting an analysis Job", "job", job.Name)
		}
	}
}
