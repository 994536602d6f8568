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

// AnalysisSpec is how a step is judged. Its defaults are applied in code
// (see the Default* constants), so that a step override can inherit from
// spec.analysis whatever it leaves unset.
// +kubebuilder:validation:XValidation:rule="!has(self.count) || !has(self.failureLimit) || self.failureLimit < self.count",message="analysis.failureLimit must be less than analysis.count, or the analysis could never fail"
// +kubebuilder:validation:XValidation:rule="!has(self.templates) || self.templates.all(t, self.templates.exists_one(u, u.name == t.name && (has(u.clusterScope) && u.clusterScope) == (has(t.clusterScope) && t.clusterScope)))",message="analysis.templates must not name the same template twice"
// +kubebuilder:validation:XValidation:rule="!has(self.background)",message="analysis.background is not implemented yet: this Stepwise would never measure it; measure in each step's analysis (spec.analysis.metrics, or a step's own) instead"
// +kubebuilder:validation:XValidation:rule="!has(self.postPromotion)",message="analysis.postPromotion is not implemented yet: this Stepwise would never measure it or roll back after promotion; analyse the last step before 100% instead"
type AnalysisSpec struct {
	// Interval between measurements. Defaults to 30s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="analysis.interval must be a duration of at least 1s, such as 30s or 1m"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Count is the number of measurements per metric and step. Defaults to 5.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Count *int32 `json:"count,omitempty"`

	// FailureLimit is how many failed measurements a metric tolerates: one
	// more fails the step. Defaults to 0, so any failed measurement fails it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailureLimit *int32 `json:"failureLimit,omitempty"`

	// Inconclusive says what happens when a metric gives no usable value
	// (empty result, NaN, ±Inf, several series, or consecutiveErrorLimit query
	// errors in a row): Pause (default), Abort or Promote. Never a pass by itself.
	// +optional
	Inconclusive InconclusivePolicy `json:"inconclusive,omitempty"`

	// InconclusiveLimit is how many inconclusive measurements in a row (no
	// data, NaN, ±Inf, several series) a metric tolerates: one more makes it
	// Inconclusive. A measurement with a value resets the streak. Inconclusive
	// measurements never count towards count, so a canary that keeps
	// answering nothing never passes. Defaults to 2; a metric may set its own.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	InconclusiveLimit *int32 `json:"inconclusiveLimit,omitempty"`

	// ConsecutiveErrorLimit is how many query errors in a row a metric
	// tolerates before it is inconclusive. Defaults to 4.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	ConsecutiveErrorLimit *int32 `json:"consecutiveErrorLimit,omitempty"`

	// InitialDelay is the least time between the step's canary Pods all
	// being ready on the canary revision and a metric's first measurement.
	// The first measurement waits for the longer of this and the query's
	// lookback (its longest range plus offset, read from the PromQL) plus
	// scrapeMargin, so that no measurement reads the data the same Pods
	// produced on the previous revision. Unset: the lookback rule alone.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="analysis.initialDelay must be a duration such as 30s or 2m"
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`

	// ScrapeMargin is added to a query's lookback before its first
	// measurement: time for Prometheus to scrape the canary on its new
	// revision (at least three scrape intervals, so that rate() over a
	// window as young as the canary still finds two samples when one
	// scrape is late) and for clocks to disagree a little. Defaults to 30s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="analysis.scrapeMargin must be a duration such as 30s or 1m"
	ScrapeMargin *metav1.Duration `json:"scrapeMargin,omitempty"`

	// Args are available to queries, URLs, bodies and Job templates as
	// {{ .Args.name }}: at most 32, each name of 1 to 63 characters, each
	// either a literal value (at most 1024 characters) or valueFrom a
	// Secret key or a field of the Rollout's metadata. They also fill the
	// args of spec.analysis.templates. A step's args merge by name over
	// spec.analysis.args.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Args []AnalysisArg `json:"args,omitempty"`

	// Templates are AnalysisTemplates (in the Rollout's namespace) or
	// ClusterAnalysisTemplates whose metrics are measured beside
	// metrics. A missing template or argument stalls the Rollout with a
	// message naming it; it never passes.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Templates []AnalysisTemplateRef `json:"templates,omitempty"`

	// Metrics are all measured; the step passes when every metric passes.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.exists_one(n, n.name == m.name))",message="analysis.metrics[].name must be unique"
	Metrics []Metric `json:"metrics,omitempty"`

	// Background is measured from the first step until promotion, across
	// pauses, beside the steps' analysis: a failure aborts at any point.
	// Only in spec.analysis, not in a step. Refused by the API server until
	// the controller measures it; its schema is left out of the CRD until
	// then, where each of its metrics would repeat the whole Metric schema.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Background *BackgroundAnalysis `json:"background,omitempty"`

	// PostPromotion keeps measuring for a window after the rollout reached
	// 100%: a failure rolls every Pod back in place to the previous stable
	// revision. Only in spec.analysis, not in a step. Refused, and left out
	// of the CRD's schema, as Background is.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	PostPromotion *PostPromotionAnalysis `json:"postPromotion,omitempty"`

	// Judge turns the weighted share of passing compare metrics (0-100)
	// into a verdict: at or above pass promotes, from marginal to below
	// pass is inconclusive, below marginal aborts. Defaults to 90 and 75.
	// +optional
	Judge *JudgeThresholds `json:"judge,omitempty"`

	// MeasurementRetention is how many measurements per metric stay in
	// status.analysis.metrics[].measurements. Defaults to 10, at most 200.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=200
	MeasurementRetention *int32 `json:"measurementRetention,omitempty"`
}

// Metric is one measurement source (exactly one provider) and how its
// value is judged: a fixed thresholdRange, a compare of canary against
// stable (prometheus only), or neither for a job, whose success is the
// verdict.
// +kubebuilder:validation:XValidation:rule="(has(self.prometheus) ? 1 : 0) + (has(self.web) ? 1 : 0) + (has(self.job) ? 1 : 0) == 1",message="metrics[] must set exactly one provider: prometheus, web or job"
// +kubebuilder:validation:XValidation:rule="has(self.job) ? !has(self.thresholdRange) && !has(self.compare) : has(self.thresholdRange) != has(self.compare)",message="metrics[] must set exactly one of thresholdRange or compare with prometheus or web, and neither with job (its success is the verdict)"
// +kubebuilder:validation:XValidation:rule="!has(self.compare) || has(self.prometheus)",message="metrics[].compare needs the prometheus provider"
type Metric struct {
	// Name identifies the metric in status and Events.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="analysis.metrics[].name must be lower-case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`

	// Prometheus runs a PromQL instant query.
	// +optional
	Prometheus *PrometheusMetric `json:"prometheus,omitempty"`

	// Web reads one value by JSONPath from an HTTP GET or POST answer.
	// +optional
	Web *WebMetric `json:"web,omitempty"`

	// Job runs a Kubernetes Job in the Rollout's namespace: success
	// passes, failure fails, the deadline makes it inconclusive.
	// +optional
	Job *JobMetric `json:"job,omitempty"`

	// ThresholdRange is where a value must be to count as successful.
	// +optional
	ThresholdRange *ThresholdRange `json:"thresholdRange,omitempty"`

	// Compare judges the canary Pods against the stable Pods of the same
	// workload over the same window, instead of a fixed threshold.
	// +optional
	Compare *CompareSpec `json:"compare,omitempty"`

	// Critical: a failure of this metric aborts at once, whatever the score.
	// +optional
	Critical bool `json:"critical,omitempty"`

	// Weight of the metric in the judge's score. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight *int32 `json:"weight,omitempty"`

	// DryRun: the metric is measured, recorded and shown, and never decides.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// InconclusiveLimit overrides the analysis' inconclusiveLimit for this metric.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	InconclusiveLimit *int32 `json:"inconclusiveLimit,omitempty"`
}

