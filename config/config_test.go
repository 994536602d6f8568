// Package config_test checks the installation manifests (config/default, as
// `kubectl apply -k config/default` renders them) and the Argo CD health
// scripts in config/argocd.
package config_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/argocdhealth"
	"github.com/stepwise-dev/stepwise/test/envtestenv"
)

const (
	namespace      = "stepwise-system"
	managerName    = "stepwise-manager"
	leaderElection = "stepwise-leader-election"
	metricsService = "stepwise-manager-metrics"
	metricsAuth    = "stepwise-metrics-auth"
	metricsReader  = "stepwise-metrics-reader"
	image          = "ghcr.io/stepwise-dev/stepwise:v0.2.0"
)

// object is one rendered manifest: as sent to the API server, and decoded
// into its Go type for the checks.
type object struct {
	u     *unstructured.Unstructured
	typed runtime.Object
}

func (o object) key() string { return o.u.GetKind() + "/" + o.u.GetName() }

// render builds config/default as kubectl apply -k does, and decodes every
// object strictly into its Go type, so that a misspelt field (say
// readOnlyRootFileSystem) fails here instead of being dropped silently by a
// lenient client.
func render(t *testing.T) []object {
	t.Helper()
	opts := krusty.MakeDefaultOptions()
	// Unspecified is what the kustomize CLI and kubectl use: the legacy
	// order (Namespace and CRDs first) unless the kustomization sets
	// sortOptions. kubectl apply -k applies in this order, so it matters.
	opts.Reorder = krusty.ReorderOptionUnspecified
	resMap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), "default")
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	var out []object
	for _, r := range resMap.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decodeStrict(t, data))
	}
	return out
}

// decodeStrict decodes one manifest (JSON) into its Go type, failing on a
// field the type lacks.
func decodeStrict(t *testing.T, data []byte) object {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	typed, err := scheme.New(u.GroupVersionKind())
	if err != nil {
		t.Fatalf("%s %s: no Go type for %s: %v", u.GetKind(), u.GetName(), u.GroupVersionKind(), err)
	}
	strictErrs, err := kjson.UnmarshalStrict(data, typed)
	if err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	for _, e := range strictErrs {
		t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), e)
	}
	return object{u: u, typed: typed}
}

func find[T runtime.Object](t *testing.T, objs []object, kind, name string) T {
	t.Helper()
	for _, o := range objs {
		if o.u.GetKind() == kind && o.u.GetName() == name {
			typed, ok := o.typed.(T)
			if !ok {
				t.Fatalf("%s/%s decoded as %T", kind, name, o.typed)
			}
			return typed
		}
	}
	var zero T
	t.Fatalf("config/default renders no %s %q", kind, name)
	return zero
}

// crdNamesOnDisk reads the names of the CRDs controller-gen wrote.
func crdNamesOnDisk(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		names = append(names, "CustomResourceDefinition/"+crd.Name)
	}
	return names
}

func TestDefaultRendersTheWholeInstallation(t *testing.T) {
	objs := render(t)
	var got []string
	for _, o := range objs {
		got = append(got, o.key())
	}
	want := append(crdNamesOnDisk(t),
		"Namespace/"+namespace,
		"ServiceAccount/"+managerName,
		"ClusterRole/"+managerName,
		"ClusterRoleBinding/"+managerName,
		"Role/"+leaderElection,
		"RoleBinding/"+leaderElection,
		"ClusterRole/"+metricsAuth,
		"ClusterRoleBinding/"+metricsAuth,
		"ClusterRole/"+metricsReader,
		"Deployment/"+managerName,
		"Service/"+metricsService,
	)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("config/default renders\n  %v\nwant\n  %v", got, want)
	}

	// kubectl apply -k sends objects in this order and stops at the first
	// error: the namespace and the CRDs must come before anything in them.
	if objs[0].key() != "Namespace/"+namespace {
		t.Errorf("first object is %s, want the Namespace", objs[0].key())
	}
	seenOther := false
	for _, o := range objs[1:] {
		isCRD := o.u.GetKind() == "CustomResourceDefinition"
		if isCRD && seenOther {
			t.Errorf("%s comes after other objects", o.key())
		}
		seenOther = seenOther || !isCRD
	}

	mapper := clusterScoped()
	for _, o := range objs {
		if mapper[o.u.GetKind()] {
			if o.u.GetNamespace() != "" {
				t.Errorf("cluster-scoped %s has namespace %q", o.key(), o.u.GetNamespace())
			}
		} else if o.u.GetNamespace() != namespace {
			t.Errorf("%s is in namespace %q, want %q", o.key(), o.u.GetNamespace(), namespace)
		}
	}
}

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

