package release

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"sigs.k8s.io/yaml"
)

const (
	root    = "../.."
	testDig = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// treeVersion is the version the tree installs.
func treeVersion(t *testing.T) string {
	t.Helper()
	m, err := chartMetadata(root)
	if err != nil {
		t.Fatal(err)
	}
	return m.AppVersion
}

func TestPinValuesSetsTheImageAndKeepsTheRest(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := pinValues(data, "registry.example/team/stepwise", testDig)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := common.ReadValues(pinned)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := vals["image"].(map[string]any)
	if img["repository"] != "registry.example/team/stepwise" || img["digest"] != testDig {
		t.Errorf("image values %v", img)
	}
	before, after := strings.Split(string(data), "\n"), strings.Split(string(pinned), "\n")
	if len(before) != len(after) {
		t.Fatalf("pinning changed the number of lines: %d, then %d", len(before), len(after))
	}
	changed := 0
	for i := range before {
		if before[i] != after[i] {
			changed++
		}
	}
	if changed != 2 {
		t.Errorf("pinning changed %d lines, want the repository and digest lines only", changed)
	}
	if _, err := pinValues([]byte("image:\n  repository: x\n"), "r", testDig); err == nil || !strings.Contains(err.Error(), "image.digest") {
		t.Errorf("values without image.digest: %v, want an error naming it", err)
	}
}

func TestCheckVersionRefusesAVersionTheTreeDoesNotInstall(t *testing.T) {
	v := treeVersion(t)
	if got, err := checkVersion(root, ""); err != nil || got != v {
		t.Errorf("checkVersion(tree, \"\") = %q, %v; want the chart's appVersion %s", got, err, v)
	}
	if got, err := checkVersion(root, v); err != nil || got != v {
		t.Errorf("checkVersion(tree, %s) = %q, %v", v, got, err)
	}
	for _, tc := range []struct{ version, want string }{
		{"v99.0.0", "charts/stepwise/Chart.yaml has version"},
		{"v99.0.0", "config/manager/kustomization.yaml sets the image tag"},
		{strings.TrimPrefix(v, "v"), "want a tag such as v0.2.0"},
		{"v1.2", "want a tag such as v0.2.0"},
	} {
		if _, err := checkVersion(root, tc.version); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkVersion(%q): %v, want an error saying %q", tc.version, err, tc.want)
		}
	}
}

// TestInstallYAMLIsConfigDefaultPinnedByDigest: install.yaml holds the
// objects of config/default with only the manager's image changed, to the
// digest, in the order kubectl applies (Namespace and CRDs first).
func TestInstallYAMLIsConfigDefaultPinnedByDigest(t *testing.T) {
	pinned := "registry.example/stepwise@" + testDig
	out, err := installYAML(root, treeVersion(t), pinned)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	images := 0
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Image string `json:"image"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, obj.Kind)
		for _, c := range obj.Spec.Template.Spec.Containers {
			images++
			if c.Image != pinned {
				t.Errorf("%s runs %s, want %s", obj.Kind, c.Image, pinned)
			}
		}
	}
	if images != 1 {
		t.Errorf("%d containers, want the manager's", images)
	}
	if len(kinds) < 3 || kinds[0] != "Namespace" || kinds[1] != "CustomResourceDefinition" || kinds[2] != "CustomResourceDefinition" {
		t.Errorf("kinds in order %q: want the Namespace, then the CRDs", kinds)
	}
	if !bytes.HasPrefix(out, []byte("# Stepwise "+treeVersion(t)+":")) {
		t.Errorf("install.yaml does not start with its header: %.80s", out)
	}
}
