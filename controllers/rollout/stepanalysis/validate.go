package stepanalysis

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/judge"
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
			if err := checkCompare(spec, i, k, m); err != nil {
				return err
			}
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
			rendered, err := renderProbe(m.Prometheus.Query, ProbeArgs(&a))
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

// checkCompare parses a compared metric's rule as the judge will: the
// CRD checks each string's shape, this checks what it cannot (a
// confidence of exactly 1, say), naming the field.
func checkCompare(spec *v1alpha1.RolloutSpec, step, k int, m v1alpha1.Metric) error {
	if m.Compare == nil {
		return nil
	}
	field := fmt.Sprintf("spec.analysis.metrics[%d]", k)
	if o := spec.Steps[step].Analysis; o != nil && len(o.Metrics) > 0 {
		field = fmt.Sprintf("spec.steps[%d].analysis.metrics[%d]", step, k)
	}
	if _, err := judge.ParseCompare(string(m.Compare.Direction), m.Compare.Tolerance, m.Compare.Confidence); err != nil {
		return fmt.Errorf("%s (metric %s): %w", field, m.Name, err)
	}
	return nil
}

// MaxValidations bounds the verdicts Validations keeps: far more Rollouts
// than one manager drives, at a few hundred bytes each.
const MaxValidations = 4096

// Validations remembers Validate's verdict for each Rollout's spec, keyed by
// the Rollout and checked against its UID and generation: the API server
// raises the generation with every spec change, so one (UID, generation)
// is one spec, and its queries are rendered once, not at every round.
//
// It is the only memory of it, and losing it (a restart, a new leader, an
// eviction) is safe: the next round validates again and finds the same
// verdict, at the cost of one render of each query. It holds at most
// MaxValidations verdicts, and a deleted Rollout's is dropped (Forget).
type Validations struct {
	// Check is the validation remembered; Validate when nil.
	Check func(*v1alpha1.RolloutSpec) error

	mu       sync.Mutex
	verdicts map[types.NamespacedName]verdict
}

type verdict struct {
	uid        types.UID
	generation int64
	err        error
}

// Validate returns Check's verdict on ro's spec, checking it only the first
// time this generation of this Rollout is seen.
func (v *Validations) Validate(ro *v1alpha1.Rollout) error {
	key := types.NamespacedName{Namespace: ro.Namespace, Name: ro.Name}
	v.mu.Lock()
	got, ok := v.verdicts[key]
	v.mu.Unlock()
	if ok && got.uid == ro.UID && got.generation == ro.Generation {
		return got.err
	}
	check := v.Check
	if check == nil {
		check = Validate
	}
	// Outside the lock: rendering is the cost being saved, and another
	// Rollout's round need not wait for it.
	err := check(&ro.Spec)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verdicts == nil {
		v.verdicts = map[types.NamespacedName]verdict{}
	}
	if _, known := v.verdicts[key]; !known && len(v.verdicts) >= MaxValidations {
		for k := range v.verdicts {
			// Any one: it costs that Rollout one render at its next round.
			delete(v.verdicts, k)
			break
		}
	}
	v.verdicts[key] = verdict{uid: ro.UID, generation: ro.Generation, err: err}
	return err
}

// Forget drops the verdict of the Rollout at key, once it is deleted.
func (v *Validations) Forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.verdicts, key)
}

// Len is how many verdicts are kept.
func (v *Validations) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.verdicts)
}

// CheckSpanning refuses, naming it, a metric that an analysis spanning
// steps (field: spec.analysis.background or postPromotion) cannot measure:
// a job metric (a Job per interval, for as long as it lasts) or a compared
// one (the judge compares one step's canary and stable Pods, and the last
// step leaves no stable Pods).
func CheckSpanning(field string, metrics []v1alpha1.Metric) error {
	for _, m := range metrics {
		switch {
		case m.Job != nil:
			return fmt.Errorf("%s: metric %s is a job metric, which only a step's analysis runs; use a prometheus or web metric in its templates", field, m.Name)
		case m.Compare != nil:
			return fmt.Errorf("%s: metric %s compares canary and stable, which only a step's analysis does; give it a thresholdRange instead", field, m.Name)
		}
	}
	return nil
}
