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

const planCloneSet = `# deploy/web/cloneset.yaml
apiVersion: stepwise.dev/v1alpha1
kind: CloneSet
metadata:
  name: web
  namespace: shop
spec:
  replicas: 4
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: registry.example.com/web:1.4.0
`

const planService = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 80}]
`

// runStdin is run with a standard input.
func runStdin(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	// No cluster: plan -f must never need one.
	args = append(args, "--kubeconfig", "/nonexistent/kubeconfig")
	code = Execute(context.Background(), streams, args, Options{})
	return code, out.String(), errOut.String()
}

// TestPlanFromFile: plan -f reads the CloneSet from a file or stdin, with
// no cluster, and refuses what the API server would refuse, naming the
// field as it does.
func TestPlanFromFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	valid := write("valid.yaml", planCloneSet)
	cases := []struct {
		name    string
		args    []string
		stdin   string
		wantOut []string // in stdout, on success
		wantErr string   // stderr starts with it, on failure
	}{
		{
			name:    "valid_file",
			args:    []string{"plan", "-f", valid, "--steps", "25%,100%"},
			wantOut: []string{"kind: Rollout", "name: web", "namespace: shop", "kind: CloneSet", "partition: 75%"},
		},
		{
			name:    "stdin",
			args:    []string{"plan", "-f", "-", "--steps", "50%,100%", "--version-constraint", ">=1.0.0"},
			stdin:   planCloneSet,
			wantOut: []string{"kind: Rollout", "partition: 50%", "container: app"},
		},
		{
			name:    "several_documents_and_a_name",
			args:    []string{"plan", "-f", "-", "web", "--steps", "100%", "-o", "json"},
			stdin:   "---\n" + planService + "---\n" + planCloneSet + "---\n" + strings.Replace(planCloneSet, "name: web\n", "name: api\n", 1),
			wantOut: []string{`"kind": "Rollout"`, `"name": "web"`},
		},
		{
			name: "explicit_namespace_for_a_file_without_one",
			args: []string{"plan", "-f", "-", "--steps", "100%", "-n", "prod"},
			// The kubeconfig does not exist: only -n gives a namespace.
			stdin:   strings.Replace(planCloneSet, "  namespace: shop\n", "", 1),
			wantOut: []string{"namespace: prod"},
		},
		{
			name:    "typo_field",
			args:    []string{"plan", "-f", "-", "--steps", "100%"},
			stdin:   strings.Replace(planCloneSet, "replicas: 4", "replica: 4", 1),
			wantErr: `error: -: CloneSet in version "v1alpha1" cannot be handled as a CloneSet: strict decoding error: unknown field "spec.replica"`,
		},
		{
			name:    "cel_violation",
			args:    []string{"plan", "-f", write("cel.yaml", planCloneSet+"  updateStrategy:\n    partition: 150%\n"), "--steps", "100%"},
			wantErr: "error: " + filepath.Join(dir, "cel.yaml") + `: CloneSet.stepwise.dev "web" is invalid: spec.updateStrategy.partition: Invalid value: "150%": spec.updateStrategy.partition must be a non-negative integer or a percent`,
		},
		{
			name:    "wrong_type",
			args:    []string{"plan", "-f", "-", "--steps", "100%"},
			stdin:   strings.Replace(planCloneSet, "replicas: 4", "replicas: four", 1),
			wantErr: `error: -: CloneSet.stepwise.dev "web" is invalid: [spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer`,
		},
		{
			name:    "several_cloneSets_without_a_name",
			args:    []string{"plan", "-f", "-", "--steps", "100%"},
			stdin:   planCloneSet + "---\n" + strings.Replace(planCloneSet, "name: web\n", "name: api\n", 1),
			wantErr: "error: - has CloneSets web, api: name the one to plan",
		},
		{
			name:    "no_cloneset",
			args:    []string{"plan", "-f", "-", "--steps", "100%"},
			stdin:   planService,
			wantErr: "error: -: no CloneSet of stepwise.dev/v1alpha1",
		},
		{
			name:    "namespace_mismatch",
			args:    []string{"plan", "-f", valid, "--steps", "100%", "-n", "prod"},
			wantErr: `error: ` + valid + `: CloneSet web is in namespace "shop", not "prod" as -n says`,
		},
		{
			name:    "missing_file",
			args:    []string{"plan", "-f", filepath.Join(dir, "nope.yaml"), "--steps", "100%"},
			wantErr: "error: -f: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runStdin(c.stdin, c.args...)
			if c.wantErr != "" {
				if code != ExitError || !strings.HasPrefix(stderr, c.wantErr) {
					t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and stderr starting with:\n%s", code, stderr, c.wantErr)
				}
				return
			}
			if code != ExitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			for _, w := range c.wantOut {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}
