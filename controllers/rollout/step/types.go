package step

import (
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Verdict is the analysis verdict for the current step, as the caller
// assessed it from status.analysis.
type Verdict string

const (
	// VerdictNone: no analysis result for this step (not started, or reset).
	VerdictNone Verdict = ""
	// VerdictRunning: more measurements are needed.
	VerdictRunning Verdict = "Running"
	// VerdictPassed: every metric passed.
	VerdictPassed Verdict = "Passed"
	// VerdictFailed: a metric failed; the rollout aborts.
	VerdictFailed Verdict = "Failed"
	// VerdictInconclusive: the data could not decide; the step's
	// inconclusive policy applies.
	VerdictInconclusive Verdict = "Inconclusive"
)

// AnalysisAction tells the analysis runner what to do with status.analysis.
type AnalysisAction string

const (
	// AnalysisKeep: take no measurement and leave status.analysis as it is
	// (no analysis in this state, or it is held by a pause or an abort, which
	// keeps the failing tally on show).
	AnalysisKeep AnalysisAction = ""
	// AnalysisStart: reset status.analysis for (step, canary revision,
	// Decision.Status.AnalysisStartedAt) and take measurements when due. The
	// caller must reset before it assesses the next verdict, or an old
	// Inconclusive tally would be read again.
	AnalysisStart AnalysisAction = "Start"
	// AnalysisRun: go on taking measurements when due; the runner requeues
	// for the next one itself.
	AnalysisRun AnalysisAction = "Run"
	// AnalysisClear: drop status.analysis; the step it was for is over.
	AnalysisClear AnalysisAction = "Clear"
)

// Step is one spec.steps entry, resolved for the workload's current replicas.
type Step struct {
	// Partition is the step's partition as written in spec, applied as is so
	// that a percent keeps its meaning when the workload scales.
	Partition intstr.IntOrString
	// Pods is Partition resolved for the current replicas (percent rounded
	// up, clamped to [0, replicas]); see ResolvePartition.
	Pods int32
	// Pause is true when the step has a pause.
	Pause bool
	// PauseDuration is the pause's length; 0 with Pause waits for a promote request.
	PauseDuration time.Duration
	// Analysis is true when an analysis runs after this step
	// (RolloutSpec.AnalysisForStep).
	Analysis bool
	// Inconclusive is the step's effective inconclusive policy; empty means Pause.
	Inconclusive v1alpha1.InconclusivePolicy
}

// Requests holds the manual-request tokens: on the object, the annotation
// values; in Status.Handled, the last values handled.
type Requests struct {
	Promote     string
	PromoteFull string
	Abort       string
	Retry       string
	Pause       string
	Resume      string
}

// Status is the part of RolloutStatus the decision reads and writes. A zero
// time is an unset field.
type Status struct {
	// Phase is Healthy, Progressing, Paused or Aborted; empty on a new Rollout.
	Phase v1alpha1.RolloutPhase
	// Reason is the machine-readable cause of Phase (a v1alpha1.Reason*
	// constant), status.reason; the Ready condition's reason should repeat it.
	Reason string
	// Message says in words what the rollout waits for or why it stopped.
	Message string
	// CurrentStepIndex is the step in progress, nil when none is.
	CurrentStepIndex *int32
	// StableRevision is the revision last rolled out in full.
	StableRevision string
	// PreviousStableRevisions are the revisions that were stable before
	// StableRevision, newest first, at most
	// v1alpha1.MaxPreviousStableRevisions. Decide keeps it: whenever it
	// replaces StableRevision, the one replaced goes first.
	PreviousStableRevisions []string
	// CanaryRevision is the revision being rolled out, or the one aborted.
	CanaryRevision string
	// StepStartedAt is when the current step's partition was decided.
	StepStartedAt time.Time
	// StepReadyAt is when the current step passed the workload gate; the
	// pause counts from here.
	StepReadyAt time.Time
	// AnalysisStartedAt is when the current step's analysis started; set
	// also means the step's pause is over. The caller reads it from
	// status.analysis.startedAt when status.analysis is for the current step
	// and canary revision (zero otherwise), and writes it there on AnalysisStart.
	AnalysisStartedAt time.Time
	// PostPromotionStartedAt is when the post-promotion analysis started:
	// every Pod ran the canary revision, and it is promoted to stable at
	// the end of the window. The caller reads it from
	// status.postPromotionAnalysis.startedAt when that tally is for the
	// canary revision (zero otherwise), and writes it there on Start.
	PostPromotionStartedAt time.Time
	// LastProgressAt is when the workload last made progress; the progress
	// deadline counts from here.
	LastProgressAt time.Time
	// UpdatedReadyReplicas is the workload's count when last seen; a rise is progress.
	UpdatedReadyReplicas int32
	// PauseRequested is true from a pause request to a resume request.
	PauseRequested bool
	// PromotedFull is true from a promote-full request until the rollout
	// it promoted ends: each step then passes on its workload gate alone.
	PromotedFull bool
	// Handled holds the request tokens already handled (status.lastHandled*At).
	Handled Requests
}

// Workload is what the workload reports.
type Workload struct {
	// ObservedGenerationCurrent is status.observedGeneration == metadata.generation.
	ObservedGenerationCurrent bool
	// Replicas is the desired number of Pods (spec.replicas).
	Replicas int32
	// UpdatedReadyReplicas is the number of ready Pods on UpdateRevision.
	UpdatedReadyReplicas int32
	// UpdateRevision is the revision of the current template.
	UpdateRevision string
	// CurrentRevision is the revision every Pod was last on together; used
	// once, to adopt a stable revision for a new Rollout.
	CurrentRevision string
	// Partition is the partition the workload runs now, resolved to Pods.
	Partition int32
}

// Analysis is the caller's assessment of the current step's analysis. It
// must belong to the run started at Status.AnalysisStartedAt; it is ignored
// while no analysis was started.
type Analysis struct {
	Verdict Verdict
	// Message quotes the measurement behind a Failed or Inconclusive verdict.
	Message string
}

// Input is everything Decide reads.
type Input struct {
	// Now is the clock, injected.
	Now time.Time
	// Steps is spec.steps, resolved. Never empty (the CRD requires a step).
	Steps []Step
	// Paused is spec.paused.
	Paused bool
	// ProgressDeadline is spec.progressDeadlineSeconds; 0 disables it.
	ProgressDeadline time.Duration
	// Status is the Rollout's status.
	Status Status
	// Workload is what the workload reports.
	Workload Workload
	// Analysis is the current step's verdict.
	Analysis Analysis
	// Background is spec.analysis.background; nil when there is none.
	Background *Background
	// PostPromotion is spec.analysis.postPromotion; nil when there is none.
	PostPromotion *PostPromotion
	// Requests holds the request annotations now on the Rollout (empty when absent).
	Requests Requests
	// VersionViolation says why the update revision breaks
	// spec.versionPolicy; empty when it does not (or there is no policy).
	VersionViolation string
	// Governed is true when the workload takes its partition from the
	// Rollout's grant (Stepwise's CloneSet): a new revision then waits
	// unacknowledged rather than behind an armed partition.
	Governed bool
	// Downgrade is true when the update revision's version is lower than the
	// stable revision's (spec.versionPolicy's container) and the downgrade is
	// trusted: the revision was stable before (Status.PreviousStableRevisions)
	// or its version meets spec.versionPolicy.trustedDowngrades. It takes the
	// fast path.
	Downgrade bool
	// UntrustedDowngrade says why a lower version is not trusted and takes
	// the steps; empty otherwise. It is added to the RolloutStarted Event.
	UntrustedDowngrade string
	// TrafficRouted is true with spec.trafficRouting: a step is reached
	// only once its Pods are ready AND the routes carry its traffic.
	TrafficRouted bool
	// TrafficStep is the step whose weight and matches the routes carry,
	// accepted by their Gateways, for the canary revision
	// (status.traffic.step); nil when none.
	TrafficStep *int32
}

// Event is one Kubernetes Event to record on the Rollout.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Reason is a v1alpha1.Event* constant.
	Reason string
	// Message is for people.
	Message string
}

