package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
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

// trafficIndex indexes Rollouts by the objects their traffic routing reads
// (trafficKey): the stable and canary Services, the routes it names and
// Stepwise's canary routes beside them, and, when a route is in another
// namespace, the Rollout's namespace for its ReferenceGrants (any name).
const trafficIndex = "spec.trafficRouting.objects"

// trafficKey is the index value of an object of kind: kind/namespace/name,
// without the name for a ReferenceGrant (any grant of the namespace may
// allow the route).
func trafficKey(kind, namespace, name string) string {
	if kind == traffic.ReferenceGrantGVK.Kind {
		name = ""
	}
	return kind + "/" + namespace + "/" + name
}

func indexTraffic(obj client.Object) []string {
	ro, ok := obj.(*v1alpha1.Rollout)
	if !ok || ro.Spec.TrafficRouting == nil {
		return nil
	}
	tr := ro.Spec.TrafficRouting
	keys := []string{trafficKey("Service", ro.Namespace, tr.StableService), trafficKey("Service", ro.Namespace, tr.CanaryService.Name)}
	for _, ref := range tr.HTTPRoutes {
		ns := ref.Namespace
		if ns == "" {
			ns = ro.Namespace
		}
		keys = append(keys, trafficKey("HTTPRoute", ns, ref.Name), trafficKey("HTTPRoute", ns, traffic.CanaryRouteName(ref.Name)))
		if ns != ro.Namespace {
			keys = append(keys, trafficKey(traffic.ReferenceGrantGVK.Kind, ro.Namespace, ""))
		}
	}
	return keys
}

