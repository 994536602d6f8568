package v1alpha1

import "time"

// Annotations that ask a Rollout for a manual action. Each value is a token,
// usually a timestamp (`kubectl stepwise promote` writes RFC 3339): a request
// is pending while the annotation differs from the matching
// status.lastHandled*At field, so writing the same value twice does nothing
// and there is nothing to clean up afterwards, as with Flux's
// reconcile.fluxcd.io/requestedAt (meta.ReconcileRequestAnnotation), which is
// honoured too.
const (
	// PromoteAtAnnotation skips the stage the current step is in once the
	// workload gate has passed: its pause if it is pausing, otherwise its
	// analysis. A step with both needs two promotes (or one after the pause).
	PromoteAtAnnotation = "stepwise.dev/promote-at"
	// PromoteFullAtAnnotation promotes the rollout in progress in full: it
	// goes to the last step at once, skipping every pause and analysis left,
	// the last step's included, and completes once the last step's workload
	// gate passes (its Pods updated and ready, and with traffic routing the
	// routes carrying it). Ignored while paused (by a pause-at request or
	// spec.paused), when no rollout is in progress, and when Aborted: retry
	// first.
	PromoteFullAtAnnotation = "stepwise.dev/promote-full-at"
	// AbortAtAnnotation aborts the rollout in progress: partition back to
	// 100%, phase Aborted.
	AbortAtAnnotation = "stepwise.dev/abort-at"
	// RetryAtAnnotation starts an aborted rollout again from step 0 with the
	// same canary revision, or reruns an inconclusive analysis.
	RetryAtAnnotation = "stepwise.dev/retry-at"
	// PauseAtAnnotation holds forward progress until a resume-at request.
	// It is the kubectl way to pause; spec.paused is the git way.
	PauseAtAnnotation = "stepwise.dev/pause-at"
	// ResumeAtAnnotation ends a pause-at request.
	ResumeAtAnnotation = "stepwise.dev/resume-at"

	// KruisePartitionRollbackAnnotation, set to "true" on an OpenKruise
	// CloneSet, declares that Kruise runs with its CloneSetPartitionRollback
	// feature gate on, so it moves updated Pods back itself when the
	// partition rises. Without it, a Rollout that aborts deletes the canary
	// Pods one budget at a time and Kruise recreates them on the current revision.
	KruisePartitionRollbackAnnotation = "stepwise.dev/kruise-partition-rollback"
)

// Rollout condition types beside Flux's meta.ReadyCondition,
// meta.ReconcilingCondition and meta.StalledCondition.
const (
	// PartitionConflictCondition is True while another field manager than the
	// controller also writes the workload's partition (for example a git
	// manifest that sets it). Its message names that manager. Fix: drop
	// partition from the manifest in git, or tell Argo CD to ignore it with
	// ignoreDifferences.
	PartitionConflictCondition = "PartitionConflict"
	// CanaryRollbackCondition is True while an aborted Rollout deletes
	// canary Pods so that a workload that does not move them back itself (a
	// StatefulSet, an OpenKruise CloneSet without CloneSetPartitionRollback)
	// recreates them on the stable revision; its message says which Pod it
	// waits for. False once every Pod is back; absent when nothing needed it.
	CanaryRollbackCondition = "CanaryRollback"
	// TrafficConflictCondition is True while another field manager than
	// the controller also writes what the Rollout sets in an HTTPRoute or
	// a Service selector (for example a git manifest that sets weights on
	// the backends Stepwise owns). Its message names that manager and the
	// object. Fix: drop those fields from git (docs/traffic.md).
	TrafficConflictCondition = "TrafficConflict"
)

