package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Rollout's analysis: what spec.analysis (and a step's) asks, the
// metrics and their providers, and the tally status keeps.

// AnalysisSpec is how a step is judged. Its defaults are applied in code
// (see the Default* constants), so that a step override can inherit from
// spec.analysis whatever it leaves unset.
// +kubebuilder:validation:XValidation:rule="!has(self.count) || !has(self.failureLimit) || self.failureLimit < self.count",message="analysis.failureLimit must be less than analysis.count, or the analysis could never fail"
// +kubebuilder:validation:XValidation:rule="!has(self.templates) || self.templates.all(t, self.templates.exists_one(u, u.name == t.name && (has(u.clusterScope) && u.clusterScope) == (has(t.clusterScope) && t.clusterScope)))",message="analysis.templates must not name the same template twice"
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

	// Background is measured from spec.analysis.background.startingStep
	// until promotion, across pauses, beside the steps' analysis: a
	// failure aborts at any point, an inconclusive verdict applies
	// spec.analysis.inconclusive (Pause holds the rollout for a retry or
	// an abort request). Only in spec.analysis, not in a step.
	// +optional
	Background *BackgroundAnalysis `json:"background,omitempty"`

	// PostPromotion keeps measuring for a window once every Pod runs the
	// canary revision, before the revision is promoted to stable: a
	// failure aborts and rolls every Pod back in place to the stable
	// revision (Stepwise's CloneSet; other workloads keep their Pods until
	// git reverts). Only in spec.analysis, not in a step.
	// +optional
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
	// Analysis names the analysis it was taken for when it is not a
	// step's: background (spec.analysis.background) or postPromotion.
	// +optional
	// +kubebuilder:validation:Enum=background;postPromotion
	Analysis string `json:"analysis,omitempty"`
	// Value as text ("0.004", "NaN"); empty when the query failed.
	// +optional
	Value string           `json:"value,omitempty"`
	Phase MeasurementPhase `json:"phase"`
	// +optional
	Message string      `json:"message,omitempty"`
	Time    metav1.Time `json:"time"`
}
