package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/index"
	"github.com/stepwise-dev/stepwise/controllers/rollout/step"
	"github.com/stepwise-dev/stepwise/controllers/rollout/traffic"
	"github.com/stepwise-dev/stepwise/controllers/rollout/workload"
)

// RBAC for traffic routing: the stable and canary Services and the
// HTTPRoutes are read fresh (get) and watched by their metadata (list,
// watch: a GitOps tool re-applying one during a release, or a Gateway
// accepting a route, brings the Rollout back at once); the Services'
// selectors applied (patch, which also drops Stepwise's managed fields at
// rest) and the canary Service created by an apply (create); the routes'
// rules applied (patch), Stepwise's canary routes created by an apply
// (create) and deleted when no match is left; Gateways are read (get) to
// know whether a route's parent exists and must accept it; the
// ReferenceGrants of the Rollout's namespace are listed fresh when a route
// is in another namespace, and watched by their metadata so that a grant
// created later resumes the Rollout. The Rollout itself is patched for its
// finalizer; the canary Service and route it owns carry no
// blockOwnerDeletion, which would need rollouts/finalizers.
//
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=referencegrants,verbs=list;watch
// +kubebuilder:rbac:groups=stepwise.dev,resources=rollouts,verbs=patch

// rolloutsOfTraffic maps an object of kind (watched by its metadata) to the
// Rollouts whose traffic routing reads it, through index.RolloutTraffic on the
// cached Rollouts.
func (r *Reconciler) rolloutsOfTraffic(kind string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var list v1alpha1.RolloutList
		if err := r.Client.List(ctx, &list, client.MatchingFields{index.RolloutTraffic: index.TrafficKey(kind, obj.GetNamespace(), obj.GetName())}); err != nil {
			log.FromContext(ctx).Error(err, "listing the Rollouts of a traffic object", "kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
		}
		return reqs
	}
}

// trafficWait is how soon a round looks again after it moved a step's
// traffic (the step's gate then passes in the next round), and while a
// Gateway has not accepted a route when routes are not watched (their CRD
// was not installed when the manager started); watched, the Gateway's
// status write brings the Rollout back.
const trafficWait = 2 * time.Second

// grantWait is how soon a Rollout whose cross-namespace route lacks a
// ReferenceGrant looks for it again when grants are not watched (their CRD
// was not installed when the manager started).
const grantWait = 5 * time.Second

// revisionLabel is the Pod label the Services select a revision by, and
// its value for a revision: the short hash on Stepwise's CloneSet, the
// controller-revision-hash that StatefulSets and OpenKruise CloneSets
// write (and move in place) themselves.
func revisionLabel(ref v1alpha1.WorkloadReference) (string, func(string) string) {
	if gvk, err := workloadGVK(ref); err == nil && gvk == workload.CloneSetGVK {
		return v1alpha1.RevisionHashLabel, v1alpha1.RevisionHash
	}
	return appsv1.ControllerRevisionHashLabelKey, func(rev string) string { return rev }
}

func (r *Reconciler) trafficApplier() *traffic.Applier {
	return &traffic.Applier{Client: r.Client, Reader: r.APIReader}
}

// ensureTrafficFinalizer adds TrafficFinalizer to a Rollout with traffic
// routing before any route is touched, so that its deletion puts them back.
func (r *Reconciler) ensureTrafficFinalizer(ctx context.Context, ro *v1alpha1.Rollout) error {
	if ro.Spec.TrafficRouting == nil || controllerutil.ContainsFinalizer(ro, v1alpha1.TrafficFinalizer) {
		return nil
	}
	before := ro.DeepCopy()
	controllerutil.AddFinalizer(ro, v1alpha1.TrafficFinalizer)
	if err := r.Client.Patch(ctx, ro, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding finalizer %s: %w", v1alpha1.TrafficFinalizer, err)
	}
	r.mem.writes.wrote(ro)
	return nil
}

