package plan

import (
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Pod is what the planner needs to know about one Pod the CloneSet owns.
// The reconciler derives every field from the Pod object; the planner never
// reads the object itself, so tests can state a cluster in a few lines.
type Pod struct {
	// Name identifies the Pod in the plan's Delete, Update and Rollback lists.
	Name string
	// Revision is the value of the controller-revision-hash label. A Pod
	// that is being updated in place already carries its target revision.
	Revision string
	// CreationTimestamp orders scale-down: the youngest Pod goes first.
	CreationTimestamp time.Time
	// Scheduled is true once spec.nodeName is set. Unscheduled Pods are the
	// cheapest to delete. Left false for every Pod, it only loses that
	// preference.
	Scheduled bool
	// Ready: Running, PodReady True and InPlaceUpdateReady True.
	Ready bool
	// Available: Ready for at least minReadySeconds. Only available Pods
	// count toward the maxUnavailable floor, and only touching an available
	// Pod spends budget.
	Available bool
	// Terminating: deletionTimestamp is set. Such a Pod is neither counted
	// as one of the replicas nor deleted again; the slot it leaves counts as
	// unavailable until its replacement is available.
	Terminating bool
	// Updating: an in-place update of this Pod is in progress. It counts as
	// unavailable, so moving it again (to a newer template, or back when the
	// partition rises) costs no budget, and the planner may do so before
	// the update completes: a Pod whose new image never starts is not stuck.
	Updating bool
	// Held: the Pod waits in lifecycle state PreparingUpdate, taken aside
	// by its inPlaceUpdate hook for a move that has not started. Such a
	// Pod is named in Plan.Release once no move wants it any more.
	Held bool
	// SpecifiedDelete: named in scaleStrategy.podsToDelete or labelled
	// stepwise.dev/specified-delete. Such a Pod no longer counts as one of
	// the replicas: its replacement is created in the same plan, and it is
	// deleted as soon as the budget allows (at once unless it is available
	// and the budget is used up; then there is one Pod more for a while).
	SpecifiedDelete bool
	// Labels feed priorityStrategy and scatterStrategy.
	Labels map[string]string
}

// Input is everything the planner looks at: the CloneSet spec fields that
// matter for the budget, the two revisions, and the Pods.
type Input struct {
	// Replicas is spec.replicas. Negative means 0.
	Replicas int32
	// Partition is spec.updateStrategy.partition; nil means 0.
	Partition *intstr.IntOrString
	// MaxUnavailable is spec.updateStrategy.maxUnavailable; nil means 20%.
	MaxUnavailable *intstr.IntOrString
	// MaxSurge is spec.updateStrategy.maxSurge; nil means 0. The reconciler
	// passes 0 for InPlaceOnly.
	MaxSurge *intstr.IntOrString
	// ScaleMaxUnavailable is spec.scaleStrategy.maxUnavailable; nil means
	// creating Pods is not limited.
	ScaleMaxUnavailable *intstr.IntOrString
	// Paused is spec.updateStrategy.paused: no Pod moves revision and
	// maxSurge counts as 0, but Pods are still created and deleted.
	Paused bool
	// CurrentRevision is status.currentRevision, the revision the partition
	// keeps Pods on. Empty means UpdateRevision (a new CloneSet).
	CurrentRevision string
	// UpdateRevision is the revision of the current template.
	UpdateRevision string
	// PriorityStrategy is spec.updateStrategy.priorityStrategy.
	PriorityStrategy *v1alpha1.UpdatePriorityStrategy
	// ScatterStrategy is spec.updateStrategy.scatterStrategy.
	ScatterStrategy v1alpha1.UpdateScatterStrategy
	// Pods are all Pods the CloneSet owns, terminating ones included.
	Pods []Pod
}

// Plan is what to do in this reconcile. Applying it never takes the number
// of available Pods below replicas - maxUnavailable (unless it already was),
// and never deletes a Pod that is still needed to reach replicas, except the
// Pods the user named for deletion.
type Plan struct {
	// ExpectedUpdatedReplicas is replicas - partition, for
	// status.expectedUpdatedReplicas.
	ExpectedUpdatedReplicas int32
	// CreateUpdateRevision is how many new Pods to create on UpdateRevision.
	CreateUpdateRevision int32
	// CreateCurrentRevision is how many new Pods to create on
	// CurrentRevision, because the partition wants more Pods there than
	// exist.
	CreateCurrentRevision int32
	// Delete lists the Pods to delete now, each with why: named for deletion
	// first, then scale-down or surge clean-up. Deletions that would spend
	// more budget than is left wait for a later reconcile.
	Delete []Deletion
	// Update lists the Pods to move to UpdateRevision now (in place or by
	// recreation, as the strategy says), in the order to do it.
	Update []string
	// Rollback lists the Pods to move back to CurrentRevision now, because
	// the partition was raised (or they sit on a third revision that the
	// partition wants on CurrentRevision), in the order to do it.
	Rollback []string
	// Release lists held Pods (Pod.Held) that no move wants any more,
	// paused or not: the template went back to their revision, or the
	// partition was raised so that their side keeps them. The reconciler
	// returns them to service; nothing else would, since no update comes.
	// A held Pod on a third revision always has somewhere to go and is
	// never released. Sorted by name.
	Release []string
	// Blocked is set when Pods should move but nothing can be done:
	// maxUnavailable is used up by Pods that are not ready, and nothing of
	// ours (an update in flight, a Pod waiting out minReadySeconds, a
	// create or delete this round) will free budget by itself. It is a
	// snapshot: a Pod created seconds ago is not ready either, so report
	// it in a condition and an Event once it has lasted a while.
	Blocked *Blocked
}

// Deletion is one Pod to delete and why.
type Deletion struct {
	// Name of the Pod.
	Name string
	// Reason is one of the Reason* constants, written to read well after
	// "deleted pod x: ".
	Reason string
}

// Reasons for a Deletion.
const (
	// ReasonSpecifiedDelete: the Pod is in scaleStrategy.podsToDelete or
	// carries the specified-delete label.
	ReasonSpecifiedDelete = "specified for deletion"
	// ReasonScaleDown: there are more Pods than replicas.
	ReasonScaleDown = "scale down"
	// ReasonSurgeCleanup: the extra Pods maxSurge allowed are no longer
	// needed. Which surplus Pods are called surge and which scale-down is a
	// best guess when both happen at once; the Pods chosen do not depend on
	// it.
	ReasonSurgeCleanup = "surge no longer needed"
)

// Blocked explains why an update (or rollback) cannot progress.
type Blocked struct {
	// Unavailable is how many of the replicas are unavailable now: not
	// available Pods plus missing ones.
	Unavailable int32
	// MaxUnavailable is the resolved spec.updateStrategy.maxUnavailable.
	MaxUnavailable int32
	// Pods names the Pods that are not ready and not being updated by us,
	// sorted: what to look at.
	Pods []string
	// Message is a sentence for the UpdateBlocked condition and Event. It
	// changes only when the numbers or the Pods change.
	Message string
}
