package cloneset

import (
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// podCounts is what status reports about the Pods, computed once per reconcile.
type podCounts struct {
	replicas, ready, available              int32
	updated, updatedReady, updatedAvailable int32
	updating                                int32
	// nextAvailable is the soonest a ready Pod passes minReadySeconds, so the
	// reconcile can come back exactly then.
	nextAvailable time.Duration
}

func countPods(pods []*corev1.Pod, updateRevision string, minReadySeconds int32, isUpdating func(*corev1.Pod) bool, now time.Time) podCounts {
	var c podCounts
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		c.replicas++
		onUpdate := pod.Labels[RevisionLabel] == updateRevision
		if onUpdate {
			c.updated++
		}
		if isUpdating(pod) {
			c.updating++
		}
		if !podReady(pod) {
			continue
		}
		c.ready++
		if onUpdate {
			c.updatedReady++
		}
		available, wait := podAvailable(pod, minReadySeconds, now)
		if !available {
			if c.nextAvailable == 0 || wait < c.nextAvailable {
				c.nextAvailable = wait
			}
			continue
		}
		c.available++
		if onUpdate {
			c.updatedAvailable++
		}
	}
	return c
}

// statusFindings are the problems a reconcile met that status must show.
type statusFindings struct {
	// failedUpdate names why a Pod cannot move to the update revision.
	failedUpdate string
	// blocked says maxUnavailable is used up by Pods unavailable for other reasons.
	blocked string
	// scaleError is the last create or delete failure.
	scaleError string
	// invalidSpec is a spec problem the CRD schema cannot catch.
	invalidSpec string
}

// computeStatus fills status from counts and findings. Conditions follow
// kstatus: Reconciling while Pods move, Stalled when only a human can help,
// Ready when the CloneSet is where its spec says it should be.
func computeStatus(cs *stepwisev1.CloneSet, counts podCounts, revs *revisionSet, expectedUpdated int32, gov governance, findings statusFindings, selector string) stepwisev1.CloneSetStatus {
	status := *cs.Status.DeepCopy()
	status.Replicas = counts.replicas
	status.ReadyReplicas = counts.ready
	status.AvailableReplicas = counts.available
	status.UpdatedReplicas = counts.updated
	status.UpdatedReadyReplicas = counts.updatedReady
	status.UpdatedAvailableReplicas = counts.updatedAvailable
	status.ExpectedUpdatedReplicas = expectedUpdated
	status.LabelSelector = selector
	if revs != nil {
		status.UpdateRevision = revs.update.Name
		status.CurrentRevision = revs.current.Name
		if revs.collisionCount != 0 || status.CollisionCount != nil {
			cc := revs.collisionCount
			status.CollisionCount = &cc
		}
	}
	if gov.known {
		status.Rollout = gov.governor(status.UpdateRevision)
		gov.setGovernedCondition(&status, cs.Spec.UpdateStrategy.Partition, cs.Generation)
	}
	awaiting := gov.awaiting(status.UpdateRevision)
	releasing := gov.releasing(status.UpdateRevision)

	gen := cs.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	clear := func(t string) { apimeta.RemoveStatusCondition(&status.Conditions, t) }

	desired := ptr.Deref(cs.Spec.Replicas, 0)
	settled := counts.replicas == desired && counts.updating == 0 &&
		counts.updatedReady >= expectedUpdated && counts.ready == desired &&
		// partition held: no more Pods on the update revision than asked,
		// unless the update is complete.
		(counts.updated <= expectedUpdated || status.CurrentRevision == status.UpdateRevision)
	paused := cs.Spec.UpdateStrategy.Paused && counts.updated < expectedUpdated

	switch {
	case findings.failedUpdate != "":
		set(stepwisev1.FailedUpdateCondition, metav1.ConditionTrue, stepwisev1.ReasonInPlaceImpossible, findings.failedUpdate)
	default:
		clear(stepwisev1.FailedUpdateCondition)
	}
	if findings.blocked != "" {
		set(stepwisev1.UpdateBlockedCondition, metav1.ConditionTrue, stepwisev1.ReasonUnavailableBudget, findings.blocked)
	} else {
		clear(stepwisev1.UpdateBlockedCondition)
	}
	if findings.scaleError != "" {
		set(stepwisev1.FailedScaleCondition, metav1.ConditionTrue, stepwisev1.ReasonCreateFailed, findings.scaleError)
	} else {
		clear(stepwisev1.FailedScaleCondition)
	}

	switch {
	case findings.invalidSpec != "":
		set(meta.StalledCondition, metav1.ConditionTrue, meta.InvalidPathReason, findings.invalidSpec)
		set(meta.ReconcilingCondition, metav1.ConditionFalse, meta.InvalidPathReason, findings.invalidSpec)
		set(meta.ReadyCondition, metav1.ConditionFalse, meta.InvalidPathReason, findings.invalidSpec)
	case findings.failedUpdate != "":
		set(meta.StalledCondition, metav1.ConditionTrue, stepwisev1.ReasonInPlaceImpossible, findings.failedUpdate)
		clear(meta.ReconcilingCondition)
		set(meta.ReadyCondition, metav1.ConditionFalse, stepwisev1.ReasonInPlaceImpossible, findings.failedUpdate)
	case awaiting != "":
		// No health check may read "all Current" between a commit and the
		// Rollout's reaction to it.
		clear(meta.StalledCondition)
		set(meta.ReconcilingCondition, metav1.ConditionTrue, stepwisev1.ReasonAwaitingRollout, awaiting)
		set(meta.ReadyCondition, metav1.ConditionFalse, stepwisev1.ReasonAwaitingRollout, awaiting)
	case releasing != "" && (settled || paused):
		// Where the grant puts it, but the release is not done: Ready
		// only once the Rollout has promoted the revision.
		clear(meta.StalledCondition)
		set(meta.ReconcilingCondition, metav1.ConditionTrue, stepwisev1.ReasonAwaitingRollout, releasing)
		set(meta.ReadyCondition, metav1.ConditionFalse, stepwisev1.ReasonAwaitingRollout, releasing)
	case settled || paused:
		clear(meta.StalledCondition)
		clear(meta.ReconcilingCondition)
		reason, msg := stepwisev1.ReasonUpdated, fmt.Sprintf("%d/%d Pods ready on revision %s", counts.updatedReady, desired, status.UpdateRevision)
		switch {
		case paused:
			reason, msg = stepwisev1.ReasonPaused, fmt.Sprintf("update paused with %d/%d Pods on revision %s", counts.updated, desired, status.UpdateRevision)
		case expectedUpdated < desired:
			reason, msg = stepwisev1.ReasonPartitioned, fmt.Sprintf("%d/%d Pods on revision %s, partition keeps %d on %s", counts.updated, desired, status.UpdateRevision, desired-expectedUpdated, status.CurrentRevision)
		}
		set(meta.ReadyCondition, metav1.ConditionTrue, reason, msg)
	default:
		clear(meta.StalledCondition)
		reason := stepwisev1.ReasonUpdating
		if counts.replicas != desired {
			reason = stepwisev1.ReasonScaling
		}
		msg := fmt.Sprintf("%d/%d Pods, %d updated, %d updated and ready, %d ready, %d of %d expected on revision %s",
			counts.replicas, desired, counts.updated, counts.updatedReady, counts.ready, expectedUpdated, desired, status.UpdateRevision)
		set(meta.ReconcilingCondition, metav1.ConditionTrue, reason, msg)
		set(meta.ReadyCondition, metav1.ConditionFalse, reason, msg)
	}
	return status
}

