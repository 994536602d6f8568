package commands

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestLintRunsTheControllersChecks: lint checks each Rollout's analysis
// queries as the controller does before it runs them, which no CRD rule
// can, and the shipped examples pass.
func TestLintRunsTheControllersChecks(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "rollout.yaml")
	if err := os.WriteFile(bad, []byte(`apiVersion: stepwise.dev/v1alpha1
kind: Rollout
metadata:
  name: web
spec:
  workloadRef: {apiVersion: stepwise.dev/v1alpha1, kind: CloneSet, name: web}
  steps:
  - partition: 50%
  - partition: 0
  analysis:
    metrics:
    - name: error-rate
      prometheus:
        address: http://prometheus.monitoring:9090
        query: sum(rate(http_requests_total{pod=~"{{ .CanaryPod }}"}[1m]))
      thresholdRange: {max: 0.01}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run("lint", "-f", bad)
	if code != ExitError || !strings.Contains(stdout, bad+": Rollout web: spec.analysis.metrics[0].prometheus.query (metric error-rate, step 1)") ||
		!strings.Contains(stdout, `map has no entry for key "CanaryPod"`) || stderr != "error: 1 of 1 objects are invalid\n" {
		t.Errorf("lint of a query with an unknown field: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	examples := filepath.Join("..", "..", "..", "..", "examples", "rollout")
	code, stdout, stderr = run("lint", "-f", filepath.Join(examples, "cloneset.yaml"), "-f", filepath.Join(examples, "rollout.yaml"))
	if code != ExitOK || !strings.HasSuffix(stdout, "2 objects checked, 0 invalid\n") {
		t.Errorf("lint of examples/rollout: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	empty := filepath.Join(dir, "service.yaml")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run("lint", "-f", empty); code != ExitError || stderr != "error: no Rollout or CloneSet of stepwise.dev/v1alpha1 in the files\n" {
		t.Errorf("lint of a file without Stepwise objects: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run("lint", "-f", filepath.Join(dir, "missing.yaml")); code != ExitError || !strings.Contains(stderr, "missing.yaml: no such file") {
		t.Errorf("lint of a missing file: exit %d, stderr %q", code, stderr)
	}
}

func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "__start_kubectl-stepwise",
		"zsh":  "#compdef kubectl-stepwise",
		"fish": "complete -c kubectl-stepwise",
	} {
		code, stdout, stderr := run("completion", shell)
		if code != ExitOK || !strings.Contains(stdout, want) {
			t.Errorf("completion %s: exit %d, no %q in its script\nstderr:\n%s", shell, code, want, stderr)
		}
	}
	// The commands complete, as the scripts ask them with __complete.
	var out bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
	code := Execute(context.Background(), streams, []string{"__complete", ""}, Options{})
	stdout := out.String()
	for _, want := range []string{"list\t", "set\t", "undo\t", "lint\t", "version\t", "promote\t"} {
		if code != ExitOK || !strings.Contains(stdout, want) {
			t.Errorf("__complete '' (exit %d) lacks %q:\n%s", code, want, stdout)
		}
	}
}
