package traffic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// specHashAnnotation records on a canary route the hash of the spec
// Stepwise applied.
const specHashAnnotation = "stepwise.dev/applied-spec-hash"

func specHash(spec gatewayv1.HTTPRouteSpec) (string, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("encoding HTTPRoute spec: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8]), nil
}

// FieldManager owns what Stepwise writes into Services and HTTPRoutes: the
// selectors of the Services during a release (with the revision key; at
// rest Stepwise lets go of them), the rules of the routes whose weights it
// sets, and its own canary Service and routes.
const FieldManager = "stepwise-traffic"

// Applier writes a Plan. Reads go around the cache (Reader): no informer
// on HTTPRoutes is needed, the Rollout controller caches Services by their
// metadata only, and managed fields are there to name who else writes.
type Applier struct {
	Client client.Client
	Reader client.Reader
}

// Target is one Rollout's routing and what names a revision on its Pods.
type Target struct {
	Rollout *v1alpha1.Rollout
	// LabelKey is the Pod label the Services select a revision by, and
	// LabelValue maps a revision to its value.
	LabelKey   string
	LabelValue func(revision string) string
	// LastWeight is the canary weight Stepwise last applied
	// (status.traffic.canaryWeight): a route found carrying another was
	// changed by someone else.
	LastWeight int32
	// LastStable and LastCanary are the revisions Stepwise last made the
	// stable and canary Services select (status.traffic.stableRevision
	// and canaryRevision; "" for none): a Service found selecting another
	// was changed by someone else.
	LastStable, LastCanary string
}

// Result is what the routes carry after Apply.
type Result struct {
	// Weight is the canary weight read back from the routes (the lowest,
	// when several routes disagree).
	Weight int32
	// Matches is how many match rules the canary routes carry.
	Matches int32
	// Accepted: every route with a parent Gateway present reports it
	// accepted at its current generation.
	Accepted bool
	// Waiting says what is not accepted yet; empty when Accepted.
	Waiting string
	// Conflicts name, per object, the other field managers that changed
	// what Stepwise set ("HTTPRoute shop/web: spec.rules by kustomize-controller").
	Conflicts []string
	// Applied is true when something was written.
	Applied bool

	// gateways are the parent Gateways looked up during this Apply, and
	// whether each exists: a route and Stepwise's canary route beside it
	// share their parents, which are read once.
	gateways map[client.ObjectKey]bool
}

// Apply writes plan for t: Services first (so that a release pins the
// stable Service to its revision before any weight moves, and a promotion
// gives it back its own selector before the canary weight goes to 0),
// then each route.
func (a *Applier) Apply(ctx context.Context, t Target, plan Plan) (Result, error) {
	ro := t.Rollout
	tr := ro.Spec.TrafficRouting
	res := Result{Accepted: true, Weight: 100, gateways: map[client.ObjectKey]bool{}}
	stable := &corev1.Service{}
	if err := a.Reader.Get(ctx, client.ObjectKey{Namespace: ro.Namespace, Name: tr.StableService}, stable); err != nil {
		return res, fmt.Errorf("getting stable Service %s: %w", tr.StableService, err)
	}
	if err := a.applyService(ctx, t, stable, plan.StableSelects, t.LastStable, &res); err != nil {
		return res, err
	}
	if err := a.applyCanaryService(ctx, t, stable, plan.CanarySelects, &res); err != nil {
		return res, err
	}

	for _, ref := range tr.HTTPRoutes {
		if err := a.applyRoute(ctx, t, ref, plan, &res); err != nil {
			return res, err
		}
	}
	if len(tr.HTTPRoutes) == 0 {
		res.Weight = 0
	}
	res.Matches = int32(len(plan.Matches))
	return res, nil
}

// labelValue is the selector value for revision; "" for none.
func (t Target) labelValue(revision string) string {
	if revision == "" {
		return ""
	}
	return t.LabelValue(revision)
}

// applyService makes a Service that git owns (the stable one, or a canary
// Service from git) select revision (ChangeService): the revision key is
// added to git's selector during a release and removed at rest, when
// Stepwise also gives up the field, so that at rest the Service is git's.
// A Service's selector is an atomic map: Stepwise applies all of it, git's
// keys unchanged. A Service found without the key Stepwise set (last) was
// re-applied by someone else: a conflict naming who, and the key goes back.
func (a *Applier) applyService(ctx context.Context, t Target, svc *corev1.Service, revision, last string, res *Result) error {
	value := t.labelValue(revision)
	if value != "" && SelectorChanged(svc.Spec.Selector, t.LabelKey, t.labelValue(last)) {
		if others := otherManagers(svc.ManagedFields, []string{"spec", "selector"}); len(others) > 0 {
			found := "without " + t.LabelKey
			if v, ok := svc.Spec.Selector[t.LabelKey]; ok {
				found = t.LabelKey + "=" + v
			}
			res.Conflicts = append(res.Conflicts, fmt.Sprintf("Service %s/%s: spec.selector (%s, Stepwise set %s=%s) by %s",
				svc.Namespace, svc.Name, found, t.LabelKey, t.labelValue(last), strings.Join(others, ", ")))
		}
	}
	owned := slices.Contains(managersOf(svc.ManagedFields, []string{"spec", "selector"}), FieldManager)
	change := ChangeService(svc.Spec.Selector, t.LabelKey, value, owned)
	if change.Selector != nil {
		selector := map[string]any{}
		for k, v := range change.Selector {
			selector[k] = v
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": svc.Name, "namespace": svc.Namespace},
			"spec":     map[string]any{"selector": selector},
		}}
		if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying the selector of Service %s: %w", svc.Name, err)
		}
		res.Applied = true
	}
	if change.Release {
		if err := a.release(ctx, svc); err != nil {
			return err
		}
	}
	return nil
}

