package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/testsupport/promrunner"
)

// TestDemo runs the demo's story in-process, as `make demo` does, and checks
// its verdicts. Both runs share one log file: controller-runtime keeps the
// first logger it is given for the life of the process.
func TestDemo(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "controllers.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()

	t.Run("with Prometheus", func(t *testing.T) {
		noPrometheus := false
		if _, err := promrunner.Available(promrunner.Options{}); err != nil {
			// As in pkg/analysis: CI installs Prometheus, and a silent
			// fallback would hide that the analysis went untested.
			if os.Getenv("STEPWISE_SKIP_PROMETHEUS") != "1" {
				t.Fatalf("%v\n(set STEPWISE_SKIP_PROMETHEUS=1 to run the demo without it)", err)
			}
			noPrometheus = true
		}
		out := runDemo(t, options{Log: logFile, NoPrometheus: noPrometheus}, logPath)
		if !noPrometheus && !strings.Contains(out, "AnalysisFailed") {
			t.Errorf("v3 was not aborted by the analysis")
		}
	})
	t.Run("without Prometheus", func(t *testing.T) {
		if testing.Short() {
			t.Skip("a second cluster start; -short skips it")
		}
		out := runDemo(t, options{Log: logFile, NoPrometheus: true}, logPath)
		if !strings.Contains(out, "AbortRequested") {
			t.Errorf("v3 was not aborted by request")
		}
	})
}

// runDemo runs the story and checks what both variants promise; it returns
// the output.
func runDemo(t *testing.T, opts options, logPath string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	began := time.Now()
	err := run(ctx, &out, opts)
	t.Logf("demo output (%s):\n%s", time.Since(began).Round(time.Second), out.String())
	if err != nil {
		if log, readErr := os.ReadFile(logPath); readErr == nil {
			lines := strings.Split(string(log), "\n")
			t.Logf("controller log, last lines:\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
		t.Fatalf("run: %v", err)
	}
	_, summary, ok := strings.Cut(out.String(), "==> Summary")
	if !ok {
		t.Fatal("no summary in the output")
	}
	for _, want := range []string{"✓ " + verdictV2, "✓ " + fmt.Sprintf(verdictV3, 1)} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if strings.Contains(summary, "✗") {
		t.Errorf("summary reports a failed expectation")
	}
	return out.String()
}

func TestDecodeManifests(t *testing.T) {
	files, err := readManifests(filepath.Join("..", "..", "examples", "demo"))
	if err != nil {
		t.Fatal(err)
	}

	cs, ro, err := decodeManifests(files, "ns", "http://127.0.0.1:9999")
	if err != nil {
		t.Fatal(err)
	}
	if cs.Namespace != "ns" || ro.Namespace != "ns" {
		t.Errorf("namespaces %q, %q, want ns", cs.Namespace, ro.Namespace)
	}
	if got := cs.Spec.Template.Spec.Containers[0].Image; got != "example.com/web:v1" {
		t.Errorf("image %q, want example.com/web:v1", got)
	}
	if cs.Spec.UpdateStrategy.Type != stepwisev1.InPlaceIfPossibleCloneSetUpdateStrategyType {
		t.Errorf("update strategy %q, want InPlaceIfPossible", cs.Spec.UpdateStrategy.Type)
	}
	a, ok := ro.Spec.AnalysisForStep(0)
	if !ok || len(a.Metrics) != 1 {
		t.Fatalf("analysis of step 1: %+v, %t; want one metric", a, ok)
	}
	m := a.Metrics[0]
	if m.Prometheus.Address != "http://127.0.0.1:9999" {
		t.Errorf("address %q, want the substituted URL", m.Prometheus.Address)
	}
	for _, want := range []string{"{{ .Namespace }}", "{{ .CanaryPods }}", "http_requests_total"} {
		if !strings.Contains(m.Prometheus.Query, want) {
			t.Errorf("query lacks %q:\n%s", want, m.Prometheus.Query)
		}
	}
	if m.ThresholdRange.Max != "0.05" {
		t.Errorf("max %q, want 0.05", m.ThresholdRange.Max)
	}
	// Each step moves two of the six Pods: 2, 4, 6 updated.
	for i, want := range []int{4, 2, 0} {
		kept, err := scaledPartition(ro.Spec.Steps[i], 6)
		if err != nil || kept != want {
			t.Errorf("step %d keeps %d Pods (%v), want %d", i+1, kept, err, want)
		}
	}

	_, ro, err = decodeManifests(files, "ns", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ro.Spec.AnalysisForStep(0); ok {
		t.Error("without Prometheus the Rollout still has an analysis")
	}
}

func TestDecodeManifestsRejectsTypos(t *testing.T) {
	doc := "apiVersion: stepwise.dev/v1alpha1\nkind: Rollout\nmetadata: {name: web}\nspec:\n  stepz: []\n"
	_, _, err := decodeManifests([]manifestFile{{path: "typo.yaml", data: []byte(doc)}}, "ns", "")
	if err == nil || !strings.Contains(err.Error(), "stepz") {
		t.Errorf("decode of a misspelt field: %v, want an error naming it", err)
	}
}

func TestSince(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Unix(int64(s), 0)) }
	m := func(s int, step int32) stepwisev1.Measurement {
		return stepwisev1.Measurement{Metric: "error-rate", Step: step, Value: "0", Phase: stepwisev1.MeasurementSuccessful, Time: at(s)}
	}
	before := []stepwisev1.Measurement{m(1, 0), m(2, 1)}
	now := []stepwisev1.Measurement{m(2, 1), m(3, 0)} // the oldest dropped, one added
	if got := since(before, now); len(got) != 1 || !got[0].Time.Equal(new(at(3))) {
		t.Errorf("since = %+v, want the one at 3s", got)
	}
	if got := since(nil, now); len(got) != 2 {
		t.Errorf("since(nil) = %d measurements, want 2", len(got))
	}
}

// scaledPartition is how many of replicas Pods a step keeps on the stable
// revision, a percent rounded up as the CRD documents.
func scaledPartition(step stepwisev1.RolloutStep, replicas int) (int, error) {
	return intstr.GetScaledValueFromIntOrPercent(&step.Partition, replicas, true)
}