// readYAML decodes the one object of a YAML file, refusing unknown fields.
func readYAML[T any](t *testing.T, path string) *T {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj T
	if err := yaml.UnmarshalStrict(data, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &obj
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

// managerFlags are the flags cmd/manager defines itself. A flag the binary
// does not know makes it exit at start, which only a running cluster would
// show otherwise.
func managerFlags(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "cmd", "manager", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`flag\.\w+Var\(&[\w.]+,\s*"([a-z0-9-]+)"`).FindAllSubmatch(src, -1) {
		flags[string(m[1])] = true
	}
	if len(flags) == 0 {
		t.Fatal("found no flag definitions in cmd/manager/main.go")
	}
	return flags
}

func TestManagerDeployment(t *testing.T) {
	objs := render(t)
	d := find[*appsv1.Deployment](t, objs, "Deployment", managerName)
	pod := d.Spec.Template.Spec

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1", d.Spec.Replicas)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != image {
		t.Errorf("image = %q, want %q", c.Image, image)
	}

	args := map[string]string{}
	known := managerFlags(t)
	for _, a := range c.Args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !known[name] {
			t.Errorf("argument %q is not a flag of cmd/manager", a)
		}
		args[name] = value
	}
	if v, ok := args["leader-elect"]; !ok || (v != "" && v != "true") {
		t.Errorf("args %v: want --leader-elect", c.Args)
	}
	if args["metrics-bind-address"] != ":8443" || args["health-probe-bind-address"] != ":8081" {
		t.Errorf("args %v: want --metrics-bind-address=:8443 and --health-probe-bind-address=:8081", c.Args)
	}
	// Metrics are served with authentication unless someone opts out.
	if v, ok := args["metrics-secure"]; ok && v != "true" {
		t.Errorf("args %v: the metrics endpoint must stay secure", c.Args)
	}

	// The Go soft memory limit is left to the manager (90% of the
	// container limit): GOMEMLIMIT equal to the limit lets the OOM killer
	// strike before the collector.
	var memEnv *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			t.Errorf("the Deployment sets GOMEMLIMIT (%+v): set %s, the manager takes 90%% of it", e, "STEPWISE_MEMORY_LIMIT")
		}
		if e.Name == "STEPWISE_MEMORY_LIMIT" {
			memEnv = &c.Env[i]
		}
	}
	switch {
	case memEnv == nil || memEnv.ValueFrom == nil || memEnv.ValueFrom.ResourceFieldRef == nil:
		t.Error("STEPWISE_MEMORY_LIMIT is not set from the container's resources")
	default:
		ref := memEnv.ValueFrom.ResourceFieldRef
		if ref.Resource != "limits.memory" || ref.ContainerName != c.Name || (!ref.Divisor.IsZero() && ref.Divisor.Value() != 1) {
			t.Errorf("STEPWISE_MEMORY_LIMIT = %+v, want limits.memory of container %s in bytes", ref, c.Name)
		}
	}

	port := func(p intstr.IntOrString) int32 {
		if p.Type == intstr.Int {
			return p.IntVal
		}
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return cp.ContainerPort
			}
		}
		t.Errorf("port %q is not a container port", p.StrVal)
		return 0
	}
	for name, probe := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("no HTTP probe for %s", name)
			continue
		}
		if probe.HTTPGet.Path != name || port(probe.HTTPGet.Port) != 8081 {
			t.Errorf("probe for %s asks %s on port %v, want %s on 8081", name, probe.HTTPGet.Path, probe.HTTPGet.Port.String(), name)
		}
	}

	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[res]; !ok {
			t.Errorf("no %s request", res)
		}
		if _, ok := c.Resources.Limits[res]; !ok {
			t.Errorf("no %s limit", res)
		}
	}

	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("the Pod does not set runAsNonRoot: true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("the Pod does not use the RuntimeDefault seccomp profile")
	}
	csc := c.SecurityContext
	switch csc {
	case nil:
		t.Error("the container has no securityContext")
	default:
		if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
			t.Error("the root filesystem is writable")
		}
		if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
			t.Error("privilege escalation is allowed")
		}
		if csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 {
			t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", csc.Capabilities)
		}
		if csc.Privileged != nil && *csc.Privileged {
			t.Error("the container is privileged")
		}
	}

	sel := d.Spec.Selector.MatchLabels
	for k, v := range sel {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the Pod template labels %v", k, v, d.Spec.Template.Labels)
		}
	}

	// The metrics Service must reach the port the manager serves metrics on.
	svc := find[*corev1.Service](t, objs, "Service", metricsService)
	if len(svc.Spec.Selector) == 0 {
		t.Fatal("the metrics Service selects nothing")
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not match the manager Pods %v", k, v, d.Spec.Template.Labels)
		}
	}
	_, metricsPort, _ := net.SplitHostPort(args["metrics-bind-address"])
	want, _ := strconv.Atoi(metricsPort)
	if len(svc.Spec.Ports) != 1 || port(svc.Spec.Ports[0].TargetPort) != int32(want) {
		t.Errorf("metrics Service ports %+v do not lead to container port %d", svc.Spec.Ports, want)
	}
}

