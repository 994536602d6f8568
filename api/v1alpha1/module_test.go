package v1alpha1

import (
	"os"
	"strings"
	"testing"
)

// TestImportersGetOnlyTheAPIsDependencies: the API is a module of its own
// (api/go.mod), so that Go code importing it to write Rollouts pulls the
// API machinery and Flux's condition types, not what the controllers and
// their tests need. go.mod lists what it requires, and go.sum's lines
// without /go.mod the modules whose source a build of it may download:
// none of the controllers' heavy dependencies may appear in either.
func TestImportersGetOnlyTheAPIsDependencies(t *testing.T) {
	var sources []string
	for line := range strings.Lines(mustRead(t, "../go.sum")) {
		if f := strings.Fields(line); len(f) == 3 && !strings.HasSuffix(f[1], "/go.mod") {
			sources = append(sources, f[0])
		}
	}
	for file, data := range map[string]string{"go.mod": mustRead(t, "../go.mod"), "go.sum": strings.Join(sources, "\n")} {
		for _, heavy := range []string{
			"sigs.k8s.io/controller-runtime", "k8s.io/client-go", "github.com/go-git/", "github.com/yuin/gopher-lua",
			"github.com/fluxcd/pkg/ssa", "github.com/prometheus/", "sigs.k8s.io/gateway-api", "helm.sh/", "github.com/chromedp/", "sigs.k8s.io/kustomize",
			"github.com/google/go-containerregistry", "github.com/stepwise-dev/stepwise ",
		} {
			if strings.Contains(data, heavy) {
				t.Errorf("api/%s names %s: importers of the API would pull it", file, heavy)
			}
		}
	}
	if !strings.Contains(mustRead(t, "../go.mod"), "module github.com/stepwise-dev/stepwise/api\n") {
		t.Error("api/go.mod is not the module github.com/stepwise-dev/stepwise/api")
	}
}

func mustRead(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
