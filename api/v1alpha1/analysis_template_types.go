package v1alpha1

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnalysisArg is one argument of an analysis: a literal value, or a value
// read from a Secret key or from the Rollout's metadata.
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.valueFrom)",message="analysis.args[] must set exactly one of value or valueFrom"
type AnalysisArg struct {
	// Name is read as {{ .Args.name }} (or {{ index .Args "name" }}).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Value is the literal value.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value *string `json:"value,omitempty"`
	// ValueFrom reads the value at the start of each rollout.
	// +optional
	ValueFrom *ArgValueFrom `json:"valueFrom,omitempty"`
}

// ArgValueFrom names where an argument's value is read.
// +kubebuilder:validation:XValidation:rule="has(self.secretKeyRef) != has(self.fieldRef)",message="analysis.args[].valueFrom must set exactly one of secretKeyRef or fieldRef"
type ArgValueFrom struct {
	// SecretKeyRef is a key of a Secret in the Rollout's namespace.
	// +optional
	SecretKeyRef *SecretKeyReference `json:"secretKeyRef,omitempty"`
	// FieldRef is a field of the Rollout's metadata, such as
	// metadata.labels['app'] or metadata.name.
	// +optional
	FieldRef *corev1.ObjectFieldSelector `json:"fieldRef,omitempty"`
}

// AnalysisTemplateRef names an AnalysisTemplate in the Rollout's namespace,
// or a ClusterAnalysisTemplate when clusterScope is true.
type AnalysisTemplateRef struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// ClusterScope names a ClusterAnalysisTemplate.
	// +optional
	ClusterScope bool `json:"clusterScope,omitempty"`
}

// BackgroundAnalysis is measured from the step it starts at until
// promotion, across pauses, beside the steps' analysis: a failure aborts
// at any point. Its metrics come from templates, as Argo Rollouts'
// background analysis does; spec.analysis.args are theirs too.
type BackgroundAnalysis struct {
	// Templates are AnalysisTemplates (in the Rollout's namespace) or
	// ClusterAnalysisTemplates whose prometheus and web metrics are
	// measured every interval (spec.analysis.interval) until promotion;
	// spec.analysis.count does not end it. A job metric is refused.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	Templates []AnalysisTemplateRef `json:"templates"`
	// StartingStep is the index of the step whose canary Pods, once ready,
	// start the measuring (0, the first step, when unset).
	// +optional
	// +kubebuilder:validation:Minimum=0
	StartingStep *int32 `json:"startingStep,omitempty"`
}

// PostPromotionAnalysis is measured for a window once every Pod runs the
// canary revision, before it is promoted to stable: a failure rolls every
// Pod back in place to the stable revision. Its metrics come from
// templates, as the background analysis' do.
type PostPromotionAnalysis struct {
	// Window is how long measuring goes on after the last step's Pods are
	// ready; the revision is promoted to stable at its end.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="analysis.postPromotion.window must be a duration of at least 1s, such as 10m"
	Window metav1.Duration `json:"window"`
	// Templates are AnalysisTemplates (in the Rollout's namespace) or
	// ClusterAnalysisTemplates whose prometheus and web metrics are
	// measured every interval (spec.analysis.interval) during the window.
	// A job or compare metric is refused.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	Templates []AnalysisTemplateRef `json:"templates"`
}

// JudgeThresholds turn a score (0-100) into a verdict.
// +kubebuilder:validation:XValidation:rule="self.marginal <= self.pass",message="analysis.judge.marginal must not be greater than analysis.judge.pass"
type JudgeThresholds struct {
	// +kubebuilder:default=90
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Pass int32 `json:"pass"`
	// +kubebuilder:default=75
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Marginal int32 `json:"marginal"`
}

// CompareDirection is the bad direction of a compare metric.
// +kubebuilder:validation:Enum=increase;decrease;either
type CompareDirection string

const (
	CompareIncrease CompareDirection = "increase"
	CompareDecrease CompareDirection = "decrease"
	CompareEither   CompareDirection = "either"
)

// CompareSpec judges canary against stable: a Mann-Whitney U test at
// confidence, with the effect (Hodges-Lehmann shift relative to the stable
// median) compared with tolerance, in the bad direction only.
type CompareSpec struct {
	// Direction is the bad direction: increase, decrease or either.
	Direction CompareDirection `json:"direction"`
	// Tolerance is the relative shift allowed, a decimal such as "0.25".
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+([.][0-9]+)?$')",message="compare.tolerance must be a non-negative decimal such as \"0.25\""
	Tolerance string `json:"tolerance"`
	// Confidence of the test, a decimal in (0, 1) such as "0.98".
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^0[.][0-9]*[1-9][0-9]*$')",message="compare.confidence must be a decimal between 0 and 1 such as \"0.98\""
	Confidence string `json:"confidence"`
}

