package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

const lintCloneSet = `apiVersion: stepwise.dev/v1alpha1
kind: CloneSet
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      initContainers:
      - name: migrate
        image: registry.example.com/migrate:1.4.0
      containers:
      - name: app
        image: registry.example.com/web:1.4.0
`

func lintRollout(name, container, lastPartition string) string {
	return `apiVersion: stepwise.dev/v1alpha1
kind: Rollout
metadata:
  name: ` + name + `
spec:
  workloadRef: {apiVersion: stepwise.dev/v1alpha1, kind: CloneSet, name: web}
  versionPolicy: {container: ` + container + `}
  steps:
  - partition: 50%
  - partition: ` + lastPartition + "\n"
}

func TestLint(t *testing.T) {
	files := []ManifestFile{
		{Source: "web.yaml", Data: strings.NewReader(lintCloneSet + "---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\n" +
			lintRollout("web", "app", "0") + "---\n" + lintRollout("init", "migrate", "0") + "---\n" + lintRollout("typo", "ap", "0"))},
		{Source: "broken.yaml", Data: strings.NewReader(strings.Replace(lintCloneSet, "replicas: 3", "replica: 3", 1) + "---\n" +
			lintRollout("last", "app", "10%") + "---\n" + lintRollout("refused", "app", "0") +
			"---\napiVersion: stepwise.dev/v1beta1\nkind: Rollout\nmetadata: {name: future}\n")},
	}
	report, err := Lint(context.Background(), files, LintOptions{CheckRollout: func(r *stepwisev1.Rollout) error {
		if r.Name == "refused" {
			return errors.New("spec.analysis.metrics[0].prometheus.query: refused by the controller's check")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := WriteLintReport(&out, report); err != nil {
		t.Fatal(err)
	}
	assertText(t, out.String(), `web.yaml: CloneSet web: valid
web.yaml: Rollout web: valid
web.yaml: Rollout init: valid
web.yaml: Rollout typo: spec.versionPolicy.container: "ap" is not a container of CloneSet web (it has app, migrate (init)): the controller would refuse every revision
broken.yaml: CloneSet web: CloneSet in version "v1alpha1" cannot be handled as a CloneSet: strict decoding error: unknown field "spec.replica"
broken.yaml: Rollout last: Rollout.stepwise.dev "last" is invalid: spec.steps: Invalid value: spec.steps: the last step must have partition 0 or '0%'
broken.yaml: Rollout refused: spec.analysis.metrics[0].prometheus.query: refused by the controller's check
broken.yaml: Rollout future: stepwise.dev/v1beta1 is not served: this plugin knows stepwise.dev/v1alpha1
8 objects checked, 5 invalid; 1 document of other kinds skipped
`)

	_, err = Lint(context.Background(), []ManifestFile{{Source: "bad.yaml", Data: strings.NewReader("kind: [")}}, LintOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "reading bad.yaml: document 1:") {
		t.Errorf("a file that does not parse: %v", err)
	}
}