// rolloutsOfTraffic maps an object of kind (watched by its metadata) to the
// Rollouts whose traffic routing reads it, through trafficIndex on the
// cached Rollouts.
func (r *Reconciler) rolloutsOfTraffic(kind string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var list v1alpha1.RolloutList
		if err := r.Client.List(ctx, &list, client.MatchingFields{trafficIndex: trafficKey(kind, obj.GetNamespace(), obj.GetName())}); err != nil {
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
	r.writes.wrote(ro)
	return nil
}

// finalizeTraffic runs on a deleted Rollout: the routes send everything to
// the stable Service again, the matches go, and the stable Service gets
// git's selector back (every Pod of the workload, as before the Rollout);
// then the finalizer goes.
func (r *Reconciler) finalizeTraffic(ctx context.Context, ro *v1alpha1.Rollout) error {
	if !controllerutil.ContainsFinalizer(ro, v1alpha1.TrafficFinalizer) {
		return nil
	}
	if tr := ro.Spec.TrafficRouting; tr != nil {
		res, err := r.trafficApplier().Apply(ctx, trafficTarget(ro), traffic.Plan{})
		if err != nil {
			return fmt.Errorf("restoring traffic of a deleted Rollout: %w", err)
		}
		if res.Applied || lastWeight(ro) > 0 {
			r.event(ro, step.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventTrafficReleased,
				Message: fmt.Sprintf("Rollout deleted: %s send every request to Service %s again, and it selects every Pod of %s %s", routeNames(ro), tr.StableService, ro.Spec.WorkloadRef.Kind, ro.Spec.WorkloadRef.Name)})
		}
	}
	before := ro.DeepCopy()
	controllerutil.RemoveFinalizer(ro, v1alpha1.TrafficFinalizer)
	if err := r.Client.Patch(ctx, ro, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("removing finalizer %s: %w", v1alpha1.TrafficFinalizer, err)
	}
	r.writes.wrote(ro)
	return nil
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

// routeTraffic decides and applies the round's traffic, after the step
// decision, and records it in status.traffic; the next round's decision
// reads status.traffic.step for the step's gate.
func (r *Reconciler) routeTraffic(ctx context.Context, rd *round, wl workload.Workload, obs workload.Observation, in step.Input) (time.Duration, error) {
	ro := rd.ro
	tr := ro.Spec.TrafficRouting
	if tr == nil {
		ro.Status.Traffic = nil
		apimeta.RemoveStatusCondition(&ro.Status.Conditions, v1alpha1.TrafficConflictCondition)
		return 0, nil
	}
	st := &ro.Status
	pods, err := wl.Pods(ctx, obs)
	if err != nil {
		return 0, err
	}
	var stableReady, canaryReady, onCanary int32
	for i := range pods {
		p := &pods[i]
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
	plan := traffic.Decide(tin)
	target := trafficTarget(ro)
	if err := r.trafficApplier().CheckGrants(ctx, target); err != nil {
		var missing *traffic.MissingGrantError
		if errors.As(err, &missing) {
			// Reported, not retried as an error: the grant's creation is
			// watched; without that watch, look again in a while.
			var requeue time.Duration
			if !r.grantsWatched {
				requeue = grantWait
			}
			return 0, &stallError{problem{reason: v1alpha1.ReasonReferenceGrantMissing, message: missing.Error(), requeue: requeue}}
		}
		return 0, err
	}
	res, err := r.trafficApplier().Apply(ctx, target, plan)
	if err != nil {
		return 0, err
	}
	previous := st.Traffic
	next := &v1alpha1.TrafficStatus{
		CanaryWeight: res.Weight, Matches: res.Matches, Accepted: res.Accepted,
		StableRevision: plan.StableSelects, CanaryRevision: plan.CanarySelects,
	}
	// The workload reports ready canary Pods that the Pod cache does not
	// show yet (it lags behind the workload's status): the weight decided
	// on it is the one for a canary without ready Pods, not the step's.
	// The step is not reached on it; the next round looks again.
	behind := tin.StepReady && canaryReady == 0 && in.Workload.UpdatedReadyReplicas > 0
	if stepIdx != nil && !behind && res.Accepted && res.Weight == plan.CanaryWeight {
		next.Step = stepIdx
	}
	st.Traffic = next
	if !res.Accepted && res.Waiting != "" && st.Reason == v1alpha1.ReasonWaitingForTraffic {
		// Say which Gateway holds the step, not only that one does.
		st.Message = fmt.Sprintf("%s: %s", st.Message, res.Waiting)
	}
	log.FromContext(ctx).V(1).Info("traffic", "weight", res.Weight, "matches", res.Matches, "accepted", res.Accepted, "why", plan.Why)
	if previous == nil || previous.CanaryWeight != next.CanaryWeight || previous.Matches != next.Matches {
		if next.CanaryWeight == 0 && next.Matches == 0 {
			if previous != nil && (previous.CanaryWeight > 0 || previous.Matches > 0) {
				rd.events = append(rd.events, step.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventTrafficRestored,
					Message: fmt.Sprintf("%s send every request to Service %s (%s)", routeNames(ro), tr.StableService, plan.Why)})
			}
		} else {
			rd.events = append(rd.events, step.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventTrafficShifted,
				Message: fmt.Sprintf("%s: %d%% to Service %s, %d match rules (%s)", routeNames(ro), next.CanaryWeight, tr.CanaryService.Name, next.Matches, plan.Why)})
		}
	}
	if e := setTrafficConflict(ro, rd, res.Conflicts, plan.AtRest()); e != nil {
		rd.events = append(rd.events, *e)
	}
	// An abort's weight, and the Services' return to git's selectors,
	// follow Pods that roll back; the workload is watched, but a round
	// that saw it before its Pods (a Stepwise CloneSet's Pods are not
	// watched) looks again until the Services and routes are at rest.
	aborting := tin.Mode == traffic.Aborted && !plan.AtRest()
	if aborting || behind || (!res.Accepted && !r.routesWatched) || (next.Step != nil && (previous == nil || !ptr.Equal(previous.Step, next.Step))) {
		return trafficWait, nil
	}
	return 0, nil
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
		t.LastStable, t.LastCanary = tr.StableRevision, tr.CanaryRevision
	}
	return t
}
