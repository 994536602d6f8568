package cloneset

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/index"
)

// A Rollout that names a CloneSet governs it: the Rollout's status carries
// a partitionGrant (an update revision and a partition), and the CloneSet
// moves Pods only that far, whatever spec.updateStrategy.partition says.
// So git may keep any partition, or none, and a GitOps tool re-applying it
// moves no Pod; and a new template moves no Pod until the Rollout has
// acknowledged its revision, which keeps the CloneSet Reconciling (kstatus
// InProgress, Argo CD Progressing) in between.
//
// Why the Rollout's status and not a field or an annotation on the
// CloneSet: a git manifest never holds another object's status, only the
// Rollout controller writes it, and it is written in the same request as
// the decision it carries, so the decision and the act can never part
// (a crash between two writes cannot move Pods on a decision that was not
// recorded). The price is one cached List of the namespace's Rollouts per
// CloneSet reconcile.

// governance is what the Rollout governing a CloneSet allows this round.
type governance struct {
	// known is false until the Rollouts were read this round: status then
	// keeps what it said about them.
	known bool
	// rollout names the governing Rollout; empty when none does.
	rollout string
	// grant is its partitionGrant; nil before its first decision.
	grant *stepwisev1.PartitionGrant
	// gone names the Rollout that governed the CloneSet (status.rollout)
	// when it no longer does.
	gone string
	// stable is the governing Rollout's status.stableRevision: the
	// revision it last promoted.
	stable string
	// routesTraffic is true when the governing Rollout moves a Gateway's
	// traffic with its steps (spec.trafficRouting).
	routesTraffic bool
}

// gatewayDrainSeconds is the least time between a Pod leaving its Service's
// endpoints and its image being patched while a Rollout routes traffic
// through a Gateway. A Gateway learns that a Pod left from the
// EndpointSlice and may apply what it learns in batches: Traefik, with its
// defaults, up to 2 s later (providersThrottleDuration), during which it
// still sends the Pod requests. inPlaceUpdateStrategy.gracePeriodSeconds
// defaults to 0, as in OpenKruise, which is right behind kube-proxy alone;
// behind a Gateway it would send requests to a container being stopped,
// so the larger of the two applies.
const gatewayDrainSeconds = 3

// gracePeriodSeconds is the grace period the in-place engine applies: the
// spec's, raised to gatewayDrainSeconds while a Rollout routes traffic.
func (g governance) gracePeriodSeconds(spec int32) int32 {
	if g.routesTraffic {
		return max(spec, gatewayDrainSeconds)
	}
	return spec
}

// governanceOf picks the Rollout that governs cs among the namespace's
// Rollouts: of those naming it, the one the Rollout controller lets drive
// it (stepwisev1.Claimant), so the two controllers never disagree.
func governanceOf(cs *stepwisev1.CloneSet, rollouts []stepwisev1.Rollout) governance {
	var naming []stepwisev1.Rollout
	for i := range rollouts {
		if names(&rollouts[i], cs.Name) {
			naming = append(naming, rollouts[i])
		}
	}
	g := governance{known: true}
	if ro := stepwisev1.Claimant(naming); ro != nil {
		g.rollout, g.grant, g.stable = ro.Name, ro.Status.PartitionGrant, ro.Status.StableRevision
		g.routesTraffic = ro.Spec.TrafficRouting != nil
	}
	if prev := cs.Status.Rollout; prev != nil && prev.Name != g.rollout {
		g.gone = prev.Name
	}
	return g
}

// names reports whether a Rollout drives the CloneSet called name.
func names(ro *stepwisev1.Rollout, name string) bool {
	ref := ro.Spec.WorkloadRef
	return ref.APIVersion == stepwisev1.GroupVersion.String() && ref.Kind == "CloneSet" && ref.Name == name
}

// holdAll keeps every Pod off the update revision.
var holdAll = intstr.FromString("100%")

// acknowledged reports whether the governing Rollout let Pods move to
// updateRevision.
func (g governance) acknowledged(updateRevision string) bool {
	return g.grant != nil && g.grant.Revision == updateRevision
}

// partition is the partition the CloneSet applies: spec's when no Rollout
// governs; the grant's when it is for the update revision; every Pod kept
// off the update revision otherwise, until the Rollout acknowledges it
// (and the plan is paused meanwhile, so that Pods on the revision the
// Rollout acknowledged before stay there too: see awaiting).
func (g governance) partition(spec *intstr.IntOrString, updateRevision string) *intstr.IntOrString {
	switch {
	case g.rollout == "":
		return spec
	case g.acknowledged(updateRevision):
		p := g.grant.Partition
		return &p
	}
	p := holdAll
	return &p
}

// promoted reports whether revision may become the CloneSet's current
// revision: no Rollout governs it, or the governing Rollout has no stable
// revision yet (it adopts one from the CloneSet) or made revision stable.
// Not before the Rollouts were read.
func (g governance) promoted(revision string) bool {
	return g.known && (g.rollout == "" || g.stable == "" || g.stable == revision)
}