// warnings keeps the API server's warnings (deprecated fields, Pod
// Security violations), which kubectl prints and goes on.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

// TestDefaultAppliesToAnAPIServer creates every rendered object, in order,
// on a real kube-apiserver (envtest, no CRDs preinstalled): what `kubectl
// apply -k config/default` does. Strict field validation rejects unknown
// fields. The namespace enforces the restricted Pod Security level, which
// the API server checks on a Deployment's Pod template with a warning only:
// a warning here is a manager Pod that would be refused later.
func TestDefaultAppliesToAnAPIServer(t *testing.T) {
	applyToAPIServer(t, render(t))
}

// startAPIServer starts an envtest API server for the test, with a client
// whose warnings w keeps.
func startAPIServer(t *testing.T) (*rest.Config, client.Client, *warnings) {
	t.Helper()
	env, err := envtestenv.NewWithCRDs()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (run 'make test-assets' first): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	w := &warnings{}
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c, w
}

// applyToAPIServer creates objs in order on a fresh envtest API server with
// strict field validation, fails on any warning, then checks what the
// manager's ServiceAccount may do and that the CRDs are served.
func applyToAPIServer(t *testing.T, objs []object) {
	t.Helper()
	_, c, w := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createObjects(ctx, t, c, w, objs)
	checkManagerAccess(ctx, t, c)
	waitForCRDs(ctx, t, c, objs)
}

// createObjects creates objs in order with strict field validation and
// fails on any warning.
func createObjects(ctx context.Context, t *testing.T, c client.Client, w *warnings, objs []object) {
	t.Helper()
	for _, o := range objs {
		u := o.u.DeepCopy()
		if err := c.Create(ctx, u, client.FieldValidation("Strict"), client.FieldOwner("config-test")); err != nil {
			t.Fatalf("creating %s: %v", o.key(), err)
		}
		for _, text := range w.take() {
			t.Errorf("creating %s: API server warns: %s", o.key(), text)
		}
	}
}

