package config_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// chartDir is the Helm chart, which must install what config/default
// installs.
var chartDir = filepath.Join("..", "charts", "stepwise")

// helmLabels are the labels the chart adds to every object's metadata, and
// that config/default does not have.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// renderChart renders the chart as `helm template --include-crds` does,
// with the Helm SDK, into namespace stepwise-system, and decodes every
// object strictly.
func renderChart(t *testing.T, valuesYAML string) []object {
	t.Helper()
	manifest, err := renderManifest(t, valuesYAML)
	if err != nil {
		t.Fatalf("rendering the chart with %q: %v", valuesYAML, err)
	}
	return decodeManifest(t, manifest)
}

// renderManifest is the chart's manifest with valuesYAML, or Helm's error.
func renderManifest(t *testing.T, valuesYAML string) (string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	values := map[string]any{}
	if err := yaml.Unmarshal([]byte(valuesYAML), &values); err != nil {
		t.Fatalf("values %q: %v", valuesYAML, err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = "stepwise"
	install.Namespace = namespace
	install.IncludeCRDs = true
	install.Replace = true
	// Helm's offline default is v1.20; the chart needs 1.33 (CEL), and the
	// tests' API server is v1.37.
	if install.KubeVersion, err = common.ParseKubeVersion("v1.37.2"); err != nil {
		t.Fatal(err)
	}
	releaser, err := install.Run(chrt, values)
	if err != nil {
		return "", err
	}
	rel, ok := releaser.(*release.Release)
	if !ok {
		t.Fatalf("the install returned a %T", releaser)
	}
	return rel.Manifest, nil
}

// decodeManifest decodes every object of a rendered manifest strictly.
func decodeManifest(t *testing.T, manifest string) []object {
	t.Helper()
	var out []object
	docs := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(manifest), 4096)
	for {
		var doc map[string]any
		if err := docs.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding the rendered chart: %v", err)
		}
		if len(doc) == 0 {
			continue
		}
		data, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if data, err = yaml.YAMLToJSON(data); err != nil {
			t.Fatal(err)
		}
		if kind, _ := doc["kind"].(string); kind == "ServiceMonitor" {
			// The operator's Go types are not a dependency; compared as
			// unstructured with config/prometheus's.
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				t.Fatal(err)
			}
			out = append(out, object{u: u})
			continue
		}
		out = append(out, decodeStrict(t, data))
	}
	return out
}

// withoutHelmLabels removes the labels Helm adds, after checking that they
// are there.
func withoutHelmLabels(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u = u.DeepCopy()
	labels := u.GetLabels()
	for _, l := range helmLabels {
		if _, ok := labels[l]; !ok && u.GetKind() != "CustomResourceDefinition" {
			t.Errorf("%s/%s: no label %s", u.GetKind(), u.GetName(), l)
		}
		delete(labels, l)
	}
	if len(labels) == 0 {
		labels = nil
	}
	u.SetLabels(labels)
	return u
}

// withoutVersionLabel drops the release label config/manager sets on the
// Deployment: the chart sets it on every object, and withoutHelmLabels
// drops it there (hack/release checks that both name one release).
func withoutVersionLabel(u *unstructured.Unstructured) *unstructured.Unstructured {
	labels := u.GetLabels()
	if _, ok := labels["app.kubernetes.io/version"]; !ok {
		return u
	}
	u = u.DeepCopy()
	delete(labels, "app.kubernetes.io/version")
	u.SetLabels(labels)
	return u
}

// TestChartInstallsWhatConfigDefaultInstalls renders the chart with its
// default values and compares every object with config/default's, field by
// field: only the Namespace (Helm's --create-namespace makes it) and the
// labels Helm adds may differ. A rule, flag or field added to one and not
// the other fails here.
func TestChartInstallsWhatConfigDefaultInstalls(t *testing.T) {
	chart := map[string]object{}
	for _, o := range renderChart(t, "") {
		o.u = withoutHelmLabels(t, o.u)
		chart[o.key()] = o
	}
	for _, want := range render(t) {
		if want.u.GetKind() == "Namespace" {
			continue
		}
		got, ok := chart[want.key()]
		if !ok {
			t.Errorf("the chart installs no %s", want.key())
			continue
		}
		delete(chart, want.key())
		if diff := cmp.Diff(withoutVersionLabel(want.u).Object, got.u.Object); diff != "" {
			t.Errorf("%s differs from config/default (-kustomize +helm):\n%s", want.key(), diff)
		}
	}
	for key := range chart {
		t.Errorf("the chart installs %s, which config/default does not", key)
	}
}

