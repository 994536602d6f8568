package stepanalysis

import (
	"fmt"
	"time"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// Validate checks every query a Rollout's steps would run, before any
// runs: what CEL cannot, since it cannot parse a Go template or PromQL.
// The error names the field. A template with a construct that is not
// allowed is refused; so is a query that is not PromQL (a MetricsQL
// extension, say) unless the step's analysis sets initialDelay, since its
// lookback, and so the time its first measurement needs, is unknown.
func Validate(spec *v1alpha1.RolloutSpec) error {
	for i := range spec.Steps {
		a, ok := spec.AnalysisForStep(i)
		if !ok {
			continue
		}
		for k, m := range a.Metrics {
			if m.Prometheus == nil {
				continue
			}
			field := fmt.Sprintf("spec.analysis.metrics[%d].prometheus.query", k)
			if o := spec.Steps[i].Analysis; o != nil && len(o.Metrics) > 0 {
				field = fmt.Sprintf("spec.steps[%d].analysis.metrics[%d].prometheus.query", i, k)
			}
			if err := analysis.CheckTemplate(m.Prometheus.Query); err != nil {
				return fmt.Errorf("%s (metric %s): %w", field, m.Name, err)
			}
			rendered, err := renderProbe(m.Prometheus.Query, a.Args)
			if err != nil {
				return fmt.Errorf("%s (metric %s, step %d): %w", field, m.Name, i+1, err)
			}
			if _, err := analysis.Lookback(rendered, time.Time{}); err != nil && a.InitialDelay.Duration <= 0 {
				return fmt.Errorf("%s (metric %s, step %d): %w: Stepwise reads the query's windows to know when the canary's own data fills them; "+
					"for a query that is not PromQL, set analysis.initialDelay to at least its longest window plus the scrape margin", field, m.Name, i+1, err)
			}
		}
	}
	return nil
}
