package cli

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// PlanTraffic is the traffic routing of a planned Rollout (docs/traffic.md).
type PlanTraffic struct {
	// StableService is the Service the routes send to; CanaryService the
	// one Stepwise points at the canary Pods, created from the stable one
	// when CreateCanary is set.
	StableService, CanaryService string
	CreateCanary                 bool
	// Routes are the HTTPRoutes that carry the weights.
	Routes []stepwisev1.HTTPRouteReference
	// Weights is, per step, the percent of requests to the canary; nil for
	// the canary's share of ready Pods at every step.
	Weights []int
	// Matches go on every step but the last, which sends every request to
	// the new revision anyway.
	Matches []stepwisev1.TrafficMatch
}

// TrafficPlan is what the routes carry at each step of a planned Rollout
// for a workload of Replicas Pods: Steps[i] for spec.steps[i].
type TrafficPlan struct {
	Replicas int32
	Steps    []StepTraffic
}

// StepTraffic is what the routes carry once a step is reached, as the
// controller decides it: plan prints it beside each step.
type StepTraffic struct {
	Weight  int32
	Matches []stepwisev1.TrafficMatch
	// Why is how the weight was chosen.
	Why string
}

// ParseWeights reads "5%,20%,100%": the percent of requests sent to the
// canary at each step, from 0% to 100%, one per step.
func ParseWeights(s string, steps int) ([]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) != steps {
		return nil, fmt.Errorf("%d weights for %d steps: give one per step", len(parts), steps)
	}
	out := make([]int, 0, len(parts))
	for _, raw := range parts {
		p := strings.TrimSpace(raw)
		n, ok := parsePercent(p)
		if !ok || n > 100 {
			return nil, fmt.Errorf("%q is not a percent between 0%% and 100%%", p)
		}
		out = append(out, n)
	}
	if last := out[len(out)-1]; last != 100 {
		return nil, fmt.Errorf("the last step sends %d%%: it must send 100%%, as every pod is updated", last)
	}
	return out, nil
}

// ParseMatch reads "header:NAME=VALUE" or "query:NAME=VALUE" (exact), or
// with "~=" a regular expression.
func ParseMatch(s string) (stepwisev1.TrafficMatch, error) {
	kind, rest, ok := strings.Cut(s, ":")
	sep, typ := "=", stepwisev1.StringMatchType("")
	if i, j := strings.Index(rest, "~="), strings.Index(rest, "="); i >= 0 && i < j {
		sep, typ = "~=", stepwisev1.StringMatchRegularExpression
	}
	name, value, hasValue := strings.Cut(rest, sep)
	if !ok || !hasValue || name == "" || value == "" {
		return stepwisev1.TrafficMatch{}, fmt.Errorf("%q is neither header:NAME=VALUE nor query:NAME=VALUE (~= for a regular expression)", s)
	}
	m := &stepwisev1.StringMatch{Name: name, Value: value, Type: typ}
	switch kind {
	case "header":
		return stepwisev1.TrafficMatch{Header: m}, nil
	case "query":
		return stepwisev1.TrafficMatch{QueryParam: m}, nil
	}
	return stepwisev1.TrafficMatch{}, fmt.Errorf("%q: %q is neither header nor query", s, kind)
}

// ParseRoute reads "[NAMESPACE/]NAME[#RULE]": RULE is the rule's index, or
// its name when not a number.
func ParseRoute(s string) (stepwisev1.HTTPRouteReference, error) {
	var ref stepwisev1.HTTPRouteReference
	rest, rule, hasRule := strings.Cut(s, "#")
	if ns, name, ok := strings.Cut(rest, "/"); ok {
		ref.Namespace, rest = ns, name
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return ref, fmt.Errorf("%q: %q is not a namespace name: %s", s, ns, strings.Join(errs, "; "))
		}
	}
	ref.Name = rest
	if errs := validation.IsDNS1123Subdomain(rest); len(errs) > 0 {
		return ref, fmt.Errorf("%q: %q is not an object name: %s", s, rest, strings.Join(errs, "; "))
	}
	switch {
	case hasRule && rule == "":
		return ref, fmt.Errorf("%q: no rule after #", s)
	case hasRule:
		if n, err := strconv.ParseInt(rule, 10, 32); err == nil {
			idx := int32(n)
			ref.RuleIndex = &idx
		} else {
			ref.RuleName = rule
		}
	}
	return ref, nil
}

// applyTraffic writes t into r: spec.trafficRouting and each step's traffic
// and matches.
func applyTraffic(r *stepwisev1.Rollout, t *PlanTraffic) error {
	if t.StableService == "" {
		return &PlanError{Flag: "stable-service", Err: fmt.Errorf("required for traffic routing: the Service your HTTPRoute sends to")}
	}
	if len(t.Routes) == 0 {
		return &PlanError{Flag: "http-route", Err: fmt.Errorf("required with --stable-service: the HTTPRoute that sends to it")}
	}
	if t.Weights != nil && len(t.Weights) != len(r.Spec.Steps) {
		return &PlanError{Flag: "traffic", Err: fmt.Errorf("%d weights for %d steps: give one per step", len(t.Weights), len(r.Spec.Steps))}
	}
	canary := t.CanaryService
	if canary == "" {
		canary = t.StableService + "-canary"
	}
	r.Spec.TrafficRouting = &stepwisev1.TrafficRouting{
		StableService: t.StableService,
		CanaryService: stepwisev1.CanaryService{Name: canary, Create: t.CreateCanary},
		HTTPRoutes:    t.Routes,
	}
	for i := range r.Spec.Steps {
		if t.Weights != nil {
			w := int32(t.Weights[i])
			r.Spec.Steps[i].Traffic = &w
		}
		if i < len(r.Spec.Steps)-1 && len(t.Matches) > 0 {
			r.Spec.Steps[i].Matches = t.Matches
		}
	}
	return nil
}

// trafficComment says what the routes carry at a step, and why.
func trafficComment(t StepTraffic, canary string) string {
	s := fmt.Sprintf("%d%% of requests to %s", t.Weight, canary)
	if t.Why != "" {
		s += " (" + t.Why + ")"
	}
	switch n := len(t.Matches); n {
	case 0:
		return s
	case 1:
		return s + ", and those matching its match"
	default:
		return s + fmt.Sprintf(", and those matching any of its %d matches", n)
	}
}
