package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestParseSteps(t *testing.T) {
	good := map[string][]int{
		"10%,50%,100%":     {10, 50, 100},
		" 10% , 100% ":     {10, 100},
		"100%":             {100},
		"1%,2%,99%,100%":   {1, 2, 99, 100},
		"25%,50%,75%,100%": {25, 50, 75, 100},
	}
	for in, want := range good {
		got, err := ParseSteps(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseSteps(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":                                 `no steps`,
		"150%":                             `"150%" is not a percent between 1% and 100%`,
		"0%,100%":                          `"0%" is not a percent between 1% and 100%`,
		"50,100%":                          `"50" is not a percent between 1% and 100% (write "50%")`,
		"10.5%,100%":                       `"10.5%" is not a percent between 1% and 100%`,
		"-10%,100%":                        `"-10%" is not a percent between 1% and 100%`,
		"10%,,100%":                        `"" is not a percent between 1% and 100%`,
		"50%,10%,100%":                     `"10%" after 50%: steps must update more pods each time`,
		"50%,50%,100%":                     `"50%" after 50%: steps must update more pods each time`,
		"10%,50%":                          `the last step is 50%: it must be 100%`,
		strings.Repeat("1%,", 20) + "100%": `21 steps is more than the 20 a Rollout allows`,
	}
	for in, want := range bad {
		_, err := ParseSteps(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSteps(%q) error = %v, want it to contain %q", in, err, want)
		}
	}
}

func TestParsePause(t *testing.T) {
	for in, want := range map[string]*PlanPause{
		"":       nil,
		"1m":     {Duration: time.Minute},
		"1h30m":  {Duration: 90 * time.Minute},
		"1.5m":   {Duration: 90 * time.Second},
		"manual": {Manual: true},
	} {
		got, err := ParsePause(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParsePause(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"0s", "-1m", "+1m", "1", ".5s", "soon", "1 m"} {
		if _, err := ParsePause(in); err == nil || !strings.Contains(err.Error(), "positive duration") {
			t.Errorf("ParsePause(%q) error = %v, want a positive-duration error", in, err)
		}
	}
}

func TestParseErrorRateMax(t *testing.T) {
	for in, want := range map[string]stepwisev1.Decimal{"0.01": "0.01", ".01": "0.01", "1e-2": "0.01", "0": "0", "1": "1"} {
		got, err := ParseErrorRateMax(in)
		if err != nil || got != want {
			t.Errorf("ParseErrorRateMax(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"1%":   `"1%" is not a ratio between 0 and 1 (a ratio: 1% is 0.01)`,
		"2":    `"2" is not a ratio between 0 and 1`,
		"-0.1": `"-0.1" is not a ratio between 0 and 1`,
		"NaN":  `"NaN" is not a ratio between 0 and 1`,
		"lots": `"lots" is not a ratio between 0 and 1`,
	} {
		if _, err := ParseErrorRateMax(in); err == nil || err.Error() != want {
			t.Errorf("ParseErrorRateMax(%q) error = %v, want %q", in, err, want)
		}
	}
}

func TestParsePrometheusAddress(t *testing.T) {
	for _, ok := range []string{"http://prometheus.monitoring:9090", "https://prom.example.com/api/prom"} {
		if _, err := ParsePrometheusAddress(ok); err != nil {
			t.Errorf("ParsePrometheusAddress(%q): %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"prometheus:9090":                    "is not an http or https URL",
		"ftp://prometheus":                   "is not an http or https URL",
		"http://":                            "has no host",
		"http://" + strings.Repeat("a", 520): "longer than 512",
		"http://[::1":                        "is not a URL",
	} {
		if _, err := ParsePrometheusAddress(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePrometheusAddress(%q) error = %v, want %q", in, err, want)
		}
	}
}

func TestParseVersionConstraint(t *testing.T) {
	if _, err := ParseVersionConstraint(">=1.0.0 <2.0.0"); err != nil {
		t.Error(err)
	}
	if _, err := ParseVersionConstraint(">=1.0.0 <<2"); err == nil || !strings.Contains(err.Error(), "is not a semver constraint") {
		t.Errorf("want a constraint error, got %v", err)
	}
}

func testCloneSet(containers ...string) *stepwisev1.CloneSet {
	cs := &stepwisev1.CloneSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
	for _, c := range containers {
		cs.Spec.Template.Spec.Containers = append(cs.Spec.Template.Spec.Containers, corev1.Container{Name: c, Image: "example.com/" + c + ":1.0.0"})
	}
	return cs
}

func fullPlanOptions(t *testing.T) PlanOptions {
	t.Helper()
	steps, err := ParseSteps("10%,50%,100%")
	if err != nil {
		t.Fatal(err)
	}
	return PlanOptions{
		Updated:           steps,
		Pause:             &PlanPause{Duration: time.Minute},
		ErrorRateMax:      "0.01",
		Prometheus:        "http://prometheus.monitoring:9090",
		VersionConstraint: ">=1.0.0 <2.0.0",
	}
}

func TestBuildPlanYAML(t *testing.T) {
	r, err := BuildPlan(testCloneSet("app"), fullPlanOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteManifest(&out, r, "yaml"); err != nil {
		t.Fatal(err)
	}
	want := `# Planned by kubectl stepwise plan. A step's partition is the pods kept on
# the stable revision; the controller owns the CloneSet's partition field.

apiVersion: stepwise.dev/v1alpha1
kind: Rollout
metadata:
  name: web
  namespace: shop
spec:
  workloadRef:
    apiVersion: stepwise.dev/v1alpha1
    kind: CloneSet
    name: web
  steps:
    - partition: 90% # 10% of pods updated
      pause:
        duration: 1m
    - partition: 50% # 50% of pods updated
      pause:
        duration: 1m
    - partition: 0 # every pod updated
  analysis:
    metrics:
      - name: error-rate
        prometheus:
          address: http://prometheus.monitoring:9090
          query: |
            (sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code=~"5.."}[{{ .CanaryAge }}])) or vector(0))
            / sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[{{ .CanaryAge }}]))
        thresholdRange:
          max: 0.01
  versionPolicy:
    container: app
    constraint: '>=1.0.0 <2.0.0'
`
	assertText(t, out.String(), want)
}

func TestBuildPlanMinimal(t *testing.T) {
	r, err := BuildPlan(testCloneSet("app", "sidecar"), PlanOptions{Name: "web-rollout", Updated: []int{20, 100}, Pause: &PlanPause{Manual: true}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteManifest(&out, r, "yaml"); err != nil {
		t.Fatal(err)
	}
	want := `# Planned by kubectl stepwise plan. A step's partition is the pods kept on
# the stable revision; the controller owns the CloneSet's partition field.

apiVersion: stepwise.dev/v1alpha1
kind: Rollout
metadata:
  name: web-rollout
  namespace: shop
spec:
  workloadRef:
    apiVersion: stepwise.dev/v1alpha1
    kind: CloneSet
    name: web
  steps:
    - partition: 80% # 20% of pods updated
      pause: {}
    - partition: 0 # every pod updated
`
	assertText(t, out.String(), want)
}

// TestManifestRoundTrip checks that what plan prints, YAML or JSON, reads
// back as the Rollout it was made from.
func TestManifestRoundTrip(t *testing.T) {
	r, err := BuildPlan(testCloneSet("app"), fullPlanOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"yaml", "json"} {
		var out bytes.Buffer
		if err := WriteManifest(&out, r, format); err != nil {
			t.Fatal(err)
		}
		data, err := yaml.YAMLToJSON(out.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		var back stepwisev1.Rollout
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if !reflect.DeepEqual(back.Spec, r.Spec) || back.Name != r.Name || back.Namespace != r.Namespace {
			t.Errorf("%s does not read back as the plan:\n%s", format, out.String())
		}
		if back.Spec.Steps[2].Partition != intstr.FromInt32(0) {
			t.Errorf("%s: last partition is %#v, want the integer 0", format, back.Spec.Steps[2].Partition)
		}
	}
	if err := WriteManifest(&bytes.Buffer{}, r, "xml"); err == nil {
		t.Error("xml output accepted")
	}
}

func TestBuildPlanErrors(t *testing.T) {
	o := fullPlanOptions(t)
	cases := []struct {
		name string
		cs   *stepwisev1.CloneSet
		edit func(*PlanOptions)
		want string
	}{
		{"two containers, none named", testCloneSet("app", "sidecar"), func(*PlanOptions) {},
			"--container: CloneSet shop/web runs app, sidecar: name the one whose image tag is the version"},
		{"unknown container", testCloneSet("app"), func(o *PlanOptions) { o.Container = "db" },
			`--container: "db" is not a container of CloneSet shop/web (it has app)`},
		{"threshold without address", testCloneSet("app"), func(o *PlanOptions) { o.Prometheus = "" },
			"--prometheus: required with --error-rate-max"},
		{"address without threshold", testCloneSet("app"), func(o *PlanOptions) { o.ErrorRateMax = "" },
			"--error-rate-max: required with --prometheus"},
		{"no steps", testCloneSet("app"), func(o *PlanOptions) { o.Updated = nil }, "--steps: no steps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := o
			c.edit(&o)
			_, err := BuildPlan(c.cs, o)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error = %v, want it to start with %q", err, c.want)
			}
		})
	}
}

func TestPartition(t *testing.T) {
	for updated, want := range map[int]intstr.IntOrString{
		1: intstr.FromString("99%"), 10: intstr.FromString("90%"), 99: intstr.FromString("1%"), 100: intstr.FromInt32(0),
	} {
		if got := Partition(updated); got != want {
			t.Errorf("Partition(%d) = %v, want %v", updated, got, want)
		}
	}
}

// TestPlanQueryIsTheDocumentedOne keeps `kubectl stepwise plan` and the
// example docs/analysis.md leads with (which the end-to-end tests run) the
// same query.
func TestPlanQueryIsTheDocumentedOne(t *testing.T) {
	page, err := os.ReadFile("../../docs/analysis.md")
	if err != nil {
		t.Fatal(err)
	}
	squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if !strings.Contains(squash(string(page)), squash(ErrorRateQuery)) {
		t.Errorf("docs/analysis.md does not show the query plan writes:\n%s", ErrorRateQuery)
	}
}

// TestValidatePlan: a Rollout the API server would refuse is not printed.
func TestValidatePlan(t *testing.T) {
	r := newTestRollout()
	if err := ValidatePlan(context.Background(), r); err != nil {
		t.Fatalf("the contract's example is refused: %v", err)
	}
	r.Spec.Steps = nil
	err := ValidatePlan(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), `the planned rollout would be refused: Rollout.stepwise.dev "web" is invalid: [spec.steps: Required value`) {
		t.Errorf("a Rollout without steps: err = %v", err)
	}
}