// Reasons of a Rollout's conditions and of status.reason-like decisions. The
// Ready condition carries the reason of the last step decision.
const (
	// ReasonStable: no rollout in progress; the workload runs the stable
	// revision and the partition is armed at 100%.
	ReasonStable = "Stable"
	// ReasonWaitingForWorkload: the workload has not reported a revision yet.
	ReasonWaitingForWorkload = "WaitingForWorkload"
	// ReasonWaitingForPods: the step's partition is set and the workload gate
	// (observedGeneration current, enough updated Pods ready) has not passed.
	ReasonWaitingForPods = "WaitingForPods"
	// ReasonPartitionMismatch: the workload runs another partition than the
	// step's, so the gate cannot pass; see PartitionConflictCondition.
	ReasonPartitionMismatch = "PartitionMismatch"
	// ReasonStepPaused: the step's timed pause is running.
	ReasonStepPaused = "StepPaused"
	// ReasonAwaitingPromotion: the step's pause has no duration and waits for
	// a promote-at request.
	ReasonAwaitingPromotion = "AwaitingPromotion"
	// ReasonAnalysisRunning: the step's analysis is taking measurements.
	ReasonAnalysisRunning = "AnalysisRunning"
	// ReasonAnalysisInconclusive: the step's analysis had no usable data and
	// its inconclusive policy is Pause: promote, retry or abort.
	ReasonAnalysisInconclusive = "AnalysisInconclusive"
	// ReasonAnalysisFailed: the step's analysis failed and the rollout aborted.
	ReasonAnalysisFailed = "AnalysisFailed"
	// ReasonBackgroundAnalysisFailed: spec.analysis.background failed and
	// the rollout aborted.
	ReasonBackgroundAnalysisFailed = "BackgroundAnalysisFailed"
	// ReasonBackgroundAnalysisInconclusive: spec.analysis.background had
	// no usable data and the inconclusive policy is Pause: the rollout
	// holds for a retry or an abort request.
	ReasonBackgroundAnalysisInconclusive = "BackgroundAnalysisInconclusive"
	// ReasonPostPromotionAnalysis: every Pod runs the canary revision and
	// spec.analysis.postPromotion measures it for its window before it is
	// promoted to stable.
	ReasonPostPromotionAnalysis = "PostPromotionAnalysis"
	// ReasonPostPromotionAnalysisFailed: spec.analysis.postPromotion
	// failed; the rollout aborted and every Pod goes back to the stable
	// revision.
	ReasonPostPromotionAnalysisFailed = "PostPromotionAnalysisFailed"
	// ReasonPostPromotionAnalysisInconclusive: spec.analysis.postPromotion
	// had no usable data and the inconclusive policy is Pause: the rollout
	// holds, every Pod on the canary, for a promote, retry or abort request.
	ReasonPostPromotionAnalysisInconclusive = "PostPromotionAnalysisInconclusive"
	// ReasonAbortRequested: an abort-at request aborted the rollout.
	ReasonAbortRequested = "AbortRequested"
	// ReasonProgressDeadlineExceeded: the workload made no progress for
	// spec.progressDeadlineSeconds.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonVersionPolicyViolation: the update revision's image breaks
	// spec.versionPolicy, so no Pod is moved to it.
	ReasonVersionPolicyViolation = "VersionPolicyViolation"
	// ReasonRollingBack: the template went back to the stable revision during
	// a rollout; every Pod returns to it at once, without analysis.
	ReasonRollingBack = "RollingBack"
	// ReasonDowngrading: the update revision is a semver downgrade of the
	// stable one; every Pod moves to it at once, without analysis.
	ReasonDowngrading = "Downgrading"
	// ReasonPausedBySpec: spec.paused holds forward progress.
	ReasonPausedBySpec = "PausedBySpec"
	// ReasonPauseRequested: a pause-at request holds forward progress.
	ReasonPauseRequested = "PauseRequested"
)