// PrometheusMetric is an instant query against a Prometheus-compatible API.
// +kubebuilder:validation:XValidation:rule="!has(self.bearerTokenSecretRef) || !has(self.headers) || !self.headers.exists(k, k.lowerAscii() == 'authorization')",message="prometheus.headers cannot set Authorization when prometheus.bearerTokenSecretRef is set"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.caRef) || !has(self.insecureSkipVerify) || !self.insecureSkipVerify",message="prometheus.tls.caRef and prometheus.insecureSkipVerify are mutually exclusive: the CA verifies the server, insecureSkipVerify does not"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.caRef) || self.address.lowerAscii().startsWith('https://')",message="prometheus.tls.caRef needs an https prometheus.address"
type PrometheusMetric struct {
	// Address is the base URL, for example http://prometheus.monitoring:9090.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="prometheus.address must be an http or https URL"
	Address string `json:"address"`

	// Query is a Go template of a PromQL expression. It sees .Namespace,
	// .Workload, .StableRevision, .CanaryRevision, .CanaryPods and .StablePods
	// (regexes of Pod names), .CanaryAge (the time since the step's canary
	// Pods were all ready on the canary revision, as a PromQL duration, for
	// windows such as [{{ .CanaryAge }}]) and .Args. Its result must be a
	// scalar or a one-element vector.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Query string `json:"query"`

	// Timeout of one query, at most 30s. Defaults to 10s. A round of
	// measurements is also cut at the analysis interval, so that a
	// Prometheus that never answers holds a worker no longer than that.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('30s')",message="prometheus.timeout must be a positive duration of at most 30s, such as 10s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// InsecureSkipVerify accepts any TLS certificate. For tests only: to
	// trust a private CA, set tls.caRef.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`

	// TLS says how the server's certificate is verified.
	// +optional
	TLS *PrometheusTLS `json:"tls,omitempty"`

	// Headers are added to every request. They are stored in plain text:
	// put credentials in bearerTokenSecretRef instead. Names are HTTP
	// tokens; values hold no control character but tab. Host, the
	// forwarding headers (Forwarded, X-Forwarded-For, X-Forwarded-Host,
	// X-Forwarded-Proto, X-Real-IP), hop-by-hop headers (Connection,
	// Keep-Alive, Proxy-Connection, Proxy-Authenticate, Proxy-Authorization,
	// TE, Trailer, Transfer-Encoding, Upgrade), Content-Length and
	// Content-Type are refused: they would steer the request to another
	// target or origin than the address, or the connection rather than the
	// query.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 128 && k.matches('^[-!#$%&\\x27*+.^_`|~0-9A-Za-z]+$'))",message="prometheus.headers names must be HTTP tokens (letters, digits and !#$%&'*+-.^_`|~) of at most 128 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !self[k].matches('[\\x00-\\x08\\x0a-\\x1f\\x7f]'))",message="prometheus.headers values must not hold control characters (CR, LF, NUL...)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.lowerAscii() in ['host', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'content-length', 'content-type']))",message="prometheus.headers cannot set Host, Forwarded, X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto, X-Real-IP, hop-by-hop headers (Connection, Keep-Alive, Proxy-Connection, Proxy-Authenticate, Proxy-Authorization, TE, Trailer, Transfer-Encoding, Upgrade), Content-Length or Content-Type"
	Headers map[string]HeaderValue `json:"headers,omitempty"`

	// BearerTokenSecretRef names a key of a Secret in the Rollout's namespace
	// whose value is sent as "Authorization: Bearer <value>".
	// +optional
	BearerTokenSecretRef *SecretKeyReference `json:"bearerTokenSecretRef,omitempty"`
}

