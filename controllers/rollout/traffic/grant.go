package traffic

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
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

// Consents reports whether grants (the ReferenceGrants of an HTTPRoute's
// namespace) let Rollouts of rolloutNS write the HTTPRoute named route: a
// grant whose from entries include Rollouts (group stepwise.dev) of
// rolloutNS and whose to entries include HTTPRoutes (all, or that one by
// name). It is the route owner's consent, in the Gateway API's own
// pattern: only the route's namespace can give it.
func Consents(grants []gatewayv1.ReferenceGrant, rolloutNS, route string) bool {
	for _, g := range grants {
		from := false
		for _, f := range g.Spec.From {
			from = from || (string(f.Group) == v1alpha1.GroupVersion.Group && f.Kind == "Rollout" && string(f.Namespace) == rolloutNS)
		}
		if !from {
			continue
		}
		for _, to := range g.Spec.To {
			if to.Group == gatewayv1.GroupName && to.Kind == "HTTPRoute" && (to.Name == nil || string(*to.Name) == route) {
				return true
			}
		}
	}
	return false
}

// MissingConsentError says that no ReferenceGrant in an HTTPRoute's
// namespace lets Rollouts of the Rollout's namespace write it.
type MissingConsentError struct {
	// Namespace and Route name the route, or Stepwise's route beside it.
	Namespace, Route string
	// RolloutNamespace is where the Rollout is.
	RolloutNamespace string
}

func (e *MissingConsentError) Error() string {
	return fmt.Sprintf("HTTPRoute %s/%s belongs to namespace %s, which has not consented to Rollouts of namespace %s writing it: "+
		"the route's owner must create a ReferenceGrant in namespace %s (from: [{group: %s, kind: Rollout, namespace: %s}], to: [{group: %s, kind: HTTPRoute, name: %s}]); until then Stepwise writes nothing into it",
		e.Namespace, e.Route, e.Namespace, e.RolloutNamespace, e.Namespace, v1alpha1.GroupVersion.Group, e.RolloutNamespace, gatewayv1.GroupName, e.Route)
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