// finalizeTraffic runs on a deleted Rollout: what status.traffic.written
// records goes (the revision key from the Services' selectors, the canary
// backendRefs and weights from the routes, the routes Stepwise created),
// whatever the spec says, and nothing is created; then the finalizer goes.
// A Rollout that does not hold its workload (refused as a duplicate)
// touches nothing: the traffic is the holder's. Objects already gone, and
// routes the manager may no longer reach (reported in a Warning Event),
// do not hold the deletion, so a namespace being deleted is not held
// either.
func (r *Reconciler) finalizeTraffic(ctx context.Context, ro *v1alpha1.Rollout) error {
	if !controllerutil.ContainsFinalizer(ro, v1alpha1.TrafficFinalizer) {
		return nil
	}
	holder, err := r.claimant(ctx, ro)
	if err != nil {
		return err
	}
	if holder == ro.Name {
		if err := r.releaseTraffic(ctx, ro); err != nil {
			return err
		}
	}
	before := ro.DeepCopy()
	controllerutil.RemoveFinalizer(ro, v1alpha1.TrafficFinalizer)
	if err := r.Client.Patch(ctx, ro, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("removing finalizer %s: %w", v1alpha1.TrafficFinalizer, err)
	}
	r.mem.writes.wrote(ro)
	return nil
}

// releaseTraffic takes out of every object what a deleted Rollout's
// record says it wrote.
func (r *Reconciler) releaseTraffic(ctx context.Context, ro *v1alpha1.Rollout) error {
	target := trafficTarget(ro)
	target.Release = true
	if target.Written == nil {
		return nil
	}
	a := r.trafficApplier()
	world, err := a.Observe(ctx, target)
	if err != nil {
		return fmt.Errorf("restoring traffic of a deleted Rollout: %w", err)
	}
	out := traffic.Changes(world, target, traffic.Plan{})
	var left []string
	for _, p := range out.Problems {
		left = append(left, p.Message)
	}
	for _, w := range out.Writes {
		err := a.Write(ctx, []traffic.Write{w})
		switch {
		case apierrors.IsForbidden(err):
			left = append(left, err.Error())
		case err != nil:
			return fmt.Errorf("restoring traffic of a deleted Rollout: %w", err)
		}
	}
	if len(left) > 0 {
		r.event(ro, step.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.EventTrafficNotPermitted,
			Message: fmt.Sprintf("Rollout deleted, and Stepwise could not take its writes out of everything: %s; remove the backendRefs to Service %s by hand",
				strings.Join(left, "; "), canaryServices(target.Written))})
	}
	if len(out.Writes) > 0 {
		r.event(ro, step.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventTrafficReleased,
			Message: fmt.Sprintf("Rollout deleted: what it wrote is out of %s", writtenNames(target.Written))})
	}
	return nil
}

// canaryServices names the canary Services a record's routes send to.
func canaryServices(w *v1alpha1.TrafficWritten) string {
	var names []string
	for _, rt := range w.Routes {
		if !slices.Contains(names, rt.CanaryService) {
			names = append(names, rt.CanaryService)
		}
	}
	return strings.Join(names, ", ")
}