// PrometheusTLS says how a Prometheus server's certificate is verified.
type PrometheusTLS struct {
	// CARef names the PEM certificates of the authorities that may sign the
	// server's certificate, in place of the system's: a key of a ConfigMap
	// or Secret in the Rollout's namespace, read at each measurement.
	// +optional
	CARef *CAReference `json:"caRef,omitempty"`
}

// CAReferenceKind is the kind of object a CAReference names.
// +kubebuilder:validation:Enum=ConfigMap;Secret
type CAReferenceKind string

const (
	CAReferenceConfigMap CAReferenceKind = "ConfigMap"
	CAReferenceSecret    CAReferenceKind = "Secret"
)

// CAReference names one key of a ConfigMap or Secret in the Rollout's
// namespace.
type CAReference struct {
	// Kind is ConfigMap or Secret.
	Kind CAReferenceKind `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="prometheus.tls.caRef.key must be a valid ConfigMap or Secret key"
	Key string `json:"key"`
}

// HeaderValue is the value of one of prometheus.headers. Its length is
// bounded so that the API server can afford to check every character.
// +kubebuilder:validation:MaxLength=1024
type HeaderValue string

// SecretKeyReference names one key of a Secret in the Rollout's namespace.
type SecretKeyReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="bearerTokenSecretRef.key must be a valid Secret key"
	Key string `json:"key"`
}

// ThresholdRange bounds a value, both ends included.
// +kubebuilder:validation:XValidation:rule="has(self.min) || has(self.max)",message="thresholdRange must set min, max or both"
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || self.min <= self.max",message="thresholdRange.min must not be greater than thresholdRange.max"
type ThresholdRange struct {
	// Min is the lowest successful value.
	// +optional
	Min Decimal `json:"min,omitempty"`
	// Max is the highest successful value.
	// +optional
	Max Decimal `json:"max,omitempty"`
}

// Decimal is a JSON number (max: 0.01) kept in Go as its literal text.
// A float64 field would need controller-gen's allowDangerousTypes, and a
// Quantity would need quotes in YAML and print 0.01 as "10m". The empty
// Decimal is unset. Read it with Float64.
// +kubebuilder:validation:Type=number
type Decimal string

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

// AnalysisStatus is the running tally of one step's analysis. Counters, not
// the measurements themselves, so that the verdict can be recomputed after a
// restart even when more were taken than status.measurements keeps.
type AnalysisStatus struct {
	// StepIndex is the step analysed.
	StepIndex int32 `json:"stepIndex"`
	// Revision is the canary revision analysed.
	Revision string `json:"revision"`
	// StartedAt is when the analysis started (the pause ended).
	StartedAt metav1.Time `json:"startedAt"`
	// CanaryReadyAt is when the step's canary Pods were all ready on the
	// canary revision, as the workload gate saw it. No measurement reads
	// data from before it: .CanaryAge counts from here, and a metric's
	// first measurement waits for its query's lookback after it.
	// +optional
	CanaryReadyAt *metav1.Time `json:"canaryReadyAt,omitempty"`
	// Phase is the verdict so far.
	// +optional
	Phase AnalysisPhase `json:"phase,omitempty"`
	// Message explains a Failed or Inconclusive verdict with the measurement behind it.
	// +optional
	Message string `json:"message,omitempty"`
	// Metrics holds one tally per metric: the inline metrics and those of
	// the templates used.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=110
	Metrics []MetricStatus `json:"metrics,omitempty"`
	// Score is the judge's weighted share of passing compare metrics,
	// 0-100, as text; empty without compare metrics.
	// +optional
	Score string `json:"score,omitempty"`
}

// MetricStatus is the tally of one metric in one step's analysis.
type MetricStatus struct {
	Name string `json:"name"`
	// +optional
	Phase AnalysisPhase `json:"phase,omitempty"`
	// Count is the number of measurements taken.
	// +optional
	Count int32 `json:"count,omitempty"`
	// +optional
	Successful int32 `json:"successful,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	Inconclusive int32 `json:"inconclusive,omitempty"`
	// +optional
	Errors int32 `json:"errors,omitempty"`
	// ConsecutiveErrors resets on any measurement that is not an error.
	// +optional
	ConsecutiveErrors int32 `json:"consecutiveErrors,omitempty"`
	// ConsecutiveInconclusive resets on any measurement with a value.
	// +optional
	ConsecutiveInconclusive int32 `json:"consecutiveInconclusive,omitempty"`
	// Lookback is how far back the query reads at the canary's readiness
	// (its longest range plus offset, ranges bound by .CanaryAge counting
	// for nothing), as a PromQL duration such as 1m.
	// +optional
	Lookback string `json:"lookback,omitempty"`
	// FirstMeasurementAt is when the first measurement is due: canaryReadyAt
	// plus the longer of lookback + scrapeMargin and initialDelay.
	// +optional
	FirstMeasurementAt *metav1.Time `json:"firstMeasurementAt,omitempty"`
	// LastValue is the last value read, as text.
	// +optional
	LastValue string `json:"lastValue,omitempty"`
	// LastMeasuredAt: the next measurement is due one interval later.
	// +optional
	LastMeasuredAt *metav1.Time `json:"lastMeasuredAt,omitempty"`

	// DryRun: the metric is recorded and shown and never decides.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Measurements are this metric's latest measurements, oldest first, at
	// most spec.analysis.measurementRetention.
	// +optional
	// +kubebuilder:validation:MaxItems=200
	Measurements []Measurement `json:"measurements,omitempty"`

	// CanaryMedian, StableMedian, Effect (the Hodges-Lehmann shift relative
	// to the stable median), PValue and Verdict are the judge's last
	// comparison of a compare metric, as text.
	// +optional
	CanaryMedian string `json:"canaryMedian,omitempty"`
	// +optional
	StableMedian string `json:"stableMedian,omitempty"`
	// +optional
	Effect string `json:"effect,omitempty"`
	// +optional
	PValue string `json:"pValue,omitempty"`
	// +optional
	Verdict string `json:"verdict,omitempty"`
}

// Measurement is one query result.
type Measurement struct {
	Metric string `json:"metric"`
	// Step is the index of the step it was taken in.
	Step int32 `json:"step"`
	// Value as text ("0.004", "NaN"); empty when the query failed.
	// +optional
	Value string           `json:"value,omitempty"`
	Phase MeasurementPhase `json:"phase"`
	// +optional
	Message string      `json:"message,omitempty"`
	Time    metav1.Time `json:"time"`
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
