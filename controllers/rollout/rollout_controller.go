package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/traffic"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

// fieldManager owns the workload's partition and writes the Rollout's status.
const fieldManager = workload.FieldManager

// DefaultConcurrency is how many Rollouts are reconciled at once. A
// reconcile that measures waits for Prometheus (up to the analysis
// interval, at most stepanalysis.MaxQueryTime), so the workers must
// outnumber the Rollouts whose Prometheus may stop answering at the same
// time; each idle worker costs a goroutine.
const DefaultConcurrency = 16

// conflictRequeue is the retry after a status patch lost to a concurrent
// change of the Rollout (an annotation written between our read and our
// write). That change is watched too; this is only a safety net.
const conflictRequeue = time.Second

// Reconciler reconciles Rollouts.
type Reconciler struct {
	// Client reads from the cache and writes.
	Client client.Client
	// APIReader reads around the cache: Secrets and ConfigMaps that metrics
	// reference (not cached, so that get is the only permission they need)
	// and the workload's managed fields (stripped from the cache).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Metrics   *Metrics
	// Clock is injectable for tests; the real clock when nil.
	Clock clock.PassiveClock
	// ProviderFactory builds analysis providers; DefaultProviderFactory
	// (pkg/analysis/prometheus) when nil.
	ProviderFactory ProviderFactory
	// AnalysisAddresses restricts the Prometheus addresses that metrics may
	// name (entries as prometheus.ParseAllowList reads them: URL prefixes
	// or hosts); empty allows any. A metric naming another address gets an
	// Error measurement before any Secret is read or connection made. Set
	// from the manager's flag AnalysisAddressesFlag.
	AnalysisAddresses []string
	// AnalysisBudget bounds the memory of the Prometheus answers being
	// read at once, across every Rollout (prometheus.Budget); nil:
	// SetupWithManager makes one of prometheus.DefaultBudget bytes.
	AnalysisBudget *prometheus.Budget
	// Notifier posts phase transitions to spec.notifications off the
	// reconcile; with none, spec.notifications is ignored and nothing is
	// recorded in status.notifications.
	Notifier *Notifier
	// Pods reads the cached Pods without copying them.
	Pods workload.PodLister
	// Namespaces are those the manager watches; empty for all. Traffic
	// routing neither reads nor writes an HTTPRoute elsewhere.
	Namespaces []string

	// cache reads workloads, including the unstructured OpenKruise
	// CloneSet, which the manager's client would read live, and the
	// Rollout when it holds our last write (readRollout). Set by
	// SetupWithManager; Client when unset.
	cache client.Reader
	// routesWatched and grantsWatched: HTTPRoutes and ReferenceGrants are
	// watched (their CRDs were installed when the manager started), so
	// waiting for a Gateway's acceptance or a missing grant needs no
	// requeue. Set by SetupWithManager.
	routesWatched, grantsWatched bool
	// mem is what the controller keeps in memory between rounds.
	mem memory
}

// RBAC: only the verbs the code calls. The Rollout is watched, and read
// fresh (get) when the cache may lack our last write; its status is
// patched. Workloads are read from the cache (list, watch), their managed
// fields fresh (get), and their partition written with server-side apply
// (patch). Pods and revisions are only read from the cache. Events go
// through the events.k8s.io API.
//
// +kubebuilder:rbac:groups=stepwise.dev,resources=rollouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=stepwise.dev,resources=rollouts/status,verbs=patch
// +kubebuilder:rbac:groups=stepwise.dev,resources=clonesets,verbs=list;watch
// +kubebuilder:rbac:groups=apps.kruise.io,resources=clonesets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// Secrets, get only and in every namespace: a metric's bearer token is a
// Secret in the Rollout's namespace (a metric's prometheus.bearerTokenSecretRef),
// and Rollouts live in any namespace. It is read by name at each
// measurement, around the cache, so no list or watch is granted and no
// Secret is kept in memory. An install whose Rollouts never use a token can
// drop this rule (docs/security.md).
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
//
// ConfigMaps, get only, for the same reason: a metric's private CA
// (prometheus.tls.caRef) may be a ConfigMap in the Rollout's namespace.
// Pods, delete: an aborted rollout on a StatefulSet or an OpenKruise
// CloneSet without its CloneSetPartitionRollback gate deletes its canary
// Pods, one budget at a time, for their controller to recreate them on the
// stable revision. Stepwise's own CloneSets are not patched: the Rollout
// governs them through its status.partitionGrant.
//
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get