// Reasons of the Ready, Reconciling and Stalled conditions when no step
// decision could be taken; status.reason keeps the last decision's.
const (
	// ReasonWorkloadNotFound: the workload named in spec.workloadRef does
	// not exist (yet); its creation triggers the next reconcile.
	ReasonWorkloadNotFound = "WorkloadNotFound"
	// ReasonWorkloadUnsupported: the workload cannot be driven (its CRD is
	// not installed, or a StatefulSet uses the OnDelete strategy).
	ReasonWorkloadUnsupported = "WorkloadUnsupported"
	// ReasonInvalidSpec: the spec cannot be applied to the workload.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonInvalidAnalysis: a metric's query template uses a construct
	// that is not allowed, or its PromQL does not parse and no initialDelay
	// says how long to wait; the message names the field.
	ReasonInvalidAnalysis = "InvalidAnalysis"
	// ReasonAnalysisTemplateMissing: an analysis template, or an argument
	// it needs (or the Secret or field an argument is read from), is
	// missing; the message names it. The analysis never passes on it.
	ReasonAnalysisTemplateMissing = "AnalysisTemplateMissing"
	// ReasonReconcileFailed: a request to the API server failed; the
	// reconcile is retried with backoff.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonFieldManagerConflict is the reason of PartitionConflictCondition.
	ReasonFieldManagerConflict = "FieldManagerConflict"
	// ReasonWaitingForTraffic: the step's Pods are ready but the routes do
	// not carry its weight and matches yet (or a Gateway has not accepted them).
	ReasonWaitingForTraffic = "WaitingForTraffic"
	// ReasonRollingBackCanaryPods is the reason of CanaryRollbackCondition
	// while canary Pods are deleted and recreated.
	ReasonRollingBackCanaryPods = "RollingBackCanaryPods"
	// ReasonCanaryPodsRolledBack is the reason of CanaryRollbackCondition
	// once every Pod is back on the stable revision.
	ReasonCanaryPodsRolledBack = "CanaryPodsRolledBack"
	// ReasonDuplicateRollout: an older Rollout drives the same workload;
	// this one leaves it alone until that one is deleted.
	ReasonDuplicateRollout = "DuplicateRollout"
	// ReasonReferenceGrantMissing: an HTTPRoute of spec.trafficRouting is
	// in another namespace than the Rollout, and a ReferenceGrant is
	// missing: in the route's namespace, its owner's consent that Rollouts
	// of this namespace write the route; or in the Rollout's namespace, the
	// grant that lets the route send to the Services. The message says
	// which. No Pod moves until both exist.
	ReasonReferenceGrantMissing = "ReferenceGrantMissing"
	// ReasonObjectNotOwned: spec.trafficRouting asks Stepwise to create a
	// Service or a route whose name someone else already uses; Stepwise
	// leaves it alone and moves no Pod until the name is free or the spec
	// names another.
	ReasonObjectNotOwned = "ObjectNotOwned"
	// ReasonTrafficNotPermitted: an HTTPRoute of spec.trafficRouting is in
	// a namespace the manager does not watch, or the API server refuses the
	// manager access to it.
	ReasonTrafficNotPermitted = "TrafficNotPermitted"
)

