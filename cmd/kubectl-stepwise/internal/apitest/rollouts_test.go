package apitest

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/cmd/kubectl-stepwise/internal/commands"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

func TestPromoteFullWritesItsAnnotation(t *testing.T) {
	ns := newNamespace(t)
	createRollout(t, ns)
	res := run(t, ns, fixedClock(), "promote", "web", "--full")
	token := "2026-11-29T12:00:00.123Z"
	want := "rollout " + ns + "/web: promote --full requested (" + stepwisev1.PromoteFullAtAnnotation + "=" + token + "): the controller goes to the last step at once"
	if res.code != commands.ExitOK || !strings.HasPrefix(res.stdout, want) {
		t.Fatalf("promote --full (exit %d):\n%s\nwant it to start with:\n%s\nstderr:\n%s", res.code, res.stdout, want, res.stderr)
	}
	r := rolloutOf(t, ns, "web")
	if r.Annotations[stepwisev1.PromoteFullAtAnnotation] != token || r.Annotations[stepwisev1.PromoteAtAnnotation] != "" {
		t.Errorf("annotations %v, want only %s=%s", r.Annotations, stepwisev1.PromoteFullAtAnnotation, token)
	}
	// Until the controller handles it, get says it is pending.
	res = run(t, ns, fixedClock(), "get", "rollout", "web")
	if !strings.Contains(res.stdout, "Request:   promote --full requested just now, not handled yet") {
		t.Errorf("get does not show the pending request:\n%s", res.stdout)
	}
}

// TestGetShowsTrafficAndAnalysis: get shows what the routes carry
// (status.traffic) and each metric's verdict (status.analysis).
func TestGetShowsTrafficAndAnalysis(t *testing.T) {
	ns := newNamespace(t)
	createCloneSet(t, ns, "app")
	namedRollout(t, ns, "web", true, func(st *stepwisev1.RolloutStatus) {
		st.Phase, st.Reason, st.CurrentStepIndex = stepwisev1.RolloutProgressing, stepwisev1.ReasonAnalysisRunning, new(int32(0))
		st.StableRevision, st.CanaryRevision = "web-0", "web-1"
		st.StepReadyAt = &metav1.Time{Time: fixedNow.Add(-time.Minute)}
		st.Traffic = &stepwisev1.TrafficStatus{CanaryWeight: 20, Matches: 1, Accepted: true, Step: new(int32(0))}
		st.Analysis = &stepwisev1.AnalysisStatus{
			StepIndex: 0, Revision: "web-1", StartedAt: metav1.NewTime(fixedNow.Add(-time.Minute)), Phase: stepwisev1.AnalysisRunning,
			Metrics: []stepwisev1.MetricStatus{
				{Name: "error-rate", Phase: stepwisev1.AnalysisPassed, Count: 5, Successful: 5, LastValue: "0.001"},
				{Name: "latency-p99", Phase: stepwisev1.AnalysisRunning, Count: 2, Successful: 1, Failed: 1, LastValue: "0.31"},
			},
		}
	})
	res := run(t, ns, fixedClock(), "get", "rollout", "web")
	for _, want := range []string{
		"Traffic:   20% to web-canary, 80% to web, 1 match to web-canary\n",
		"Analysis: Running for step 1, started 60s ago\n",
		"  error-rate   Passed   5 measured  5 successful, 0 failed, 0 inconclusive, 0 errors  last 0.001\n",
		"  latency-p99  Running  2 measured  1 successful, 1 failed, 0 inconclusive, 0 errors  last 0.31\n",
	} {
		if res.code != commands.ExitOK || !strings.Contains(res.stdout, want) {
			t.Errorf("get (exit %d) lacks %q:\n%s%s", res.code, want, res.stdout, res.stderr)
		}
	}
}

// TestLintMatchesTheAPIServerForRollouts: what lint says of a Rollout is
// what the API server says on a strict dry-run create, word for word.
func TestLintMatchesTheAPIServerForRollouts(t *testing.T) {
	ns := newNamespace(t)
	base := `apiVersion: stepwise.dev/v1alpha1
kind: Rollout
metadata:
  name: web
  namespace: ` + ns + `
spec:
  workloadRef: {apiVersion: stepwise.dev/v1alpha1, kind: CloneSet, name: web}
  steps:
  - partition: 90%
    pause: {duration: 1m}
  - partition: 0
`
	cases := map[string]string{
		"valid":          base,
		"typo":           strings.Replace(base, "workloadRef", "workloadref", 1),
		"last step":      strings.Replace(base, "partition: 0\n", "partition: 10%\n", 1),
		"workload kind":  strings.Replace(base, "kind: CloneSet", "kind: Deployment", 1),
		"enum":           base + "  analysis:\n    inconclusive: Maybe\n",
		"traffic weight": strings.Replace(base, "  - partition: 0\n", "  - partition: 0\n    traffic: 120\n", 1),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			report, err := cli.Lint(context.Background(), []cli.ManifestFile{{Source: "rollout.yaml", Data: strings.NewReader(doc)}}, cli.LintOptions{})
			if err != nil || len(report.Findings) != 1 {
				t.Fatalf("lint: %+v, %v", report, err)
			}
			_, server := env.dynamic.Resource(cli.RolloutResource()).Namespace(ns).Create(t.Context(), decode(t, doc),
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
			if errString(report.Findings[0].Err) != errString(server) {
				t.Errorf("lint:\n%s\nAPI server:\n%s", errString(report.Findings[0].Err), errString(server))
			}
		})
	}
}
