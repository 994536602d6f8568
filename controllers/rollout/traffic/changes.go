package traffic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Op is what a Write does.
type Op int

const (
	// ApplySelector applies a Service's spec.selector (Object holds it
	// alone).
	ApplySelector Op = iota
	// ReleaseSelector drops Stepwise's managed-fields entry from a Service
	// (Object is the live Service).
	ReleaseSelector
	// ApplyRules applies a route's spec.rules (Object holds them alone,
	// with the resourceVersion they were computed from).
	ApplyRules
	// Create creates an object Stepwise owns (a canary Service, a route
	// carrying matches), which must not exist yet.
	Create
	// Apply applies the whole of an object Stepwise owns.
	Apply
	// Delete deletes an object Stepwise owns (Object is the live one: its
	// UID and resourceVersion are the precondition).
	Delete
)

// Write is one write the Applier makes.
type Write struct {
	Op     Op
	Object client.Object
	// What names the object in errors and logs.
	What string
}

// Problem is why traffic cannot follow the plan. Pods do not move while
// there is one.
type Problem struct {
	// Reason is a v1alpha1 Reason constant.
	Reason  string
	Message string
}

// Outcome is what Changes decides for one round.
type Outcome struct {
	// Writes are the writes to make, once Written is on record.
	Writes []Write
	// Written is the record to store in status before the writes: what
	// the Rollout's objects may carry of its writes once they are made.
	Written *v1alpha1.TrafficWritten
	// Weight is the canary weight the routes carry as read (the lowest,
	// when several disagree), before this round's writes.
	Weight int32
	// Accepted: every route with a parent Gateway present reports it
	// accepted at its current generation; Waiting says which is not.
	Accepted bool
	Waiting  string
	// Reached: the Services and routes already carry the plan, accepted,
	// and nothing stands in its way.
	Reached bool
	// ServicesReady: the Services already select what the plan says, so
	// Pods may move to the canary revision.
	ServicesReady bool
	// Conflicts name, per object, the other field managers that changed
	// what Stepwise set ("HTTPRoute shop/web: spec.rules by kustomize-controller").
	Conflicts []string
	// Problems stop the release: Pods do not move, and the writes only
	// take out what Stepwise wrote.
	Problems []Problem
}

// Changes decides the writes that bring what w shows to plan for t, and
// the record to keep of them. Rules:
//   - Only what Written records, or what this round adds to it, is ever
//     taken out: a Service's revision key, a route's backendRef to a
//     canary Service and the stable backendRef's weight beside it, a route
//     that Stepwise created. Other Rollouts' writes, git's and those of
//     anyone else stay.
//   - A route in another namespace is written only with its owner's
//     consent (Consents) and the grant that lets it send to the Services
//     (UngrantedServices); without them, or when the spec no longer names
//     it, what Stepwise wrote into it is taken out and nothing is added.
//   - Stepwise creates a Service or a route only when its name is free,
//     and changes or deletes only those it created (CreatedByAnnotation).
//   - With t.Release nothing is created or added: every object goes back
//     to what it was before Stepwise wrote into it.
func Changes(w *World, t Target, plan Plan) Outcome {
	c := &changer{w: w, t: t, plan: plan, out: Outcome{Accepted: true, Weight: 100}}
	c.services()
	c.routes()
	c.out.Written = c.record()
	c.out.Reached = c.out.ServicesReady && c.routesInPlace && c.out.Accepted && len(c.out.Problems) == 0
	return c.out
}

type changer struct {
	w    *World
	t    Target
	plan Plan
	out  Outcome
	// keptServices and keptRoutes are the record being built.
	keptServices []string
	keptRoutes   []v1alpha1.WrittenRoute
	// routesInPlace: no route of the spec needs a write.
	routesInPlace bool
	// weighed: some route of the spec was read for its weight.
	weighed bool
}

