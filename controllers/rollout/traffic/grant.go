package traffic

import (
	"context"
	"fmt"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// UngrantedServices returns those of services (Services in servicesNS)
// that an HTTPRoute in routeNS may not send to under grants (the
// ReferenceGrants of servicesNS): none when the route is in the Services'
// namespace; otherwise every Service that no grant allows, a grant
// allowing when one of its from entries is HTTPRoutes of routeNS and one
// of its to entries is that Service, or every Service (no name).
func UngrantedServices(grants []gatewayv1.ReferenceGrant, routeNS, servicesNS string, services []string) []string {
	if routeNS == servicesNS {
		return nil
	}
	var missing []string
	for _, svc := range services {
		if !granted(grants, routeNS, svc) {
			missing = append(missing, svc)
		}
	}
	return missing
}

func granted(grants []gatewayv1.ReferenceGrant, routeNS, svc string) bool {
	for _, g := range grants {
		from := false
		for _, f := range g.Spec.From {
			from = from || (f.Group == gatewayv1.GroupName && f.Kind == "HTTPRoute" && string(f.Namespace) == routeNS)
		}
		if !from {
			continue
		}
		for _, to := range g.Spec.To {
			if to.Group == "" && to.Kind == "Service" && (to.Name == nil || string(*to.Name) == svc) {
				return true
			}
		}
	}
	return false
}

// MissingGrantError says that a route in another namespace than the
// Services has no ReferenceGrant to send to them: the Gateway would refuse
// the reference (ResolvedRefs=False, RefNotPermitted) and the requests for
// those backends would fail.
type MissingGrantError struct {
	// Route is the route ("namespace/name").
	Route string
	// Namespace is the Services' namespace, where the grant must be.
	Namespace string
	// Services are the Services no grant allows.
	Services []string
}

func (e *MissingGrantError) Error() string {
	routeNS, _, _ := strings.Cut(e.Route, "/")
	return fmt.Sprintf("HTTPRoute %s may not send to Service %s in namespace %s: no ReferenceGrant in namespace %s allows HTTPRoutes of namespace %s (from: [{group: %s, kind: HTTPRoute, namespace: %s}], to: [{group: \"\", kind: Service}]); create one",
		e.Route, strings.Join(e.Services, ", "), e.Namespace, e.Namespace, routeNS, gatewayv1.GroupName, routeNS)
}

// ReferenceGrantGVK is read (and watched) at v1beta1, the version every
// Gateway API install since v0.6 serves (v1 came later, with the same
// schema).
var ReferenceGrantGVK = schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1beta1", Kind: "ReferenceGrant"}

// CheckGrants returns a MissingGrantError for the first route of t in
// another namespace than the Services that may not send to both of them.
// Grants are listed around the cache, once, and only when a route is in
// another namespace.
func (a *Applier) CheckGrants(ctx context.Context, t Target) error {
	ro := t.Rollout
	tr := ro.Spec.TrafficRouting
	var grants []gatewayv1.ReferenceGrant
	listed := false
	for _, ref := range tr.HTTPRoutes {
		if ref.Namespace == "" || ref.Namespace == ro.Namespace {
			continue
		}
		if !listed {
			var err error
			if grants, err = a.listGrants(ctx, ro.Namespace); err != nil {
				return err
			}
			listed = true
		}
		if missing := UngrantedServices(grants, ref.Namespace, ro.Namespace, []string{tr.StableService, tr.CanaryService.Name}); len(missing) > 0 {
			return &MissingGrantError{Route: ref.Namespace + "/" + ref.Name, Namespace: ro.Namespace, Services: missing}
		}
	}
	return nil
}

func (a *Applier) listGrants(ctx context.Context, ns string) ([]gatewayv1.ReferenceGrant, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ReferenceGrantGVK.GroupVersion().WithKind(ReferenceGrantGVK.Kind + "List"))
	if err := a.Reader.List(ctx, list, client.InNamespace(ns)); err != nil {
		if apimeta.IsNoMatchError(err) {
			// No ReferenceGrant API: nothing can grant the reference.
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
