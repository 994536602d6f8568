package v1alpha1

import (
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutPhase summarizes a Rollout for people and for GitOps health checks.
// +kubebuilder:validation:Enum=Healthy;Progressing;Paused;Aborted
type RolloutPhase string

const (
	// RolloutHealthy: no rollout in progress; the workload runs the stable revision.
	RolloutHealthy RolloutPhase = "Healthy"
	// RolloutProgressing: stepping, pausing for a set time, analysing, or
	// moving every Pod at once on a rollback or downgrade.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutPaused: waiting for a person (a promote, a resume or spec.paused
	// set to false).
	RolloutPaused RolloutPhase = "Paused"
	// RolloutAborted: the canary was rolled back; waits for a change in git or
	// a retry.
	RolloutAborted RolloutPhase = "Aborted"
)

// InconclusivePolicy says what an inconclusive analysis (no data, NaN, ±Inf,
// several series, or too many query errors) does.
// +kubebuilder:validation:Enum=Pause;Abort;Promote
type InconclusivePolicy string

const (
	// InconclusivePause waits for a promote, a retry or an abort.
	InconclusivePause InconclusivePolicy = "Pause"
	// InconclusiveAbort aborts the rollout.
	InconclusiveAbort InconclusivePolicy = "Abort"
	// InconclusivePromote goes on to the next step.
	InconclusivePromote InconclusivePolicy = "Promote"
)

// AnalysisPhase is the verdict of an analysis or of one of its metrics.
// +kubebuilder:validation:Enum=Running;Passed;Failed;Inconclusive
type AnalysisPhase string

const (
	AnalysisRunning      AnalysisPhase = "Running"
	AnalysisPassed       AnalysisPhase = "Passed"
	AnalysisFailed       AnalysisPhase = "Failed"
	AnalysisInconclusive AnalysisPhase = "Inconclusive"
)

// MeasurementPhase is the outcome of one query.
// +kubebuilder:validation:Enum=Successful;Failed;Inconclusive;Error
type MeasurementPhase string

const (
	// MeasurementSuccessful: the value is inside thresholdRange.
	MeasurementSuccessful MeasurementPhase = "Successful"
	// MeasurementFailed: the value is outside thresholdRange.
	MeasurementFailed MeasurementPhase = "Failed"
	// MeasurementInconclusive: no single finite value (empty, NaN, ±Inf, several series).
	MeasurementInconclusive MeasurementPhase = "Inconclusive"
	// MeasurementError: the query could not be run (network, auth, bad template).
	MeasurementError MeasurementPhase = "Error"
)

// RolloutSpec is the step plan for one workload.
// +kubebuilder:validation:XValidation:rule="has(self.trafficRouting) || !self.steps.exists(s, has(s.traffic) || has(s.matches))",message="spec.steps[].traffic and spec.steps[].matches need spec.trafficRouting"
// +kubebuilder:validation:XValidation:rule="!has(self.analysis) || !has(self.analysis.background) || !has(self.analysis.background.startingStep) || self.analysis.background.startingStep < size(self.steps)",message="spec.analysis.background.startingStep must be the index of one of spec.steps (0 is the first)"
type RolloutSpec struct {
	// WorkloadRef names the workload in the Rollout's namespace. It cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.workloadRef is immutable: create another Rollout to drive another workload"
	// +kubebuilder:validation:XValidation:rule="(self.apiVersion == 'stepwise.dev/v1alpha1' && self.kind == 'CloneSet') || (self.apiVersion == 'apps.kruise.io/v1alpha1' && self.kind == 'CloneSet') || (self.apiVersion == 'apps/v1' && self.kind == 'StatefulSet')",message="spec.workloadRef must be a stepwise.dev/v1alpha1 CloneSet, an apps.kruise.io/v1alpha1 CloneSet or an apps/v1 StatefulSet"
	WorkloadRef WorkloadReference `json:"workloadRef"`

	// The third rule on steps uses CEL two-variable comprehensions
	// (all(i, a, ...)), which API servers accept from Kubernetes 1.33.

	// Steps are run in order. Partitions are Pods kept on the stable revision,
	// so they must not rise from one step to a later one, and the last must be
	// 0 or "0%". A count and a percent cannot be compared without knowing the
	// replicas, so only two counts or two percents are checked against each other.
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="self.size() >= 1",message="spec.steps must have at least one step"
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || (type(self[self.size() - 1].partition) == int ? self[self.size() - 1].partition == 0 : self[self.size() - 1].partition == '0%')",message="spec.steps: the last step must have partition 0 or '0%'"
	// +kubebuilder:validation:XValidation:rule="self.all(i, a, self.all(j, b, j <= i || (type(a.partition) == int) != (type(b.partition) == int) || (type(a.partition) == int ? b.partition <= a.partition : int(b.partition.replace('%', '')) <= int(a.partition.replace('%', '')))))",message="spec.steps[].partition must not rise from one step to a later one (counts are compared with counts, percents with percents)"
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || !has(self[self.size() - 1].traffic) || self[self.size() - 1].traffic == 100",message="spec.steps: the last step's traffic must be 100 (no stable Pod is left to serve the rest)"
	Steps []RolloutStep `json:"steps"`

	// Analysis runs after each step's pause, unless the step overrides or skips it.
	// +optional
	Analysis *AnalysisSpec `json:"analysis,omitempty"`

	// VersionPolicy checks the image tag of one container as a semantic
	// version: a revision that breaks the constraint is not rolled out, and a
	// downgrade from the stable revision to a revision that was stable before
	// (or that trustedDowngrades trusts) takes the fast path (no steps, no analysis).
	// +optional
	VersionPolicy *VersionPolicy `json:"versionPolicy,omitempty"`

	// ProgressDeadlineSeconds is how long a step may wait for the workload
	// without progress (an updated Pod becoming ready) before the rollout
	// aborts. Pauses and analyses do not count. A rollback or downgrade has
	// nothing to abort to: past the deadline it is marked Stalled and goes
	// on. Defaults to 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// Paused holds forward progress: no rollout starts and no step is taken.
	// Rollbacks (to the stable revision, or a semver downgrade) and aborts still happen.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// TrafficRouting shifts requests with Gateway API HTTPRoutes: steps
	// may then set traffic (a weight) and matches. Unset: the share of Pods
	// alone decides, as a Service that selects every Pod does.
	// +optional
	TrafficRouting *TrafficRouting `json:"trafficRouting,omitempty"`

	// Notifications are webhooks posted to when the phase changes
	// (Progressing, Paused, Aborted, Healthy), each transition at most
	// once. See docs/notifications.md.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Notifications []Notification `json:"notifications,omitempty"`
}

// WorkloadReference names a workload in the Rollout's namespace.
type WorkloadReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RolloutStep is one partition value and what to do once the workload reached it.
type RolloutStep struct {
	// Partition is how many Pods (or what percent of replicas, rounded up) stay
	// on the stable revision during this step.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="spec.steps[].partition must be a non-negative integer or a percent from 0% to 100%"
	Partition intstr.IntOrString `json:"partition"`

	// Pause waits after the workload gate: for a duration, or without one
	// until a promote-at request.
	// +optional
	Pause *StepPause `json:"pause,omitempty"`

	// Traffic is the percent of requests the routes send to the canary
	// Service during this step. Unset with spec.trafficRouting: the
	// canary's share of ready Pods.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Traffic *int32 `json:"traffic,omitempty"`

	// Matches send the requests that match any of them to the canary
	// Service, whatever the weight, during this step.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Matches []TrafficMatch `json:"matches,omitempty"`

	// Analysis overrides spec.analysis for this step: fields set here replace
	// those of spec.analysis (args are merged key by key, metrics replace the
	// whole list); skip: true runs no analysis.
	// +optional
	Analysis *StepAnalysis `json:"analysis,omitempty"`
}

// StepPause is a timed or a manual pause.
type StepPause struct {
	// Duration of the pause, for example 1m or 1h30m. Unset: wait for a promote-at request.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s')",message="spec.steps[].pause.duration must be a positive duration such as 30s, 5m or 1h30m"
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// StepAnalysis overrides or skips the analysis of one step.
// +kubebuilder:validation:XValidation:rule="!has(self.background) && !has(self.postPromotion) && !has(self.measurementRetention) && !has(self.judge)",message="spec.steps[].analysis cannot set background, postPromotion, judge or measurementRetention: they belong to spec.analysis"
// +kubebuilder:validation:XValidation:rule="!has(self.skip) || !self.skip || !(has(self.interval) || has(self.count) || has(self.failureLimit) || has(self.inconclusive) || has(self.inconclusiveLimit) || has(self.consecutiveErrorLimit) || has(self.initialDelay) || has(self.scrapeMargin) || has(self.args) || has(self.metrics) || has(self.templates))",message="spec.steps[].analysis.skip cannot be combined with other analysis fields"
type StepAnalysis struct {
	// Skip runs no analysis after this step.
	// +optional
	Skip bool `json:"skip,omitempty"`

	AnalysisSpec `json:",inline"`
}

// VersionPolicy reads one container's image tag as a semantic version.
type VersionPolicy struct {
	// Container is the name of the container whose image tag is compared.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Container string `json:"container"`
	// Constraint (Masterminds/semver syntax, such as ">=1.0.0 <2.0.0") that
	// the tag of a new revision must meet. Unset: any version, and the policy
	// only detects downgrades.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Constraint string `json:"constraint,omitempty"`
	// TrustedDowngrades (Masterminds/semver syntax, such as ">=1.0.0") lets a
	// downgrade whose version meets it take the fast path even when its
	// revision was never stable under this Rollout. Unset: only a revision
	// listed in status.previousStableRevisions is trusted. A pre-release
	// (1.4.0-hotfix.1) meets a constraint only if the constraint names a
	// pre-release itself, so a hotfix build below its release walks the steps.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9A-Za-z.+*<>=!~^, |-]+$')",message="versionPolicy.trustedDowngrades must be a semantic version constraint such as \">=1.0.0\" (Masterminds/semver syntax)"
	TrustedDowngrades string `json:"trustedDowngrades,omitempty"`
}

// RolloutStatus is the observed state of a Rollout. Everything the step
// decision needs lives here (and in the workload), never in memory, so a
// restarted controller resumes at the same step and reuses analyses that passed.
type RolloutStatus struct {
	// LastHandledReconcileAt is the last reconcile.fluxcd.io/requestedAt value handled.
	meta.ReconcileRequestStatus `json:",inline"`

	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase: Healthy, Progressing, Paused or Aborted.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`

	// Reason is why the phase is what it is, one CamelCase word (a Reason*
	// constant such as AnalysisFailed), as in a Pod's status. The Ready
	// condition repeats it, but conditions are summarized by other code; this
	// field is the step decision's own record.
	// +optional
	Reason string `json:"reason,omitempty"`

	// CurrentStepIndex is the index in spec.steps of the step in progress;
	// unset when no step is (idle, aborted, or a rollback or downgrade).
	// +optional
	CurrentStepIndex *int32 `json:"currentStepIndex,omitempty"`

	// StableRevision is the workload revision last rolled out in full.
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`

	// PreviousStableRevisions are the revisions that were stable before
	// StableRevision, newest first, at most MaxPreviousStableRevisions (10):
	// a semver downgrade takes the fast path only to one of them (or to a
	// version spec.versionPolicy.trustedDowngrades trusts). It is written
	// with StableRevision in the same status write, so it survives restarts.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=253
	PreviousStableRevisions []string `json:"previousStableRevisions,omitempty"`

	// CanaryRevision is the revision being rolled out, or the one aborted.
	// +optional
	CanaryRevision string `json:"canaryRevision,omitempty"`

	// Message says what the rollout waits for, in words.
	// +optional
	Message string `json:"message,omitempty"`

	// StepStartedAt is when the current step's partition was set.
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`

	// StepReadyAt is when the current step passed the workload gate; its pause counts from here.
	// +optional
	StepReadyAt *metav1.Time `json:"stepReadyAt,omitempty"`

	// LastProgressAt is when the workload last made progress (a step started
	// or more updated Pods became ready); spec.progressDeadlineSeconds counts from here.
	// +optional
	LastProgressAt *metav1.Time `json:"lastProgressAt,omitempty"`

	// UpdatedReadyReplicas is the workload's count when last seen, to detect progress.
	// +optional
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas,omitempty"`

	// PauseRequested is true from a pause-at request to a resume-at request.
	// +optional
	PauseRequested bool `json:"pauseRequested,omitempty"`

	// PartitionGrant is how far the Rollout lets a stepwise.dev CloneSet
	// move its Pods, in place of the CloneSet's own
	// spec.updateStrategy.partition, which git may keep at any value. It is
	// written with the decision, in the same status write, so the decision
	// and the act are one. Unset for other workloads, whose partition the
	// Rollout writes.
	// +optional
	PartitionGrant *PartitionGrant `json:"partitionGrant,omitempty"`

	// Traffic is what the routes were last set to; unset without
	// spec.trafficRouting once nothing the Rollout wrote is left.
	// +optional
	Traffic *TrafficStatus `json:"traffic,omitempty"`

	// Analysis is the analysis of the current step (or the one that aborted the rollout).
	// +optional
	Analysis *AnalysisStatus `json:"analysis,omitempty"`

	// BackgroundAnalysis is the tally of spec.analysis.background for the
	// rollout in progress (or the one it aborted); stepIndex is the step
	// it started at.
	// +optional
	BackgroundAnalysis *AnalysisStatus `json:"backgroundAnalysis,omitempty"`

	// PostPromotionAnalysis is the tally of spec.analysis.postPromotion
	// for the canary revision, from when its last step's Pods were ready
	// (startedAt) to the end of the window (or the abort it caused).
	// +optional
	PostPromotionAnalysis *AnalysisStatus `json:"postPromotionAnalysis,omitempty"`

	// AnalysisTemplates are the templates the rollout in progress uses, as
	// they were when it started: a template edited mid-release does not
	// change the release in flight.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	AnalysisTemplates []UsedAnalysisTemplate `json:"analysisTemplates,omitempty"`

	// Measurements are the most recent measurements, oldest first, at most
	// MaxMeasurements (20): the writer drops the oldest.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Measurements []Measurement `json:"measurements,omitempty"`

	// PromotedFull is true from a promote-full-at request until the rollout
	// it promoted completes, aborts or is replaced by a newer revision: a
	// step then passes on its workload gate alone, without its pause or
	// analysis.
	// +optional
	PromotedFull bool `json:"promotedFull,omitempty"`

	// LastHandledPromoteAt is the last stepwise.dev/promote-at value handled.
	// +optional
	LastHandledPromoteAt string `json:"lastHandledPromoteAt,omitempty"`
	// LastHandledPromoteFullAt is the last stepwise.dev/promote-full-at value handled.
	// +optional
	LastHandledPromoteFullAt string `json:"lastHandledPromoteFullAt,omitempty"`
	// LastHandledAbortAt is the last stepwise.dev/abort-at value handled.
	// +optional
	LastHandledAbortAt string `json:"lastHandledAbortAt,omitempty"`
	// LastHandledRetryAt is the last stepwise.dev/retry-at value handled.
	// +optional
	LastHandledRetryAt string `json:"lastHandledRetryAt,omitempty"`
	// LastHandledPauseAt is the last stepwise.dev/pause-at value handled.
	// +optional
	LastHandledPauseAt string `json:"lastHandledPauseAt,omitempty"`
	// LastHandledResumeAt is the last stepwise.dev/resume-at value handled.
	// +optional
	LastHandledResumeAt string `json:"lastHandledResumeAt,omitempty"`

	// Notifications is the last phase transition decided for
	// spec.notifications; unset while there are none.
	// +optional
	Notifications *NotificationStatus `json:"notifications,omitempty"`

	// Conditions: Ready, Reconciling, Stalled (Flux semantics, for kstatus),
	// PartitionConflict and TrafficConflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PartitionGrant lets a CloneSet move Pods to one update revision, up to a
// partition.
type PartitionGrant struct {
	// Revision is the update revision the Rollout acknowledged. A CloneSet
	// whose template is at another revision moves no Pod to it.
	Revision string `json:"revision"`
	// Partition is how many Pods (or what percent) stay off Revision, as
	// spec.steps writes it.
	// +kubebuilder:validation:XIntOrString
	Partition intstr.IntOrString `json:"partition"`
}

// Rollout walks one workload through steps of partition values, checking
// Prometheus between steps, and promotes or aborts by itself.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="PHASE",type=string,JSONPath=`.status.phase`,description="Healthy, Progressing, Paused or Aborted"
// +kubebuilder:printcolumn:name="STEP",type=integer,JSONPath=`.status.currentStepIndex`,description="Index of the step in progress"
// +kubebuilder:printcolumn:name="CANARY",type=string,JSONPath=`.status.canaryRevision`,description="Revision being rolled out"
// +kubebuilder:printcolumn:name="STABLE",type=string,JSONPath=`.status.stableRevision`,description="Revision last rolled out in full"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.message`,description="What the rollout waits for"
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:metadata:annotations="kustomize.toolkit.fluxcd.io/prune=disabled"
// +kubebuilder:metadata:annotations="argocd.argoproj.io/sync-options=Prune=false"
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RolloutSpec   `json:"spec,omitempty"`
	Status RolloutStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions, for fluxcd/pkg/runtime/conditions.
func (in *Rollout) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions sets the status conditions, for fluxcd/pkg/runtime/conditions.
func (in *Rollout) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}

// RolloutList is a list of Rollouts.
// +kubebuilder:object:root=true
type RolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Rollout `json:"items"`
}