// release drops Stepwise's entry from a Service's managed fields: at rest
// the selector it holds is git's keys, and whoever applies git's manifest
// next owns it alone. The entry holds spec.selector only (all Stepwise
// applies to a Service it does not own). The write carries the
// resourceVersion read, so a concurrent change is never overwritten; it is
// retried in the next round.
func (a *Applier) release(ctx context.Context, svc *corev1.Service) error {
	fresh := &corev1.Service{}
	if err := a.Reader.Get(ctx, client.ObjectKeyFromObject(svc), fresh); err != nil {
		return fmt.Errorf("getting Service %s: %w", svc.Name, err)
	}
	kept := slices.DeleteFunc(slices.Clone(fresh.ManagedFields), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == FieldManager && e.Subresource == ""
	})
	if len(kept) == len(fresh.ManagedFields) {
		return nil
	}
	if len(kept) == 0 {
		// An empty list would leave managed fields as they are: with no
		// other manager, Stepwise's entry stays, harmlessly.
		return nil
	}
	patch := []map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": fresh.ResourceVersion},
		{"op": "replace", "path": "/metadata/managedFields", "value": kept},
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encoding the managed fields of Service %s: %w", svc.Name, err)
	}
	if err := a.Client.Patch(ctx, fresh, client.RawPatch(types.JSONPatchType, raw)); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			// Changed since read: the next round looks again.
			return nil
		}
		return fmt.Errorf("releasing the selector of Service %s: %w", svc.Name, err)
	}
	return nil
}

// applyCanaryService makes the canary Service select revision. One from
// git is handled as the stable one (applyService). With
// canaryService.create Stepwise creates it from the stable one (ports,
// selector, labels without GitOps tracking keys), owned by the Rollout, and
// keeps its selector at the stable Service's own keys plus the revision
// key (none at rest).
func (a *Applier) applyCanaryService(ctx context.Context, t Target, stable *corev1.Service, revision string, res *Result) error {
	ro := t.Rollout
	cs := ro.Spec.TrafficRouting.CanaryService
	current := &corev1.Service{}
	err := a.Reader.Get(ctx, client.ObjectKey{Namespace: ro.Namespace, Name: cs.Name}, current)
	switch {
	case apierrors.IsNotFound(err) && !cs.Create:
		return fmt.Errorf("canary Service %s not found (set spec.trafficRouting.canaryService.create for Stepwise to create it)", cs.Name)
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("getting canary Service %s: %w", cs.Name, err)
	}
	if !cs.Create {
		return a.applyService(ctx, t, current, revision, t.LastCanary, res)
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ro.Namespace, Name: cs.Name, Labels: WithoutTracking(stable.Labels)},
		Spec: corev1.ServiceSpec{
			Selector: ServiceSelector(stable.Spec.Selector, t.LabelKey, t.labelValue(revision)),
			Type:     corev1.ServiceTypeClusterIP,
		},
	}
	for _, p := range stable.Spec.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port, TargetPort: p.TargetPort})
	}
	if err := a.setOwner(ro, svc); err != nil {
		return err
	}
	if current.Name != "" && apiequality.Semantic.DeepEqual(current.Spec.Selector, svc.Spec.Selector) &&
		samePorts(current.Spec.Ports, svc.Spec.Ports) && maps.Equal(current.Labels, svc.Labels) {
		return nil
	}
	res.Applied = true
	return a.applyTyped(ctx, svc, "canary Service "+cs.Name)
}

