// Package gitmanifests is what a team commits for traffic routing, as the
// unit, integration and end-to-end tests of traffic routing apply it: the
// app's HTTPRoute and stable Service, and Apply, which writes one as a
// GitOps tool does.
package gitmanifests

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Route is route web in ns as git has it: a redirect rule of the team's
// own ("legacy"), and the app's rule ("app") with a path match and a
// header filter, sending to Service web on port 80 without weights. Its
// parent is Gateway edge of ns.
func Route(ns string) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{}
	r.APIVersion, r.Kind = gatewayv1.GroupVersion.String(), "HTTPRoute"
	r.Namespace, r.Name = ns, "web"
	r.Spec.ParentRefs = []gatewayv1.ParentReference{{Name: "edge"}}
	r.Spec.Hostnames = []gatewayv1.Hostname{"shop.example"}
	r.Spec.Rules = []gatewayv1.HTTPRouteRule{
		{
			Name:    ptr.To(gatewayv1.SectionName("legacy")),
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To("/old")}}},
			Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To("/")}}}},
		},
		{
			Name:    ptr.To(gatewayv1.SectionName("app")),
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}}},
			Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "x-team", Value: "shop"}}}}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: "web", Port: ptr.To(gatewayv1.PortNumber(80)),
			}}}},
		},
	}
	return r
}

// Service is stable Service web in ns as git has it (selecting app=web,
// port 80 to 8080), with the labels by which Argo CD and Flux track it.
func Service(ns string) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{
			"app": "web", "app.kubernetes.io/instance": "shop", "kustomize.toolkit.fluxcd.io/name": "apps",
		}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// Apply server-side applies obj whole (without its status) as manager:
// with force, as Flux does, or without, as kubectl apply --server-side
// does, failing on a conflict.
func Apply(ctx context.Context, c client.Client, manager string, obj client.Object, force bool) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", obj.GetName(), err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	opts := []client.ApplyOption{client.FieldOwner(manager)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: m}), opts...); err != nil {
		return fmt.Errorf("applying %s as %s: %w", obj.GetName(), manager, err)
	}
	return nil
}