// Event reasons on a Rollout.
const (
	EventRolloutStarted           = "RolloutStarted"
	EventRolloutRestarted         = "RolloutRestarted"
	EventStepReady                = "StepReady"
	EventStepAdvanced             = "StepAdvanced"
	EventAnalysisStarted          = "AnalysisStarted"
	EventAnalysisInconclusive     = "AnalysisInconclusive"
	EventRolloutCompleted         = "RolloutCompleted"
	EventRolloutAborted           = "RolloutAborted"
	EventRollingBack              = "RollingBack"
	EventDowngrading              = "Downgrading"
	EventProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	EventVersionPolicyViolation   = "VersionPolicyViolation"
	EventPromoted                 = "Promoted"
	EventRetried                  = "Retried"
	EventPaused                   = "Paused"
	EventResumed                  = "Resumed"
	EventRequestIgnored           = "RequestIgnored"
	EventPartitionConflict        = "PartitionConflict"
	// EventTrafficShifted: the routes were set to a step's weight and matches.
	EventTrafficShifted = "TrafficShifted"
	// EventTrafficConflict: a Warning that another field manager writes
	// what the Rollout sets in a route or Service, naming it.
	EventTrafficConflict = "TrafficConflict"
	// EventTrafficRestored: the routes send everything to the stable
	// Service again (after a promotion, an abort, or the Rollout's deletion).
	EventTrafficRestored = "TrafficRestored"
	// EventTrafficReleased: the Rollout was deleted while it routed
	// traffic; its routes and the stable Service are back to git's form.
	// A reason of its own: the recorder folds a second Event of one reason
	// on one object into a series that it writes only later.
	EventTrafficReleased = "TrafficReleased"
	// EventCanaryPodDeleted: canary Pods were deleted after an abort so that
	// their workload recreates them on the stable revision; one Event per
	// round, naming its Pods.
	EventCanaryPodDeleted = "CanaryPodDeleted"
	// EventCanaryRollbackCompleted: every Pod is back on the stable revision.
	EventCanaryRollbackCompleted = "CanaryRollbackCompleted"
	// EventDuplicateRollout: a Warning that an older Rollout drives the
	// same workload, naming it.
	EventDuplicateRollout = "DuplicateRollout"
	// EventReferenceGrantMissing: a Warning naming the route, the Services
	// and the namespace of the ReferenceGrant that is missing.
	EventReferenceGrantMissing = ReasonReferenceGrantMissing
	// EventObjectNotOwned: a Warning naming the Service or route that
	// Stepwise would have created and that someone else made.
	EventObjectNotOwned = ReasonObjectNotOwned
	// EventTrafficNotPermitted: a Warning naming the route the manager may
	// not reach.
	EventTrafficNotPermitted = ReasonTrafficNotPermitted
	// EventAnalysisPassed: every metric of a step's analysis passed.
	EventAnalysisPassed = "AnalysisPassed"
	// EventAnalysisFailed: a metric failed; the rollout aborts.
	EventAnalysisFailed = "AnalysisFailed"
	// EventMeasurementDeferred: a round's due measurements were deferred
	// because the Rollout's namespace already measures with its share of
	// the manager's workers. Its own reason, so that the events API folds
	// the deferrals into one series without hiding a MeasurementScheduled
	// note.
	EventMeasurementDeferred = "MeasurementDeferred"
	// EventAnalysisJob: a job metric's Job was created for a measurement,
	// or waits for room in the namespace (MaxAnalysisJobs).
	EventAnalysisJob = "AnalysisJob"
	// EventMeasurementError: a query could not be run (network, auth,
	// template, Secret, a window reaching before the canary); errors count
	// towards consecutiveErrorLimit.
	EventMeasurementError = "MeasurementError"
	// EventMeasurementScheduled: a metric's first measurement of a step is
	// set, after the canary's readiness plus the query's lookback and the
	// scrape margin (or initialDelay), and says why then.
	EventMeasurementScheduled = "MeasurementScheduled"
	// EventMetricCompared: the judge compared a compare metric's canary
	// Pods with its stable Pods (medians, effect, p-value, verdict); a
	// Warning when the canary is worse.
	EventMetricCompared = "MetricCompared"
	// EventAnalysisScored: the judge scored a step's compare metrics
	// (0-100) against judge.pass and judge.marginal, or a critical one
	// failed; a Warning unless the score promotes.
	EventAnalysisScored = "AnalysisScored"
	// EventComparisonImpossible: a Warning that a step's partition leaves
	// no stable Pod (partition 0) or no canary Pod, so its compare metrics
	// will be Inconclusive.
	EventComparisonImpossible = "ComparisonImpossible"
	// EventNotificationSent: a webhook of spec.notifications accepted a
	// phase transition.
	EventNotificationSent = "NotificationSent"
	// EventNotificationFailed: a Warning that a webhook was not posted to,
	// or refused, after its retries; the transition is not posted again.
	EventNotificationFailed = "NotificationFailed"
)

// Defaults applied in code, not by the CRD schema: a step's analysis
// override inherits every field it leaves unset from spec.analysis, which a
// schema default would hide (see RolloutSpec.AnalysisForStep).
const (
	DefaultAnalysisInterval      = 30 * time.Second
	DefaultAnalysisCount         = int32(5)
	DefaultFailureLimit          = int32(0)
	DefaultConsecutiveErrorLimit = int32(4)
	DefaultInconclusiveLimit     = int32(2)
	DefaultScrapeMargin          = 30 * time.Second
	DefaultInconclusivePolicy    = InconclusivePause
	DefaultPrometheusTimeout     = 10 * time.Second
	DefaultWebTimeout            = 10 * time.Second
	DefaultJobActiveDeadline     = 10 * time.Minute
	DefaultMeasurementRetention  = 10
	DefaultJudgePass             = int32(90)
	DefaultJudgeMarginal         = int32(75)
)

// MaxMeasurements bounds status.measurements; the writer drops the oldest.
const MaxMeasurements = 20

// MaxPreviousStableRevisions bounds status.previousStableRevisions; the
// writer drops the oldest.
const MaxPreviousStableRevisions = 10

// Labels of the Jobs a job metric creates. The manager caches only Jobs
// that carry AnalysisRolloutLabel.
const (
	// AnalysisRolloutLabel names the Rollout whose analysis created the Job.
	AnalysisRolloutLabel = "stepwise.dev/analysis-rollout"
	// AnalysisMetricLabel names the metric the Job measures.
	AnalysisMetricLabel = "stepwise.dev/analysis-metric"
)

// Measurement.Analysis values: the analysis a measurement was taken for,
// when it is not a step's.
const (
	MeasurementOfBackground    = "background"
	MeasurementOfPostPromotion = "postPromotion"
)
