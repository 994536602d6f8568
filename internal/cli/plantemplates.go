package cli

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// PlanTemplates are the analysis templates a planned Rollout uses.
type PlanTemplates struct {
	// Steps are measured in each step's analysis (spec.analysis.templates).
	Steps []stepwisev1.AnalysisTemplateRef
	// Background are measured from the first step until promotion
	// (spec.analysis.background.templates).
	Background []stepwisev1.AnalysisTemplateRef
	// Args are spec.analysis.args, for the templates of both.
	Args []stepwisev1.AnalysisArg
}

// ParseTemplateRef reads "NAME" (an AnalysisTemplate in the Rollout's
// namespace) or "cluster:NAME" (a ClusterAnalysisTemplate).
func ParseTemplateRef(s string) (stepwisev1.AnalysisTemplateRef, error) {
	name, cluster := strings.CutPrefix(s, "cluster:")
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return stepwisev1.AnalysisTemplateRef{}, fmt.Errorf("%q is not NAME or cluster:NAME with a valid object name: %s", s, strings.Join(errs, "; "))
	}
	return stepwisev1.AnalysisTemplateRef{Name: name, ClusterScope: cluster}, nil
}

// ParseArg reads "NAME=VALUE", within the CRD's limits on args.
func ParseArg(s string) (stepwisev1.AnalysisArg, error) {
	name, value, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return stepwisev1.AnalysisArg{}, fmt.Errorf("%q is not NAME=VALUE", s)
	case name == "" || len(name) > 63:
		return stepwisev1.AnalysisArg{}, fmt.Errorf("%q: the name must have 1 to 63 characters", s)
	case len(value) > 1024:
		return stepwisev1.AnalysisArg{}, fmt.Errorf("%q: the value is longer than 1024 characters", name)
	}
	return stepwisev1.AnalysisArg{Name: name, Value: &value}, nil
}

// applyTemplates adds t to r's analysis.
func applyTemplates(r *stepwisev1.Rollout, t *PlanTemplates) error {
	if len(t.Steps) == 0 && len(t.Background) == 0 {
		if len(t.Args) > 0 {
			return &PlanError{Flag: "analysis-arg", Err: fmt.Errorf("args are for templates: add --analysis-template or --background-template")}
		}
		return nil
	}
	if r.Spec.Analysis == nil {
		r.Spec.Analysis = &stepwisev1.AnalysisSpec{}
	}
	a := r.Spec.Analysis
	a.Templates = t.Steps
	a.Args = t.Args
	if len(t.Background) > 0 {
		a.Background = &stepwisev1.BackgroundAnalysis{Templates: t.Background}
	}
	return nil
}