// waitForCRDs waits until the CRDs among objs are served, or the manager's
// informers would never sync.
func waitForCRDs(ctx context.Context, t *testing.T, c client.Client, objs []object) {
	t.Helper()
	for _, o := range objs {
		if o.u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: o.u.GetName()}, &crd); err != nil {
				t.Fatal(err)
			}
			if established(&crd) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not Established: %+v", crd.Name, crd.Status.Conditions)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// accessCase is one request of the manager's ServiceAccount, and whether
// the rendered RBAC must allow it.
type accessCase struct {
	verb, group, resource, subresource, namespace string
	allowed                                       bool
}

// managerAccess is what the controllers, the leader election and the
// metrics filter do (allowed), and a few neighbours they must not be able
// to do.
var managerAccess = []accessCase{
	{verb: "list", resource: "pods", namespace: "team-a", allowed: true},
	{verb: "patch", resource: "pods", namespace: "team-a", allowed: true},
	{verb: "update", resource: "pods", namespace: "team-a"},
	{verb: "patch", resource: "pods", subresource: "status", namespace: "team-a", allowed: true},
	{verb: "update", resource: "pods", subresource: "status", namespace: "team-a"},
	{verb: "get", resource: "secrets", namespace: "team-a", allowed: true},
	{verb: "list", resource: "secrets", namespace: "team-a"},
	{verb: "watch", resource: "secrets", namespace: "team-a"},
	{verb: "update", group: "apps", resource: "controllerrevisions", namespace: "team-a", allowed: true},
	{verb: "patch", group: "apps", resource: "statefulsets", namespace: "team-a", allowed: true},
	{verb: "update", group: "apps", resource: "statefulsets", namespace: "team-a"},
	{verb: "get", group: "stepwise.dev", resource: "clonesets", namespace: "team-a", allowed: true},
	{verb: "update", group: "stepwise.dev", resource: "clonesets", namespace: "team-a"},
	{verb: "patch", group: "stepwise.dev", resource: "clonesets", namespace: "team-a"},
	{verb: "update", group: "stepwise.dev", resource: "clonesets", subresource: "finalizers", namespace: "team-a", allowed: true},
	{verb: "patch", group: "stepwise.dev", resource: "rollouts", subresource: "status", namespace: "team-a", allowed: true},
	{verb: "update", group: "stepwise.dev", resource: "rollouts", subresource: "status", namespace: "team-a"},
	{verb: "create", group: "events.k8s.io", resource: "events", namespace: "team-a", allowed: true},
	{verb: "create", resource: "events", namespace: "team-a"},
	{verb: "create", resource: "events", namespace: namespace, allowed: true},
	{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, allowed: true},
	{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: namespace},
	{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "team-a"},
	{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews", allowed: true},
	{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews", allowed: true},
}

// checkManagerAccess asks the API server's authorizer about every
// managerAccess case for the manager's ServiceAccount.
func checkManagerAccess(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	for _, tc := range managerAccess {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + namespace + ":" + managerName,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: tc.verb, Group: tc.group, Resource: tc.resource, Subresource: tc.subresource, Namespace: tc.namespace,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("%s %s/%s/%s in %q: allowed = %v, want %v (%s)", tc.verb, tc.group, tc.resource, tc.subresource, tc.namespace, sar.Status.Allowed, tc.allowed, sar.Status.Reason)
		}
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// Argo CD health checks.

var healthScripts = map[string]string{
	"resource.customizations.health.stepwise.dev_Rollout":  "rollout-health.lua",
	"resource.customizations.health.stepwise.dev_CloneSet": "cloneset-health.lua",
}

// The ConfigMap patch carries copies of the scripts (argocd-cm has no way
// to point at a file): they must not drift from the files tested below.
func TestArgoCDPatchEmbedsTheScripts(t *testing.T) {
	cm := readYAML[corev1.ConfigMap](t, filepath.Join("argocd", "argocd-cm-patch.yaml"))
	if cm.Kind != "ConfigMap" || cm.Name != "argocd-cm" || cm.Namespace != "argocd" {
		t.Errorf("patch targets %s %s/%s, want ConfigMap argocd/argocd-cm", cm.Kind, cm.Namespace, cm.Name)
	}
	for key, file := range healthScripts {
		script, err := os.ReadFile(filepath.Join("argocd", file))
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data[key] != string(script) {
			t.Errorf("argocd-cm-patch.yaml %s differs from argocd/%s: copy the script into the patch again", key, file)
		}
	}
	if len(cm.Data) != len(healthScripts) {
		t.Errorf("patch sets %d keys, want %d", len(cm.Data), len(healthScripts))
	}
}

type healthCase struct {
	name string
	// obj is the object without apiVersion and kind, in YAML.
	obj    string
	status string
	// message is a part of the expected message; empty: not checked.
	message string
	// kstatus, when set, is what Flux's health check (kstatus.Compute)
	// says of the object, and kstatusMessage a part of its message.
	kstatus        kstatus.Status
	kstatusMessage string
}

// sampleObject turns a YAML sample into the map Argo CD hands the script.
// The sample is first decoded strictly into the Stepwise Go type, so that a
// misspelt field fails the test instead of going unnoticed by the script
// (which would just see nil). Then it is decoded as unstructured, which
// makes integers int64, as in objects read from the API server.
func sampleObject[T any](t *testing.T, kind, doc string) map[string]any {
	t.Helper()
	data, err := yaml.YAMLToJSONStrict([]byte("apiVersion: stepwise.dev/v1alpha1\nkind: " + kind + "\n" + doc))
	if err != nil {
		t.Fatal(err)
	}
	var typed T
	strictErrs, err := kjson.UnmarshalStrict(data, &typed)
	if err != nil {
		t.Fatalf("sample is not a %s: %v", kind, err)
	}
	for _, e := range strictErrs {
		t.Fatalf("sample is not a %s: %v", kind, e)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u.Object
}

func runHealthCases[T any](t *testing.T, kind, file string, cases []healthCase) {
	script, err := os.ReadFile(filepath.Join("argocd", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := sampleObject[T](t, kind, tc.obj)
			status, message, err := argocdhealth.Evaluate(string(script), obj)
			if err != nil {
				t.Fatal(err)
			}
			if status != tc.status || !strings.Contains(message, tc.message) {
				t.Errorf("got %s %q, want %s with a message containing %q", status, message, tc.status, tc.message)
			}
			if tc.kstatus == "" {
				return
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
			if err != nil {
				t.Fatalf("kstatus: %v", err)
			}
			if res.Status != tc.kstatus || !strings.Contains(res.Message, tc.kstatusMessage) {
				t.Errorf("kstatus: got %s %q, want %s with a message containing %q", res.Status, res.Message, tc.kstatus, tc.kstatusMessage)
			}
		})
	}
}

func TestRolloutHealth(t *testing.T) {
	abortMsg := "step 2 (partition 50%): analysis failed: error-rate 0.08 is above 0.01"
	runHealthCases[stepwisev1.Rollout](t, "Rollout", "rollout-health.lua", []healthCase{{
		name:    "no status yet",
		obj:     `metadata: {name: web, generation: 1}`,
		status:  argocdhealth.Progressing,
		message: "waiting for the rollout controller",
	}, {
		name: "spec change not observed yet",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 2
  phase: Healthy
  conditions: [{type: Ready, status: "True", reason: Stable, message: stable}]`,
		status:  argocdhealth.Progressing,
		message: "waiting for rollout spec update to be observed",
	}, {
		name: "status without observedGeneration",
		obj: `
metadata: {name: web, generation: 1}
status: {phase: Healthy}`,
		status:  argocdhealth.Progressing,
		message: "waiting for rollout spec update to be observed",
	}, {
		name: "aborted by a failed analysis",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Aborted
  reason: AnalysisFailed
  message: "` + abortMsg + `"
  conditions:
  - {type: Ready, status: "False", reason: AnalysisFailed, message: "` + abortMsg + `"}
  - {type: Stalled, status: "True", reason: AnalysisFailed, message: "` + abortMsg + `"}`,
		status:  argocdhealth.Degraded,
		message: abortMsg,
	}, {
		name: "aborted, message only in the Stalled condition",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Aborted
  conditions: [{type: Stalled, status: "True", reason: AbortRequested, message: aborted by request}]`,
		status:  argocdhealth.Degraded,
		message: "aborted by request",
	}, {
		name: "rollback past its progress deadline",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Progressing
  reason: ProgressDeadlineExceeded
  message: rolling back to the stable revision
  conditions: [{type: Stalled, status: "True", reason: ProgressDeadlineExceeded, message: no progress for 600s}]`,
		status:  argocdhealth.Degraded,
		message: "no progress for 600s",
	}, {
		name: "paused by spec.paused",
		obj: `
metadata: {name: web, generation: 4}
status: {observedGeneration: 4, phase: Paused, reason: PausedBySpec, message: "step 1 (partition 90%) held: paused by spec.paused"}`,
		status:  argocdhealth.Suspended,
		message: "paused by spec.paused",
	}, {
		name: "step pause without duration waits for a promote",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Paused
  reason: AwaitingPromotion
  currentStepIndex: 1
  message: "step 2 (partition 50%): waiting for a promote request"
  conditions:
  - {type: Ready, status: "False", reason: AwaitingPromotion, message: "step 2 (partition 50%): waiting for a promote request"}
  - {type: Reconciling, status: "True", reason: AwaitingPromotion, message: "step 2 (partition 50%): waiting for a promote request"}`,
		status:  argocdhealth.Suspended,
		message: "waiting for a promote request",
	}, {
		name: "inconclusive analysis waits for a person",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3, phase: Paused, reason: AnalysisInconclusive, message: "analysis inconclusive: no data"}`,
		status:  argocdhealth.Suspended,
		message: "no data",
	}, {
		name: "Progressing phase awaiting promotion",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3, phase: Progressing, reason: AwaitingPromotion, message: waiting for a promote request}`,
		status:  argocdhealth.Suspended,
		message: "waiting for a promote request",
	}, {
		name: "Progressing phase awaiting promotion, reason only in Ready",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Progressing
  conditions: [{type: Ready, status: "False", reason: AwaitingPromotion, message: waiting for a promote request}]`,
		status:  argocdhealth.Suspended,
		message: "waiting for a promote request",
	}, {
		name: "timed step pause",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3, phase: Progressing, reason: StepPaused, message: "step 1 (partition 90%): paused until 2030-01-01T00:00:00Z"}`,
		status:  argocdhealth.Progressing,
		message: "paused until",
	}, {
		name: "analysis running",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Progressing
  reason: AnalysisRunning
  message: "step 1 (partition 90%): analysis 2/5"
  conditions:
  - {type: Ready, status: "False", reason: AnalysisRunning, message: "step 1 (partition 90%): analysis 2/5"}
  - {type: Reconciling, status: "True", reason: AnalysisRunning, message: "step 1 (partition 90%): analysis 2/5"}`,
		status:  argocdhealth.Progressing,
		message: "analysis 2/5",
	}, {
		name: "waiting for Pods, partition conflict raised",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Progressing
  reason: PartitionMismatch
  message: workload partition is 100%, step wants 90%
  conditions:
  - {type: PartitionConflict, status: "True", reason: FieldManagerConflict, message: field manager argocd-controller also writes the partition}`,
		status:  argocdhealth.Progressing,
		message: "step wants 90%",
	}, {
		name: "healthy",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Healthy
  reason: Stable
  stableRevision: web-7d9f
  message: revision web-7d9f is stable
  conditions: [{type: Ready, status: "True", reason: Stable, message: revision web-7d9f is stable}]`,
		status:  argocdhealth.Healthy,
		message: "web-7d9f is stable",
	}, {
		name: "healthy phase while reconciles fail",
		obj: `
metadata: {name: web, generation: 3}
status:
  observedGeneration: 3
  phase: Healthy
  conditions:
  - {type: Ready, status: "False", reason: ReconcileFailed, message: "patching CloneSet web: connection refused"}
  - {type: Reconciling, status: "True", reason: ProgressingWithRetry, message: "patching CloneSet web: connection refused"}`,
		status:  argocdhealth.Progressing,
		message: "connection refused",
	}, {
		name: "healthy phase without conditions",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3, phase: Healthy}`,
		status: argocdhealth.Progressing,
	}, {
		name: "status without a phase",
		obj: `
metadata: {name: web, generation: 3}
status: {observedGeneration: 3}`,
		status:  argocdhealth.Progressing,
		message: "report a phase",
	}})
}

func TestCloneSetHealth(t *testing.T) {
	runHealthCases[stepwisev1.CloneSet](t, "CloneSet", "cloneset-health.lua", []healthCase{{
		name: "no status yet",
		obj: `
metadata: {name: web, generation: 1}
spec: {replicas: 4, template: {}}`,
		status:  argocdhealth.Progressing,
		message: "waiting for the CloneSet controller",
	}, {
		name: "spec change not observed yet",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status: {observedGeneration: 1, replicas: 4, readyReplicas: 4, updatedReplicas: 4, updatedReadyReplicas: 4, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Progressing,
		message: "waiting for CloneSet spec update to be observed",
	}, {
		name: "stalled: template change impossible in place",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}, updateStrategy: {type: InPlaceOnly}}
status:
  observedGeneration: 2
  replicas: 4
  readyReplicas: 4
  updatedReplicas: 0
  updatedReadyReplicas: 0
  expectedUpdatedReplicas: 4
  conditions:
  - {type: Stalled, status: "True", reason: InPlaceImpossible, message: "InPlaceOnly: spec.containers[0].ports changed"}
  - {type: Ready, status: "False", reason: InPlaceImpossible, message: "InPlaceOnly: spec.containers[0].ports changed"}`,
		status:  argocdhealth.Degraded,
		message: "ports changed",
	}, {
		name: "reconciling: updating in place",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status:
  observedGeneration: 2
  replicas: 4
  readyReplicas: 3
  updatedReplicas: 2
  updatedReadyReplicas: 1
  expectedUpdatedReplicas: 4
  conditions:
  - {type: Reconciling, status: "True", reason: Updating, message: "4/4 Pods, 2 updated, 1 updated and ready"}`,
		status:  argocdhealth.Progressing,
		message: "2 updated, 1 updated and ready",
	}, {
		name: "update paused half way",
		obj: `
metadata: {name: web, generation: 3}
spec: {replicas: 4, template: {}, updateStrategy: {paused: true}}
status: {observedGeneration: 3, replicas: 4, readyReplicas: 4, updatedReplicas: 1, updatedReadyReplicas: 1, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Suspended,
		message: "1 of 4 Pods updated",
	}, {
		name: "paused after the update completed",
		obj: `
metadata: {name: web, generation: 3}
spec: {replicas: 4, template: {}, updateStrategy: {paused: true}}
status: {observedGeneration: 3, replicas: 4, readyReplicas: 4, updatedReplicas: 4, updatedReadyReplicas: 4, expectedUpdatedReplicas: 4}`,
		status: argocdhealth.Healthy,
	}, {
		name: "new revision awaiting its Rollout: git's partition 0 ignored",
		obj: `
metadata: {name: web, generation: 7}
spec: {replicas: 4, template: {}, updateStrategy: {partition: 0}}
status:
  observedGeneration: 7
  replicas: 4
  readyReplicas: 4
  updatedReplicas: 0
  updatedReadyReplicas: 0
  expectedUpdatedReplicas: 0
  currentRevision: web-2
  updateRevision: web-3
  rollout: {name: web, revision: web-2, partition: 100%}
  conditions:
  - {type: Reconciling, status: "True", reason: AwaitingRollout, message: "revision web-3 waits for Rollout web to acknowledge it: no Pod moves to it before"}
  - {type: Ready, status: "False", reason: AwaitingRollout, message: "revision web-3 waits for Rollout web to acknowledge it: no Pod moves to it before"}
  - {type: Governed, status: "True", reason: GovernedByRollout, message: "Rollout web decides how far Pods move; spec.updateStrategy.partition (0) is ignored"}`,
		status:  argocdhealth.Progressing,
		message: "waits for Rollout web",
	}, {
		name: "at a Rollout's step: git's partition 0 ignored",
		obj: `
metadata: {name: web, generation: 7}
spec: {replicas: 4, template: {}, updateStrategy: {partition: 0}}
status:
  observedGeneration: 7
  replicas: 4
  readyReplicas: 4
  updatedReplicas: 2
  updatedReadyReplicas: 2
  expectedUpdatedReplicas: 2
  currentRevision: web-2
  updateRevision: web-3
  rollout: {name: web, revision: web-3, partition: 50%}
  conditions:
  - {type: Ready, status: "True", reason: Partitioned, message: "2/4 Pods on revision web-3, partition keeps 2 on web-2"}
  - {type: Governed, status: "True", reason: GovernedByRollout, message: "Rollout web decides how far Pods move: partition 50% for revision web-3; spec.updateStrategy.partition (0) is ignored"}`,
		status:  argocdhealth.Healthy,
		message: "partition keeps 2",
	}, {
		name: "held at 100% partition by a Rollout",
		obj: `
metadata: {name: web, generation: 5}
spec: {replicas: 4, template: {}, updateStrategy: {partition: 100%}}
status: {observedGeneration: 5, replicas: 4, readyReplicas: 4, updatedReplicas: 0, updatedReadyReplicas: 0}`,
		status: argocdhealth.Healthy,
	}, {
		name: "canary step reached",
		obj: `
metadata: {name: web, generation: 6}
spec: {replicas: 4, template: {}, updateStrategy: {partition: 50%}}
status:
  observedGeneration: 6
  replicas: 4
  readyReplicas: 4
  updatedReplicas: 2
  updatedReadyReplicas: 2
  expectedUpdatedReplicas: 2
  conditions: [{type: Ready, status: "True", reason: Partitioned, message: "2/4 Pods on revision web-2, partition keeps 2 on web-1"}]`,
		status:  argocdhealth.Healthy,
		message: "partition keeps 2",
	}, {
		name: "fully updated",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status: {observedGeneration: 2, replicas: 4, readyReplicas: 4, updatedReplicas: 4, updatedReadyReplicas: 4, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Healthy,
		message: "4/4 Pods ready",
	}, {
		name: "a Pod became unready",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status: {observedGeneration: 2, replicas: 4, readyReplicas: 3, updatedReplicas: 4, updatedReadyReplicas: 3, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Progressing,
		message: "3/4 Pods ready",
	}, {
		name: "updated Pods not ready yet",
		obj: `
metadata: {name: web, generation: 2}
spec: {replicas: 4, template: {}}
status: {observedGeneration: 2, replicas: 4, readyReplicas: 4, updatedReplicas: 4, updatedReadyReplicas: 2, expectedUpdatedReplicas: 4}`,
		status:  argocdhealth.Progressing,
		message: "2 of 4 updated Pods ready",
	}, {
		name: "replicas unset counts as 1",
		obj: `
metadata: {name: web, generation: 1}
spec: {template: {}}
status: {observedGeneration: 1, replicas: 1, readyReplicas: 1}`,
		status: argocdhealth.Healthy,
	}, {
		name: "replicas unset, Pod not ready",
		obj: `
metadata: {name: web, generation: 1}
spec: {template: {}}
status: {observedGeneration: 1, replicas: 1, readyReplicas: 0}`,
		status: argocdhealth.Progressing,
	}, {
		name: "scaled to zero",
		obj: `
metadata: {name: web, generation: 7}
spec: {replicas: 0, template: {}}
status: {observedGeneration: 7, replicas: 0, readyReplicas: 0}`,
		status: argocdhealth.Healthy,
	}})
}
