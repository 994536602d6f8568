package gitops

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	httpRouteGVK    = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}
	gatewayGVK      = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "Gateway"}
	gatewayClassGVK = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "GatewayClass"}
)

const (
	// examples/traffic's files, committed beside the CloneSet (the tools
	// apply the folder examples/rollout).
	trafficDir      = "examples/traffic"
	servicePath     = "examples/rollout/service.yaml"
	routePath       = "examples/rollout/httproute.yaml"
	gatewayName     = "edge" // the route's parent, as httproute.yaml names it
	gatewayCtrlName = "stepwise.dev/test-gateway"
	// trafficPause is step 1's pause: longer than two of either tool's
	// intervals, so the tool re-applies or compares the route while it
	// carries the step's weight.
	trafficPause = "25s"
)

// routeBackends says where rule app of route r sends ("web" as git has
// it, "web=90 web-canary=10" while weighted) and the canary's weight.
func routeBackends(r *unstructured.Unstructured) (string, int64) {
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	for _, rule := range rules {
		m, _ := rule.(map[string]any)
		if m["name"] != "app" {
			continue
		}
		refs, _ := m["backendRefs"].([]any)
		var parts []string
		var canary int64
		for _, ref := range refs {
			b, _ := ref.(map[string]any)
			name, _ := b["name"].(string)
			w, weighted := b["weight"].(int64)
			if name == "web-canary" {
				canary = w
			}
			if weighted && len(refs) > 1 {
				name += fmt.Sprintf("=%d", w)
			}
			parts = append(parts, name)
		}
		return strings.Join(parts, " "), canary
	}
	return "no rule app", 0
}

