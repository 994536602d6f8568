package cloneset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/podcache"
	"github.com/stepwise-dev/stepwise/pkg/inplace"
)

// Reconciler reconciles CloneSets.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache, for the fresh reads the in-place
	// engine needs before it flips a readiness gate.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Metrics   *Metrics
	// Clock is injectable for tests; the real clock when nil.
	Clock clock.PassiveClock
	// Pods reads the cached Pods without copying them.
	Pods *podcache.Stores

	engine inplace.Interface
	mem    memory
}

// RBAC: only the verbs the code calls. CloneSets, Pods and revisions are
// read from the cache (list, watch); a Pod is read fresh (get) before its
// readiness gate flips, and a CloneSet (get) when its status write lost a
// conflict (patchStatus); Pods are created, patched and deleted, never
// updated; status is patched, never updated; a revision is updated only to
// renumber it when a template comes back. Events go through the
// events.k8s.io API.
//
// Pods and revisions are owned with blockOwnerDeletion, which the
// OwnerReferencesPermissionEnforcement admission plugin allows only to a
// client that may update the owner's finalizers: hence clonesets/finalizers.
//
// +kubebuilder:rbac:groups=stepwise.dev,resources=clonesets,verbs=get;list;watch
// +kubebuilder:rbac:groups=stepwise.dev,resources=clonesets/status,verbs=patch
// +kubebuilder:rbac:groups=stepwise.dev,resources=clonesets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=stepwise.dev,resources=rollouts,verbs=list;watch

