package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// ListRollouts reads the Rollouts of a namespace, or of every namespace
// when namespace is "", sorted by namespace and name.
func ListRollouts(ctx context.Context, dyn dynamic.Interface, namespace string) ([]*stepwisev1.Rollout, error) {
	list, err := dyn.Resource(RolloutResource()).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		where := "every namespace"
		if namespace != "" {
			where = "namespace " + namespace
		}
		return nil, fmt.Errorf("listing rollouts in %s: %w", where, err)
	}
	out := make([]*stepwisev1.Rollout, 0, len(list.Items))
	for i := range list.Items {
		r, err := RolloutFromUnstructured(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// ListOptions are the choices of `kubectl stepwise list`.
type ListOptions struct {
	// AllNamespaces adds the NAMESPACE column.
	AllNamespaces bool
	Now           time.Time
	Color         bool
}

// RenderList is the table of `kubectl stepwise list`: one line per
// Rollout with its phase and reason, its step (1-based, of how many), the
// canary's share of requests where traffic routing sets one, and its age.
// A status that describes an older generation says so in the phase.
func RenderList(rollouts []*stepwisev1.Rollout, o ListOptions) string {
	p := painter{enabled: o.Color}
	header := []cell{{text: "NAME", color: faint}, {text: "PHASE", color: faint}, {text: "STEP", color: faint},
		{text: "WEIGHT", color: faint}, {text: "AGE", color: faint}, {text: "REASON", color: faint}}
	if o.AllNamespaces {
		header = append([]cell{{text: "NAMESPACE", color: faint}}, header...)
	}
	rows := [][]cell{header}
	for _, r := range rollouts {
		st := &r.Status
		phase := string(st.Phase)
		if phase == "" {
			phase = "Unknown"
		}
		if st.ObservedGeneration < r.Generation {
			phase += " (stale)"
		}
		row := []cell{{text: r.Name}, {text: phase, color: phaseColor(st.Phase)}, {text: listStep(r)}, {text: listWeight(r)},
			{text: age(o.Now, r.CreationTimestamp.Time)}, {text: st.Reason}}
		if o.AllNamespaces {
			row = append([]cell{{text: r.Namespace}}, row...)
		}
		rows = append(rows, row)
	}
	var b strings.Builder
	writeTable(&b, p, "", rows)
	return b.String()
}

// WriteList prints the table, or says that there is nothing to list, as
// kubectl get does (on stderr there, here on out: the caller picks).
func WriteList(w io.Writer, rollouts []*stepwisev1.Rollout, namespace string, o ListOptions) error {
	text := RenderList(rollouts, o)
	if len(rollouts) == 0 {
		text = "No rollouts found in namespace " + namespace + ".\n"
		if o.AllNamespaces {
			text = "No rollouts found.\n"
		}
	}
	_, err := io.WriteString(w, text)
	return err
}

// listStep is "2/3" during a step, "-" otherwise.
func listStep(r *stepwisev1.Rollout) string {
	i := derefIndex(r.Status.CurrentStepIndex)
	if i < 0 || i >= len(r.Spec.Steps) {
		return "-"
	}
	return fmt.Sprintf("%d/%d", i+1, len(r.Spec.Steps))
}

// listWeight is the canary's share of requests as status.traffic records
// it, with "+N" for match rules; "-" without traffic routing, where the
// Pods' share is all there is.
func listWeight(r *stepwisev1.Rollout) string {
	t := r.Status.Traffic
	if r.Spec.TrafficRouting == nil || t == nil {
		return "-"
	}
	s := fmt.Sprintf("%d%%", t.CanaryWeight)
	if t.Matches > 0 {
		s += fmt.Sprintf("+%d", t.Matches)
	}
	return s
}

// age is kubectl's AGE column: "5m", "3d".
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
