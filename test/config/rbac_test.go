package config_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

func clusterScoped() map[string]bool {
	return map[string]bool{
		"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	}
}

func TestGeneratedClusterRoleIsBoundToTheManager(t *testing.T) {
	objs := render(t)
	role := find[*rbacv1.ClusterRole](t, objs, "ClusterRole", managerName)

	// The rendered role is controller-gen's file unchanged: nobody patches
	// generated RBAC on the way.
	onDisk := generatedClusterRole(t)
	if fmt.Sprint(role.Rules) != fmt.Sprint(onDisk.Rules) {
		t.Errorf("rendered ClusterRole rules differ from config/rbac/role.yaml")
	}
	if len(role.Rules) == 0 {
		t.Error("the ClusterRole grants nothing")
	}

	sa := find[*corev1.ServiceAccount](t, objs, "ServiceAccount", managerName)
	crb := find[*rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", managerName)
	if crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}) {
		t.Errorf("ClusterRoleBinding roleRef = %+v, want ClusterRole %s", crb.RoleRef, role.Name)
	}
	wantSubject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
	if !slices.Equal(crb.Subjects, wantSubject) {
		t.Errorf("ClusterRoleBinding subjects = %+v, want %+v", crb.Subjects, wantSubject)
	}

	deploy := find[*appsv1.Deployment](t, objs, "Deployment", managerName)
	if got := deploy.Spec.Template.Spec.ServiceAccountName; got != sa.Name {
		t.Errorf("Deployment runs as ServiceAccount %q, want %q", got, sa.Name)
	}
}

// generatedClusterRole is controller-gen's config/rbac/role.yaml.
func generatedClusterRole(t *testing.T) *rbacv1.ClusterRole {
	return readYAML[rbacv1.ClusterRole](t, filepath.Join("rbac", "role.yaml"))
}

func TestLeaderElectionRole(t *testing.T) {
	objs := render(t)
	role := find[*rbacv1.Role](t, objs, "Role", leaderElection)
	rb := find[*rbacv1.RoleBinding](t, objs, "RoleBinding", leaderElection)
	sa := find[*corev1.ServiceAccount](t, objs, "ServiceAccount", managerName)

	if rb.Namespace != role.Namespace || rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}) {
		t.Errorf("RoleBinding %s/%s refers to %+v, want Role %s/%s", rb.Namespace, rb.Name, rb.RoleRef, role.Namespace, role.Name)
	}
	wantSubject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
	if !slices.Equal(rb.Subjects, wantSubject) {
		t.Errorf("RoleBinding subjects = %+v, want %+v", rb.Subjects, wantSubject)
	}

	// client-go's Lease lock gets, creates and updates (renew, release);
	// the leader-election recorder writes core Events. Nothing more.
	want := map[string][]string{
		"coordination.k8s.io/leases": {"create", "get", "update"},
		"/events":                    {"create", "patch"},
	}
	if got := grantsOf(role.Rules); !equalGrants(got, want) {
		t.Errorf("leader-election Role grants\n  %v\nwant\n  %v", got, want)
	}
}

// grantsOf flattens rules into verbs by "group/resource" (non-resource
// URLs by their path), sorted.
func grantsOf(rules []rbacv1.PolicyRule) map[string][]string {
	out := map[string][]string{}
	add := func(key string, verbs []string) {
		out[key] = append(out[key], verbs...)
		slices.Sort(out[key])
		out[key] = slices.Compact(out[key])
	}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				add(g+"/"+res, r.Verbs)
			}
		}
		for _, u := range r.NonResourceURLs {
			add(u, r.Verbs)
		}
	}
	return out
}

