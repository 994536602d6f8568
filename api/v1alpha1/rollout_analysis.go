package v1alpha1

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnalysisForStep returns the analysis that runs after step i, with step
// overrides and defaults applied, and false when none runs (skipped, or no
// metric). Keeping the merge here gives the step decision and the analysis
// runner one answer.
func (s *RolloutSpec) AnalysisForStep(i int) (AnalysisSpec, bool) {
	var out AnalysisSpec
	if s.Analysis != nil {
		s.Analysis.DeepCopyInto(&out)
	}
	if i >= 0 && i < len(s.Steps) && s.Steps[i].Analysis != nil {
		o := s.Steps[i].Analysis
		if o.Skip {
			return AnalysisSpec{}, false
		}
		out.override(o.AnalysisSpec.DeepCopy())
	}
	if len(out.Metrics) == 0 && len(out.Templates) == 0 {
		return AnalysisSpec{}, false
	}
	out.setDefaults()
	return out, true
}

// BackgroundAnalysis returns spec.analysis.background as an analysis to
// run, with spec.analysis' settings and args and its defaults, the step it
// starts at, and false when there is none. Its count is unbounded: it
// measures until promotion, whatever spec.analysis.count says.
func (s *RolloutSpec) BackgroundAnalysis() (AnalysisSpec, int32, bool) {
	if s.Analysis == nil || s.Analysis.Background == nil || len(s.Analysis.Background.Templates) == 0 {
		return AnalysisSpec{}, 0, false
	}
	var from int32
	if bg := s.Analysis.Background; bg.StartingStep != nil {
		from = *bg.StartingStep
	}
	return s.Analysis.unbounded(s.Analysis.Background.Templates), from, true
}

// PostPromotionAnalysis returns spec.analysis.postPromotion as an analysis
// to run, as BackgroundAnalysis does, with its window; false when there is
// none. Its count is unbounded: the window ends it.
func (s *RolloutSpec) PostPromotionAnalysis() (AnalysisSpec, time.Duration, bool) {
	if s.Analysis == nil || s.Analysis.PostPromotion == nil || len(s.Analysis.PostPromotion.Templates) == 0 {
		return AnalysisSpec{}, 0, false
	}
	pp := s.Analysis.PostPromotion
	return s.Analysis.unbounded(pp.Templates), pp.Window.Duration, true
}

// unbounded is a with templates for its metrics, no count, and defaults.
func (a *AnalysisSpec) unbounded(templates []AnalysisTemplateRef) AnalysisSpec {
	var out AnalysisSpec
	a.DeepCopyInto(&out)
	out.Background, out.PostPromotion, out.Metrics = nil, nil, nil
	out.Templates = append([]AnalysisTemplateRef(nil), templates...)
	out.Count = new(int32(math.MaxInt32))
	out.setDefaults()
	return out
}

// override replaces the fields o sets; args merge key by key.
func (a *AnalysisSpec) override(o *AnalysisSpec) {
	if o.Interval != nil {
		a.Interval = o.Interval
	}
	if o.Count != nil {
		a.Count = o.Count
	}
	if o.FailureLimit != nil {
		a.FailureLimit = o.FailureLimit
	}
	if o.Inconclusive != "" {
		a.Inconclusive = o.Inconclusive
	}
	if o.InconclusiveLimit != nil {
		a.InconclusiveLimit = o.InconclusiveLimit
	}
	if o.ConsecutiveErrorLimit != nil {
		a.ConsecutiveErrorLimit = o.ConsecutiveErrorLimit
	}
	if o.InitialDelay != nil {
		a.InitialDelay = o.InitialDelay
	}
	if o.ScrapeMargin != nil {
		a.ScrapeMargin = o.ScrapeMargin
	}
	for _, arg := range o.Args {
		a.Args = setArg(a.Args, arg)
	}
	if len(o.Metrics) > 0 {
		a.Metrics = o.Metrics
	}
	if len(o.Templates) > 0 {
		a.Templates = o.Templates
	}
}

// setArg replaces the argument of arg's name, or appends it.
func setArg(args []AnalysisArg, arg AnalysisArg) []AnalysisArg {
	for i := range args {
		if args[i].Name == arg.Name {
			args[i] = arg
			return args
		}
	}
	return append(args, arg)
}

