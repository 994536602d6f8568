package v1alpha1

import "strings"

// Traffic routing through Gateway API HTTPRoutes (docs/traffic.md). The
// types below name Services and HTTPRoutes by name only: this module does
// not import sigs.k8s.io/gateway-api, so that importers of the API do not
// pull it (module_test.go).

// TrafficRouting shifts requests between the stable and the canary revision
// with Gateway API HTTPRoutes, in weights and header or query matches per
// step, in place of the share of Pods alone.
// +kubebuilder:validation:XValidation:rule="self.stableService != self.canaryService.name",message="spec.trafficRouting.canaryService.name must differ from spec.trafficRouting.stableService"
type TrafficRouting struct {
	// StableService is the Service that selects the workload's Pods and that
	// the routes send traffic to. During a release Stepwise adds the
	// revision label (RevisionHashLabel on a stepwise.dev CloneSet) at the
	// stable revision to its selector, before any Pod moves, so that it
	// selects the stable Pods only; once the release is promoted or rolled
	// back it takes the key out again: at rest the Service is as git wrote
	// it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="spec.trafficRouting.stableService must be a Service name (DNS-1035 label)"
	StableService string `json:"stableService"`

	// CanaryService selects the canary Pods during a release: a selector
	// plus the revision label at the canary revision, kept by Stepwise (at
	// rest without the revision label).
	CanaryService CanaryService `json:"canaryService"`

	// HTTPRoutes carry the weights and matches. Each must send its traffic
	// to the stable Service. A route named twice is set once. See
	// docs/traffic.md for what Stepwise writes into them and what stays yours.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	HTTPRoutes []HTTPRouteReference `json:"httpRoutes"`
}

// CanaryService names the canary Service.
type CanaryService struct {
	// Name of the canary Service, in the Rollout's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="spec.trafficRouting.canaryService.name must be a Service name (DNS-1035 label)"
	Name string `json:"name"`

	// Create: Stepwise creates the Service from the stable one (ports,
	// selector, and labels but those by which GitOps tools and Helm track
	// their objects) and owns it (it goes with the Rollout). Unset: the
	// Service exists, and Stepwise manages only its selector, as for the
	// stable Service.
	// +optional
	Create bool `json:"create,omitempty"`
}

// HTTPRouteReference names one HTTPRoute (gateway.networking.k8s.io/v1) and,
// when it has several rules, the one whose traffic the Rollout shifts.
// +kubebuilder:validation:XValidation:rule="!(has(self.ruleIndex) && has(self.ruleName))",message="spec.trafficRouting.httpRoutes[]: set ruleIndex or ruleName, not both"
type HTTPRouteReference struct {
	// Name of the HTTPRoute.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.trafficRouting.httpRoutes[].name must be an object name (DNS-1123 subdomain)"
	Name string `json:"name"`

	// Namespace of the HTTPRoute; the Rollout's when unset. A route in
	// another namespace needs a ReferenceGrant there for the Services.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.trafficRouting.httpRoutes[].namespace must be a namespace name (DNS-1123 label)"
	Namespace string `json:"namespace,omitempty"`

	// RuleIndex is the index in spec.rules of the rule whose traffic is
	// shifted, when the route has several.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	RuleIndex *int32 `json:"ruleIndex,omitempty"`

	// RuleName is the name (spec.rules[].name) of the rule whose traffic is
	// shifted, when the route has several.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	RuleName string `json:"ruleName,omitempty"`
}

// TrafficMatch sends the requests that match to the canary, whatever the
// weight. It matches one header or one query parameter; a cookie is matched
// through the Cookie header with a regular expression.
// +kubebuilder:validation:XValidation:rule="has(self.header) != has(self.queryParam)",message="spec.steps[].matches[] must set exactly one of header and queryParam"
type TrafficMatch struct {
	// Header matches one request header.
	// +optional
	Header *StringMatch `json:"header,omitempty"`
	// QueryParam matches one query parameter.
	// +optional
	QueryParam *StringMatch `json:"queryParam,omitempty"`
}

// StringMatchType is how a StringMatch compares values.
// +kubebuilder:validation:Enum=Exact;RegularExpression
type StringMatchType string

const (
	StringMatchExact             StringMatchType = "Exact"
	StringMatchRegularExpression StringMatchType = "RegularExpression"
)

