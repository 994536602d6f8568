package traffic

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func grant(from gatewayv1.ReferenceGrantFrom, to ...gatewayv1.ReferenceGrantTo) gatewayv1.ReferenceGrant {
	g := gatewayv1.ReferenceGrant{}
	g.Spec.From = []gatewayv1.ReferenceGrantFrom{from}
	g.Spec.To = to
	return g
}

func TestUngrantedServices(t *testing.T) {
	routesOf := func(ns string) gatewayv1.ReferenceGrantFrom {
		return gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(ns)}
	}
	services := gatewayv1.ReferenceGrantTo{Group: "", Kind: "Service"}
	service := func(name string) gatewayv1.ReferenceGrantTo {
		return gatewayv1.ReferenceGrantTo{Group: "", Kind: "Service", Name: ptr.To(gatewayv1.ObjectName(name))}
	}
	both := []string{"web", "web-canary"}
	cases := []struct {
		name    string
		grants  []gatewayv1.ReferenceGrant
		routeNS string
		want    []string
	}{
		{"a route in the Services' namespace needs no grant", nil, "shop", nil},
		{"no grant", nil, "edge", both},
		{"every Service of the namespace", []gatewayv1.ReferenceGrant{grant(routesOf("edge"), services)}, "edge", nil},
		{"both Services by name, in two grants", []gatewayv1.ReferenceGrant{grant(routesOf("edge"), service("web")), grant(routesOf("edge"), service("web-canary"))}, "edge", nil},
		{"the stable Service alone: the canary is missing", []gatewayv1.ReferenceGrant{grant(routesOf("edge"), service("web"))}, "edge", []string{"web-canary"}},
		{"a grant for the routes of another namespace", []gatewayv1.ReferenceGrant{grant(routesOf("other"), services)}, "edge", both},
		{"a grant for GRPCRoutes", []gatewayv1.ReferenceGrant{grant(gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "GRPCRoute", Namespace: "edge"}, services)}, "edge", both},
		{"a grant to Secrets", []gatewayv1.ReferenceGrant{grant(routesOf("edge"), gatewayv1.ReferenceGrantTo{Group: "", Kind: "Secret"})}, "edge", both},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := UngrantedServices(tc.grants, tc.routeNS, "shop", both); !slices.Equal(got, tc.want) {
				t.Fatalf("UngrantedServices = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMissingGrantErrorNamesTheGrant(t *testing.T) {
	msg := (&MissingGrantError{Route: "edge/web", Namespace: "shop", Services: []string{"web", "web-canary"}}).Error()
	for _, part := range []string{"HTTPRoute edge/web", "Service web, web-canary", "no ReferenceGrant in namespace shop", "namespace: edge", "kind: Service"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q does not say %q", msg, part)
		}
	}
}
