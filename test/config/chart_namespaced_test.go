package config_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/config/rbac"
	"github.com/stepwise-dev/stepwise/internal/manager"
	"github.com/stepwise-dev/stepwise/test/harness"
	"github.com/stepwise-dev/stepwise/test/shippedrbac"
)

// The values of a namespaced install for two teams, and the same with
// Roles only (no metrics endpoint, so no ClusterRole for its reviews).
const (
	namespacedValues = "{rbac: {namespaced: true}, watchNamespaces: [team-a, team-b]}"
	rolesOnlyValues  = "{rbac: {namespaced: true}, watchNamespaces: [team-a, team-b], metrics: {enabled: false}}"
)

// nsKey names an object by kind, namespace and name: a namespaced install
// has a Role of the same name in each watched namespace.
func nsKey(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// TestNamespacedChartInstallsConfigDefaultInRoles renders the chart with
// rbac.namespaced and compares it, field by field, with config/default
// changed only in what a namespaced install changes: ClusterRole
// stepwise-manager becomes a Role of the same rules in each watched
// namespace (the rules are the generated file's, not a copy), its binding a
// RoleBinding there; the metrics ClusterRoles carry the release's
// namespace, so several namespaced installs can share a cluster; the
// manager gets --watch-namespaces.
func TestNamespacedChartInstallsConfigDefaultInRoles(t *testing.T) {
	watched := []string{"team-a", "team-b"}
	var want []*unstructured.Unstructured
	for _, o := range render(t) {
		u := o.u.DeepCopy()
		switch o.key() {
		case "Namespace/" + namespace:
			continue
		case "ClusterRole/" + managerName, "ClusterRoleBinding/" + managerName:
			for _, ns := range watched {
				nsu := u.DeepCopy()
				nsu.SetKind(strings.TrimPrefix(u.GetKind(), "Cluster"))
				nsu.SetNamespace(ns)
				if nsu.GetKind() == "RoleBinding" {
					if err := unstructured.SetNestedField(nsu.Object, "Role", "roleRef", "kind"); err != nil {
						t.Fatal(err)
					}
				}
				want = append(want, nsu)
			}
			continue
		case "ClusterRole/" + metricsAuth, "ClusterRole/" + metricsReader:
			u.SetName(u.GetName() + "-" + namespace)
		case "ClusterRoleBinding/" + metricsAuth:
			u.SetName(u.GetName() + "-" + namespace)
			if err := unstructured.SetNestedField(u.Object, metricsAuth+"-"+namespace, "roleRef", "name"); err != nil {
				t.Fatal(err)
			}
		case "Deployment/" + managerName:
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			c["args"] = append(c["args"].([]any), "--"+manager.WatchNamespacesFlag+"="+strings.Join(watched, ","))
			if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				t.Fatal(err)
			}
		}
		want = append(want, u)
	}
	chart := map[string]*unstructured.Unstructured{}
	for _, o := range renderChart(t, namespacedValues) {
		chart[nsKey(o.u)] = withoutHelmLabels(t, o.u)
	}
	for _, w := range want {
		got, ok := chart[nsKey(w)]
		if !ok {
			t.Errorf("the namespaced chart installs no %s", nsKey(w))
			continue
		}
		delete(chart, nsKey(w))
		if diff := cmp.Diff(withoutVersionLabel(w).Object, got.Object); diff != "" {
			t.Errorf("%s differs from config/default's, namespaced (-want +helm):\n%s", nsKey(w), diff)
		}
	}
	for key := range chart {
		t.Errorf("the namespaced chart installs %s, which config/default has no counterpart of", key)
	}
}

// TestNamespacedChartValues checks what rbac.namespaced and metrics.enabled
// change, and what the chart refuses.
func TestNamespacedChartValues(t *testing.T) {
	args := func(t *testing.T, objs []object) []string {
		return find[*appsv1.Deployment](t, objs, "Deployment", managerName).Spec.Template.Spec.Containers[0].Args
	}
	t.Run("with metrics off a namespaced install grants Roles only", func(t *testing.T) {
		objs := renderChart(t, "{rbac: {namespaced: true}, watchNamespaces: [team-a], metrics: {enabled: false, serviceMonitor: {enabled: true}}}")
		for _, o := range objs {
			if k := o.u.GetKind(); k != "CustomResourceDefinition" && clusterScoped()[k] {
				t.Errorf("%s is cluster-scoped", o.key())
			}
			if k := o.u.GetKind(); k == "Service" || k == "ServiceMonitor" {
				t.Errorf("%s rendered with metrics off", o.key())
			}
		}
		if got := args(t, objs); !slices.Contains(got, "--metrics-bind-address=0") || slices.Contains(got, "--metrics-bind-address=:8443") {
			t.Errorf("args %q: want --metrics-bind-address=0", got)
		}
		for _, p := range find[*appsv1.Deployment](t, objs, "Deployment", managerName).Spec.Template.Spec.Containers[0].Ports {
			if p.Name == "metrics" {
				t.Errorf("port %+v declared with metrics off", p)
			}
		}
	})
	t.Run("metrics off cluster-wide keeps the manager's ClusterRole", func(t *testing.T) {
		objs := renderChart(t, "metrics: {enabled: false}")
		find[*rbacv1.ClusterRole](t, objs, "ClusterRole", managerName)
		for _, o := range objs {
			if strings.HasPrefix(o.u.GetName(), "stepwise-metrics-") {
				t.Errorf("%s rendered with metrics off", o.key())
			}
		}
	})
	t.Run("a namespaced install needs watchNamespaces", func(t *testing.T) {
		_, err := renderManifest(t, "rbac: {namespaced: true}")
		if err == nil || !strings.Contains(err.Error(), "rbac.namespaced: set watchNamespaces") {
			t.Errorf("rendering error %v, want one asking for watchNamespaces", err)
		}
	})
}