// SetupWithManager wires the reconciler. Rollouts are watched for spec and
// annotation changes (requests) and, for the other Rollouts of the same
// workload, for their deletion; the workloads they drive for any change,
// mapped back through a field index; the Services, HTTPRoutes and
// ReferenceGrants their traffic routing reads, by metadata, through another; time-driven work (pauses,
// measurements, deadlines) is requeued, nothing is polled. OpenKruise's
// CloneSet is watched only when its CRD is installed at start.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.ProviderFactory == nil {
		r.ProviderFactory = DefaultProviderFactory
	}
	if err := r.setupAnalysis(concurrency); err != nil {
		return err
	}
	if r.Pods == nil {
		return errors.New("the Rollout controller needs the cache's Pod stores (Reconciler.Pods)")
	}
	r.cache = mgr.GetCache()
	b := ctrl.NewControllerManagedBy(mgr).
		Named("rollout").
		For(&v1alpha1.Rollout{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&v1alpha1.CloneSet{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOf(workload.CloneSetGVK))).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOf(workload.StatefulSetGVK))).
		// A rollback deletes canary Pods one by one and waits for each.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOfPod), builder.WithPredicates(podMoved)).
		// A job metric's Job ending wakes its Rollout; one going away wakes
		// those that may wait for its room.
		Owns(&batchv1.Job{}).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsAwaitingJobRoom), builder.WithPredicates(jobGone)).
		// A Service re-applied by git during a release gets its revision
		// key back at once; only metadata is cached, the selector is read
		// fresh. HTTPRoutes and ReferenceGrants likewise, below.
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOfTraffic("Service")), builder.OnlyMetadata).
		// The next Rollout of a workload takes over when the one driving it goes.
		Watches(&v1alpha1.Rollout{}, handler.EnqueueRequestsFromMapFunc(r.siblingsOf), builder.WithPredicates(goingAway)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})

	kruise := workload.KruiseCloneSetGVK
	installed, err := crdInstalled(mgr, kruise)
	switch {
	case err != nil:
		return err
	case installed:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kruise)
		b = b.Watches(u, handler.EnqueueRequestsFromMapFunc(r.rolloutsOf(kruise)))
	default:
		mgr.GetLogger().Info("OpenKruise CloneSet CRD not installed: not watching apps.kruise.io CloneSets (restart the manager after installing it)")
	}
	// Traffic routing's Gateway API objects, by their metadata, through the
	// same index as the Services.
	for _, w := range []struct {
		gvk     schema.GroupVersionKind
		watched *bool
	}{
		{schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "HTTPRoute"}, &r.routesWatched},
		{traffic.ReferenceGrantGVK, &r.grantsWatched},
	} {
		if *w.watched, err = crdInstalled(mgr, w.gvk); err != nil {
			return err
		}
		if !*w.watched {
			mgr.GetLogger().Info("Gateway API CRD not installed: not watching it (restart the manager after installing it)", "kind", w.gvk.Kind)
			continue
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(w.gvk)
		b = b.Watches(m, handler.EnqueueRequestsFromMapFunc(r.rolloutsOfTraffic(w.gvk.Kind)), builder.OnlyMetadata)
	}
	return b.Complete(r)
}

// crdInstalled reports whether the API server serves gvk (a CRD that may
// not be installed).
func crdInstalled(mgr ctrl.Manager, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case apimeta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("looking up %s: %w", gvk, err)
}

// Reconcile takes one step decision for a Rollout and carries it out.
//
// The Rollout is read as it stands after this controller's last write of
// it (readRollout). Its status is the controller's only memory: a decision
// taken from a copy without the last step recorded would take that step
// again, rolling canary Pods back or moving traffic before its status
// patch failed on the optimistic lock. Workloads are read from the cache,
// where lagging behind our own partition write only makes the gate wait.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	ro, err := r.readRollout(ctx, req.NamespacedName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.Namespace, req.Name)
			r.mem.writes.forget(req.NamespacedName)
			r.mem.validations.Forget(req.NamespacedName)
			r.mem.deletedCanaries.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting Rollout: %w", err)
	}
	if !ro.DeletionTimestamp.IsZero() {
		// The partition stays where it is, owned by our field manager until
		// another writer takes it; routes go back to the stable Service
		// (TrafficFinalizer).
		return ctrl.Result{}, r.finalizeTraffic(ctx, ro)
	}
	if err := r.ensureTrafficFinalizer(ctx, ro); err != nil {
		return ctrl.Result{}, err
	}

	original := ro.DeepCopy()
	r.cleanJobs(ctx, ro, original.Status.Analysis)
	rd := &round{ro: ro, now: r.Clock.Now()}
	defer func() {
		result, retErr = r.finish(ctx, original, rd, result, retErr)
	}()

	requeue, err := r.reconcileRollout(ctx, rd)
	var se *stallError
	if errors.As(err, &se) {
		rd.problem = &se.problem
		if news(original, se.reason, se.message) {
			rd.events = append(rd.events, step.Event{Type: corev1.EventTypeWarning, Reason: se.reason, Message: se.message})
		}
		return ctrl.Result{RequeueAfter: se.requeue}, nil
	}
	return ctrl.Result{RequeueAfter: requeue}, err
}

