package cli

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// MaxSteps is the CRD's limit on spec.steps.
const MaxSteps = 20

// ErrorRateMetric is the name of the metric plan writes.
const ErrorRateMetric = "error-rate"

// ErrorRateQuery is the query plan writes and docs/analysis.md leads with:
// the share of 5xx responses among the canary Pods' requests since they
// became ready on the canary revision. The window grows with the canary
// ({{ .CanaryAge }}), so it never reads what the same Pods served on the
// previous revision and the first measurement needs only the scrape
// margin. No 5xx series reads as 0; no requests at all stays empty, which
// is inconclusive, never a pass.
const ErrorRateQuery = `(sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code=~"5.."}[{{ .CanaryAge }}])) or vector(0))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[{{ .CanaryAge }}]))
`

// PlanOptions are the validated inputs of `kubectl stepwise plan`.
type PlanOptions struct {
	// Name of the Rollout; the CloneSet's when empty.
	Name string
	// Updated is, per step, the percent of Pods on the new revision (1 to
	// 100, rising, ending at 100): what people think in. ParseSteps makes it.
	Updated []int
	// Pause after every step but the last; nil for none.
	Pause *PlanPause
	// ErrorRateMax, when set, adds the error-rate analysis; Prometheus is
	// then its address. ParseErrorRateMax and ParsePrometheusAddress make them.
	ErrorRateMax stepwisev1.Decimal
	Prometheus   string
	// Container and VersionConstraint make the versionPolicy; both empty
	// for none.
	Container         string
	VersionConstraint string
	// Traffic, when set, adds spec.trafficRouting and each step's traffic
	// and matches.
	Traffic *PlanTraffic
	// Templates, when set, adds analysis templates and their args.
	Templates *PlanTemplates
}

// PlanPause is a timed pause or, with Manual, a wait for a promote.
type PlanPause struct {
	Duration time.Duration
	Manual   bool
}

// ParseSteps reads "10%,50%,100%": the percent of Pods updated at each step.
// Its errors do not name the flag; the caller does.
func ParseSteps(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("no steps: give the percent of pods updated at each step, such as 10%%,50%%,100%%")
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxSteps {
		return nil, fmt.Errorf("%d steps is more than the %d a Rollout allows", len(parts), MaxSteps)
	}
	steps := make([]int, 0, len(parts))
	for i, raw := range parts {
		p := strings.TrimSpace(raw)
		n, ok := parsePercent(p)
		if !ok || n < 1 || n > 100 {
			hint := ""
			if _, err := strconv.Atoi(p); err == nil {
				hint = fmt.Sprintf(` (write "%s%%")`, p)
			}
			return nil, fmt.Errorf("%q is not a percent between 1%% and 100%%%s", p, hint)
		}
		if i > 0 && n <= steps[i-1] {
			return nil, fmt.Errorf("%q after %d%%: steps must update more pods each time", p, steps[i-1])
		}
		steps = append(steps, n)
	}
	if last := steps[len(steps)-1]; last != 100 {
		return nil, fmt.Errorf("the last step is %d%%: it must be 100%%, so that every pod is updated", last)
	}
	return steps, nil
}

// parsePercent reads a whole percent such as "10%"; the CRD takes no
// fractions, signs or spaces either.
func parsePercent(s string) (int, bool) {
	digits, ok := strings.CutSuffix(s, "%")
	if !ok || digits == "" || len(digits) > 3 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// ParsePause reads a duration such as 1m, or "manual" for a wait for promote.
func ParsePause(s string) (*PlanPause, error) {
	if s == "" {
		return nil, nil
	}
	if s == "manual" {
		return &PlanPause{Manual: true}, nil
	}
	// The CRD's pattern: time.ParseDuration also takes signs and forms such
	// as ".5s" that the API server would refuse.
	durationRE := regexp.MustCompile(`^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$`)
	d, err := time.ParseDuration(s)
	if err != nil || !durationRE.MatchString(s) || d <= 0 {
		return nil, fmt.Errorf("%q is neither a positive duration such as 30s, 5m or 1h30m nor \"manual\"", s)
	}
	return &PlanPause{Duration: d}, nil
}

// ParseErrorRateMax reads the highest acceptable share of failed requests, a
// ratio from 0 to 1.
func ParseErrorRateMax(s string) (stepwisev1.Decimal, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1 {
		hint := ""
		if strings.HasSuffix(strings.TrimSpace(s), "%") {
			hint = " (a ratio: 1% is 0.01)"
		}
		return "", fmt.Errorf("%q is not a ratio between 0 and 1%s", s, hint)
	}
	// FormatFloat gives a JSON number (no ".01" or "1e-2" as typed), which
	// is what the CRD stores.
	return stepwisev1.Decimal(strconv.FormatFloat(v, 'f', -1, 64)), nil
}

// ParsePrometheusAddress checks what the CRD checks (an http or https URL of
// at most 512 characters), so that a mistake shows here and not at apply time.
func ParsePrometheusAddress(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q is not an http or https URL", s)
	case u.Host == "":
		return "", fmt.Errorf("%q has no host", s)
	case len(s) > 512:
		return "", fmt.Errorf("%q is longer than 512 characters", s)
	}
	return s, nil
}

