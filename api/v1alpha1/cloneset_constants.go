package v1alpha1

// Pod labels, annotations and condition types shared by the CloneSet
// controller, pkg/inplace and anyone who reads Pods.
const (
	// InPlaceUpdateReady is the readiness gate every CloneSet Pod carries. It is
	// False while the Pod is being updated in place, so the Pod leaves Service
	// endpoints, and True otherwise.
	InPlaceUpdateReady = "InPlaceUpdateReady"

	// InPlaceUpdateStateAnnotation holds how far the in-place update of a Pod
	// got, as JSON (see pkg/inplace.State).
	InPlaceUpdateStateAnnotation = "stepwise.dev/inplace-update-state"

	// InPlaceUpdateGraceAnnotation holds the images waiting for the grace
	// period to end, as JSON.
	InPlaceUpdateGraceAnnotation = "stepwise.dev/inplace-update-grace"

	// LifecycleStateLabel is the Pod's lifecycle state: Normal,
	// PreparingUpdate, Updating, Updated, PreparingDelete.
	LifecycleStateLabel = "lifecycle.stepwise.dev/state"

	// SpecifiedDeleteLabel marks a Pod to be deleted first, like podsToDelete.
	SpecifiedDeleteLabel = "stepwise.dev/specified-delete"
)

// Lifecycle states, the values of LifecycleStateLabel.
const (
	LifecycleStateNormal          = "Normal"
	LifecycleStatePreparingUpdate = "PreparingUpdate"
	LifecycleStateUpdating        = "Updating"
	LifecycleStateUpdated         = "Updated"
	LifecycleStatePreparingDelete = "PreparingDelete"
)

// CloneSet condition types and reasons.
const (
	// FailedUpdateCondition is True when a Pod cannot be moved to the update
	// revision, for example an InPlaceOnly CloneSet whose template changed a
	// field that cannot change in place.
	FailedUpdateCondition = "FailedUpdate"
	// FailedScaleCondition is True when creating or deleting Pods failed.
	FailedScaleCondition = "FailedScale"
	// UpdateBlockedCondition is True when maxUnavailable is used up by Pods
	// that are unavailable for other reasons, so the update cannot progress.
	UpdateBlockedCondition = "UpdateBlocked"
	// GovernedCondition is True while a Rollout decides how far the
	// CloneSet moves its Pods (status.rollout), whatever
	// spec.updateStrategy.partition says; False, reason RolloutGone, once
	// the Rollout that did is gone and the spec's partition applies again.
	GovernedCondition = "Governed"

	ReasonInPlaceImpossible = "InPlaceImpossible"
	ReasonUnavailableBudget = "UnavailableBudgetExhausted"
	ReasonUpdating          = "Updating"
	ReasonScaling           = "Scaling"
	ReasonUpdated           = "Updated"
	ReasonPaused            = "Paused"
	ReasonPartitioned       = "Partitioned"
	ReasonCreateFailed      = "CreateFailed"
	ReasonDeleteFailed      = "DeleteFailed"
	ReasonCorruptedState    = "CorruptedInPlaceState"
	// ReasonGovernedByRollout: a Rollout's partitionGrant applies.
	ReasonGovernedByRollout = "GovernedByRollout"
	// ReasonAwaitingRollout: the update revision is not the one the
	// governing Rollout acknowledged; no Pod moves to it, and the CloneSet
	// is Reconciling until the Rollout reacts.
	ReasonAwaitingRollout = "AwaitingRollout"
	// ReasonRolloutGone: the Rollout that governed the CloneSet no longer
	// exists (or no longer names it).
	ReasonRolloutGone = "RolloutGone"

	// ReasonLifecycleHook is the reason of a Pod's InPlaceUpdateReady=False
	// while a lifecycle hook with markPodNotReady holds it (PreparingUpdate
	// or PreparingDelete). The in-place engine turns only its own reason
	// back to True; the CloneSet controller lifts this one when the Pod
	// leaves the Preparing state.
	ReasonLifecycleHook = "LifecycleHook"
)

// Event reasons on a CloneSet.
const (
	EventSuccessfulCreate            = "SuccessfulCreate"
	EventSuccessfulDelete            = "SuccessfulDelete"
	EventFailedCreate                = "FailedCreate"
	EventFailedDelete                = "FailedDelete"
	EventSuccessfulUpdatePodInPlace  = "SuccessfulUpdatePodInPlace"
	EventFailedUpdatePodInPlace      = "FailedUpdatePodInPlace"
	EventSuccessfulUpdatePodReCreate = "SuccessfulUpdatePodReCreate"
	EventUpdateBlocked               = "UpdateBlocked"
	EventCorruptedInPlaceState       = "CorruptedInPlaceState"
	// EventGoverned: a Rollout now decides how far Pods move.
	EventGoverned = "Governed"
	// EventReleased: no Rollout governs any more; the spec's partition applies.
	EventReleased = "Released"
	// EventLifecycleHook: a Pod entered a Preparing state and waits for its
	// hook, or left PreparingUpdate because no update wants it any more.
	EventLifecycleHook = "LifecycleHook"
	// EventInvalidSpec: the selector is missing, invalid, empty, or does not
	// match the template's labels; nothing is done until the spec changes.
	EventInvalidSpec = "InvalidSpec"
	// EventNewRevision: the template changed, so the update revision did.
	EventNewRevision = "NewRevision"
	// EventUpdateComplete: every Pod runs the revision they were updated
	// to, which status now names as current (usually the update revision;
	// the one before it when the next template came before status said so).
	EventUpdateComplete = "UpdateComplete"
	// EventReady: the CloneSet became Ready.
	EventReady = "Ready"
)
