// Package config_test checks the installation manifests (config/default, as
// `kubectl apply -k config/default` renders them) and the Argo CD health
// scripts in config/argocd.
package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
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

// Argo CD health checks.
