package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// manifest is a Rollout as it belongs in git: no status, no server-set
// metadata. Its JSON keeps the Go field order, which is the contract's order
// (workloadRef, steps, analysis, ...), unlike a map's sorted keys.
type manifest struct {
	// Not metav1.TypeMeta, which puts kind before apiVersion.
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Metadata   manifestMeta           `json:"metadata"`
	Spec       stepwisev1.RolloutSpec `json:"spec"`
}

type manifestMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// WriteManifest prints a Rollout for a commit, as "yaml" or "json". The YAML
// says in comments how many Pods each step updates, because partitions count
// the Pods kept back, which reads backwards.
func WriteManifest(w io.Writer, r *stepwisev1.Rollout, format string) error {
	return WritePlan(w, r, format, nil)
}

// WritePlan is WriteManifest that also says, in the YAML's comments, what
// the routes carry at each step of a Rollout with traffic routing, as the
// controller decides it; traffic may be nil.
func WritePlan(w io.Writer, r *stepwisev1.Rollout, format string, traffic *TrafficPlan) error {
	doc, err := manifestNode(r, traffic)
	if err != nil {
		return err
	}
	switch format {
	case "", "yaml":
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
			return fmt.Errorf("writing YAML: %w", err)
		}
		return enc.Close()
	case "json":
		var buf bytes.Buffer
		if err := writeJSON(&buf, doc.Content[0]); err != nil {
			return err
		}
		var out bytes.Buffer
		if err := json.Indent(&out, buf.Bytes(), "", "    "); err != nil {
			return fmt.Errorf("indenting JSON: %w", err)
		}
		out.WriteByte('\n')
		_, err := w.Write(out.Bytes())
		return err
	}
	return fmt.Errorf("output format %q is not supported: use yaml or json", format)
}

// manifestNode goes through JSON so that the API types' own encoding
// (Decimal thresholds, int-or-string partitions, omitempty) decides the
// content, and through a YAML node tree so that the layout can be tidied.
func manifestNode(r *stepwisev1.Rollout, traffic *TrafficPlan) (*yaml.Node, error) {
	data, err := json.Marshal(manifest{
		APIVersion: stepwisev1.GroupVersion.String(),
		Kind:       "Rollout",
		Metadata:   manifestMeta{Name: r.Name, Namespace: r.Namespace},
		Spec:       r.Spec,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding rollout %s: %w", r.Name, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("re-reading rollout %s: %w", r.Name, err)
	}
	tidy(&doc)
	if spec := mappingValue(doc.Content[0], "spec"); spec != nil {
		if steps := mappingValue(spec, "steps"); steps != nil {
			for i, step := range steps.Content {
				if p := mappingValue(step, "partition"); p != nil {
					p.LineComment = updatedComment(p.Value)
					if traffic != nil && i < len(traffic.Steps) && r.Spec.TrafficRouting != nil {
						p.LineComment += "; " + trafficComment(traffic.Steps[i], r.Spec.TrafficRouting.CanaryService.Name)
					}
				}
			}
		}
	}
	doc.HeadComment = "Planned by kubectl stepwise plan. A step's partition is the pods kept on\n" +
		"the stable revision; the controller owns the CloneSet's partition field."
	if traffic != nil && r.Spec.TrafficRouting != nil {
		replicas := fmt.Sprintf("%d replicas", traffic.Replicas)
		if traffic.Replicas == 1 {
			replicas = "1 replica"
		}
		doc.HeadComment += fmt.Sprintf("\nEach step says where requests go once it is reached, with %s;\n"+
			"after the last step the stable Service selects the new revision and the\n"+
			"routes send it everything, as your HTTPRoute in git does (docs/traffic.md).", replicas)
	}
	return &doc, nil
}

// tidy turns the JSON-shaped tree into block YAML: no flow style or quotes
// unless needed (the encoder quotes strings such as "0" by itself),
// multi-line strings such as queries as literal blocks, and durations
// without zero units, as metav1.Duration writes "1m0s".
func tidy(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && strings.Contains(n.Value, "\n") {
		n.Style = yaml.LiteralStyle
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch k.Value {
			case "duration", "interval", "timeout":
				if d, err := time.ParseDuration(v.Value); err == nil && v.Kind == yaml.ScalarNode {
					v.Value = ShortDuration(d)
				}
			}
		}
	}
	for _, c := range n.Content {
		tidy(c)
	}
}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// updatedComment reads a partition back as the share of Pods updated.
func updatedComment(partition string) string {
	if partition == "0" || partition == "0%" {
		return "every pod updated"
	}
	if n, ok := parsePercent(partition); ok {
		return fmt.Sprintf("%d%% of pods updated", 100-n)
	}
	return ""
}

// writeJSON writes a node tree made from JSON back as JSON, keeping the key
// order that a map would lose.
func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSONString(b, n.Content[i].Value); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!int", "!!float", "!!bool":
			b.WriteString(n.Value)
		case "!!null":
			b.WriteString("null")
		default:
			return writeJSONString(b, n.Value)
		}
	default:
		return fmt.Errorf("unexpected YAML node kind %v", n.Kind)
	}
	return nil
}

// writeJSONString writes s without json.Marshal's HTML escaping, which would
// turn a constraint such as ">=1.0.0" into "\u003e=1.0.0".
func writeJSONString(b *bytes.Buffer, s string) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("encoding %q: %w", s, err)
	}
	// Encode ends with a newline, which json.Indent would keep.
	b.Truncate(b.Len() - 1)
	return nil
}
