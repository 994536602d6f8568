package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/internal/testsupport/envtestenv"
)

// gitopsCRDDir is where make gitops-assets writes the Flux and Argo CD CRDs,
// relative to the repository root as envtestenv reads it.
var gitopsCRDDir = filepath.Join("bin", "gitops-crds")

// gitopsGroups need the CRDs of gitopsCRDDir.
var gitopsGroups = []string{"source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io", "argoproj.io"}

// manifest is one object of a YAML file or of a yaml block of a doc.
type manifest struct {
	where string // file, or file:line of the block
	obj   *unstructured.Unstructured
}

var yamlBlockRE = regexp.MustCompile("(?m)^```yaml\\n((?s:.*?))^```")

// manifests collects every object under examples/ and docs/: their YAML
// files, and the yaml blocks of docs/*.md that are whole objects (with
// apiVersion, kind and metadata.name; the rest are excerpts).
func manifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	for _, dir := range []string{".", filepath.Join("..", "docs")} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch {
			case strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml"):
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				// examples/demo leaves Prometheus's address to test/demo,
				// which substitutes it (test/demo's PrometheusPlaceholder).
				data = bytes.ReplaceAll(data, []byte("${PROMETHEUS_URL}"), []byte("http://127.0.0.1:9090"))
				objs, err := objects(data)
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				for _, o := range objs {
					out = append(out, manifest{where: path, obj: o})
				}
			case strings.HasSuffix(path, ".md"):
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				for _, m := range yamlBlockRE.FindAllSubmatchIndex(data, -1) {
					line := 1 + bytes.Count(data[:m[0]], []byte("\n"))
					objs, err := objects(data[m[2]:m[3]])
					if err != nil {
						continue // an excerpt, not a document
					}
					for _, o := range objs {
						if o.GetName() != "" {
							out = append(out, manifest{where: fmt.Sprintf("%s:%d", path, line), obj: o})
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// objects decodes the Kubernetes objects of a YAML stream; a document
// without apiVersion and kind (values files, kustomize configs' fragments)
// is none.
func objects(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		o := &unstructured.Unstructured{Object: m}
		if o.GetAPIVersion() == "" || o.GetKind() == "" {
			continue
		}
		// kustomization.yaml is kustomize's input, not an API object.
		if strings.HasPrefix(o.GetAPIVersion(), "kustomize.config.k8s.io/") {
			continue
		}
		out = append(out, o)
	}
}

// TestEveryManifestPassesTheAPIServer dry-run creates every object of
// examples/ and docs/ on envtest: the Stepwise kinds against our CRDs, core
// kinds as they are, Flux and Argo CD kinds against their CRDs from
// bin/gitops-crds (make gitops-assets).
func TestEveryManifestPassesTheAPIServer(t *testing.T) {
	all := manifests(t)
	if len(all) == 0 {
		t.Fatal("no manifests found")
	}
	var crdDirs []string
	// Gateway API's CRDs (the traffic routing docs' HTTPRoutes), from the
	// module go.mod requires.
	gateway, err := envtestenv.GatewayAPICRDs()
	if err != nil {
		t.Fatal(err)
	}
	crdDirs = append(crdDirs, gateway...)
	haveGitOps := true
	if _, err := os.Stat(filepath.Join("..", gitopsCRDDir)); err != nil {
		haveGitOps = false
	} else {
		crdDirs = append(crdDirs, gitopsCRDDir)
	}
	cfg := envtestenv.StartForTest(t, crdDirs...)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	checked := 0
	for _, m := range all {
		gvk := m.obj.GroupVersionKind()
		what := fmt.Sprintf("%s: %s %s", m.where, gvk.Kind, m.obj.GetName())
		if !haveGitOps && slices.Contains(gitopsGroups, gvk.Group) {
			t.Logf("%s: skipped: %s is missing (make gitops-assets writes the Flux and Argo CD CRDs)", what, gitopsCRDDir)
			continue
		}
		mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			if meta.IsNoMatchError(err) && !strings.HasSuffix(gvk.Group, "stepwise.dev") && gvk.Group != "" {
				// A third party's kind this test bed has no CRD for
				// (the Prometheus Operator's).
				t.Logf("%s: skipped: no CRD for %s here", what, gvk.GroupKind())
				continue
			}
			t.Errorf("%s: %v", what, err)
			continue
		}
		obj := m.obj.DeepCopy()
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = "default"
				obj.SetNamespace(ns)
			}
			// Dry runs still need the namespace to exist.
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		if err := c.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		checked++
	}
	t.Logf("%d of %d objects passed a server-side dry run", checked, len(all))
}
