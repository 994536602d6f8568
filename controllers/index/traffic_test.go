package index

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TestRolloutTraffic: a Rollout is found from each object its traffic
// routing reads, under the key the watch computes from that object.
func TestRolloutTraffic(t *testing.T) {
	ro := &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	if keys := rolloutTraffic(ro); keys != nil {
		t.Fatalf("without traffic routing: %v, want none", keys)
	}
	ro.Spec.TrafficRouting = &v1alpha1.TrafficRouting{
		StableService: "web",
		CanaryService: v1alpha1.CanaryService{Name: "web-canary"},
		HTTPRoutes:    []v1alpha1.HTTPRouteReference{{Name: "web"}, {Name: "edge-web", Namespace: "edge"}},
	}
	keys := rolloutTraffic(ro)
	for _, obj := range []struct{ kind, ns, name string }{
		{"Service", "shop", "web"},
		{"Service", "shop", "web-canary"},
		{"HTTPRoute", "shop", "web"},
		{"HTTPRoute", "shop", "web-stepwise-canary"},
		{"HTTPRoute", "edge", "edge-web"},
		{"HTTPRoute", "edge", "edge-web-stepwise-canary"},
		{"ReferenceGrant", "shop", "routes-from-edge"},
		// The route owner's consent, in the route's namespace.
		{"ReferenceGrant", "edge", "rollouts-from-shop"},
	} {
		if !slices.Contains(keys, TrafficKey(obj.kind, obj.ns, obj.name)) {
			t.Errorf("%s %s/%s does not map to the Rollout (keys %v)", obj.kind, obj.ns, obj.name, keys)
		}
	}
	for _, obj := range []struct{ kind, ns, name string }{
		{"Service", "edge", "web"},
		{"HTTPRoute", "shop", "edge-web"},
		{"ReferenceGrant", "other", "any"},
	} {
		if slices.Contains(keys, TrafficKey(obj.kind, obj.ns, obj.name)) {
			t.Errorf("%s %s/%s maps to the Rollout, which does not read it (keys %v)", obj.kind, obj.ns, obj.name, keys)
		}
	}
	ro.Spec.TrafficRouting.HTTPRoutes = ro.Spec.TrafficRouting.HTTPRoutes[:1]
	if slices.Contains(rolloutTraffic(ro), TrafficKey("ReferenceGrant", "shop", "")) {
		t.Error("a Rollout whose routes are all in its namespace is brought back by ReferenceGrants")
	}
}
