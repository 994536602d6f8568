package gitops

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	// The app's files in git, at the path the examples deploy from.
	cloneSetPath = "examples/rollout/cloneset.yaml"
	rolloutPath  = "examples/rollout/rollout.yaml"
	// The example's image, whose tag a release changes.
	exampleImage = "ghcr.io/stefanprodan/podinfo:6.7.0"
	imageRepo    = "ghcr.io/stefanprodan/podinfo"
	replicas     = 10
)

// readDocs reads the YAML documents of a file of the repository.
func readDocs(t *testing.T, root, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no manifest", path)
	}
	return out
}

// doc is the document of path named name.
func doc(t *testing.T, root, path, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range readDocs(t, root, path) {
		if u.GetName() == name {
			return u
		}
	}
	t.Fatalf("%s has no %s", path, name)
	return nil
}

func set(t *testing.T, u *unstructured.Unstructured, value any, fields ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(u.Object, value, fields...); err != nil {
		t.Fatalf("setting %s: %v", strings.Join(fields, "."), err)
	}
}

func toYAML(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appFiles are examples/rollout's CloneSet and Rollout as the team commits
// them, with image tag tag. The example's times are for production (a
// one-minute pause, five measurements 30 s apart); the test shortens them,
// and points the analysis at its Prometheus, whose simulated traffic labels
// the status code `code`.
func appFiles(t *testing.T, root, tag, promURL string) map[string][]byte {
	t.Helper()
	cs, err := os.ReadFile(filepath.Join(root, cloneSetPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cs, []byte(exampleImage)) {
		t.Fatalf("%s no longer has image %s", cloneSetPath, exampleImage)
	}
	cs = bytes.ReplaceAll(cs, []byte(exampleImage), []byte(imageRepo+":"+tag))
	cs = bytes.ReplaceAll(cs, []byte("gracePeriodSeconds: 10"), []byte("gracePeriodSeconds: 1"))
	return map[string][]byte{cloneSetPath: cs, rolloutPath: rolloutFile(t, root, rolloutPath, promURL)}
}

// rolloutFile is the Rollout of file path with the test's times and
// Prometheus.
func rolloutFile(t *testing.T, root, path, promURL string) []byte {
	t.Helper()
	return toYAML(t, shortRollout(t, root, path, promURL))
}

func shortRollout(t *testing.T, root, path, promURL string) *unstructured.Unstructured {
	t.Helper()
	ro := doc(t, root, path, "web")
	steps, _, _ := unstructured.NestedSlice(ro.Object, "spec", "steps")
	for _, s := range steps {
		if p, ok := s.(map[string]any)["pause"].(map[string]any); ok && p["duration"] != nil {
			p["duration"] = "3s"
		}
	}
	set(t, ro, steps, "spec", "steps")
	set(t, ro, "1s", "spec", "analysis", "interval")
	set(t, ro, int64(2), "spec", "analysis", "count")
	// Prometheus scrapes every second here (the default margin, 30s, is
	// for a 10s-15s scrape interval).
	set(t, ro, "4s", "spec", "analysis", "scrapeMargin")
	metrics, _, _ := unstructured.NestedSlice(ro.Object, "spec", "analysis", "metrics")
	for _, m := range metrics {
		p := m.(map[string]any)["prometheus"].(map[string]any)
		p["address"] = promURL
		p["query"] = strings.ReplaceAll(p["query"].(string), `status=~"5.."`, `code=~"5.."`)
	}
	set(t, ro, metrics, "spec", "analysis", "metrics")
	return ro
}
