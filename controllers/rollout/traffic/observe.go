package traffic

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
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

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Target is one Rollout's routing, what names a revision on its Pods, and
// what the Rollout recorded of its last writes.
type Target struct {
	Rollout *v1alpha1.Rollout
	// LabelKey is the Pod label the Services select a revision by, and
	// LabelValue maps a revision to its value.
	LabelKey   string
	LabelValue func(revision string) string
	// LastWeight is the canary weight Stepwise last set
	// (status.traffic.canaryWeight): a route found carrying another was
	// changed by someone else.
	LastWeight int32
	// LastStable and LastCanary are the revisions Stepwise last made the
	// stable and canary Services select (status.traffic.stableRevision
	// and canaryRevision; "" for none): a Service found selecting another
	// was changed by someone else.
	LastStable, LastCanary string
	// Written is status.traffic.written: what the Rollout may have written
	// into objects it does not own.
	Written *v1alpha1.TrafficWritten
	// Release takes out what Written records and writes nothing else,
	// whatever spec.trafficRouting says (the Rollout is being deleted, or
	// no longer routes traffic).
	Release bool
	// Namespaces the manager may reach; empty for every namespace. A route
	// elsewhere is neither read nor written.
	Namespaces []string
}

// routing is the spec's routing, nil when t releases.
func (t Target) routing() *v1alpha1.TrafficRouting {
	if t.Release {
		return nil
	}
	return t.Rollout.Spec.TrafficRouting
}

// reachable reports whether the manager may reach namespace ns.
func (t Target) reachable(ns string) bool {
	return len(t.Namespaces) == 0 || ns == t.Rollout.Namespace || slices.Contains(t.Namespaces, ns)
}

// routeNamespace is where ref's route is.
func (t Target) routeNamespace(ref v1alpha1.HTTPRouteReference) string {
	if ref.Namespace == "" {
		return t.Rollout.Namespace
	}
	return ref.Namespace
}

// routeKeys are the routes t touches: those of the spec, then those
// Written records, each once.
func (t Target) routeKeys() []types.NamespacedName {
	var keys []types.NamespacedName
	add := func(k types.NamespacedName) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if tr := t.routing(); tr != nil {
		for _, ref := range tr.HTTPRoutes {
			add(types.NamespacedName{Namespace: t.routeNamespace(ref), Name: ref.Name})
		}
	}
	if t.Written != nil {
		for _, w := range t.Written.Routes {
			add(types.NamespacedName{Namespace: w.Namespace, Name: w.Name})
		}
	}
	return keys
}

