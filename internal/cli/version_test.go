package cli

import (
	"runtime/debug"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestPluginBuild(t *testing.T) {
	installed := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/stepwise-dev/stepwise", Version: "v0.2.0"}}
	checkout := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	for name, c := range map[string]struct {
		linked string
		info   *debug.BuildInfo
		want   string
	}{
		"go install":                {"", installed, "v0.2.0 (go1.26.8)"},
		"release build, ldflags":    {"v0.3.0", installed, "v0.3.0 (go1.26.8)"},
		"checkout with vcs stamp":   {"", checkout, "(devel) (revision 0123456789ab, modified, go1.26.8)"},
		"no build info":             {"", nil, "(unknown)"},
		"no build info, ldflags":    {"v0.3.0", nil, "v0.3.0"},
		"empty main module version": {"", &debug.BuildInfo{GoVersion: "go1.26.8"}, "(devel) (go1.26.8)"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := PluginBuild(c.linked, c.info).String(); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestManagerVersion(t *testing.T) {
	deployment := func(labels map[string]any, image string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "stepwise-manager", "namespace": "stepwise-system", "labels": labels},
			"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "sidecar", "image": "proxy:9"},
				map[string]any{"name": "manager", "image": image},
			}}}},
			"status": map[string]any{"readyReplicas": int64(1)},
		}}
	}
	for name, c := range map[string]struct {
		labels map[string]any
		image  string
		want   string
	}{
		"chart label":           {map[string]any{"app.kubernetes.io/version": "v0.2.0"}, "ghcr.io/stepwise-dev/stepwise@sha256:abc", "v0.2.0"},
		"image tag":             {nil, "ghcr.io/stepwise-dev/stepwise:v0.1.0", "v0.1.0"},
		"registry port, digest": {nil, "registry.local:5000/stepwise@sha256:abc", ""},
		"tag and digest":        {nil, "registry.local:5000/stepwise:v0.2.0@sha256:abc", "v0.2.0"},
	} {
		t.Run(name, func(t *testing.T) {
			m := managerOf(deployment(c.labels, c.image))
			if m.Version != c.want || m.Image != c.image || m.Ready != 1 || m.Replicas != 2 {
				t.Errorf("manager %+v, want version %q of image %s, 1/2 ready", m, c.want, c.image)
			}
		})
	}
}

func TestWriteVersions(t *testing.T) {
	plugin := Build{Version: "v0.2.0", GoVersion: "go1.26.8"}
	var b strings.Builder
	_ = WriteVersions(&b, plugin, []Manager{
		{Namespace: "stepwise-system", Name: "stepwise-manager", Version: "v0.1.0", Image: "ghcr.io/stepwise-dev/stepwise:v0.1.0", Ready: 1, Replicas: 1},
		{Namespace: "team-a", Name: "stepwise-manager", Image: "ghcr.io/stepwise-dev/stepwise@sha256:abc", Replicas: 1},
	}, "")
	assertText(t, b.String(), `Plugin:   v0.2.0 (go1.26.8)
Manager:  v0.1.0 (stepwise-system/stepwise-manager, image ghcr.io/stepwise-dev/stepwise:v0.1.0, 1/1 ready)
Warning:  the plugin is v0.2.0 and the manager v0.1.0: plan -f and lint check files against the plugin's CRDs; use the plugin of the release you run
Manager:  unknown (team-a/stepwise-manager, image ghcr.io/stepwise-dev/stepwise@sha256:abc, 0/1 ready)
`)
	b.Reset()
	_ = WriteVersions(&b, plugin, []Manager{}, "shop")
	assertText(t, b.String(), "Plugin:   v0.2.0 (go1.26.8)\nManager:  not found (no Deployment labelled "+ManagerSelector+" in namespace shop)\n")
	b.Reset()
	_ = WriteVersions(&b, Build{Version: "(devel)"}, nil, "")
	assertText(t, b.String(), "Plugin:   (devel)\n")
}
