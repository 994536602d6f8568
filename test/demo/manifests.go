package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// PrometheusPlaceholder in a manifest stands for the address of the
// Prometheus the demo starts, which is only known at run time.
const PrometheusPlaceholder = "${PROMETHEUS_URL}"

// manifestFile is one YAML file as read.
type manifestFile struct {
	path string
	data []byte
}

// readManifests reads every *.yaml file of dir, in name order.
func readManifests(dir string) ([]manifestFile, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("listing manifests in %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no *.yaml manifests in %s", dir)
	}
	sort.Strings(paths)
	files := make([]manifestFile, 0, len(paths))
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading manifest: %w", err)
		}
		files = append(files, manifestFile{path: path, data: data})
	}
	return files, nil
}

// documentSeparator splits multi-document YAML files.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeManifests decodes the one CloneSet and the one Rollout of files into
// typed objects in namespace. promURL replaces PrometheusPlaceholder; empty
// means there is no Prometheus, and the Rollout loses its analysis, since a
// query that can never be answered would only pause the rollout.
func decodeManifests(files []manifestFile, namespace, promURL string) (*stepwisev1.CloneSet, *stepwisev1.Rollout, error) {
	var (
		cloneSets []*stepwisev1.CloneSet
		rollouts  []*stepwisev1.Rollout
	)
	for _, f := range files {
		data := f.data
		if promURL != "" {
			data = bytes.ReplaceAll(data, []byte(PrometheusPlaceholder), []byte(promURL))
		}
		for i, doc := range documentSeparator.Split(string(data), -1) {
			if isBlank(doc) {
				continue
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return nil, nil, fmt.Errorf("%s, document %d: %w", f.path, i+1, err)
			}
			if meta.APIVersion != stepwisev1.GroupVersion.String() {
				return nil, nil, fmt.Errorf("%s, document %d: apiVersion %q, want %s", f.path, i+1, meta.APIVersion, stepwisev1.GroupVersion)
			}
			// Strict: a misspelt field would otherwise vanish silently and
			// the demo would show something else than the file says.
			switch meta.Kind {
			case "CloneSet":
				cs := &stepwisev1.CloneSet{}
				if err := yaml.UnmarshalStrict([]byte(doc), cs); err != nil {
					return nil, nil, fmt.Errorf("%s, document %d: %w", f.path, i+1, err)
				}
				cloneSets = append(cloneSets, cs)
			case "Rollout":
				ro := &stepwisev1.Rollout{}
				if err := yaml.UnmarshalStrict([]byte(doc), ro); err != nil {
					return nil, nil, fmt.Errorf("%s, document %d: %w", f.path, i+1, err)
				}
				rollouts = append(rollouts, ro)
			default:
				return nil, nil, fmt.Errorf("%s, document %d: kind %q: the demo applies only a CloneSet and a Rollout", f.path, i+1, meta.Kind)
			}
		}
	}
	if len(cloneSets) != 1 || len(rollouts) != 1 {
		return nil, nil, fmt.Errorf("the demo's manifests must hold one CloneSet and one Rollout, found %d and %d", len(cloneSets), len(rollouts))
	}
	cs, ro := cloneSets[0], rollouts[0]
	if err := check(cs, ro); err != nil {
		return nil, nil, err
	}
	cs.Namespace, ro.Namespace = namespace, namespace
	if promURL == "" {
		ro.Spec.Analysis = nil
		for i := range ro.Spec.Steps {
			ro.Spec.Steps[i].Analysis = nil
		}
	}
	return cs, ro, nil
}

// check catches manifests the story cannot be told with.
func check(cs *stepwisev1.CloneSet, ro *stepwisev1.Rollout) error {
	var errs []error
	if len(cs.Spec.Template.Spec.Containers) == 0 {
		errs = append(errs, fmt.Errorf("CloneSet %s has no container", cs.Name))
	}
	if cs.Spec.UpdateStrategy.Type == stepwisev1.RecreateCloneSetUpdateStrategyType || cs.Spec.UpdateStrategy.Type == "" {
		errs = append(errs, fmt.Errorf("CloneSet %s recreates Pods (updateStrategy.type %q): the demo shows in-place updates", cs.Name, cs.Spec.UpdateStrategy.Type))
	}
	if ref := ro.Spec.WorkloadRef; ref.Kind != "CloneSet" || ref.Name != cs.Name {
		errs = append(errs, fmt.Errorf("rollout %s drives %s %s, not CloneSet %s", ro.Name, ref.Kind, ref.Name, cs.Name))
	}
	if len(ro.Spec.Steps) == 0 {
		errs = append(errs, fmt.Errorf("rollout %s has no steps", ro.Name))
	}
	return errors.Join(errs...)
}

// isBlank is true for a document of comments and whitespace only.
func isBlank(doc string) bool {
	for line := range strings.Lines(doc) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}
