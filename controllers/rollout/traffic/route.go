package traffic

import (
	"fmt"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// canaryRouteSuffix names the HTTPRoute Stepwise owns next to a user's
// route: it carries the match rules (docs/traffic.md).
const canaryRouteSuffix = "-stepwise-canary"

// CanaryRouteName is the name of the route that carries the matches for
// the user's route named route.
func CanaryRouteName(route string) string {
	const maxName = 253
	if len(route)+len(canaryRouteSuffix) > maxName {
		route = route[:maxName-len(canaryRouteSuffix)]
	}
	return route + canaryRouteSuffix
}

// Backend names a Service a route sends to: a Rollout's stable or canary
// Service. A backendRef without a namespace is in its route's namespace,
// so whether a backendRef names a Backend depends on the route's
// namespace (refersTo): a Service of the same name in another namespace is
// someone else's.
type Backend struct {
	Namespace, Name string
}

func (b Backend) String() string { return b.Namespace + "/" + b.Name }

// refersTo reports whether ref, in a route of namespace routeNS, names the
// Service b.
func refersTo(ref gatewayv1.HTTPBackendRef, routeNS string, b Backend) bool {
	return string(ref.Name) == b.Name &&
		(ref.Group == nil || *ref.Group == "") &&
		(ref.Kind == nil || *ref.Kind == "Service") &&
		string(ptr.Deref(ref.Namespace, gatewayv1.Namespace(routeNS))) == b.Namespace
}

// backendName names ref as a reader of the route would: its namespace when
// it is not the route's.
func backendName(ref gatewayv1.HTTPBackendRef, routeNS string) string {
	kind := string(ptr.Deref(ref.Kind, "Service"))
	if ns := string(ptr.Deref(ref.Namespace, gatewayv1.Namespace(routeNS))); ns != routeNS {
		return kind + " " + ns + "/" + string(ref.Name)
	}
	return kind + " " + string(ref.Name)
}

func stableRef(rule gatewayv1.HTTPRouteRule, routeNS string, stable Backend) int {
	for i, ref := range rule.BackendRefs {
		if refersTo(ref, routeNS, stable) {
			return i
		}
	}
	return -1
}

// SelectRule is the index of the rule ref designates in route: ruleIndex,
// ruleName, or else the only rule, or else the only rule that sends to
// the stable Service.
func SelectRule(route *gatewayv1.HTTPRoute, ref v1alpha1.HTTPRouteReference, stable Backend) (int, error) {
	rules := route.Spec.Rules
	switch {
	case ref.RuleIndex != nil:
		if int(*ref.RuleIndex) >= len(rules) {
			return 0, fmt.Errorf("HTTPRoute %s has %d rules, no ruleIndex %d", route.Name, len(rules), *ref.RuleIndex)
		}
		return int(*ref.RuleIndex), nil
	case ref.RuleName != "":
		for i, r := range rules {
			if r.Name != nil && string(*r.Name) == ref.RuleName {
				return i, nil
			}
		}
		return 0, fmt.Errorf("HTTPRoute %s has no rule named %q", route.Name, ref.RuleName)
	}
	found := -1
	for i, r := range rules {
		if stableRef(r, route.Namespace, stable) >= 0 {
			if found >= 0 {
				return 0, fmt.Errorf("HTTPRoute %s has several rules that send to Service %s: set ruleIndex or ruleName", route.Name, stable)
			}
			found = i
		}
	}
	if found < 0 {
		return 0, fmt.Errorf("HTTPRoute %s has no rule that sends to Service %s", route.Name, stable)
	}
	return found, nil
}

// WeightedRules returns a copy of rules (of a route in namespace routeNS)
// whose rule idx sends weight percent to the canary Service and the rest
// to the stable one. The stable backendRef is kept as written (port,
// namespace, filters); the canary's is a copy of it naming the canary. At
// weight 0 the rule holds the stable backendRef alone, without weight, as
// a manifest in git writes it (a rule that holds it alone already is left
// as it is). Every other rule and field is left as it is. A rule that
// also sends to another backend is refused: its share belongs to whoever
// wrote that backend, and a weight Stepwise set would move it.
func WeightedRules(rules []gatewayv1.HTTPRouteRule, routeNS string, idx int, stable, canary Backend, weight int32) ([]gatewayv1.HTTPRouteRule, error) {
	if idx < 0 || idx >= len(rules) {
		return nil, fmt.Errorf("no rule %d", idx)
	}
	out := copyRules(rules)
	rule := &out[idx]
	si := stableRef(*rule, routeNS, stable)
	if si < 0 {
		return nil, fmt.Errorf("rule %d does not send to Service %s", idx, stable)
	}
	for _, ref := range rule.BackendRefs {
		if !refersTo(ref, routeNS, stable) && !refersTo(ref, routeNS, canary) {
			return nil, fmt.Errorf("rule %d also sends to %s: the Rollout's rule must send to Service %s alone", idx, backendName(ref, routeNS), stable)
		}
	}
	st := *rule.BackendRefs[si].DeepCopy()
	if weight <= 0 && len(rule.BackendRefs) == 1 {
		// Already at rest: left exactly as the API server stores it.
		return out, nil
	}
	if weight <= 0 {
		st.Weight = nil
		rule.BackendRefs = []gatewayv1.HTTPBackendRef{st}
		return out, nil
	}
	ca := *st.DeepCopy()
	ca.Name = gatewayv1.ObjectName(canary.Name)
	st.Weight, ca.Weight = ptr.To(100-weight), ptr.To(weight)
	rule.BackendRefs = []gatewayv1.HTTPBackendRef{st, ca}
	return out, nil
}

// Unweighted returns a copy of rules (of a route in namespace routeNS)
// without what WeightedRules wrote for w: every backendRef to w's canary
// Service goes, and in a rule that lost one, the stable backendRef, if it
// is left alone, loses its weight. Everything else stays as it is, whoever
// wrote it. changed is false when rules carry nothing of w.
func Unweighted(rules []gatewayv1.HTTPRouteRule, routeNS string, w v1alpha1.WrittenRoute, servicesNS string) (out []gatewayv1.HTTPRouteRule, changed bool) {
	stable, canary := Backend{servicesNS, w.StableService}, Backend{servicesNS, w.CanaryService}
	out = copyRules(rules)
	for i := range out {
		rule := &out[i]
		kept := rule.BackendRefs[:0]
		for _, ref := range rule.BackendRefs {
			if !refersTo(ref, routeNS, canary) {
				kept = append(kept, ref)
			}
		}
		if len(kept) == len(rule.BackendRefs) {
			continue
		}
		changed = true
		rule.BackendRefs = kept
		if len(kept) == 1 && refersTo(kept[0], routeNS, stable) {
			rule.BackendRefs[0].Weight = nil
		}
	}
	return out, changed
}

func copyRules(rules []gatewayv1.HTTPRouteRule) []gatewayv1.HTTPRouteRule {
	out := make([]gatewayv1.HTTPRouteRule, len(rules))
	for i := range rules {
		rules[i].DeepCopyInto(&out[i])
	}
	return out
}

// CanaryWeightOf reads the canary's weight in rule idx of rules (of a route
// in namespace routeNS), as WeightedRules writes it; 0 when the rule does
// not send to the canary.
func CanaryWeightOf(rules []gatewayv1.HTTPRouteRule, routeNS string, idx int, canary Backend) int32 {
	if idx < 0 || idx >= len(rules) {
		return 0
	}
	var total, mine int32
	for _, ref := range rules[idx].BackendRefs {
		w := ptr.Deref(ref.Weight, 1)
		total += w
		if refersTo(ref, routeNS, canary) {
			mine += w
		}
	}
	if total == 0 {
		return 0
	}
	return mine * 100 / total
}

// CanaryRoute is the route Stepwise owns beside user (same namespace,
// parents and hostnames) that sends the requests matching any of matches
// to the canary Service: each match of the user's rule idx (a rule without
// matches matches everything) combined with each of matches, so that it
// is never wider than the user's rule and, with more conditions, wins over
// it in the Gateway API's precedence. The user rule's filters are copied.
// Nil when there are no matches: the route is then deleted.
func CanaryRoute(user *gatewayv1.HTTPRoute, idx int, stable, canary Backend, matches []v1alpha1.TrafficMatch) (*gatewayv1.HTTPRoute, error) {
	if len(matches) == 0 {
		return nil, nil
	}
	if idx < 0 || idx >= len(user.Spec.Rules) {
		return nil, fmt.Errorf("HTTPRoute %s has no rule %d", user.Name, idx)
	}
	rule := user.Spec.Rules[idx]
	si := stableRef(rule, user.Namespace, stable)
	if si < 0 {
		return nil, fmt.Errorf("rule %d of HTTPRoute %s does not send to Service %s", idx, user.Name, stable)
	}
	backend := *rule.BackendRefs[si].DeepCopy()
	backend.Name, backend.Weight = gatewayv1.ObjectName(canary.Name), nil

	base := rule.Matches
	if len(base) == 0 {
		base = []gatewayv1.HTTPRouteMatch{{}}
	}
	var combined []gatewayv1.HTTPRouteMatch
	for _, b := range base {
		for _, m := range matches {
			c := *b.DeepCopy()
			switch {
			case m.Header != nil:
				c.Headers = append(c.Headers, gatewayv1.HTTPHeaderMatch{
					Type:  ptr.To(gatewayv1.HeaderMatchType(matchType(m.Header.Type))),
					Name:  gatewayv1.HTTPHeaderName(m.Header.Name),
					Value: m.Header.Value,
				})
			case m.QueryParam != nil:
				c.QueryParams = append(c.QueryParams, gatewayv1.HTTPQueryParamMatch{
					Type:  ptr.To(gatewayv1.QueryParamMatchType(matchType(m.QueryParam.Type))),
					Name:  gatewayv1.HTTPHeaderName(m.QueryParam.Name),
					Value: m.QueryParam.Value,
				})
			}
			combined = append(combined, c)
		}
	}
	const maxMatches = 64 // the HTTPRoute schema's limit per rule
	if len(combined) > maxMatches {
		return nil, fmt.Errorf("rule %d of HTTPRoute %s has %d matches: with %d step matches that is over %d", idx, user.Name, len(base), len(matches), maxMatches)
	}
	route := &gatewayv1.HTTPRoute{}
	route.APIVersion, route.Kind = gatewayv1.GroupVersion.String(), "HTTPRoute"
	route.Namespace, route.Name = user.Namespace, CanaryRouteName(user.Name)
	route.Spec.ParentRefs = user.Spec.ParentRefs
	route.Spec.Hostnames = user.Spec.Hostnames
	route.Spec.Rules = []gatewayv1.HTTPRouteRule{{
		Matches:     combined,
		Filters:     rule.Filters,
		BackendRefs: []gatewayv1.HTTPBackendRef{backend},
	}}
	return route, nil
}

func matchType(t v1alpha1.StringMatchType) string {
	if t == "" {
		return string(v1alpha1.StringMatchExact)
	}
	return string(t)
}