// ArgsFromMap turns name=value pairs into literal args, sorted by name.
func ArgsFromMap(m map[string]string) []AnalysisArg {
	if len(m) == 0 {
		return nil
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]AnalysisArg, 0, len(m))
	for _, k := range names {
		v := m[k]
		out = append(out, AnalysisArg{Name: k, Value: &v})
	}
	return out
}

// LiteralArgs returns the args that have a literal value, by name; those
// read valueFrom are resolved by the controller.
func (a *AnalysisSpec) LiteralArgs() map[string]string {
	if len(a.Args) == 0 {
		return nil
	}
	out := make(map[string]string, len(a.Args))
	for _, arg := range a.Args {
		if arg.Value != nil {
			out[arg.Name] = *arg.Value
		}
	}
	return out
}

// Retention is measurementRetention or its default.
func (a *AnalysisSpec) Retention() int {
	if a == nil || a.MeasurementRetention == nil {
		return DefaultMeasurementRetention
	}
	return int(*a.MeasurementRetention)
}

// JudgeOrDefault is judge with its defaults applied.
func (a *AnalysisSpec) JudgeOrDefault() JudgeThresholds {
	if a == nil || a.Judge == nil {
		return JudgeThresholds{Pass: DefaultJudgePass, Marginal: DefaultJudgeMarginal}
	}
	return *a.Judge
}

// WeightOrDefault is the metric's weight, 1 when unset.
func (m *Metric) WeightOrDefault() int32 {
	if m.Weight == nil {
		return 1
	}
	return *m.Weight
}

func (a *AnalysisSpec) setDefaults() {
	if a.Interval == nil {
		a.Interval = &metav1.Duration{Duration: DefaultAnalysisInterval}
	}
	if a.Count == nil {
		a.Count = new(DefaultAnalysisCount)
	}
	if a.FailureLimit == nil {
		a.FailureLimit = new(DefaultFailureLimit)
	}
	if a.Inconclusive == "" {
		a.Inconclusive = DefaultInconclusivePolicy
	}
	if a.ConsecutiveErrorLimit == nil {
		a.ConsecutiveErrorLimit = new(DefaultConsecutiveErrorLimit)
	}
	if a.InconclusiveLimit == nil {
		a.InconclusiveLimit = new(DefaultInconclusiveLimit)
	}
	if a.InitialDelay == nil {
		a.InitialDelay = &metav1.Duration{}
	}
	if a.ScrapeMargin == nil {
		a.ScrapeMargin = &metav1.Duration{Duration: DefaultScrapeMargin}
	}
	for i := range a.Metrics {
		m := &a.Metrics[i]
		if p := m.Prometheus; p != nil && p.Timeout == nil {
			p.Timeout = &metav1.Duration{Duration: DefaultPrometheusTimeout}
		}
		if m.InconclusiveLimit == nil {
			m.InconclusiveLimit = a.InconclusiveLimit
		}
	}
}

// Bounds parses the range; a nil bound is open.
func (t ThresholdRange) Bounds() (lo, hi *float64, err error) {
	parse := func(field string, d Decimal) (*float64, error) {
		if d == "" {
			return nil, nil
		}
		v, err := d.Float64()
		if err != nil {
			return nil, fmt.Errorf("thresholdRange.%s: %w", field, err)
		}
		return &v, nil
	}
	if lo, err = parse("min", t.Min); err != nil {
		return nil, nil, err
	}
	if hi, err = parse("max", t.Max); err != nil {
		return nil, nil, err
	}
	return lo, hi, nil
}

// MarshalJSON writes the number literal.
func (d Decimal) MarshalJSON() ([]byte, error) {
	if d == "" {
		return []byte("null"), nil
	}
	if _, err := d.Float64(); err != nil {
		return nil, err
	}
	return []byte(d), nil
}

// UnmarshalJSON reads a number literal (or null).
func (d *Decimal) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = ""
		return nil
	}
	v := Decimal(b)
	if _, err := v.Float64(); err != nil {
		return err
	}
	*d = v
	return nil
}

// Float64 parses the number; it fails on anything but a finite JSON number.
func (d Decimal) Float64() (float64, error) {
	n := json.Number(d)
	v, err := n.Float64()
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || !json.Valid([]byte(d)) || strings.ContainsAny(string(d), "\"\t\n ") {
		return 0, fmt.Errorf("%q is not a finite JSON number", string(d))
	}
	return v, nil
}