// WebMetric reads one number from an HTTP answer. It is hardened as the
// prometheus provider: no redirects, a capped body, the manager's address
// allow-list, a private CA by tls.caRef, credentials from Secrets.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.tls.caRef) || self.url.lowerAscii().startsWith('https://')",message="web.tls.caRef needs an https web.url"
// +kubebuilder:validation:XValidation:rule="!has(self.body) || self.method == 'POST'",message="web.body needs method POST"
type WebMetric struct {
	// URL is a Go template (it sees the query variables and .Args) of an
	// http or https URL.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.lowerAscii().startsWith('http://') || self.lowerAscii().startsWith('https://')",message="web.url must be an http or https URL"
	URL string `json:"url"`
	// Method is GET (default) or POST.
	// +optional
	// +kubebuilder:default=GET
	// +kubebuilder:validation:Enum=GET;POST
	Method string `json:"method,omitempty"`
	// Headers are added to every request, each a literal value or a Secret
	// key; the same names are refused as in prometheus.headers.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Headers []WebHeader `json:"headers,omitempty"`
	// Body is a Go template of the POST body, sent as application/json.
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Body string `json:"body,omitempty"`
	// JSONPath reads the value from the JSON answer, in kubectl's syntax,
	// such as {.data.errorRate}. It must give one number.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	JSONPath string `json:"jsonPath"`
	// Timeout of one request, at most 30s. Defaults to 10s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('30s')",message="web.timeout must be a positive duration of at most 30s, such as 10s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// TLS says how the server's certificate is verified.
	// +optional
	TLS *PrometheusTLS `json:"tls,omitempty"`
}

// WebHeader is one request header: a literal value or a Secret key.
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.secretKeyRef)",message="web.headers[] must set exactly one of value or secretKeyRef"
// +kubebuilder:validation:XValidation:rule="!(self.name.lowerAscii() in ['host', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'content-length', 'content-type'])",message="web.headers cannot set Host, Forwarded, X-Forwarded-*, X-Real-IP, hop-by-hop headers, Content-Length or Content-Type"
type WebHeader struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-!#$%&\\x27*+.^_`|~0-9A-Za-z]+$')",message="web.headers[].name must be an HTTP token"
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self.matches('[\\x00-\\x08\\x0a-\\x1f\\x7f]')",message="web.headers[].value must not hold control characters (CR, LF, NUL...)"
	Value *HeaderValue `json:"value,omitempty"`
	// SecretKeyRef is a key of a Secret in the Rollout's namespace.
	// +optional
	SecretKeyRef *SecretKeyReference `json:"secretKeyRef,omitempty"`
}

// JobMetric runs a Job from spec in the Rollout's namespace.
type JobMetric struct {
	// Spec is a batch/v1 JobSpec. It is typed in Go but kept schemaless in
	// the CRD: the full Pod template schema would multiply the Rollout
	// CRD's size and its CEL cost, and the API server validates the Job
	// itself when the provider creates it (a refusal is a measurement
	// error naming the API server's message). String fields may use
	// {{ .Args.name }} and the query variables.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Spec batchv1.JobSpec `json:"spec"`
	// ActiveDeadline is how long the Job may run before the measurement is
	// inconclusive and the Job is deleted. Defaults to 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="job.activeDeadline must be a duration from 1s to 24h, such as 10m"
	ActiveDeadline *metav1.Duration `json:"activeDeadline,omitempty"`
}

// TemplateArg is an argument a template declares, with an optional default.
type TemplateArg struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*$')",message="spec.args[].name must be letters, digits and '_', not starting with a digit"
	Name string `json:"name"`
	// Value is the default, used when the Rollout gives none.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value *string `json:"value,omitempty"`
}

// AnalysisTemplateSpec is a reusable set of metrics with arguments.
type AnalysisTemplateSpec struct {
	// Args the metrics use as {{ .Args.name }}; one without a default must
	// be given by each Rollout that uses the template.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Args []TemplateArg `json:"args,omitempty"`
	// Metrics have the shape of a Rollout's analysis.metrics.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	Metrics []Metric `json:"metrics"`
}

// AnalysisTemplate is a namespaced, reusable analysis.
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:metadata:annotations="kustomize.toolkit.fluxcd.io/prune=disabled"
// +kubebuilder:metadata:annotations="argocd.argoproj.io/sync-options=Prune=false"
type AnalysisTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AnalysisTemplateSpec `json:"spec"`
}

// AnalysisTemplateList is a list of AnalysisTemplates.
// +kubebuilder:object:root=true
type AnalysisTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnalysisTemplate `json:"items"`
}

// ClusterAnalysisTemplate is an AnalysisTemplate every namespace may use.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:metadata:annotations="kustomize.toolkit.fluxcd.io/prune=disabled"
// +kubebuilder:metadata:annotations="argocd.argoproj.io/sync-options=Prune=false"
type ClusterAnalysisTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AnalysisTemplateSpec `json:"spec"`
}

// ClusterAnalysisTemplateList is a list of ClusterAnalysisTemplates.
// +kubebuilder:object:root=true
type ClusterAnalysisTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterAnalysisTemplate `json:"items"`
}

// UsedAnalysisTemplate is a template as a rollout started with it.
type UsedAnalysisTemplate struct {
	Name string `json:"name"`
	// +optional
	ClusterScope bool `json:"clusterScope,omitempty"`
	// Revision is the canary revision it was resolved for.
	Revision string `json:"revision"`
	// ResourceVersion of the template read.
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Spec is the template's spec as read.
	Spec AnalysisTemplateSpec `json:"spec"`
}