// reconcileRollout observes the workload and decides: the step, then what
// the round writes (partition, rollback deletions, traffic), then the
// analysis. It writes nothing but the analysis' Jobs; finish writes the
// status and then what rd holds.
func (r *Reconciler) reconcileRollout(ctx context.Context, rd *round) (time.Duration, error) {
	ro := rd.ro
	if err := r.mem.validations.Validate(ro); err != nil {
		return 0, stall(v1alpha1.ReasonInvalidAnalysis, "%v", err)
	}
	if err := r.checkClaim(ctx, rd); err != nil {
		return 0, err
	}
	wl, err := workload.New(ro.Spec.WorkloadRef, ro.Namespace, r.workloadClients())
	if err != nil {
		return 0, stall(v1alpha1.ReasonWorkloadUnsupported, "%v", err)
	}
	obs, err := wl.Observe(ctx)
	switch {
	case errors.Is(err, workload.ErrUnsupported):
		return 0, stall(v1alpha1.ReasonWorkloadUnsupported, "%v", err)
	case apierrors.IsNotFound(err):
		// Not an error: its creation is watched and brings us back.
		rd.problem = &problem{reason: v1alpha1.ReasonWorkloadNotFound,
			message: fmt.Sprintf("%s %s not found in namespace %s", ro.Spec.WorkloadRef.Kind, ro.Spec.WorkloadRef.Name, ro.Namespace)}
		return 0, nil
	case err != nil:
		return 0, err
	}
	rd.wl, rd.obs = wl, obs

	if err := r.checkSpanning(ctx, rd); err != nil {
		return 0, err
	}
	if rd.input, err = r.decisionInput(ctx, rd); err != nil {
		return 0, err
	}
	d := step.Decide(rd.input)
	rd.decision = &d
	canary := ro.Status.CanaryRevision
	// A Rollout's first decision takes the partition over from whoever set
	// it before the Rollout existed (a manifest, API defaulting): no conflict.
	takeover := ro.Status.Phase == ""
	fromStepStatus(&ro.Status, d.Status)
	r.noteRolloutEnd(ctx, rd, canary)

	granted := ro.Status.PartitionGrant
	if obs.Governed {
		// The grant is written with the status: the decision is the act.
		ro.Status.PartitionGrant = grantOf(&ro.Status, d.Partition)
		apimeta.RemoveStatusCondition(&ro.Status.Conditions, v1alpha1.PartitionConflictCondition)
	} else {
		ro.Status.PartitionGrant = nil
		if err := r.planPartition(ctx, rd, d.Partition, takeover); err != nil {
			return 0, err
		}
		gvk, _ := workloadGVK(ro.Spec.WorkloadRef)
		if e := setPartitionConflict(ro, rd, ro.Spec.WorkloadRef.Kind, workload.PartitionPath(gvk)); e != nil {
			rd.events = append(rd.events, *e)
		}
	}
	if err := r.rollBackCanaries(ctx, rd); err != nil {
		return 0, err
	}
	trafficRequeue, hold, err := r.routeTraffic(ctx, rd)
	if hold || err != nil {
		// No Pod moves while the Services do not select by revision yet
		// (the stable one would take the canary Pods) or the traffic cannot
		// follow the step: the partition stays where it was.
		if obs.Governed {
			ro.Status.PartitionGrant = granted
		}
		rd.apply = nil
	}
	if err != nil {
		return 0, err
	}
	analysisRequeue, err := r.runAnalysis(ctx, rd)
	if err != nil {
		return 0, err
	}
	requeue := earliest(earliest(d.RequeueAfter, analysisRequeue), trafficRequeue)
	for _, sp := range spannings() {
		after, err := r.runSpanning(ctx, rd, sp)
		if err != nil {
			return 0, err
		}
		requeue = earliest(requeue, after)
	}
	return requeue, nil
}

func (r *Reconciler) workloadClients() workload.Clients {
	reader := r.cache
	if reader == nil {
		reader = r.Client
	}
	return workload.Clients{Reader: reader, Writer: r.Client, APIReader: r.APIReader, Pods: r.Pods}
}

// earliest is the sooner of two requeues, 0 meaning none.
func earliest(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