// trafficFiles are examples/traffic's Service, route and Rollout as the
// team commits them beside the CloneSet, the Rollout with the test's
// times (step 1 paused trafficPause).
func trafficFiles(t *testing.T, root, promURL string) map[string][]byte {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(root, trafficDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ro := shortRollout(t, root, filepath.Join(trafficDir, "rollout.yaml"), promURL)
	steps, _, _ := unstructured.NestedSlice(ro.Object, "spec", "steps")
	first, _ := steps[0].(map[string]any)
	if first["traffic"] == nil {
		t.Fatalf("%s/rollout.yaml: step 1 sets no traffic", trafficDir)
	}
	first["pause"] = map[string]any{"duration": trafficPause}
	set(t, ro, steps, "spec", "steps")
	return map[string][]byte{
		servicePath: read("service.yaml"),
		routePath:   read("httproute.yaml"),
		rolloutPath: toYAML(t, ro),
	}
}

// startGateway stands in for a Gateway implementation, which kwok has
// none of: a GatewayClass and Gateway edge (the platform's, not git's),
// and every route of ns that names edge Accepted, with its references
// resolved, at its current generation, as a controller writes it. No
// request is sent anywhere.
func startGateway(t *testing.T, b *bed, ns string) {
	t.Helper()
	ctx := t.Context()
	class := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": gatewayName},
		"spec":     map[string]any{"controllerName": gatewayCtrlName},
	}}
	class.SetGroupVersionKind(gatewayClassGVK)
	gw := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": gatewayName, "namespace": ns},
		"spec": map[string]any{
			"gatewayClassName": gatewayName,
			"listeners":        []any{map[string]any{"name": "http", "protocol": "HTTP", "port": int64(80)}},
		},
	}}
	gw.SetGroupVersionKind(gatewayGVK)
	for _, u := range []*unstructured.Unstructured{class, gw} {
		if err := b.client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	go func() {
		for {
			acceptRoutes(ctx, b.client, ns)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

func acceptRoutes(ctx context.Context, c client.Client, ns string) {
	routes := &unstructured.UnstructuredList{}
	routes.SetGroupVersionKind(httpRouteGVK.GroupVersion().WithKind("HTTPRouteList"))
	if err := c.List(ctx, routes, client.InNamespace(ns)); err != nil {
		return
	}
	for i := range routes.Items {
		r := &routes.Items[i]
		gen := r.GetGeneration()
		parents, _, _ := unstructured.NestedSlice(r.Object, "status", "parents")
		if len(parents) == 1 {
			conds, _ := parents[0].(map[string]any)["conditions"].([]any)
			if len(conds) > 0 && conds[0].(map[string]any)["observedGeneration"] == gen {
				continue
			}
		}
		now := metav1.Now().UTC().Format(time.RFC3339)
		cond := func(typ string) map[string]any {
			return map[string]any{"type": typ, "status": "True", "reason": typ, "message": "", "observedGeneration": gen, "lastTransitionTime": now}
		}
		parent := map[string]any{
			"parentRef":      map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gatewayName},
			"controllerName": gatewayCtrlName,
			"conditions":     []any{cond("Accepted"), cond("ResolvedRefs")},
		}
		if err := unstructured.SetNestedSlice(r.Object, []any{parent}, "status", "parents"); err != nil {
			continue
		}
		// A conflict (the route changed meanwhile) is retried next round.
		_ = c.Status().Update(ctx, r)
	}
}

// 6. The HTTPRoute and the stable Service come from git too
// (examples/traffic). During a release the tool never writes git's rule
// over the Rollout's weights, however many intervals pass while a step
// holds them, and once the release is promoted the tool sees no difference
// from git: the route and the Service are git's again. Then git changes
// the route's rules, which the tool applies (Argo CD only with the route's
// ignore rule out of the Application, as docs/gitops.md says).
func storyTraffic(t *testing.T, s *stand) {
	startGateway(t, s.bed, s.ns)
	t0 := time.Now()
	c := s.repo.commit("web: traffic through HTTPRoute web", trafficFiles(t, s.bed.root, s.bed.prom.URL()))
	s.rec.committed(c)
	s.waitApplied(t, "the Service, the route and the Rollout with trafficRouting to be applied", c)
	logTimeline(t, s.rec.since(t0))
	gitSvc := &corev1.Service{}
	if err := s.bed.client.Get(t.Context(), client.ObjectKey{Namespace: s.ns, Name: "web"}, gitSvc); err != nil {
		t.Fatal(err)
	}
	if got := s.bed.app(t.Context(), s.ns).route; got != "web" {
		t.Fatalf("at rest the route's rule app sends to %q, not git's web", got)
	}

	if s.setTimeout != nil {
		// With wait: true, Flux applies a commit once and then waits for
		// health: a release that ends within the timeout sees no re-apply.
		// One that outlasts it (a long plan, a step waiting for a promote)
		// fails the health check and is applied again every retryInterval
		// while it runs: this release outlasts 15s.
		s.setTimeout(t, "15s")
		defer s.setTimeout(t, "3m")
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpTraffic(t)
		}
	})
	samples := s.release(t, "6.7.6")
	first, last := -1, -1
	for i, x := range samples {
		if x.app.canaryWeight > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		t.Fatal("the route never carried a canary weight during the release")
	}
	for _, x := range samples[first : last+1] {
		if x.app.canaryWeight == 0 {
			t.Errorf("%s put git's rule back over the weights mid-release: %s", s.tool, x.line())
		}
	}
	conflicts := map[string]bool{}
	for _, x := range samples {
		if x.app.trafficConflict != "" {
			conflicts[x.app.trafficConflict] = true
		}
	}
	for msg := range conflicts {
		t.Errorf("%s wrote git's form over what the Rollout set: TrafficConflict %s", s.tool, msg)
	}
	// The proof needs the tool to have gone back to git while the route
	// carried weights.
	passes := s.rec.passesBetween(samples[first].at, samples[last].at)
	t.Logf("%s applied or compared git %d times while the route carried weights (%s)", s.tool, passes, samples[last].at.Sub(samples[first].at).Round(time.Second))
	if passes == 0 {
		t.Errorf("%s never applied or compared git while the route carried weights: nothing was proven", s.tool)
	}

	// After the release: several intervals, nothing differs from git.
	t1 := time.Now()
	s.holdSteady(t, 2*s.interval+5*time.Second)
	if s.rec.passesBetween(t1, time.Now()) == 0 {
		t.Errorf("%s never applied or compared git after the release: nothing was proven", s.tool)
	}
	for _, x := range s.rec.since(t1) {
		if x.tool.settledBad || x.app.route != "web" {
			t.Errorf("after the release %s reported a difference or the route was not git's: %s", s.tool, x.line())
		}
	}
	svc := &corev1.Service{}
	if err := s.bed.client.Get(t.Context(), client.ObjectKeyFromObject(gitSvc), svc); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(svc.Spec.Selector, gitSvc.Spec.Selector) {
		t.Errorf("after the release the stable Service selects %v, git %v", svc.Spec.Selector, gitSvc.Spec.Selector)
	}
	logTimeline(t, s.rec.since(t1))

	// Between releases the route is git's to change, the ignored rule
	// included: Flux applies a new match of rule app. Argo CD does not
	// while the route's ignore rule is there: with RespectIgnoreDifferences
	// a sync takes the ignored rule's list whole from the cluster (a JSON
	// merge patch replaces lists), so the route stays OutOfSync and
	// self-heal syncs it in vain; taken out of the Application for that
	// sync, git's route is applied, and it goes back before the next
	// release.
	t2 := time.Now()
	route := s.repo.read(routePath)
	const oldPath, newPath = "        value: /\n", "        value: /shop\n"
	if !strings.Contains(string(route), oldPath) {
		t.Fatalf("%s has no match on path /", routePath)
	}
	c = s.repo.commit("web: route /shop", map[string][]byte{routePath: []byte(strings.Replace(string(route), oldPath, newPath, 1))})
	s.rec.committed(c)
	routePathNow := func() string {
		r, err := s.bed.get(t.Context(), httpRouteGVK, s.ns, "web")
		if err != nil {
			return err.Error()
		}
		return rulePath(r)
	}
	if s.ignoreRoute != nil {
		eventually(t, s.tool+" to compare the route commit", func() (bool, string) {
			ts := s.status(t.Context())
			return ts.revision == c && s.rec.passesBetween(t2, time.Now()) >= 3, ts.text
		})
		s.holdSteady(t, 3*s.interval)
		if got := routePathNow(); got != "/" {
			t.Errorf("%s applied the route's new match with the ignore rule in place (%s): the docs say it does not", s.tool, got)
		}
		s.ignoreRoute(t, false)
	}
	applied := func() (bool, string) {
		ts := s.status(t.Context())
		path := routePathNow()
		return ts.ready && ts.revision == c && path == "/shop", ts.text + " | path " + path
	}
	eventually(t, s.tool+" to apply the route's new match", applied)
	if s.ignoreRoute != nil {
		s.ignoreRoute(t, true)
		s.holdSteady(t, 2*s.interval)
		eventually(t, s.tool+" to stay Synced on git's route with the ignore rule back", applied)
	}
	logTimeline(t, s.rec.since(t2))
}

// rulePath is the path of rule app's first match.
func rulePath(r *unstructured.Unstructured) string {
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	for _, rule := range rules {
		m, _ := rule.(map[string]any)
		if m["name"] != "app" {
			continue
		}
		matches, _ := m["matches"].([]any)
		if len(matches) == 0 {
			return ""
		}
		v, _, _ := unstructured.NestedString(matches[0].(map[string]any), "path", "value")
		return v
	}
	return ""
}

// dumpTraffic logs the route, the stable Service (with their field
// managers) and what the tool says of each object, for a failed story.
func (s *stand) dumpTraffic(t *testing.T) {
	ctx := context.Background()
	for _, o := range []struct {
		gvk  schema.GroupVersionKind
		ns   string
		name string
	}{
		{httpRouteGVK, s.ns, "web"},
		{corev1.SchemeGroupVersion.WithKind("Service"), s.ns, "web"},
		{applicationGVK, "argocd", "web"},
		{kustomizationGVK, fluxNamespace, "web"},
	} {
		u, err := s.bed.get(ctx, o.gvk, o.ns, o.name)
		if err != nil {
			continue
		}
		t.Logf("%s %s/%s:\n%s", o.gvk.Kind, o.ns, o.name, toYAML(t, u))
	}
}