// emitStatusEvents turns status transitions a user cares about into Events,
// so `kubectl describe` and event exporters tell the same story as status.
func (r *Reconciler) emitStatusEvents(before *stepwisev1.CloneSet, after *stepwisev1.CloneSetStatus) {
	cs := before
	if before.Status.UpdateRevision != "" && after.UpdateRevision != before.Status.UpdateRevision {
		r.event(cs, corev1.EventTypeNormal, stepwisev1.EventNewRevision, fmt.Sprintf("template changed: update revision is now %s (current %s)", after.UpdateRevision, after.CurrentRevision))
	}
	// The current revision moves only to the revision every Pod runs
	// (revisionSet.settle): usually the update revision, or the last one a
	// status write lost to the next template did not record.
	if after.CurrentRevision != before.Status.CurrentRevision && before.Status.CurrentRevision != "" {
		r.event(cs, corev1.EventTypeNormal, stepwisev1.EventUpdateComplete, fmt.Sprintf("every Pod runs revision %s", after.CurrentRevision))
	}
	// FailedUpdate and scale failures get their Event where they happen;
	// a blocked budget is only found here.
	blocked := apimeta.FindStatusCondition(after.Conditions, stepwisev1.UpdateBlockedCondition)
	wasBlocked := apimeta.FindStatusCondition(before.Status.Conditions, stepwisev1.UpdateBlockedCondition)
	if blocked != nil && (wasBlocked == nil || wasBlocked.Message != blocked.Message) {
		r.event(cs, corev1.EventTypeWarning, stepwisev1.EventUpdateBlocked, blocked.Message)
	}
	switch was, now := before.Status.Rollout, after.Rollout; {
	case now != nil && (was == nil || was.Name != now.Name):
		r.event(cs, corev1.EventTypeNormal, stepwisev1.EventGoverned, fmt.Sprintf("Rollout %s now decides how far Pods move; spec.updateStrategy.partition is ignored while it does", now.Name))
	case now == nil && was != nil:
		r.event(cs, corev1.EventTypeNormal, stepwisev1.EventReleased, apimeta.FindStatusCondition(after.Conditions, stepwisev1.GovernedCondition).Message)
	}
	wasReady := apimeta.IsStatusConditionTrue(before.Status.Conditions, meta.ReadyCondition)
	nowReady := apimeta.IsStatusConditionTrue(after.Conditions, meta.ReadyCondition)
	if nowReady && !wasReady {
		r.event(cs, corev1.EventTypeNormal, stepwisev1.EventReady, apimeta.FindStatusCondition(after.Conditions, meta.ReadyCondition).Message)
	}
}