func samePorts(a, b []corev1.ServicePort) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ServicePort) bool {
		return x.Name == y.Name && x.Port == y.Port && x.TargetPort == y.TargetPort && x.Protocol == y.Protocol
	})
}

func (a *Applier) setOwner(ro *v1alpha1.Rollout, obj client.Object) error {
	if obj.GetNamespace() != ro.Namespace {
		return nil
	}
	gvk := v1alpha1.GroupVersion.WithKind("Rollout")
	obj.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: ro.Name, UID: ro.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
	}})
	return nil
}

// applyTyped applies obj whole (a Service or route Stepwise owns), without
// its status.
func (a *Applier) applyTyped(ctx context.Context, obj client.Object, what string) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", what, err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	u := &unstructured.Unstructured{Object: m}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s: %w", what, err)
	}
	return nil
}

func (a *Applier) applyRoute(ctx context.Context, t Target, ref v1alpha1.HTTPRouteReference, plan Plan, res *Result) error {
	ro := t.Rollout
	tr := ro.Spec.TrafficRouting
	ns := ref.Namespace
	if ns == "" {
		ns = ro.Namespace
	}
	route := &gatewayv1.HTTPRoute{}
	if err := a.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, route); err != nil {
		return fmt.Errorf("getting HTTPRoute %s/%s: %w", ns, ref.Name, err)
	}
	idx, err := SelectRule(route, ref, tr.StableService)
	if err != nil {
		return err
	}
	rules, err := WeightedRules(route.Spec.Rules, idx, tr.StableService, tr.CanaryService.Name, plan.CanaryWeight)
	if err != nil {
		return fmt.Errorf("HTTPRoute %s/%s: %w", ns, ref.Name, err)
	}
	if !apiequality.Semantic.DeepEqual(rules, route.Spec.Rules) {
		if live := CanaryWeightOf(route.Spec.Rules, idx, tr.CanaryService.Name); live != t.LastWeight {
			// Not what we left: another writer changed the rules since.
			if others := otherManagers(route.ManagedFields, []string{"spec", "rules"}); len(others) > 0 {
				res.Conflicts = append(res.Conflicts, fmt.Sprintf("HTTPRoute %s/%s: spec.rules (weight %d, Stepwise set %d) by %s", ns, ref.Name, live, t.LastWeight, strings.Join(others, ", ")))
			}
		}
		apply := &gatewayv1.HTTPRoute{}
		apply.APIVersion, apply.Kind = gatewayv1.GroupVersion.String(), "HTTPRoute"
		apply.Namespace, apply.Name = ns, ref.Name
		apply.Spec.Rules = rules
		if err := a.applyRouteSpec(ctx, apply); err != nil {
			return err
		}
		res.Applied = true
		if err := a.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, route); err != nil {
			return fmt.Errorf("reading back HTTPRoute %s/%s: %w", ns, ref.Name, err)
		}
	}
	res.Weight = min(res.Weight, CanaryWeightOf(route.Spec.Rules, idx, tr.CanaryService.Name))
	if err := a.accepted(ctx, route, res); err != nil {
		return err
	}

	canary, err := CanaryRoute(route, idx, tr.StableService, tr.CanaryService.Name, plan.Matches)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: CanaryRouteName(ref.Name)}
	current := &gatewayv1.HTTPRoute{}
	err = a.Reader.Get(ctx, key, current)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting HTTPRoute %s: %w", key, err)
	}
	exists := err == nil
	switch {
	case canary == nil && exists:
		if err := a.Client.Delete(ctx, current); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting HTTPRoute %s: %w", key, err)
		}
		res.Applied = true
	case canary != nil:
		if err := a.setOwner(ro, canary); err != nil {
			return err
		}
		hash, err := specHash(canary.Spec)
		if err != nil {
			return err
		}
		canary.Annotations = map[string]string{specHashAnnotation: hash}
		// The API server defaults fields, so the stored spec never equals
		// the applied one: what was applied is recorded as a hash.
		if !exists || current.Annotations[specHashAnnotation] != hash {
			if err := a.applyTyped(ctx, canary, "HTTPRoute "+key.String()); err != nil {
				return err
			}
			res.Applied = true
			if err := a.Reader.Get(ctx, key, current); err != nil {
				return fmt.Errorf("reading back HTTPRoute %s: %w", key, err)
			}
		}
		return a.accepted(ctx, current, res)
	}
	return nil
}