// governor is status.rollout.
func (g governance) governor(updateRevision string) *stepwisev1.CloneSetGovernor {
	if g.rollout == "" {
		return nil
	}
	gov := &stepwisev1.CloneSetGovernor{Name: g.rollout, Partition: *g.partition(nil, updateRevision)}
	if g.grant != nil {
		gov.Revision = g.grant.Revision
	}
	return gov
}

// setGovernedCondition says who decides how far Pods move. Once a Rollout
// that governed is gone the condition stays False, naming it, until another
// governs: it tells why the spec's partition applies again.
func (g governance) setGovernedCondition(status *stepwisev1.CloneSetStatus, spec *intstr.IntOrString, gen int64) {
	set := func(s metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: stepwisev1.GovernedCondition, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	switch {
	case g.rollout != "":
		set(metav1.ConditionTrue, stepwisev1.ReasonGovernedByRollout, g.describe(spec, status.UpdateRevision))
	case g.gone != "":
		set(metav1.ConditionFalse, stepwisev1.ReasonRolloutGone,
			fmt.Sprintf("Rollout %s no longer governs this CloneSet (it was deleted): spec.updateStrategy.partition (%s) applies", g.gone, describePartition(spec)))
	}
}

// describe says what the governing Rollout allows, for the condition.
func (g governance) describe(spec *intstr.IntOrString, updateRevision string) string {
	ignored := fmt.Sprintf("spec.updateStrategy.partition (%s) is ignored", describePartition(spec))
	switch {
	case g.grant == nil:
		return fmt.Sprintf("Rollout %s decides how far Pods move and has not decided yet: no Pod moves to revision %s; %s", g.rollout, updateRevision, ignored)
	case !g.acknowledged(updateRevision):
		return fmt.Sprintf("Rollout %s decides how far Pods move; it acknowledged revision %s, so no Pod moves to revision %s until it does; %s",
			g.rollout, g.grant.Revision, updateRevision, ignored)
	}
	return fmt.Sprintf("Rollout %s decides how far Pods move: partition %s for revision %s; %s", g.rollout, g.grant.Partition.String(), g.grant.Revision, ignored)
}

// awaiting is the Reconciling message while the update revision waits for
// the Rollout; empty when it does not.
func (g governance) awaiting(updateRevision string) string {
	if g.rollout == "" || g.acknowledged(updateRevision) {
		return ""
	}
	return fmt.Sprintf("revision %s waits for Rollout %s to acknowledge it: no Pod moves to it before", updateRevision, g.rollout)
}

// releasing is the Reconciling message while the governing Rollout moves
// Pods to the update revision it has not promoted yet; empty otherwise.
// Held where the grant says, the CloneSet would otherwise read as Current
// (kstatus) mid-release, and a Flux `wait` passed on it while the Rollout
// was still at its first step (issue 36). A grant holding every Pod back
// (an aborted release, a pause in git) is not a release in progress: the
// Rollout itself then reads as Failed or Suspended.
func (g governance) releasing(updateRevision string) string {
	if g.rollout == "" || !g.acknowledged(updateRevision) || g.stable == updateRevision || g.grant.Partition == holdAll {
		return ""
	}
	return fmt.Sprintf("revision %s is being released by Rollout %s (partition %s) and is not promoted yet", updateRevision, g.rollout, g.grant.Partition.String())
}

func describePartition(p *intstr.IntOrString) string {
	if p == nil {
		return "unset"
	}
	return p.String()
}

// governance lists the Rollouts that name the CloneSet, from the cache
// (index.RolloutWorkload).
func (r *Reconciler) governance(ctx context.Context, cs *stepwisev1.CloneSet) (governance, error) {
	var list stepwisev1.RolloutList
	if err := r.Client.List(ctx, &list, client.InNamespace(cs.Namespace), client.MatchingFields{index.RolloutWorkload: index.WorkloadKey(stepwisev1.GroupVersion.WithKind("CloneSet").GroupKind(), cs.Name)}); err != nil {
		return governance{}, fmt.Errorf("listing Rollouts: %w", err)
	}
	return governanceOf(cs, list.Items), nil
}

// cloneSetOf maps a Rollout to the CloneSet of ours it names.
func cloneSetOf(_ context.Context, obj client.Object) []reconcile.Request {
	ro, ok := obj.(*stepwisev1.Rollout)
	if !ok || !names(ro, ro.Spec.WorkloadRef.Name) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ro.Namespace, Name: ro.Spec.WorkloadRef.Name}}}
}

// governorChanged lets through what can change a CloneSet's governance: a
// Rollout created or deleted, its grant, its stable revision (the
// promotion that ends the CloneSet's AwaitingRollout, see releasing), or
// its deletion starting.
var governorChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, okB := e.ObjectOld.(*stepwisev1.Rollout)
		after, okA := e.ObjectNew.(*stepwisev1.Rollout)
		if !okB || !okA {
			return false
		}
		return !apiequality.Semantic.DeepEqual(before.Status.PartitionGrant, after.Status.PartitionGrant) ||
			before.Status.StableRevision != after.Status.StableRevision ||
			before.DeletionTimestamp.IsZero() != after.DeletionTimestamp.IsZero()
	},
}