// TestChartValues renders the chart with each value set and checks what it
// changes.
func TestChartValues(t *testing.T) {
	deployment := func(t *testing.T, objs []object) *appsv1.Deployment {
		return find[*appsv1.Deployment](t, objs, "Deployment", managerName)
	}
	args := func(t *testing.T, objs []object) []string {
		return deployment(t, objs).Spec.Template.Spec.Containers[0].Args
	}
	has := func(objs []object, kind, name string) bool {
		return slices.ContainsFunc(objs, func(o object) bool { return o.u.GetKind() == kind && o.u.GetName() == name })
	}
	for _, tc := range []struct {
		name, values string
		check        func(t *testing.T, objs []object)
	}{{
		name:   "image tag",
		values: "image: {repository: registry.example/stepwise, tag: v0.2.0}",
		check: func(t *testing.T, objs []object) {
			if got := deployment(t, objs).Spec.Template.Spec.Containers[0].Image; got != "registry.example/stepwise:v0.2.0" {
				t.Errorf("image %q", got)
			}
		},
	}, {
		name:   "image digest wins over the tag",
		values: "image: {tag: v0.2.0, digest: 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}",
		check: func(t *testing.T, objs []object) {
			want := "ghcr.io/stepwise-dev/stepwise@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			if got := deployment(t, objs).Spec.Template.Spec.Containers[0].Image; got != want {
				t.Errorf("image %q, want %q", got, want)
			}
		},
	}, {
		name:   "replicas",
		values: "replicas: 2",
		check: func(t *testing.T, objs []object) {
			if got := *deployment(t, objs).Spec.Replicas; got != 2 {
				t.Errorf("replicas %d", got)
			}
		},
	}, {
		name:   "leader election off",
		values: "leaderElection: false",
		check: func(t *testing.T, objs []object) {
			if got := args(t, objs); slices.Contains(got, "--leader-elect") {
				t.Errorf("args %q", got)
			}
		},
	}, {
		name:   "log level, namespaces, analysis addresses and extra args become flags",
		values: "{logLevel: debug, watchNamespaces: [team-a, team-b], analysisAllowedAddresses: ['prometheus.monitoring:9090'], notificationAllowedAddresses: ['https://hooks.slack.com/services'], extraArgs: [--rollout-concurrency=32]}",
		check: func(t *testing.T, objs []object) {
			want := []string{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081",
				"--zap-log-level=debug", "--watch-namespaces=team-a,team-b",
				"--analysis-allowed-addresses=prometheus.monitoring:9090",
				"--notification-allowed-addresses=https://hooks.slack.com/services", "--rollout-concurrency=32"}
			if diff := cmp.Diff(want, args(t, objs)); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		},
	}, {
		name:   "resources",
		values: "resources: {limits: {memory: 1Gi}}",
		check: func(t *testing.T, objs []object) {
			r := deployment(t, objs).Spec.Template.Spec.Containers[0].Resources
			if got := r.Limits.Memory().String(); got != "1Gi" {
				t.Errorf("memory limit %s", got)
			}
		},
	}, {
		name:   "no metrics Service",
		values: "metrics: {service: {enabled: false}}",
		check: func(t *testing.T, objs []object) {
			if has(objs, "Service", metricsService) {
				t.Error("the metrics Service is rendered")
			}
		},
	}, {
		name:   "the ServiceMonitor of config/prometheus",
		values: "metrics: {serviceMonitor: {enabled: true}}",
		check: func(t *testing.T, objs []object) {
			resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "prometheus")
			if err != nil {
				t.Fatalf("kustomize build config/prometheus: %v", err)
			}
			want, err := resMap.Resources()[0].Map()
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if o.u.GetKind() == "ServiceMonitor" {
					if diff := cmp.Diff(want, withoutHelmLabels(t, o.u).Object); diff != "" {
						t.Errorf("ServiceMonitor differs from config/prometheus's (-kustomize +helm):\n%s", diff)
					}
					return
				}
			}
			t.Error("no ServiceMonitor")
		},
	}, {
		name:   "pull secrets and Pod labels",
		values: "{imagePullSecrets: [{name: regcred}], podLabels: {team: platform}}",
		check: func(t *testing.T, objs []object) {
			spec := deployment(t, objs).Spec.Template
			if got := spec.Spec.ImagePullSecrets; !slices.Equal(got, []corev1.LocalObjectReference{{Name: "regcred"}}) {
				t.Errorf("imagePullSecrets %v", got)
			}
			if spec.Labels["team"] != "platform" || spec.Labels["app.kubernetes.io/name"] != "stepwise" {
				t.Errorf("Pod labels %v", spec.Labels)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, renderChart(t, tc.values))
		})
	}
}

// TestChartAppliesToAnAPIServer installs the rendered chart on a real API
// server, as TestDefaultAppliesToAnAPIServer does config/default, into the
// namespace Helm's --create-namespace would make (with the restricted Pod
// Security level, as config/default's has).
func TestChartAppliesToAnAPIServer(t *testing.T) {
	if _, err := os.Stat(filepath.Join("..", "bin", "kube-apiserver")); err != nil && os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatalf("no kube-apiserver in bin/ (run 'make test-assets'): %v", err)
	}
	var ns object
	for _, o := range render(t) {
		if o.u.GetKind() == "Namespace" {
			ns = o
		}
	}
	applyToAPIServer(t, append([]object{ns}, renderChart(t, "")...))
}