func equalGrants(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w := slices.Clone(b[k])
		slices.Sort(w)
		if !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

// TestManagerClusterRoleIsLeastPrivilege pins the generated ClusterRole to
// the verbs the controllers call (see the +kubebuilder:rbac markers and
// their comments): a marker that widens it must change this list too, on
// purpose. The end-to-end suites run the manager with this role, which
// shows it is enough.
func TestManagerClusterRoleIsLeastPrivilege(t *testing.T) {
	role := find[*rbacv1.ClusterRole](t, render(t), "ClusterRole", managerName)
	want := map[string][]string{
		"/pods":                                {"create", "delete", "get", "list", "patch", "watch"},
		"/pods/status":                         {"patch"},
		"/secrets":                             {"get"},
		"/configmaps":                          {"get"},
		"/services":                            {"create", "get", "list", "patch", "watch"},
		"gateway.networking.k8s.io/gateways":   {"get"},
		"gateway.networking.k8s.io/httproutes": {"create", "delete", "get", "list", "patch", "watch"},
		"gateway.networking.k8s.io/referencegrants": {"list", "watch"},
		"apps/controllerrevisions":                  {"create", "delete", "get", "list", "update", "watch"},
		"apps/statefulsets":                         {"get", "list", "patch", "watch"},
		"apps.kruise.io/clonesets":                  {"get", "list", "patch", "watch"},
		"events.k8s.io/events":                      {"create", "patch"},
		"stepwise.dev/clonesets":                    {"get", "list", "watch"},
		"stepwise.dev/clonesets/finalizers":         {"update"},
		"stepwise.dev/clonesets/status":             {"patch"},
		"stepwise.dev/rollouts":                     {"get", "list", "patch", "watch"},
		"stepwise.dev/rollouts/status":              {"patch"},
		// A job metric's Jobs; never update.
		"batch/jobs": {"create", "delete", "get", "list", "watch"},
		// The analysis templates a Rollout names, read by name.
		"stepwise.dev/analysistemplates":        {"get"},
		"stepwise.dev/clusteranalysistemplates": {"get"},
	}
	if got := grantsOf(role.Rules); !equalGrants(got, want) {
		t.Errorf("ClusterRole %s grants\n  %v\nwant\n  %v", managerName, got, want)
	}
	for _, r := range role.Rules {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") || len(r.ResourceNames) > 0 {
			t.Errorf("rule %+v uses a wildcard or resource names", r)
		}
	}
}

// TestMetricsRBAC: the manager may review tokens and access (and nothing
// else with that binding); scrapers get GET on /metrics from a role that
// nothing binds.
func TestMetricsRBAC(t *testing.T) {
	objs := render(t)
	sa := find[*corev1.ServiceAccount](t, objs, "ServiceAccount", managerName)
	auth := find[*rbacv1.ClusterRole](t, objs, "ClusterRole", metricsAuth)
	want := map[string][]string{
		"authentication.k8s.io/tokenreviews":        {"create"},
		"authorization.k8s.io/subjectaccessreviews": {"create"},
	}
	if got := grantsOf(auth.Rules); !equalGrants(got, want) {
		t.Errorf("ClusterRole %s grants %v, want %v", metricsAuth, got, want)
	}
	crb := find[*rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", metricsAuth)
	if crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsAuth}) ||
		!slices.Equal(crb.Subjects, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}) {
		t.Errorf("ClusterRoleBinding %s = %+v %+v, want ClusterRole %s for the manager's ServiceAccount", metricsAuth, crb.RoleRef, crb.Subjects, metricsAuth)
	}
	reader := find[*rbacv1.ClusterRole](t, objs, "ClusterRole", metricsReader)
	if got := grantsOf(reader.Rules); !equalGrants(got, map[string][]string{"/metrics": {"get"}}) {
		t.Errorf("ClusterRole %s grants %v, want GET /metrics only", metricsReader, got)
	}
	for _, o := range objs {
		if b, ok := o.typed.(*rbacv1.ClusterRoleBinding); ok && b.RoleRef.Name == metricsReader {
			t.Errorf("%s binds %s: config/default must not choose who scrapes", o.key(), metricsReader)
		}
	}
}

// TestServiceMonitor: config/prometheus, kept out of config/default so that
// a cluster without the Prometheus Operator installs cleanly, scrapes the
// metrics Service's HTTPS port with a bearer token.
func TestServiceMonitor(t *testing.T) {
	opts := krusty.MakeDefaultOptions()
	resMap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), "prometheus")
	if err != nil {
		t.Fatalf("kustomize build config/prometheus: %v", err)
	}
	if resMap.Size() != 1 {
		t.Fatalf("config/prometheus renders %d objects, want the ServiceMonitor", resMap.Size())
	}
	data, err := resMap.Resources()[0].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	// The operator's Go types are not a dependency: the fields checked.
	var sm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			Selector  struct{ MatchLabels map[string]string } `json:"selector"`
			Endpoints []struct {
				Port            string `json:"port"`
				Scheme          string `json:"scheme"`
				Path            string `json:"path"`
				BearerTokenFile string `json:"bearerTokenFile"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &sm); err != nil {
		t.Fatal(err)
	}
	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Kind != "ServiceMonitor" || sm.Metadata.Namespace != namespace {
		t.Fatalf("config/prometheus renders %s %s in %q, want a monitoring.coreos.com/v1 ServiceMonitor in %s", sm.APIVersion, sm.Kind, sm.Metadata.Namespace, namespace)
	}
	svc := find[*corev1.Service](t, render(t), "Service", metricsService)
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selector %s=%s does not match the metrics Service labels %v", k, v, svc.Labels)
		}
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if len(svc.Spec.Ports) != 1 || ep.Port != svc.Spec.Ports[0].Name || ep.Scheme != "https" || ep.Path != "/metrics" || ep.BearerTokenFile == "" {
		t.Errorf("ServiceMonitor endpoint %+v, want port %q, https, /metrics and a bearer token", ep, svc.Spec.Ports[0].Name)
	}
}