// writtenNames names the objects a record holds.
func writtenNames(w *v1alpha1.TrafficWritten) string {
	var names []string
	for _, svc := range w.Services {
		names = append(names, "Service "+svc)
	}
	for _, rt := range w.Routes {
		if n := "HTTPRoute " + rt.Namespace + "/" + rt.Name; !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

func lastWeight(ro *v1alpha1.Rollout) int32 {
	if ro.Status.Traffic == nil {
		return 0
	}
	return ro.Status.Traffic.CanaryWeight
}

func routeNames(ro *v1alpha1.Rollout) string {
	names := make([]string, 0, len(ro.Spec.TrafficRouting.HTTPRoutes))
	for _, ref := range ro.Spec.TrafficRouting.HTTPRoutes {
		ns := ref.Namespace
		if ns == "" {
			ns = ro.Namespace
		}
		names = append(names, "HTTPRoute "+ns+"/"+ref.Name)
	}
	return strings.Join(names, ", ")
}

// routeTraffic decides the round's traffic after the step decision: it
// reads the Services and routes, decides what to write (traffic.Changes),
// records that in status.traffic and keeps the writes for finish, which
// makes them once that status is written, so that a lost status write
// leaves nothing moved without a record of it. hold asks the round to keep
// the partition where it was: the Services do not select by revision yet
// (the stable one would take the canary Pods), or something stands in the
// plan's way (returned as a stallError). The next round's decision reads
// status.traffic.step for the step's gate.
func (r *Reconciler) routeTraffic(ctx context.Context, rd *round) (requeue time.Duration, hold bool, err error) {
	ro, in := rd.ro, rd.input
	tr := ro.Spec.TrafficRouting
	st := &ro.Status
	target := trafficTarget(ro)
	target.Release = tr == nil
	target.Namespaces = r.Namespaces
	if tr == nil && target.Written == nil {
		st.Traffic = nil
		apimeta.RemoveStatusCondition(&ro.Status.Conditions, v1alpha1.TrafficConflictCondition)
		return 0, false, nil
	}
	var (
		tin     traffic.Input
		stepIdx *int32
		behind  bool
	)
	if tr != nil {
		if tin, stepIdx, err = r.trafficInput(ctx, rd); err != nil {
			return 0, true, err
		}
		// The workload reports ready canary Pods that the Pod cache does
		// not show yet (it lags behind the workload's status): the weight
		// decided on it is the one for a canary without ready Pods, not the
		// step's. The step is not reached on it; the next round looks again.
		behind = tin.StepReady && tin.CanaryReady == 0 && in.Workload.UpdatedReadyReplicas > 0
	}
	plan := traffic.Decide(tin)
	world, err := r.trafficApplier().Observe(ctx, target)
	if err != nil {
		return 0, true, err
	}
	out := traffic.Changes(world, target, plan)
	rd.trafficWrites = out.Writes
	if tr == nil {
		// No longer routing: what it wrote goes, and the record with it.
		st.Traffic = nil
		if out.Written != nil {
			st.Traffic = &v1alpha1.TrafficStatus{Written: out.Written}
		}
		apimeta.RemoveStatusCondition(&ro.Status.Conditions, v1alpha1.TrafficConflictCondition)
		if len(out.Writes) > 0 || out.Written != nil {
			return trafficWait, false, nil
		}
		return 0, false, nil
	}

	previous := st.Traffic
	next := &v1alpha1.TrafficStatus{
		CanaryWeight: plan.CanaryWeight, Matches: int32(len(plan.Matches)), Accepted: out.Accepted,
		StableRevision: plan.StableSelects, CanaryRevision: plan.CanarySelects, Written: out.Written,
	}
	if len(out.Problems) > 0 {
		// Nothing is added while a problem stands: the routes keep what
		// they carry, less what is taken out.
		next.CanaryWeight, next.Matches = min(out.Weight, plan.CanaryWeight), 0
	}
	if stepIdx != nil && !behind && out.Reached {
		next.Step = stepIdx
	}
	st.Traffic = next
	if !out.Accepted && out.Waiting != "" && st.Reason == v1alpha1.ReasonWaitingForTraffic {
		// Say which Gateway holds the step, not only that one does.
		st.Message = fmt.Sprintf("%s: %s", st.Message, out.Waiting)
	}
	log.FromContext(ctx).V(1).Info("traffic", "weight", next.CanaryWeight, "read", out.Weight, "matches", next.Matches, "accepted", out.Accepted, "writes", len(out.Writes), "why", plan.Why)
	if e := trafficEvent(ro, previous, next, plan); e != nil {
		rd.events = append(rd.events, *e)
	}
	if e := setTrafficConflict(ro, rd, out.Conflicts, plan.AtRest()); e != nil {
		rd.events = append(rd.events, *e)
	}
	hold = tin.Mode == traffic.Stepping && !out.ServicesReady
	if len(out.Problems) > 0 {
		return 0, true, trafficProblem(out.Problems, r.grantsWatched)
	}
	// An abort's weight, and the Services' return to git's selectors,
	// follow Pods that roll back; the workload is watched, but a round
	// that saw it before its Pods (a Stepwise CloneSet's Pods are not
	// watched) looks again until the Services and routes are at rest.
	aborting := tin.Mode == traffic.Aborted && !plan.AtRest()
	if len(out.Writes) > 0 || aborting || behind || (!out.Accepted && !r.routesWatched) || (next.Step != nil && (previous == nil || !ptr.Equal(previous.Step, next.Step))) {
		return trafficWait, hold, nil
	}
	return 0, hold, nil
}

// trafficInput counts the workload's Pods by revision and readiness and
// says where the Rollout stands, for traffic.Decide; stepIdx is the step
// whose gate passed, nil when none did.
func (r *Reconciler) trafficInput(ctx context.Context, rd *round) (traffic.Input, *int32, error) {
	ro, in := rd.ro, rd.input
	st := &ro.Status
	pods, err := rd.workloadPods(ctx)
	if err != nil {
		return traffic.Input{}, nil, err
	}
	var stableReady, canaryReady, onCanary int32
	for _, p := range pods {
		rev := p.Labels[appsv1.ControllerRevisionHashLabelKey]
		if st.CanaryRevision != "" && rev == st.CanaryRevision {
			onCanary++
		}
		if p.DeletionTimestamp != nil || podReady(p.Status.Conditions) != corev1.ConditionTrue {
			continue
		}
		switch {
		case rev == st.StableRevision:
			stableReady++
		case st.CanaryRevision != "" && rev == st.CanaryRevision:
			canaryReady++
		}
	}
	tin := traffic.Input{
		StableReady: stableReady, CanaryReady: canaryReady, Previous: lastWeight(ro),
		StableRevision: st.StableRevision, CanaryRevision: st.CanaryRevision, CanaryPods: onCanary,
	}
	var stepIdx *int32
	switch {
	case st.Phase == v1alpha1.RolloutAborted && st.CanaryRevision != "":
		tin.Mode = traffic.Aborted
	case st.CurrentStepIndex != nil && int(*st.CurrentStepIndex) < len(ro.Spec.Steps):
		i := *st.CurrentStepIndex
		tin.Mode, tin.Step = traffic.Stepping, &ro.Spec.Steps[i]
		tin.StepReady = step.GateOpen(in.Workload, in.Steps[i])
		tin.StepKeepsNoStablePod = in.Steps[i].Pods == 0
		if tin.StepReady {
			stepIdx = &i
		}
	default:
		tin.Mode = traffic.Idle
	}
	return tin, stepIdx, nil
}

// trafficEvent is the Event for a change of what the routes are set to:
// TrafficShifted, or TrafficRestored once they send everything to the
// stable Service again; nil when nothing changed.
func trafficEvent(ro *v1alpha1.Rollout, previous, next *v1alpha1.TrafficStatus, plan traffic.Plan) *step.Event {
	tr := ro.Spec.TrafficRouting
	if previous != nil && previous.CanaryWeight == next.CanaryWeight && previous.Matches == next.Matches {
		return nil
	}
	if next.CanaryWeight == 0 && next.Matches == 0 {
		if previous == nil || (previous.CanaryWeight == 0 && previous.Matches == 0) {
			return nil
		}
		return &step.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventTrafficRestored,
			Message: fmt.Sprintf("%s send every request to Service %s (%s)", routeNames(ro), tr.StableService, plan.Why)}
	}
	return &step.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventTrafficShifted,
		Message: fmt.Sprintf("%s: %d%% to Service %s, %d match rules (%s)", routeNames(ro), next.CanaryWeight, tr.CanaryService.Name, next.Matches, plan.Why)}
}