// serviceNames are the Services t touches: the spec's stable and canary
// Services, then those Written records, each once.
func (t Target) serviceNames() []string {
	var names []string
	if tr := t.routing(); tr != nil {
		names = append(names, tr.StableService, tr.CanaryService.Name)
	}
	if t.Written != nil {
		for _, n := range t.Written.Services {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// World is what a round reads of the objects a Rollout's traffic routing
// touches, all read around the cache: the cache holds only their metadata,
// and managed fields name who else writes.
type World struct {
	// Services by name, in the Rollout's namespace; nil when absent.
	Services map[string]*corev1.Service
	// Routes by key: the route and Stepwise's route beside it.
	Routes map[types.NamespacedName]RouteView
	// Gateways says, for each parent Gateway of a route, whether it exists.
	Gateways map[client.ObjectKey]bool
	// ServiceGrants are the ReferenceGrants of the Rollout's namespace;
	// listed only when a route of the spec is in another namespace.
	ServiceGrants []gatewayv1.ReferenceGrant
	// RouteGrants are the ReferenceGrants of each other namespace that
	// holds a route.
	RouteGrants map[string][]gatewayv1.ReferenceGrant
}

// RouteView is one route as read.
type RouteView struct {
	// Route is nil when it does not exist.
	Route *gatewayv1.HTTPRoute
	// Canary is the route named CanaryRouteName beside it; nil when absent.
	Canary *gatewayv1.HTTPRoute
	// Err is why the route could not be read (the API server refused the
	// manager), or why it was not read (a namespace it does not watch).
	Err error
}

// Observe reads what t touches.
func (a *Applier) Observe(ctx context.Context, t Target) (*World, error) {
	ro := t.Rollout
	w := &World{
		Services:    map[string]*corev1.Service{},
		Routes:      map[types.NamespacedName]RouteView{},
		Gateways:    map[client.ObjectKey]bool{},
		RouteGrants: map[string][]gatewayv1.ReferenceGrant{},
	}
	for _, name := range t.serviceNames() {
		svc := &corev1.Service{}
		err := a.Reader.Get(ctx, client.ObjectKey{Namespace: ro.Namespace, Name: name}, svc)
		switch {
		case apierrors.IsNotFound(err):
			w.Services[name] = nil
		case err != nil:
			return nil, fmt.Errorf("getting Service %s: %w", name, err)
		default:
			w.Services[name] = svc
		}
	}
	crossNamespace := false
	if tr := t.routing(); tr != nil {
		for _, ref := range tr.HTTPRoutes {
			crossNamespace = crossNamespace || t.routeNamespace(ref) != ro.Namespace
		}
	}
	if crossNamespace {
		grants, err := a.listGrants(ctx, ro.Namespace)
		if err != nil {
			return nil, err
		}
		w.ServiceGrants = grants
	}
	for _, key := range t.routeKeys() {
		if !t.reachable(key.Namespace) {
			w.Routes[key] = RouteView{Err: fmt.Errorf("HTTPRoute %s is in namespace %s, which the manager does not watch (--watch-namespaces)", key, key.Namespace)}
			continue
		}
		view, err := a.observeRoute(ctx, key)
		if err != nil {
			return nil, err
		}
		w.Routes[key] = view
		if view.Err != nil {
			continue
		}
		if _, listed := w.RouteGrants[key.Namespace]; key.Namespace != ro.Namespace && !listed {
			grants, err := a.listGrants(ctx, key.Namespace)
			if err != nil {
				return nil, err
			}
			w.RouteGrants[key.Namespace] = grants
		}
		for _, r := range []*gatewayv1.HTTPRoute{view.Route, view.Canary} {
			if err := a.observeParents(ctx, r, w.Gateways); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// observeRoute reads a route and Stepwise's route beside it. A route the
// API server does not let the manager read is reported in the view, not
// as an error: it is the route's namespace's decision.
func (a *Applier) observeRoute(ctx context.Context, key types.NamespacedName) (RouteView, error) {
	var view RouteView
	for _, r := range []struct {
		name string
		into **gatewayv1.HTTPRoute
	}{{key.Name, &view.Route}, {CanaryRouteName(key.Name), &view.Canary}} {
		route := &gatewayv1.HTTPRoute{}
		err := a.Reader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: r.name}, route)
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsForbidden(err):
			view.Err = fmt.Errorf("the API server does not let the manager read HTTPRoute %s/%s", key.Namespace, r.name)
			return view, nil
		case err != nil:
			return view, fmt.Errorf("getting HTTPRoute %s/%s: %w", key.Namespace, r.name, err)
		default:
			*r.into = route
		}
	}
	return view, nil
}

// observeParents reads whether each parent Gateway of route exists, once
// per Gateway.
func (a *Applier) observeParents(ctx context.Context, route *gatewayv1.HTTPRoute, gateways map[client.ObjectKey]bool) error {
	if route == nil {
		return nil
	}
	for _, p := range route.Spec.ParentRefs {
		key, ok := gatewayKey(route, p)
		if !ok {
			continue
		}
		if _, seen := gateways[key]; seen {
			continue
		}
		gw := &metav1.PartialObjectMetadata{}
		gw.SetGroupVersionKind(schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "Gateway"})
		err := a.Reader.Get(ctx, key, gw)
		switch {
		case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) || apierrors.IsForbidden(err):
			gateways[key] = false
		case err != nil:
			return fmt.Errorf("getting Gateway %s: %w", key, err)
		default:
			gateways[key] = true
		}
	}
	return nil
}

// gatewayKey is the Gateway a parentRef of route names; false when it
// names something else.
func gatewayKey(route *gatewayv1.HTTPRoute, p gatewayv1.ParentReference) (client.ObjectKey, bool) {
	if ptr.Deref(p.Kind, "Gateway") != "Gateway" || ptr.Deref(p.Group, gatewayv1.GroupName) != gatewayv1.GroupName {
		return client.ObjectKey{}, false
	}
	return client.ObjectKey{Namespace: string(ptr.Deref(p.Namespace, gatewayv1.Namespace(route.Namespace))), Name: string(p.Name)}, true
}

func (a *Applier) listGrants(ctx context.Context, ns string) ([]gatewayv1.ReferenceGrant, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ReferenceGrantGVK.GroupVersion().WithKind(ReferenceGrantGVK.Kind + "List"))
	if err := a.Reader.List(ctx, list, client.InNamespace(ns)); err != nil {
		if apimeta.IsNoMatchError(err) || apierrors.IsForbidden(err) {
			// No ReferenceGrant API, or none the manager may read: nothing
			// grants anything.
			return nil, nil
		}
		return nil, fmt.Errorf("listing ReferenceGrants in namespace %s: %w", ns, err)
	}
	grants := make([]gatewayv1.ReferenceGrant, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &grants[i]); err != nil {
			return nil, fmt.Errorf("decoding ReferenceGrant %s/%s: %w", ns, list.Items[i].GetName(), err)
		}
	}
	return grants, nil
}