// applyRouteSpec applies spec.rules alone: spec.rules is an atomic list,
// so Stepwise takes the whole list over (as git wrote it, but for the
// selected rule's backendRefs) and leaves parents and hostnames to git.
func (a *Applier) applyRouteSpec(ctx context.Context, route *gatewayv1.HTTPRoute) error {
	rules, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&route.Spec)
	if err != nil {
		return fmt.Errorf("encoding HTTPRoute %s/%s: %w", route.Namespace, route.Name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": route.APIVersion, "kind": route.Kind,
		"metadata": map[string]any{"name": route.Name, "namespace": route.Namespace},
		"spec":     map[string]any{"rules": rules["rules"]},
	}}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the rules of HTTPRoute %s/%s: %w", route.Namespace, route.Name, err)
	}
	return nil
}

// accepted checks the route's status for each parent Gateway that exists:
// its entry must say Accepted=True for the route's current generation. A
// parent whose Gateway is absent (no Gateway API implementation here) is
// not waited for.
func (a *Applier) accepted(ctx context.Context, route *gatewayv1.HTTPRoute, res *Result) error {
	for _, p := range route.Spec.ParentRefs {
		if ptr.Deref(p.Kind, "Gateway") != "Gateway" || ptr.Deref(p.Group, gatewayv1.GroupName) != gatewayv1.GroupName {
			continue
		}
		ns := string(ptr.Deref(p.Namespace, gatewayv1.Namespace(route.Namespace)))
		exists, err := a.gatewayExists(ctx, client.ObjectKey{Namespace: ns, Name: string(p.Name)}, res)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		ok := false
		for _, s := range route.Status.Parents {
			if s.ParentRef.Name != p.Name || string(ptr.Deref(s.ParentRef.Namespace, gatewayv1.Namespace(route.Namespace))) != ns {
				continue
			}
			c := apimeta.FindStatusCondition(s.Conditions, string(gatewayv1.RouteConditionAccepted))
			ok = ok || (c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration >= route.Generation)
		}
		if !ok {
			res.Accepted = false
			res.Waiting = fmt.Sprintf("Gateway %s/%s has not accepted HTTPRoute %s/%s generation %d", ns, p.Name, route.Namespace, route.Name, route.Generation)
		}
	}
	return nil
}

// gatewayExists reads a parent Gateway's metadata once per Apply.
func (a *Applier) gatewayExists(ctx context.Context, key client.ObjectKey, res *Result) (bool, error) {
	if exists, ok := res.gateways[key]; ok {
		return exists, nil
	}
	gw := &metav1.PartialObjectMetadata{}
	gw.SetGroupVersionKind(schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "Gateway"})
	err := a.Reader.Get(ctx, key, gw)
	switch {
	case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
		res.gateways[key] = false
	case err != nil:
		return false, fmt.Errorf("getting Gateway %s: %w", key, err)
	default:
		res.gateways[key] = true
	}
	return res.gateways[key], nil
}

// otherManagers lists the managers other than FieldManager whose managed
// fields hold path (the main resource only).
func otherManagers(entries []metav1.ManagedFieldsEntry, path []string) []string {
	return slices.DeleteFunc(managersOf(entries, path), func(m string) bool { return m == FieldManager })
}

// managersOf lists the managers whose managed fields hold path (the main
// resource only).
func managersOf(entries []metav1.ManagedFieldsEntry, path []string) []string {
	var names []string
	for _, e := range entries {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		if ownsPath(e, path) && !slices.Contains(names, e.Manager) {
			names = append(names, e.Manager)
		}
	}
	slices.Sort(names)
	return names
}

func ownsPath(e metav1.ManagedFieldsEntry, path []string) bool {
	set := &fieldpath.Set{}
	if err := set.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
		return false
	}
	p := make(fieldpath.Path, 0, len(path))
	for _, name := range path {
		p = append(p, fieldpath.PathElement{FieldName: ptr.To(name)})
	}
	return set.Has(p)
}
