package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// CloneSetUpdateStrategyType says how a CloneSet moves a Pod to a new revision.
// +kubebuilder:validation:Enum=ReCreate;InPlaceIfPossible;InPlaceOnly
type CloneSetUpdateStrategyType string

const (
	// RecreateCloneSetUpdateStrategyType deletes the old Pod and creates a new one.
	RecreateCloneSetUpdateStrategyType CloneSetUpdateStrategyType = "ReCreate"
	// InPlaceIfPossibleCloneSetUpdateStrategyType updates in place when only
	// images and metadata changed, and recreates the Pod otherwise.
	InPlaceIfPossibleCloneSetUpdateStrategyType CloneSetUpdateStrategyType = "InPlaceIfPossible"
	// InPlaceOnlyCloneSetUpdateStrategyType updates in place and refuses any
	// template change that cannot be applied in place.
	InPlaceOnlyCloneSetUpdateStrategyType CloneSetUpdateStrategyType = "InPlaceOnly"
)

// OpenKruise's CloneSet fields that Stepwise does not implement are declared
// below (as Unsupported* fields) only so that the API server refuses a
// manifest carrying them, with a message naming the field: left out of the
// schema they would be pruned silently, and the workload would run without
// what the manifest asked for. Each rule allows the field to be absent only.