// StringMatch is a name and the value it must have.
type StringMatch struct {
	// Name of the header or query parameter.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-!#$%&\\x27*+.^_`|~0-9A-Za-z]+$')",message="spec.steps[].matches[].header.name and queryParam.name must be HTTP tokens (letters, digits and !#$%&'*+-.^_`|~)"
	Name string `json:"name"`
	// Value to match.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
	// Type: Exact (default) or RegularExpression.
	// +optional
	Type StringMatchType `json:"type,omitempty"`
}

// TrafficStatus is what the routes were last set to, as the Rollout wrote
// them.
type TrafficStatus struct {
	// CanaryWeight is the percent of requests sent to the canary Service.
	// +optional
	CanaryWeight int32 `json:"canaryWeight,omitempty"`
	// Matches is how many match rules send requests to the canary.
	// +optional
	Matches int32 `json:"matches,omitempty"`
	// StableRevision is the revision the stable Service selects during a
	// release; unset at rest, when the Service has its own selector (git's,
	// without the revision key).
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`
	// CanaryRevision is the revision the canary Service selects during a
	// release; unset at rest.
	// +optional
	CanaryRevision string `json:"canaryRevision,omitempty"`
	// Step is the step whose weight and matches the routes carry for
	// canaryRevision, accepted by their Gateways: the step's gate waits for
	// it. Unset otherwise.
	// +optional
	Step *int32 `json:"step,omitempty"`
	// Accepted is true when every route that has a parent Gateway reports
	// the Rollout's rules accepted for each parent (or has no parent that
	// reports at all).
	// +optional
	Accepted bool `json:"accepted,omitempty"`
	// Written is what this Rollout may have written into objects it does
	// not own. It is recorded before each write, and an entry stays until
	// the object carries nothing of it, so that what Stepwise takes out (at
	// rest, on an abort, when a route's owner withdraws consent, when the
	// Rollout is deleted) is exactly what it wrote, whatever the spec says
	// by then.
	// +optional
	Written *TrafficWritten `json:"written,omitempty"`
}

// TrafficWritten records the Services whose selector a Rollout set and the
// HTTPRoutes whose rules it weighted.
type TrafficWritten struct {
	// SelectorKey is the Pod label added to the Services' selectors.
	// +kubebuilder:validation:MaxLength=317
	SelectorKey string `json:"selectorKey"`
	// Services are Services of the Rollout's namespace whose selector may
	// carry SelectorKey.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	Services []string `json:"services,omitempty"`
	// Routes are the HTTPRoutes whose rules may send to a canary Service
	// of the Rollout.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Routes []WrittenRoute `json:"routes,omitempty"`
}

// WrittenRoute is one HTTPRoute and the backends the Rollout wrote into it:
// the weight of StableService and a backendRef to CanaryService, both
// Services of the Rollout's namespace; and, beside it, the route named
// after it with the suffix -stepwise-canary that carries a step's matches,
// when Stepwise created it (it is marked with CreatedByAnnotation).
type WrittenRoute struct {
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=63
	StableService string `json:"stableService"`
	// +kubebuilder:validation:MaxLength=63
	CanaryService string `json:"canaryService"`
}

// CreatedByAnnotation marks an object Stepwise created for a Rollout (a
// canary Service, a route carrying a step's matches) with that Rollout's
// "namespace/name". Stepwise changes or deletes only objects that carry it
// for the Rollout at hand (or, in the Rollout's namespace, its controller
// owner reference): an object of the same name that someone else made is
// never taken over.
const CreatedByAnnotation = "stepwise.dev/created-by"

// RevisionHashLabel is the label every Pod of a stepwise.dev CloneSet
// carries with the short hash of its revision (RevisionHash), which a
// Service can select. During an in-place update it moves to the new
// revision in the same write that takes the Pod out of endpoints.
const RevisionHashLabel = "stepwise.dev/revision-hash"

// RevisionHash is the short hash of a revision name "<workload>-<hash>":
// the part after the last dash, short enough for a label value whatever the
// workload's name. A name without a dash is its own hash.
func RevisionHash(revision string) string {
	if i := strings.LastIndexByte(revision, '-'); i >= 0 {
		return revision[i+1:]
	}
	return revision
}

// TrafficFinalizer is on a Rollout with spec.trafficRouting while its
// routes may send traffic to the canary: deleting the Rollout first puts
// them back to the stable Service.
const TrafficFinalizer = "stepwise.dev/traffic"