// TestNamespacedChartOnAnAPIServer installs the namespaced chart with Roles
// only on a real API server and asks its authorizer, and then the manager
// itself, what the manager's ServiceAccount may do: everything of
// ClusterRole stepwise-manager's rules in the watched namespaces, none of
// it in another namespace or cluster-wide. A manager started as that
// ServiceAccount on the watched namespaces syncs its caches; one told to
// watch a namespace without the Role stops at start, naming it.
func TestNamespacedChartOnAnAPIServer(t *testing.T) {
	cfg, c, w := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, ns := range []string{namespace, "team-a", "team-b", "other"} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if ns == namespace {
			obj.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
		}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	objs := renderChart(t, rolesOnlyValues)
	createObjects(ctx, t, c, w, objs)
	waitForCRDs(ctx, t, c, objs)

	rules, err := rbac.ManagerRules()
	if err != nil {
		t.Fatal(err)
	}
	ask := func(verb, group, resource, ns string) bool {
		res, sub, _ := strings.Cut(resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + namespace + ":" + managerName,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: group, Resource: res, Subresource: sub, Namespace: ns,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	asked := 0
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, ns := range []string{"team-a", "team-b"} {
						if !ask(v, g, res, ns) {
							t.Errorf("%s %s/%s in watched namespace %s: denied", v, g, res, ns)
						}
					}
					for _, ns := range []string{"other", namespace, ""} {
						if ask(v, g, res, ns) {
							t.Errorf("%s %s/%s in %q: allowed outside the watched namespaces", v, g, res, ns)
						}
					}
					asked++
				}
			}
		}
	}
	if asked < 20 {
		t.Fatalf("asked about %d rules only", asked)
	}
	for _, tc := range []accessCase{
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, allowed: true},
		{verb: "list", resource: "secrets", namespace: "team-a"},
		{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews"},
		{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews"},
		{verb: "list", resource: "namespaces"},
	} {
		if got := ask(tc.verb, tc.group, tc.resource, tc.namespace); got != tc.allowed {
			t.Errorf("%s %s/%s in %q: allowed = %v, want %v", tc.verb, tc.group, tc.resource, tc.namespace, got, tc.allowed)
		}
	}

	token, err := shippedrbac.Token(ctx, cfg, namespace, managerName)
	if err != nil {
		t.Fatal(err)
	}
	asManager := shippedrbac.ConfigFor(cfg, token)

	// A CloneSet Pod in each of a watched and another namespace.
	for _, ns := range []string{"team-a", "other"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0", Labels: map[string]string{"controller-revision-hash": "web-1"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}},
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	m, err := harness.StartManager(ctx, asManager, manager.Options{Namespaces: []string{"team-a", "team-b"}})
	if err != nil {
		t.Fatalf("the manager, as its ServiceAccount, on the namespaces of its Roles: %v", err)
	}
	defer m.Stop()
	var cs stepwisev1.CloneSetList
	if err := m.Manager.GetClient().List(ctx, &cs, client.InNamespace("team-a")); err != nil {
		t.Errorf("listing CloneSets from the cache: %v", err)
	}
	// The controllers start their Pod informers once the manager runs: wait
	// for team-a's Pod, then the other namespace's must be absent.
	podsOf := func(ns string) int {
		pods, err := m.Manager.Pods.List(ns, labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		return len(pods)
	}
	for deadline := time.Now().Add(30 * time.Second); podsOf("team-a") != 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the Pod stores hold %d Pods of team-a, want 1", podsOf("team-a"))
		}
	}
	if n := podsOf("other"); n != 0 {
		t.Errorf("the Pod stores hold %d Pods of namespace other, which the manager does not watch", n)
	}

	began := time.Now()
	_, err = manager.NewWithHooks(asManager, manager.Options{
		Namespaces: []string{"team-a", "other"}, Metrics: manager.MetricsOptions{BindAddress: "0"},
		Registry: prometheus.NewRegistry(),
	}, manager.Hooks{SkipNameValidation: true})
	t.Logf("a manager told to watch namespace other, in %s: %v", time.Since(began).Round(time.Millisecond), err)
	for _, part := range []string{
		"may not list and watch what it must in the namespaces it watches (--watch-namespaces=team-a,other)",
		"namespace other: ", "pods (create, delete, get, list, patch, watch)", "stepwise.dev/rollouts (get, list, patch, watch)",
		"rbac.namespaced=true",
	} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("starting on a namespace without the Role: error %v\nwant it to say %q", err, part)
		}
	}
	if err != nil && strings.Contains(err.Error(), "namespace team-a") {
		t.Errorf("the error blames team-a, which has the Role: %v", err)
	}
}