// trafficProblem is the stallError for what stands in the plan's way,
// every problem in its message, under the first one's reason. None is
// terminal: a grant, a route or a freed name is watched and brings the
// Rollout back (grants are looked for again when they are not watched).
func trafficProblem(problems []traffic.Problem, grantsWatched bool) error {
	messages := make([]string, len(problems))
	var requeue time.Duration
	for i, p := range problems {
		messages[i] = p.Message
		if p.Reason == v1alpha1.ReasonReferenceGrantMissing && !grantsWatched {
			requeue = grantWait
		}
	}
	return &stallError{problem{reason: problems[0].Reason, message: strings.Join(messages, "; "), requeue: requeue}}
}

// setTrafficConflict sets TrafficConflict from this round's conflicts:
// True naming the other managers, with a Warning Event when the message is
// new; removed once Stepwise is back at rest (atRest: the Services and
// routes are git's) with none, or the Rollout is Healthy.
func setTrafficConflict(ro *v1alpha1.Rollout, rd *round, conflicts []string, atRest bool) *step.Event {
	if len(conflicts) == 0 {
		if atRest || ro.Status.Phase == v1alpha1.RolloutHealthy {
			apimeta.RemoveStatusCondition(&ro.Status.Conditions, v1alpha1.TrafficConflictCondition)
		}
		return nil
	}
	message := fmt.Sprintf("%s: another field manager changed what the Rollout sets (field manager %q) during a release, and the Rollout set it again; "+
		"at rest the Services and routes are git's, so let git re-apply them between releases, or accept that each apply during a release is followed by the Rollout's (docs/gitops.md#trafficconflict)",
		strings.Join(conflicts, "; "), traffic.FieldManager)
	return raiseConflict(ro, rd, v1alpha1.TrafficConflictCondition, v1alpha1.EventTrafficConflict, message)
}

// trafficTarget is what the traffic Applier needs of ro: the revision
// label of its workload and what its status says was last applied.
func trafficTarget(ro *v1alpha1.Rollout) traffic.Target {
	key, value := revisionLabel(ro.Spec.WorkloadRef)
	t := traffic.Target{Rollout: ro, LabelKey: key, LabelValue: value, LastWeight: lastWeight(ro)}
	if tr := ro.Status.Traffic; tr != nil {
		t.LastStable, t.LastCanary, t.Written = tr.StableRevision, tr.CanaryRevision, tr.Written
	}
	return t
}
