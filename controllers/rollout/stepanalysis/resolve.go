package stepanalysis

import (
	"fmt"
	"sort"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// TemplateKey names a template: an AnalysisTemplate in the Rollout's
// namespace, or a ClusterAnalysisTemplate.
type TemplateKey struct {
	Name         string
	ClusterScope bool
}

func (k TemplateKey) String() string {
	if k.ClusterScope {
		return "ClusterAnalysisTemplate " + k.Name
	}
	return "AnalysisTemplate " + k.Name
}

// ResolvedMetric is a metric ready to measure, with the args its queries
// are rendered with.
type ResolvedMetric struct {
	v1alpha1.Metric
	// Template is where the metric came from; empty for an inline metric.
	Template string
	Args     map[string]string
}

// MissingError names the template or argument that is missing: the
// Rollout stalls on it and never passes.
type MissingError struct{ What string }

func (e *MissingError) Error() string { return e.What }

// Resolve turns inline metrics and template references into the metrics
// to measure. args are the Rollout's argument values, valueFrom already
// read (an arg whose source is missing is simply absent). A template's arg
// takes the Rollout's value, else the template's default; an arg with
// neither, or a template not in templates, is a *MissingError naming it.
// Two metrics of one name (inline and a template's, or two templates') are
// an error too: status keys the tallies by name.
func Resolve(inline []v1alpha1.Metric, refs []v1alpha1.AnalysisTemplateRef,
	templates map[TemplateKey]v1alpha1.AnalysisTemplateSpec, args map[string]string) ([]ResolvedMetric, error) {
	out := make([]ResolvedMetric, 0, len(inline))
	seen := map[string]string{}
	add := func(m v1alpha1.Metric, from string, a map[string]string) error {
		if prev, dup := seen[m.Name]; dup {
			return fmt.Errorf("metric %q is defined twice (%s and %s): metric names must be unique across inline metrics and templates", m.Name, prev, orInline(from))
		}
		seen[m.Name] = orInline(from)
		out = append(out, ResolvedMetric{Metric: *m.DeepCopy(), Template: from, Args: a})
		return nil
	}
	for _, m := range inline {
		if err := add(m, "", args); err != nil {
			return nil, err
		}
	}
	for _, ref := range refs {
		key := TemplateKey{Name: ref.Name, ClusterScope: ref.ClusterScope}
		spec, ok := templates[key]
		if !ok {
			return nil, &MissingError{What: fmt.Sprintf("%s not found", key)}
		}
		a, err := templateArgs(key, spec.Args, args)
		if err != nil {
			return nil, err
		}
		for _, m := range spec.Metrics {
			if err := add(m, key.String(), a); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// templateArgs gives every arg the template declares its value, and passes
// the Rollout's other args through so that inline and template metrics
// see one namespace of names.
func templateArgs(key TemplateKey, declared []v1alpha1.TemplateArg, given map[string]string) (map[string]string, error) {
	a := make(map[string]string, len(given)+len(declared))
	for k, v := range given {
		a[k] = v
	}
	var missing []string
	for _, d := range declared {
		if _, ok := given[d.Name]; ok {
			continue
		}
		if d.Value != nil {
			a[d.Name] = *d.Value
			continue
		}
		missing = append(missing, d.Name)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, &MissingError{What: fmt.Sprintf("%s needs arg %q, which spec.analysis.args does not set (or whose valueFrom source is missing) and the template gives no default", key, missing[0])}
	}
	return a, nil
}

func orInline(from string) string {
	if from == "" {
		return "spec.analysis.metrics"
	}
	return from
}

// ProbeArgs are the args a query is checked with before any Secret is
// read: literal values, and "" for those read valueFrom, so that a query
// naming them is not refused as naming an unknown arg.
func ProbeArgs(a *v1alpha1.AnalysisSpec) map[string]string {
	out := a.LiteralArgs()
	for _, arg := range a.Args {
		if arg.Value == nil {
			if out == nil {
				out = map[string]string{}
			}
			out[arg.Name] = ""
		}
	}
	return out
}

// FieldValue reads a fieldRef path of the Rollout's metadata:
// metadata.name, metadata.namespace, metadata.uid,
// metadata.labels['k'] and metadata.annotations['k'], as the downward API
// writes them. ok is false for another path or an absent key.
func FieldValue(meta map[string]string, labels, annotations map[string]string, path string) (string, bool) {
	if v, ok := meta[path]; ok {
		return v, true
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": labels, "metadata.annotations": annotations} {
		if len(path) > len(prefix)+4 && path[:len(prefix)] == prefix && path[len(prefix):len(prefix)+2] == "['" && path[len(path)-2:] == "']" {
			v, ok := m[path[len(prefix)+2:len(path)-2]]
			return v, ok
		}
	}
	return "", false
}