// ParseVersionConstraint checks a Masterminds/semver constraint.
func ParseVersionConstraint(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if len(s) > 256 {
		return "", fmt.Errorf("%q is longer than 256 characters", s)
	}
	if _, err := semver.NewConstraint(s); err != nil {
		return "", fmt.Errorf("%q is not a semver constraint such as \">=1.0.0 <2.0.0\": %w", s, err)
	}
	return s, nil
}

// PlanError is an error in an input of BuildPlan; Flag names the flag.
type PlanError struct {
	Flag string
	Err  error
}

func (e *PlanError) Error() string { return "--" + e.Flag + ": " + e.Err.Error() }
func (e *PlanError) Unwrap() error { return e.Err }

// Partition turns "percent of Pods updated" into what the CRD stores: the
// Pods kept on the stable revision. 100% updated is the integer 0, as the
// contract writes the last step.
func Partition(updated int) intstr.IntOrString {
	if updated >= 100 {
		return intstr.FromInt32(0)
	}
	return intstr.FromString(strconv.Itoa(100-updated) + "%")
}

// BuildPlan makes a Rollout for a CloneSet from validated options.
func BuildPlan(cs *stepwisev1.CloneSet, o PlanOptions) (*stepwisev1.Rollout, error) {
	if len(o.Updated) == 0 {
		return nil, &PlanError{Flag: "steps", Err: fmt.Errorf("no steps")}
	}
	name := o.Name
	if name == "" {
		name = cs.Name
	}
	r := &stepwisev1.Rollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: stepwisev1.GroupVersion.String(), Kind: "Rollout"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cs.Namespace},
		Spec: stepwisev1.RolloutSpec{
			WorkloadRef: stepwisev1.WorkloadReference{APIVersion: stepwisev1.GroupVersion.String(), Kind: "CloneSet", Name: cs.Name},
		},
	}
	for i, u := range o.Updated {
		step := stepwisev1.RolloutStep{Partition: Partition(u)}
		// No pause after the last step: the rollout is complete there, and
		// a pause would only hold its analysis back.
		if o.Pause != nil && i < len(o.Updated)-1 {
			step.Pause = &stepwisev1.StepPause{}
			if !o.Pause.Manual {
				step.Pause.Duration = &metav1.Duration{Duration: o.Pause.Duration}
			}
		}
		r.Spec.Steps = append(r.Spec.Steps, step)
	}

	switch {
	case o.ErrorRateMax != "" && o.Prometheus == "":
		return nil, &PlanError{Flag: "prometheus", Err: fmt.Errorf("required with --error-rate-max: the address of the Prometheus to ask")}
	case o.ErrorRateMax == "" && o.Prometheus != "":
		return nil, &PlanError{Flag: "error-rate-max", Err: fmt.Errorf("required with --prometheus: the highest error rate a step may show, such as 0.01")}
	case o.ErrorRateMax != "":
		r.Spec.Analysis = &stepwisev1.AnalysisSpec{Metrics: []stepwisev1.Metric{{
			Name:           ErrorRateMetric,
			Prometheus:     &stepwisev1.PrometheusMetric{Address: o.Prometheus, Query: ErrorRateQuery},
			ThresholdRange: &stepwisev1.ThresholdRange{Max: o.ErrorRateMax},
		}}}
	}

	if o.Container != "" || o.VersionConstraint != "" {
		container, err := pickContainer(cs, o.Container)
		if err != nil {
			return nil, &PlanError{Flag: "container", Err: err}
		}
		r.Spec.VersionPolicy = &stepwisev1.VersionPolicy{Container: container, Constraint: o.VersionConstraint}
	}
	if o.Traffic != nil {
		if err := applyTraffic(r, o.Traffic); err != nil {
			return nil, err
		}
	}
	if o.Templates != nil {
		if err := applyTemplates(r, o.Templates); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// pickContainer checks a container name against the CloneSet, or picks its
// only container when none is named.
func pickContainer(cs *stepwisev1.CloneSet, name string) (string, error) {
	var names []string
	for _, c := range cs.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	switch {
	case name != "" && slices.Contains(names, name):
		return name, nil
	case name != "":
		return "", fmt.Errorf("%q is not a container of CloneSet %s/%s (it has %s)", name, cs.Namespace, cs.Name, strings.Join(names, ", "))
	case len(names) == 1:
		return names[0], nil
	case len(names) == 0:
		return "", fmt.Errorf("CloneSet %s/%s has no containers", cs.Namespace, cs.Name)
	}
	return "", fmt.Errorf("CloneSet %s/%s runs %s: name the one whose image tag is the version", cs.Namespace, cs.Name, strings.Join(names, ", "))
}