// Decision is everything Decide asks the caller to do.
type Decision struct {
	// Partition is the workload partition to apply, always set: the
	// controller owns the field (server-side apply), so it must send it on
	// every apply or lose it. "100%" when armed or aborted, the step's value
	// during a step, 0 on the fast path.
	Partition intstr.IntOrString
	// Status is the new status; the caller writes it back whole, including
	// Handled into status.lastHandled*At.
	Status Status
	// Stalled is true when the rollout cannot move on without a change in git
	// or a person: aborted, or the fast path past its progress deadline. The
	// caller sets Stalled=True (and Ready=False) from it.
	Stalled bool
	// Analysis tells the analysis runner what to do.
	Analysis AnalysisAction
	// Background tells the runner of spec.analysis.background what to do
	// with status.backgroundAnalysis.
	Background AnalysisAction
	// PostPromotion tells the runner of spec.analysis.postPromotion what
	// to do with status.postPromotionAnalysis.
	PostPromotion AnalysisAction
	// RequeueAfter is when to decide again without an outside event (a timed
	// pause ending, a progress deadline, or a transition that may be followed
	// by another at once); 0: wait for a watch event. Measurement times are
	// the analysis runner's to add.
	RequeueAfter time.Duration
	// Events to record, in order.
	Events []Event
}