func (c *changer) problem(reason, format string, args ...any) {
	c.out.Problems = append(c.out.Problems, Problem{Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (c *changer) write(op Op, obj client.Object, what string) {
	c.out.Writes = append(c.out.Writes, Write{Op: op, Object: obj, What: what})
}

func (c *changer) recorded() *v1alpha1.TrafficWritten {
	if c.t.Written == nil {
		return &v1alpha1.TrafficWritten{}
	}
	return c.t.Written
}

// specRef is the spec's reference to the route at key; nil when the spec
// (or a release) does not name it.
func (c *changer) specRef(key types.NamespacedName) *v1alpha1.HTTPRouteReference {
	tr := c.t.routing()
	if tr == nil {
		return nil
	}
	for i := range tr.HTTPRoutes {
		if ref := &tr.HTTPRoutes[i]; ref.Name == key.Name && c.t.routeNamespace(*ref) == key.Namespace {
			return ref
		}
	}
	return nil
}

// routes sets each route of the spec to the plan, and takes out of every
// route the record names what the Rollout wrote and the spec no longer
// asks for.
func (c *changer) routes() {
	c.routesInPlace = true
	for _, key := range c.t.routeKeys() {
		c.route(key)
	}
	if !c.weighed {
		c.out.Weight = 0
	}
}

func (c *changer) route(key types.NamespacedName) {
	ro := c.t.Rollout
	view := c.w.Routes[key]
	ref := c.specRef(key)
	var entries []v1alpha1.WrittenRoute
	for _, e := range c.recorded().Routes {
		if e.Namespace == key.Namespace && e.Name == key.Name {
			entries = append(entries, e)
		}
	}
	if view.Err != nil {
		// Unreachable: nothing is known of it, so the record stays.
		c.keptRoutes = append(c.keptRoutes, entries...)
		c.problem(v1alpha1.ReasonTrafficNotPermitted, "%v", view.Err)
		return
	}
	live := view.Route
	if live == nil && ref != nil {
		c.problem(v1alpha1.ReasonInvalidSpec, "HTTPRoute %s not found", key)
	}
	permitted := ref != nil && live != nil && c.permitted(key)

	var rules []gatewayv1.HTTPRouteRule
	idx := -1
	if live != nil {
		rules = live.Spec.Rules
		for _, e := range entries {
			rules, _ = Unweighted(rules, key.Namespace, e, ro.Namespace)
		}
	}
	tr := c.t.routing()
	var stable, canary Backend
	if tr != nil {
		stable, canary = Backend{ro.Namespace, tr.StableService}, Backend{ro.Namespace, tr.CanaryService.Name}
	}
	if permitted {
		var err error
		stripped := live.DeepCopy()
		stripped.Spec.Rules = rules
		if idx, err = SelectRule(stripped, *ref, stable); err == nil {
			rules, err = WeightedRules(rules, key.Namespace, idx, stable, canary, c.plan.CanaryWeight)
		}
		if err != nil {
			c.problem(v1alpha1.ReasonInvalidSpec, "HTTPRoute %s: %v", key, err)
			permitted, rules = false, live.Spec.Rules
			for _, e := range entries {
				rules, _ = Unweighted(rules, key.Namespace, e, ro.Namespace)
			}
		}
	}
	if live != nil && !apiequality.Semantic.DeepEqual(rules, live.Spec.Rules) {
		if permitted {
			if w := CanaryWeightOf(live.Spec.Rules, key.Namespace, idx, canary); w != c.t.LastWeight {
				// Not what we left: another writer changed the rules since.
				if others := otherManagers(live.ManagedFields, []string{"spec", "rules"}); len(others) > 0 {
					c.out.Conflicts = append(c.out.Conflicts, fmt.Sprintf("HTTPRoute %s: spec.rules (weight %d, Stepwise set %d) by %s", key, w, c.t.LastWeight, strings.Join(others, ", ")))
				}
			}
		}
		c.write(ApplyRules, rulesApply(live, rules), "the rules of HTTPRoute "+key.String())
		if ref != nil {
			c.routesInPlace = false
		}
	}
	if permitted {
		c.weighed = true
		c.out.Weight = min(c.out.Weight, CanaryWeightOf(live.Spec.Rules, key.Namespace, idx, canary))
		c.accepted(live)
	}
	matches := c.canaryRoute(key, view, permitted, idx, stable, canary)

	// The record: what the route still carries of earlier writes, and
	// what this round writes into it.
	ours := view.Canary != nil && CreatedFor(view.Canary, ro)
	for _, e := range entries {
		if live == nil && !ours {
			continue
		}
		if _, carries := Unweighted(liveRules(live), key.Namespace, e, ro.Namespace); carries || ours {
			c.keptRoutes = append(c.keptRoutes, e)
		}
	}
	if permitted && (c.plan.CanaryWeight > 0 || matches) {
		c.keptRoutes = append(c.keptRoutes, v1alpha1.WrittenRoute{Namespace: key.Namespace, Name: key.Name, StableService: stable.Name, CanaryService: canary.Name})
	}
}

func liveRules(r *gatewayv1.HTTPRoute) []gatewayv1.HTTPRouteRule {
	if r == nil {
		return nil
	}
	return r.Spec.Rules
}

// permitted reports whether the spec's route at key may be written: in
// the Rollout's namespace always; in another, with its owner's consent and
// the grant that lets it send to the Services. What is missing is a
// problem.
func (c *changer) permitted(key types.NamespacedName) bool {
	ro := c.t.Rollout
	if key.Namespace == ro.Namespace {
		return true
	}
	ok := true
	if !Consents(c.w.RouteGrants[key.Namespace], ro.Namespace, key.Name) {
		c.problem(v1alpha1.ReasonReferenceGrantMissing, "%v", &MissingConsentError{Namespace: key.Namespace, Route: key.Name, RolloutNamespace: ro.Namespace})
		ok = false
	}
	tr := c.t.routing()
	if missing := UngrantedServices(c.w.ServiceGrants, key.Namespace, ro.Namespace, []string{tr.StableService, tr.CanaryService.Name}); len(missing) > 0 {
		c.problem(v1alpha1.ReasonReferenceGrantMissing, "%v", &MissingGrantError{Route: key.String(), Namespace: ro.Namespace, Services: missing})
		ok = false
	}
	return ok
}

// canaryRoute keeps the route beside key that carries the step's matches:
// created when the plan has matches and the name is free, applied when it
// is Stepwise's and differs, deleted when it is Stepwise's and no match is
// left. It reports whether the plan puts matches there.
func (c *changer) canaryRoute(key types.NamespacedName, view RouteView, permitted bool, idx int, stable, canary Backend) bool {
	ro := c.t.Rollout
	name := CanaryRouteName(key.Name)
	var desired *gatewayv1.HTTPRoute
	if permitted && len(c.plan.Matches) > 0 {
		if key.Namespace != ro.Namespace && !Consents(c.w.RouteGrants[key.Namespace], ro.Namespace, name) {
			c.problem(v1alpha1.ReasonReferenceGrantMissing, "%v (it carries the step's matches beside HTTPRoute %s)",
				&MissingConsentError{Namespace: key.Namespace, Route: name, RolloutNamespace: ro.Namespace}, key.Name)
		} else {
			var err error
			if desired, err = CanaryRoute(view.Route, idx, stable, canary, c.plan.Matches); err != nil {
				c.problem(v1alpha1.ReasonInvalidSpec, "%v", err)
				desired = nil
			}
		}
	}
	current := view.Canary
	what := "HTTPRoute " + key.Namespace + "/" + name
	if desired != nil {
		if key.Namespace == ro.Namespace {
			desired.OwnerReferences = ownedBy(ro)
		}
		desired.Annotations = map[string]string{v1alpha1.CreatedByAnnotation: createdBy(ro), specHashAnnotation: specHash(desired.Spec)}
	}
	switch {
	case desired != nil && current == nil:
		c.write(Create, desired, what)
		c.routesInPlace = false
	case desired != nil && !CreatedFor(current, ro):
		c.problem(v1alpha1.ReasonObjectNotOwned, "%s exists and Stepwise did not create it for this Rollout (it has no %s: %s): "+
			"Stepwise never takes over a route it did not create; delete it or rename it to let the step's matches through", what, v1alpha1.CreatedByAnnotation, createdBy(ro))
	case desired != nil:
		// The API server defaults fields, so the stored spec never equals
		// the applied one: what was applied is recorded as a hash.
		if current.Annotations[specHashAnnotation] != desired.Annotations[specHashAnnotation] || current.Annotations[v1alpha1.CreatedByAnnotation] != createdBy(ro) {
			c.write(Apply, desired, what)
			c.routesInPlace = false
		} else {
			c.accepted(current)
		}
	case current != nil && CreatedFor(current, ro):
		c.write(Delete, current, what)
	}
	return desired != nil
}

// accepted checks the route's status for each parent Gateway that exists:
// its entry must say Accepted=True for the route's current generation. A
// parent whose Gateway is absent (no Gateway API implementation here) is
// not waited for.
func (c *changer) accepted(route *gatewayv1.HTTPRoute) {
	for _, p := range route.Spec.ParentRefs {
		key, ok := gatewayKey(route, p)
		if !ok || !c.w.Gateways[key] {
			continue
		}
		ok = false
		for _, s := range route.Status.Parents {
			if s.ParentRef.Name != p.Name || string(ptr.Deref(s.ParentRef.Namespace, gatewayv1.Namespace(route.Namespace))) != key.Namespace {
				continue
			}
			cond := apimeta.FindStatusCondition(s.Conditions, string(gatewayv1.RouteConditionAccepted))
			ok = ok || (cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration >= route.Generation)
		}
		if !ok {
			c.out.Accepted = false
			c.out.Waiting = fmt.Sprintf("Gateway %s has not accepted HTTPRoute %s/%s generation %d", key, route.Namespace, route.Name, route.Generation)
		}
	}
}

// record is the new status.traffic.written, in a stable order; nil when
// it records nothing.
func (c *changer) record() *v1alpha1.TrafficWritten {
	slices.Sort(c.keptServices)
	services := slices.Compact(c.keptServices)
	routes := slices.Clone(c.keptRoutes)
	slices.SortFunc(routes, func(a, b v1alpha1.WrittenRoute) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+a.CanaryService+"/"+a.StableService, b.Namespace+"/"+b.Name+"/"+b.CanaryService+"/"+b.StableService)
	})
	routes = slices.Compact(routes)
	if len(services) == 0 && len(routes) == 0 {
		return nil
	}
	return &v1alpha1.TrafficWritten{SelectorKey: c.t.LabelKey, Services: services, Routes: routes}
}

// rulesApply is the apply of route's spec.rules alone: spec.rules is an
// atomic list, so Stepwise takes the whole list over (as it is, but for
// what it changes) and leaves parents and hostnames to their owner. It
// carries the resourceVersion the rules were computed from: rules changed
// since are decided again, never overwritten.
func rulesApply(route *gatewayv1.HTTPRoute, rules []gatewayv1.HTTPRouteRule) client.Object {
	spec := gatewayv1.HTTPRouteSpec{Rules: rules}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gatewayv1.GroupVersion.String())
	u.SetKind("HTTPRoute")
	u.SetNamespace(route.Namespace)
	u.SetName(route.Name)
	u.SetResourceVersion(route.ResourceVersion)
	encoded, err := toUnstructured(&spec)
	if err != nil {
		// An HTTPRouteSpec always encodes; keep the rules as they are.
		encoded = map[string]any{}
	}
	u.Object["spec"] = map[string]any{"rules": encoded["rules"]}
	return u
}

// specHashAnnotation records on a canary route the hash of the spec
// Stepwise applied.
const specHashAnnotation = "stepwise.dev/applied-spec-hash"

func specHash(spec gatewayv1.HTTPRouteSpec) string {
	raw, err := json.Marshal(spec)
	if err != nil {
		// A spec that does not encode cannot be applied either; an empty
		// hash only makes the next round apply again.
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}