// SetupWithManager wires the reconciler: CloneSets, the Pods and
// ControllerRevisions they own, and the Rollouts that govern them are
// watched; nothing is polled.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.engine = inplace.New(inplace.NewControllerRuntimePodClient(r.Client, r.APIReader), r.Clock)
	r.mem.expectations = newExpectations(r.Clock.Now)
	r.mem.statusWrites = newStatusWrites()
	r.mem.gateWaits = newGateWaits()
	if r.Pods == nil {
		return errors.New("the CloneSet controller needs the cache's Pod stores (Reconciler.Pods)")
	}
	return ctrl.NewControllerManagedBy(mgr).
		// A status write of ours comes back as an update event; reconciling
		// on it finds nothing new (the Pods' own events bring the next
		// round) but took a worker from the CloneSets waiting behind it.
		For(&stepwisev1.CloneSet{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		// Pods and Rollouts bring a governed CloneSet ahead of the others
		// (cloneset_priority.go).
		Watches(&corev1.Pod{}, podEvents(r.governed, r.mem.gateWaits)).
		Owns(&appsv1.ControllerRevision{}).
		// A Rollout that names a CloneSet governs how far its Pods move.
		Watches(&stepwisev1.Rollout{}, rolloutEvents(), builder.WithPredicates(governorChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r)
}

// Reconcile moves one CloneSet one round closer to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	logger := log.FromContext(ctx)
	r.mem.gateWaits.started(req.NamespacedName)
	defer r.mem.gateWaits.finished(req.NamespacedName)
	cs := &stepwisev1.CloneSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, cs); err != nil {
		if apierrors.IsNotFound(err) {
			r.mem.expectations.forget(req.NamespacedName)
			r.mem.statusWrites.forget(req.NamespacedName)
			r.Metrics.forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting CloneSet: %w", err)
	}
	if cs.DeletionTimestamp != nil {
		// Pods and revisions carry owner references: the garbage collector
		// removes them.
		return ctrl.Result{}, nil
	}

	if r.mem.statusWrites.catchUp(cs) {
		logger.V(1).Info("cache is one status write behind; starting from the status written", "resourceVersion", cs.ResourceVersion)
	}
	original := cs.DeepCopy()
	round := &syncRound{cs: cs, now: r.Clock.Now(), isUpdating: r.engine.IsUpdating}
	defer func() {
		// The Pod writes landed whatever the round's outcome: tell them.
		for _, e := range round.events() {
			r.event(cs, e.eventType, e.reason, e.note)
		}
		if err := r.patchStatus(ctx, original, round, retErr == nil); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	selector, problem := validateSelector(cs)
	if problem != "" {
		round.findings.invalidSpec = problem
		round.tell(corev1.EventTypeWarning, stepwisev1.EventInvalidSpec, problem)
		// Nothing will change until the spec does: no requeue.
		return ctrl.Result{}, nil
	}
	round.selector = selector

	pods, err := r.ownedPods(cs, selector)
	if err != nil {
		return ctrl.Result{}, err
	}
	round.pods = pods
	round.podsByName = make(map[string]*corev1.Pod, len(pods))
	for _, pod := range pods {
		round.podsByName[pod.Name] = pod
	}
	revs, err := r.syncRevisions(ctx, cs, pods)
	if err != nil {
		return ctrl.Result{}, err
	}
	round.revs = revs
	if round.gov, err = r.governance(ctx, cs); err != nil {
		return ctrl.Result{}, err
	}
	revs.settle(pods, ptr.Deref(cs.Spec.Replicas, 0), r.engine.IsUpdating, round.gov.promoted)

	if ok, waiting := r.mem.expectations.satisfied(req.NamespacedName, round.podsByName); !ok {
		// The cache is behind our own writes; the watch event that catches
		// it up requeues us. The timeout is only a safety net.
		logger.V(1).Info("waiting for cache to observe own writes", "pending", waiting)
		round.statusOnly = true
		return ctrl.Result{RequeueAfter: expectationTimeout}, nil
	}

	requeue, err := r.sync(ctx, round)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func validateSelector(cs *stepwisev1.CloneSet) (labels.Selector, string) {
	if cs.Spec.Selector == nil {
		return nil, "spec.selector is required"
	}
	selector, err := metav1.LabelSelectorAsSelector(cs.Spec.Selector)
	if err != nil {
		return nil, fmt.Sprintf("spec.selector is invalid: %v", err)
	}
	if selector.Empty() {
		return nil, "spec.selector must not be empty: it would select every Pod in the namespace"
	}
	if !selector.Matches(labels.Set(cs.Spec.Template.Labels)) {
		return nil, "spec.selector does not match spec.template.metadata.labels: Pods created from the template would not be selected"
	}
	return selector, ""
}

// patchStatus writes status once per reconcile, and only when it changed.
// observedGeneration moves only when the reconcile succeeded, so a reader
// never takes a half-applied spec as observed. The resourceVersion read is
// a precondition: a round that read the CloneSet from a cache one write
// behind (ours, or another writer's) would otherwise write an older view
// back and tell a transition that was already told, a second Event.
//
// When the precondition fails, the usual cause is our own last status
// write, not in the cache yet. Its watch event would not bring the
// CloneSet back (the For predicate lets no status-only change through), so
// the status is written again from a fresh read, unless the spec moved:
// then the spec's event brings the next round.
func (r *Reconciler) patchStatus(ctx context.Context, original *stepwisev1.CloneSet, round *syncRound, succeeded bool) error {
	err := r.writeStatus(ctx, round.cs, original, round, succeeded)
	if !apierrors.IsConflict(err) {
		return err
	}
	logger := log.FromContext(ctx)
	fresh := &stepwisev1.CloneSet{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(original), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading CloneSet after a status write conflict: %w", err)
	}
	if fresh.UID != original.UID || fresh.Generation != original.Generation {
		logger.V(1).Info("CloneSet spec changed since it was read; its status is written on the next round")
		return nil
	}
	view := round.cs.DeepCopy()
	view.Status = *fresh.Status.DeepCopy()
	err = r.writeStatus(ctx, view, fresh, round, succeeded)
	if apierrors.IsConflict(err) {
		// Changed again since the fresh read: not by a status write, which
		// only this worker makes, so by an event that brings it back.
		logger.V(1).Info("CloneSet changed since it was read; its status is written on the next round", "error", err.Error())
		return nil
	}
	return err
}

// writeStatus computes the round's status over cs's and patches it if it
// differs from before's, with before's resourceVersion as precondition. A
// conflict is returned as is, for patchStatus.
func (r *Reconciler) writeStatus(ctx context.Context, cs, before *stepwisev1.CloneSet, round *syncRound, succeeded bool) error {
	counts := round.podCounts()
	selector := ""
	if round.selector != nil {
		selector = round.selector.String()
	}
	status := computeStatus(cs, counts, round.revs, round.expectedUpdated, round.gov, round.findings, selector)
	if succeeded && !round.statusOnly || round.findings.invalidSpec != "" {
		status.ObservedGeneration = cs.Generation
	}
	if apiequality.Semantic.DeepEqual(status, before.Status) {
		return nil
	}
	body, err := statusPatch(before.ResourceVersion, &status)
	if err != nil {
		return err
	}
	cs.Status = status
	if err := r.Client.Status().Patch(ctx, cs, client.RawPatch(types.MergePatchType, body)); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			return err
		}
		return fmt.Errorf("patching CloneSet status: %w", err)
	}
	r.mem.statusWrites.record(cs, before.ResourceVersion)
	// Events follow the write, so none tells of a status that never landed.
	r.emitStatusEvents(before, &status)
	return nil
}

// statusPatch is the merge patch that writes the whole status, on the
// condition that the CloneSet is still at resourceVersion. The whole status
// goes in: a diff against the cached copy would leave out zero counts that
// the server has never stored.
func statusPatch(resourceVersion string, status *stepwisev1.CloneSetStatus) ([]byte, error) {
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return nil, fmt.Errorf("encoding CloneSet status: %w", err)
	}
	if status.Rollout == nil {
		// A merge patch leaves out what it does not name: null removes it.
		fields["rollout"] = nil
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"status":   fields,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding CloneSet status: %w", err)
	}
	return body, nil
}

func (r *Reconciler) event(cs *stepwisev1.CloneSet, eventType, reason, message string) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(cs, nil, eventType, reason, reason, "%s", message)
}