// CloneSetSpec is the desired state of a CloneSet.
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy) || !has(self.updateStrategy.type) || self.updateStrategy.type != 'InPlaceOnly' || !has(self.updateStrategy.maxSurge) || self.updateStrategy.maxSurge == 0 || self.updateStrategy.maxSurge == '0%'",message="spec.updateStrategy.maxSurge must be 0 when spec.updateStrategy.type is InPlaceOnly"
// +kubebuilder:validation:XValidation:rule="!has(self.volumeClaimTemplates)",fieldPath=".volumeClaimTemplates",message="spec.volumeClaimTemplates is not supported by stepwise.dev CloneSet: it creates no PersistentVolumeClaims per Pod; remove it, or keep this workload on OpenKruise (a Rollout can drive an apps.kruise.io CloneSet)"
// +kubebuilder:validation:XValidation:rule="!has(self.progressDeadlineSeconds)",fieldPath=".progressDeadlineSeconds",message="spec.progressDeadlineSeconds is not supported by stepwise.dev CloneSet: it sets no ProgressDeadlineExceeded condition; remove it (a Rollout's spec.progressDeadlineSeconds aborts a release that makes no progress)"
type CloneSetSpec struct {
	// Replicas is the desired number of Pods. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// Selector is a label query over Pods that should match the replica count.
	// It must match the template's labels.
	Selector *metav1.LabelSelector `json:"selector"`

	// Template describes the Pods that will be created.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Template corev1.PodTemplateSpec `json:"template"`

	// ScaleStrategy says how the CloneSet scales.
	// +optional
	ScaleStrategy CloneSetScaleStrategy `json:"scaleStrategy,omitempty"`

	// UpdateStrategy says how Pods move to a new revision.
	// +optional
	UpdateStrategy CloneSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// RevisionHistoryLimit is how many old ControllerRevisions are kept. Defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// MinReadySeconds is how long a new or updated Pod must be ready, with no
	// container crashing, before it counts as available.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// Lifecycle holds hooks that let other controllers act before a Pod is
	// deleted or updated in place.
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// UnsupportedVolumeClaimTemplates is OpenKruise's volumeClaimTemplates.
	// Not supported: the API server refuses it.
	// +optional
	UnsupportedVolumeClaimTemplates []runtime.RawExtension `json:"volumeClaimTemplates,omitempty"`

	// UnsupportedProgressDeadlineSeconds is OpenKruise's
	// progressDeadlineSeconds. Not supported: the API server refuses it.
	// +optional
	UnsupportedProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// CloneSetScaleStrategy says how a CloneSet scales.
// +kubebuilder:validation:XValidation:rule="!has(self.disablePVCReuse)",fieldPath=".disablePVCReuse",message="spec.scaleStrategy.disablePVCReuse is not supported by stepwise.dev CloneSet: it creates no PersistentVolumeClaims, so there is none to reuse; remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.enablePVCReuse)",fieldPath=".enablePVCReuse",message="spec.scaleStrategy.enablePVCReuse is OpenKruise apps.kruise.io/v1beta1 and not supported by stepwise.dev CloneSet, which creates no PersistentVolumeClaims; remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.excludePreparingDelete)",fieldPath=".excludePreparingDelete",message="spec.scaleStrategy.excludePreparingDelete is OpenKruise apps.kruise.io/v1beta1 and not supported by stepwise.dev CloneSet; remove it: a Pod in PreparingDelete never counts toward replicas here, as if it were true"
type CloneSetScaleStrategy struct {
	// PodsToDelete names Pods to delete first. When replicas stays the same a
	// replacement is created; when replicas is lowered with it, these go first.
	// +optional
	// +listType=set
	PodsToDelete []string `json:"podsToDelete,omitempty"`

	// MaxUnavailable limits scale-up: no new Pod is created while this many
	// Pods are unavailable. Unset means no limit; 0 reads as 1, one new Pod
	// at a time, since every new Pod starts unavailable.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="spec.scaleStrategy.maxUnavailable must be a non-negative integer or a percent from 0% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// UnsupportedDisablePVCReuse is OpenKruise's disablePVCReuse. Not
	// supported: the API server refuses it.
	// +optional
	UnsupportedDisablePVCReuse *bool `json:"disablePVCReuse,omitempty"`

	// UnsupportedEnablePVCReuse is OpenKruise v1beta1's enablePVCReuse. Not
	// supported: the API server refuses it.
	// +optional
	UnsupportedEnablePVCReuse *bool `json:"enablePVCReuse,omitempty"`

	// UnsupportedExcludePreparingDelete is OpenKruise v1beta1's
	// excludePreparingDelete. Not supported: the API server refuses it.
	// +optional
	UnsupportedExcludePreparingDelete *bool `json:"excludePreparingDelete,omitempty"`
}

// CloneSetUpdateStrategy says how Pods move to a new revision.
// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate)",fieldPath=".rollingUpdate",message="spec.updateStrategy.rollingUpdate is OpenKruise apps.kruise.io/v1beta1; stepwise.dev CloneSet follows apps.kruise.io/v1alpha1: move its fields up into spec.updateStrategy, and its podUpdatePolicy to spec.updateStrategy.type"
type CloneSetUpdateStrategy struct {
	// Type is ReCreate (default), InPlaceIfPossible or InPlaceOnly.
	// +optional
	// +kubebuilder:default=ReCreate
	Type CloneSetUpdateStrategyType `json:"type,omitempty"`

	// Partition is how many Pods (or what percent, rounded up) stay on the
	// current revision. Raising it while an update is under way moves Pods
	// back to the current revision. Defaults to 0.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.partition must be a non-negative integer or a percent from 0% to 100%"
	Partition *intstr.IntOrString `json:"partition,omitempty"`

	// MaxUnavailable is how many Pods (or what percent, rounded down) may be
	// unavailable during an update. Defaults to 20%. When it and maxSurge
	// both come to 0, 1 is used, so that an update can move at all.
	// (OpenKruise rounds a percent up when maxSurge is 0.)
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.maxUnavailable must be a non-negative integer or a percent from 0% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxSurge is how many Pods (or what percent, rounded up) may be created
	// above replicas during an update. Defaults to 0. Not allowed with InPlaceOnly.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="spec.updateStrategy.maxSurge must be a non-negative integer or a percent from 0% to 100%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// Paused stops updating Pods. Scaling still happens.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// PriorityStrategy orders which Pods update first.
	// +optional
	PriorityStrategy *UpdatePriorityStrategy `json:"priorityStrategy,omitempty"`

	// ScatterStrategy spreads updates across Pods that carry these labels, so
	// that not all Pods with one label value update together.
	// +optional
	ScatterStrategy UpdateScatterStrategy `json:"scatterStrategy,omitempty"`

	// InPlaceUpdateStrategy tunes in-place updates.
	// +optional
	InPlaceUpdateStrategy *InPlaceUpdateStrategy `json:"inPlaceUpdateStrategy,omitempty"`

	// UnsupportedRollingUpdate is OpenKruise v1beta1's rollingUpdate. Not
	// supported: the API server refuses it.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	UnsupportedRollingUpdate *runtime.RawExtension `json:"rollingUpdate,omitempty"`
}

// UpdatePriorityStrategy orders Pods for update. Only one of its fields may be set.
// +kubebuilder:validation:XValidation:rule="!(has(self.weightPriority) && has(self.orderPriority))",message="spec.updateStrategy.priorityStrategy may set weightPriority or orderPriority, not both"
type UpdatePriorityStrategy struct {
	// WeightPriority: Pods matching heavier terms update first.
	// +optional
	WeightPriority []UpdatePriorityWeightTerm `json:"weightPriority,omitempty"`
	// OrderPriority: Pods carrying the first key update first, ordered by
	// the integer value of that label (or the number it ends with), largest
	// first, as in OpenKruise; then Pods carrying the second key, and so on;
	// Pods with none of the keys last.
	// +optional
	OrderPriority []UpdatePriorityOrderTerm `json:"orderPriority,omitempty"`
}

// UpdatePriorityWeightTerm gives matching Pods a weight.
type UpdatePriorityWeightTerm struct {
	// Weight from 0 to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
	// MatchSelector selects the Pods that get this weight.
	MatchSelector metav1.LabelSelector `json:"matchSelector"`
}

// UpdatePriorityOrderTerm names a label whose integer value orders Pods.
type UpdatePriorityOrderTerm struct {
	// +kubebuilder:validation:MinLength=1
	OrderedKey string `json:"orderedKey"`
}

// UpdateScatterStrategy is a list of label terms to scatter updates across.
type UpdateScatterStrategy []UpdateScatterTerm

// UpdateScatterTerm is one label key and value.
type UpdateScatterTerm struct {
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// +kubebuilder:validation:MinLength=1
	Value string `json:"value"`
}

// InPlaceUpdateStrategy tunes in-place updates.
// +kubebuilder:validation:XValidation:rule="!has(self.imagePreDownloadParallelism)",fieldPath=".imagePreDownloadParallelism",message="spec.updateStrategy.inPlaceUpdateStrategy.imagePreDownloadParallelism is not supported by stepwise.dev CloneSet: it does not pre-download images; remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.imagePreDownloadTimeoutSeconds)",fieldPath=".imagePreDownloadTimeoutSeconds",message="spec.updateStrategy.inPlaceUpdateStrategy.imagePreDownloadTimeoutSeconds is not supported by stepwise.dev CloneSet: it does not pre-download images; remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.imagePreDownloadMinUpdatedReadyPods)",fieldPath=".imagePreDownloadMinUpdatedReadyPods",message="spec.updateStrategy.inPlaceUpdateStrategy.imagePreDownloadMinUpdatedReadyPods is not supported by stepwise.dev CloneSet: it does not pre-download images; remove it"
type InPlaceUpdateStrategy struct {
	// GracePeriodSeconds is the time between taking a Pod out of service
	// (InPlaceUpdateReady=False) and changing its images, so endpoints drain first.
	// While a Rollout with trafficRouting governs the CloneSet, at least 3 s
	// apply, so the Gateway follows the endpoints before the container stops.
	// +optional
	// +kubebuilder:validation:Minimum=0
	GracePeriodSeconds int32 `json:"gracePeriodSeconds,omitempty"`

	// ContainerBatches orders the update of named containers: each batch is
	// updated only once every container of the previous batch runs its new
	// image and is ready. Containers not named are updated with the last batch.
	// Use it to update a sidecar before (or after) the app container.
	// +optional
	ContainerBatches [][]string `json:"containerBatches,omitempty"`

	// UnsupportedImagePreDownloadParallelism is OpenKruise's
	// imagePreDownloadParallelism. Not supported: the API server refuses it.
	// +optional
	// +kubebuilder:validation:XIntOrString
	UnsupportedImagePreDownloadParallelism *intstr.IntOrString `json:"imagePreDownloadParallelism,omitempty"`
	// UnsupportedImagePreDownloadTimeoutSeconds is OpenKruise's
	// imagePreDownloadTimeoutSeconds. Not supported: the API server refuses it.
	// +optional
	UnsupportedImagePreDownloadTimeoutSeconds *int32 `json:"imagePreDownloadTimeoutSeconds,omitempty"`
	// UnsupportedImagePreDownloadMinUpdatedReadyPods is OpenKruise's
	// imagePreDownloadMinUpdatedReadyPods. Not supported: the API server
	// refuses it.
	// +optional
	UnsupportedImagePreDownloadMinUpdatedReadyPods *int32 `json:"imagePreDownloadMinUpdatedReadyPods,omitempty"`
}

// Lifecycle holds hooks run before a Pod is deleted or updated in place.
// +kubebuilder:validation:XValidation:rule="!has(self.preNormal)",fieldPath=".preNormal",message="spec.lifecycle.preNormal is not supported by stepwise.dev CloneSet: new Pods are Normal at once, with no PreparingNormal state; remove it"
type Lifecycle struct {
	// PreDelete holds a Pod in state PreparingDelete until its hook is released.
	// +optional
	PreDelete *LifecycleHook `json:"preDelete,omitempty"`
	// InPlaceUpdate holds a Pod in state PreparingUpdate until its hook is released.
	// +optional
	InPlaceUpdate *LifecycleHook `json:"inPlaceUpdate,omitempty"`
	// UnsupportedPreNormal is OpenKruise's preNormal hook. Not supported:
	// the API server refuses it.
	// +optional
	UnsupportedPreNormal *LifecycleHook `json:"preNormal,omitempty"`
}

// LifecycleHook says what marks a Pod as hooked: while every label in
// LabelsHandler and every finalizer in FinalizersHandler is present, another
// controller still has work to do and the CloneSet waits. (OpenKruise holds a
// Pod while any one of them is present; with a single label or finalizer,
// the two agree.) A hook that names neither holds no Pod.
type LifecycleHook struct {
	// +optional
	LabelsHandler map[string]string `json:"labelsHandler,omitempty"`
	// +optional
	FinalizersHandler []string `json:"finalizersHandler,omitempty"`
	// MarkPodNotReady sets InPlaceUpdateReady=False (reason LifecycleHook)
	// when the Pod enters PreparingUpdate or PreparingDelete, and True again
	// once it leaves PreparingUpdate: its update done, or called off.
	// +optional
	MarkPodNotReady bool `json:"markPodNotReady,omitempty"`
}

// Status counts carry no omitempty: the controller writes the whole status
// as one merge patch, and a count left out of it would keep its last value
// instead of falling to 0.

// CloneSetStatus is the observed state of a CloneSet.
type CloneSetStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`
	// Replicas is the number of Pods the CloneSet owns.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas: Running, Ready, and InPlaceUpdateReady=True.
	ReadyReplicas int32 `json:"readyReplicas"`
	// AvailableReplicas: ready for at least minReadySeconds.
	AvailableReplicas int32 `json:"availableReplicas"`
	// UpdatedReplicas: Pods on updateRevision.
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// UpdatedReadyReplicas: Pods on updateRevision that are ready. A release
	// gate should trust this, not updatedReplicas.
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas"`
	// UpdatedAvailableReplicas: Pods on updateRevision that are available.
	// +optional
	UpdatedAvailableReplicas int32 `json:"updatedAvailableReplicas"`
	// ExpectedUpdatedReplicas is replicas minus partition.
	// +optional
	ExpectedUpdatedReplicas int32 `json:"expectedUpdatedReplicas"`
	// CurrentRevision is the revision every Pod was last on together.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`
	// UpdateRevision is the revision of the current template.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`
	// CollisionCount disambiguates revision names on hash collisions.
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`
	// LabelSelector is the selector in string form, for the scale subresource.
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
	// Rollout is the Rollout that governs how far Pods move, and what the
	// CloneSet applied of its partitionGrant; unset when none governs.
	// +optional
	Rollout *CloneSetGovernor `json:"rollout,omitempty"`
	// Conditions: Ready, Reconciling, Stalled, FailedUpdate, FailedScale,
	// UpdateBlocked, Governed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CloneSetGovernor is what a CloneSet applies of the Rollout that governs it.
type CloneSetGovernor struct {
	// Name of the Rollout, in the CloneSet's namespace.
	Name string `json:"name"`
	// Revision is the update revision the Rollout acknowledged last; empty
	// before its first decision. While it is not status.updateRevision, no
	// Pod moves to the update revision.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Partition is the partition applied: the Rollout's, or every Pod kept
	// back while the update revision waits for the Rollout.
	Partition intstr.IntOrString `json:"partition"`
}

// CloneSet runs Pods from one template and updates them in place when it can.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:resource:shortName=clone
// +kubebuilder:printcolumn:name="DESIRED",type=integer,JSONPath=`.spec.replicas`,description="Desired Pods"
// +kubebuilder:printcolumn:name="UPDATED",type=integer,JSONPath=`.status.updatedReplicas`,description="Pods on the update revision"
// +kubebuilder:printcolumn:name="UPDATED_READY",type=integer,JSONPath=`.status.updatedReadyReplicas`,description="Ready Pods on the update revision"
// +kubebuilder:printcolumn:name="READY",type=integer,JSONPath=`.status.readyReplicas`,description="Ready Pods"
// +kubebuilder:printcolumn:name="TOTAL",type=integer,JSONPath=`.status.replicas`,description="Pods owned"
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:metadata:annotations="kustomize.toolkit.fluxcd.io/prune=disabled"
// +kubebuilder:metadata:annotations="argocd.argoproj.io/sync-options=Prune=false"
type CloneSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CloneSetSpec   `json:"spec,omitempty"`
	Status CloneSetStatus `json:"status,omitempty"`
}

// CloneSetList is a list of CloneSets.
// +kubebuilder:object:root=true
type CloneSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CloneSet `json:"items"`
}
