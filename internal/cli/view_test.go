package cli

import (
	"errors"
	"fmt"
	"k8s.io/utils/ptr"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// viewCases are the states people look at most. Each renders with the fixed
// clock and without colour.
func viewCases() map[string]RolloutView {
	cases := map[string]RolloutView{}

	waiting := newTestRollout()
	waiting.Status.Phase = stepwisev1.RolloutProgressing
	waiting.Status.Reason = stepwisev1.ReasonWaitingForPods
	waiting.Status.Message = "waiting for 2 more updated pods to be ready"
	waiting.Status.CurrentStepIndex = new(int32(1))
	waiting.Status.StepStartedAt = ago(90 * time.Second)
	waiting.Status.Measurements = []stepwisev1.Measurement{
		{Metric: "error-rate", Step: 0, Value: "0.004", Phase: stepwisev1.MeasurementSuccessful, Time: *ago(3 * time.Minute)},
	}
	cases["waiting for pods"] = RolloutView{Rollout: waiting, Workload: newTestWorkload(10, 3, "50%")}

	timed := newTestRollout()
	timed.Status.Phase = stepwisev1.RolloutProgressing
	timed.Status.Reason = stepwisev1.ReasonStepPaused
	timed.Status.CurrentStepIndex = new(int32(0))
	timed.Status.StepReadyAt = ago(20 * time.Second)
	cases["timed pause"] = RolloutView{Rollout: timed, Workload: newTestWorkload(10, 1, "90%")}

	delayed := newTestRollout()
	delayed.Status.Phase = stepwisev1.RolloutProgressing
	delayed.Status.Reason = stepwisev1.ReasonAnalysisRunning
	delayed.Status.Message = "step 1/3 (partition 90%): analysis started: first measurement at 2026-11-29T12:00:21Z (metric error-rate looks back 1m, scrape margin 30s)"
	delayed.Status.CurrentStepIndex = new(int32(0))
	delayed.Status.StepReadyAt = ago(70 * time.Second)
	delayed.Status.Analysis = &stepwisev1.AnalysisStatus{
		StepIndex: 0, Revision: "web-7c9d8", StartedAt: *ago(0), Phase: stepwisev1.AnalysisRunning, CanaryReadyAt: ago(69 * time.Second),
		Metrics: []stepwisev1.MetricStatus{{Name: "error-rate", Phase: stepwisev1.AnalysisRunning, Lookback: "1m", FirstMeasurementAt: ago(-21 * time.Second)}},
	}
	cases["waiting for the first measurement"] = RolloutView{Rollout: delayed, Workload: newTestWorkload(10, 1, "90%")}

	promote := newTestRollout()
	promote.Status.Phase = stepwisev1.RolloutPaused
	promote.Status.Reason = stepwisev1.ReasonAwaitingPromotion
	promote.Status.Message = "step 2 waits for a promote"
	promote.Status.CurrentStepIndex = new(int32(1))
	promote.Status.StepReadyAt = ago(10 * time.Minute)
	promote.Status.LastHandledPromoteAt = "2026-11-29T11:00:00Z"
	promote.Annotations = map[string]string{
		stepwisev1.PromoteAtAnnotation: "2026-11-29T11:59:55.5Z",
		stepwisev1.PauseAtAnnotation:   "handled-token",
	}
	promote.Status.LastHandledPauseAt = "handled-token"
	cases["waiting for promote"] = RolloutView{Rollout: promote, Workload: newTestWorkload(10, 5, "50%")}

	aborted := newTestRollout()
	aborted.Status.Phase = stepwisev1.RolloutAborted
	aborted.Status.Reason = stepwisev1.ReasonAnalysisFailed
	aborted.Status.Message = "error-rate 0.2 is above 0.01"
	aborted.Status.Analysis = &stepwisev1.AnalysisStatus{
		StepIndex: 1, Revision: "web-7c9d8", StartedAt: *ago(4 * time.Minute), Phase: stepwisev1.AnalysisFailed,
		Message: "error-rate: 0.2 is above 0.01",
		Metrics: []stepwisev1.MetricStatus{{Name: "error-rate", Phase: stepwisev1.AnalysisFailed, Count: 3, Successful: 2, Failed: 1, LastValue: "0.2"}},
	}
	for i := range 7 {
		m := stepwisev1.Measurement{Metric: "error-rate", Step: 0, Value: fmt.Sprintf("0.00%d", i), Phase: stepwisev1.MeasurementSuccessful, Time: *ago(time.Duration(10-i) * time.Minute)}
		if i >= 5 {
			m.Step = 1
		}
		aborted.Status.Measurements = append(aborted.Status.Measurements, m)
	}
	aborted.Status.Measurements[6].Value = "0.2"
	aborted.Status.Measurements[6].Phase = stepwisev1.MeasurementFailed
	aborted.Status.Measurements[6].Message = "above 0.01"
	aborted.Status.Conditions = []metav1.Condition{{
		Type: stepwisev1.PartitionConflictCondition, Status: metav1.ConditionTrue, Reason: "FieldManagerConflict",
		Message: "partition is also written by argocd-controller",
	}}
	cases["aborted"] = RolloutView{Rollout: aborted, WorkloadErr: errors.New(`clonesets.stepwise.dev "web" is forbidden`)}

	healthy := newTestRollout()
	healthy.Generation = 3
	healthy.Spec.Paused = true
	healthy.Spec.Analysis = nil
	healthy.Spec.Steps[0].Pause = nil
	healthy.Spec.Steps[1].Pause = nil
	healthy.Status.Phase = stepwisev1.RolloutHealthy
	healthy.Status.Reason = stepwisev1.ReasonStable
	healthy.Status.CanaryRevision = ""
	cases["healthy, paused by spec, stale"] = RolloutView{Rollout: healthy, Workload: newTestWorkload(10, 10, "100%")}

	routed := newTestRollout()
	routed.Spec.Analysis = nil
	routed.Spec.TrafficRouting = &stepwisev1.TrafficRouting{StableService: "web", CanaryService: stepwisev1.CanaryService{Name: "web-canary"}, HTTPRoutes: []stepwisev1.HTTPRouteReference{{Name: "web"}}}
	routed.Spec.Steps[0].Traffic = ptr.To[int32](10)
	routed.Spec.Steps[0].Matches = []stepwisev1.TrafficMatch{{Header: &stepwisev1.StringMatch{Name: "x-canary", Value: "1"}}}
	routed.Spec.Steps[2].Traffic = ptr.To[int32](100)
	routed.Status.Phase, routed.Status.Reason, routed.Status.CurrentStepIndex = stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForTraffic, ptr.To[int32](0)
	routed.Status.Traffic = &stepwisev1.TrafficStatus{CanaryWeight: 10, Matches: 1, Accepted: false, StableRevision: "web-5f6b4", CanaryRevision: "web-7c9d8"}
	routed.Status.Conditions = []metav1.Condition{{
		Type: stepwisev1.TrafficConflictCondition, Status: metav1.ConditionTrue, Reason: "FieldManagerConflict",
		Message: "HTTPRoute shop/web: spec.rules written by kustomize-controller: another field manager changed what the Rollout sets (field manager \"stepwise-traffic\") while traffic is shifted",
	}}
	cases["traffic routing"] = RolloutView{Rollout: routed, Workload: newTestWorkload(10, 1, "90%")}

	full := newTestRollout()
	full.Status.Phase, full.Status.Reason, full.Status.CurrentStepIndex = stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods, ptr.To[int32](2)
	full.Status.PromotedFull = true
	full.Status.LastHandledPromoteFullAt = "2026-11-29T11:59:00Z"
	full.Annotations = map[string]string{stepwisev1.PromoteFullAtAnnotation: "2026-11-29T11:59:00Z", stepwisev1.AbortAtAnnotation: "2026-11-29T11:59:58Z"}
	cases["promoted in full"] = RolloutView{Rollout: full, Workload: newTestWorkload(10, 4, "0")}
	return cases
}

func TestRenderRollout(t *testing.T) {
	want := map[string]string{
		"traffic routing": `Rollout:   shop/web
Workload:  CloneSet web (stepwise.dev/v1alpha1), 10 replicas, partition 90%
Phase:     Progressing (WaitingForTraffic)
Canary:    web-7c9d8
Stable:    web-5f6b4
Traffic:   10% to web-canary, 90% to web, 1 match to web-canary (not accepted by a Gateway yet)
Gate:      open: 1/1 updated pods ready
Pause:     1m once the gate passes
Warning:   TrafficConflict: HTTPRoute shop/web: spec.rules written by kustomize-controller: another field manager changed what the Rollout sets (field manager "stepwise-traffic") while traffic is shifted

Steps:
     #  PARTITION  TRAFFIC        PAUSE
  ▶  1  90%        10% + 1 match  1m
        [####################] 1/1 updated pods ready
     2  50%        ready share    until promote
     3  0          100%
`,
		"waiting for pods": `Rollout:   shop/web
Workload:  CloneSet web (stepwise.dev/v1alpha1), 10 replicas, partition 50%
Phase:     Progressing (WaitingForPods)
Message:   waiting for 2 more updated pods to be ready
Canary:    web-7c9d8
Stable:    web-5f6b4
Gate:      waiting: 3/5 updated pods ready
Pause:     waits for promote once the gate passes

Steps:
     #  PARTITION  PAUSE          ANALYSIS
  ✓  1  90%        1m             error-rate
  ▶  2  50%        until promote  error-rate
        [############........] 3/5 updated pods ready
     3  0                         error-rate

Measurements (1):
  TIME    STEP  METRIC      VALUE  PHASE
  3m ago  1     error-rate  0.004  Successful
`,
		"timed pause": `Rollout:   shop/web
Workload:  CloneSet web (stepwise.dev/v1alpha1), 10 replicas, partition 90%
Phase:     Progressing (StepPaused)
Canary:    web-7c9d8
Stable:    web-5f6b4
Gate:      passed 20s ago
Pause:     40s left of 1m

Steps:
     #  PARTITION  PAUSE          ANALYSIS
  ▶  1  90%        1m             error-rate
        [####################] 1/1 updated pods ready
     2  50%        until promote  error-rate
     3  0                         error-rate
`,
		"waiting for promote": `Rollout:   shop/web
Workload:  CloneSet web (stepwise.dev/v1alpha1), 10 replicas, partition 50%
Phase:     Paused (AwaitingPromotion)
Message:   step 2 waits for a promote
Canary:    web-7c9d8
Stable:    web-5f6b4
Gate:      passed 10m ago
Pause:     waiting for promote (kubectl stepwise promote web)
Request:   promote requested 4s ago, not handled yet

Steps:
     #  PARTITION  PAUSE          ANALYSIS
  ✓  1  90%        1m             error-rate
  ▶  2  50%        until promote  error-rate
        [####################] 5/5 updated pods ready
     3  0                         error-rate
`,
		"waiting for the first measurement": `Rollout:   shop/web
Workload:  CloneSet web (stepwise.dev/v1alpha1), 10 replicas, partition 90%
Phase:     Progressing (AnalysisRunning)
Message:   step 1/3 (partition 90%): analysis started: first measurement at 2026-11-29T12:00:21Z (metric error-rate looks back 1m, scrape margin 30s)
Canary:    web-7c9d8
Stable:    web-5f6b4
Gate:      passed 70s ago
Pause:     1m, over

Steps:
     #  PARTITION  PAUSE          ANALYSIS
  ▶  1  90%        1m             error-rate
        [####################] 1/1 updated pods ready
     2  50%        until promote  error-rate
     3  0                         error-rate

Analysis: Running for step 1, started just now
  error-rate  Running  0/5 measured  0 successful, 0 failed, 0 inconclusive, 0 errors  first measurement in 21s: the query looks back 1m
`,
		"aborted": `Rollout:   shop/web
Workload:  CloneSet web (stepwise.dev/v1alpha1): clonesets.stepwise.dev "web" is forbidden
Phase:     Aborted (AnalysisFailed)
Message:   error-rate 0.2 is above 0.01
Canary:    web-7c9d8
Stable:    web-5f6b4
Pause:     none
Warning:   PartitionConflict: partition is also written by argocd-controller

Steps:
     #  PARTITION  PAUSE          ANALYSIS
     1  90%        1m             error-rate
  ✗  2  50%        until promote  error-rate
     3  0                         error-rate

Analysis: Failed for step 2, started 4m ago
  error-rate: 0.2 is above 0.01
  error-rate  Failed  3/5 measured  2 successful, 1 failed, 0 inconclusive, 0 errors  last 0.2

Measurements (last 5 of 7):
  TIME    STEP  METRIC      VALUE  PHASE
  8m ago  1     error-rate  0.002  Successful
  7m ago  1     error-rate  0.003  Successful
  6m ago  1     error-rate  0.004  Successful
  5m ago  2     error-rate  0.005  Successful
  4m ago  2     error-rate  0.2    Failed      above 0.01
`,
		"promoted in full": `Rollout:   shop/web
Workload:  CloneSet web (stepwise.dev/v1alpha1), 10 replicas, partition 0
Phase:     Progressing (WaitingForPods)
Canary:    web-7c9d8
Stable:    web-5f6b4
Gate:      waiting: 4/10 updated pods ready
Pause:     promoted in full: no pause or analysis is left
Request:   abort requested 2s ago, not handled yet

Steps:
     #  PARTITION  PAUSE          ANALYSIS
  ✓  1  90%        1m             error-rate
  ✓  2  50%        until promote  error-rate
  ▶  3  0                         error-rate
        [########............] 4/10 updated pods ready
`,
		"healthy, paused by spec, stale": `Rollout:   shop/web
Workload:  CloneSet web (stepwise.dev/v1alpha1), 10 replicas, partition 100%
Phase:     Healthy (Stable)
Status:    stale: describes generation 2, spec is at generation 3
Canary:    -
Stable:    web-5f6b4
Pause:     paused by spec.paused

Steps:
     #  PARTITION
     1  90%
     2  50%
     3  0
`,
	}
	for name, v := range viewCases() {
		t.Run(name, func(t *testing.T) {
			got := RenderRollout(v, ViewOptions{Now: testNow})
			assertText(t, got, want[name])
		})
	}
}

// TestRenderColor checks that colour changes nothing but colour: with the
// escape sequences stripped, the coloured view is the plain one, so the
// columns stay aligned.
func TestRenderColor(t *testing.T) {
	escapes := regexp.MustCompile("\x1b\\[[0-9;]*m")
	for name, v := range viewCases() {
		t.Run(name, func(t *testing.T) {
			plain := RenderRollout(v, ViewOptions{Now: testNow})
			colored := RenderRollout(v, ViewOptions{Now: testNow, Color: true})
			if !escapes.MatchString(colored) {
				t.Fatal("no colour in the coloured view")
			}
			assertText(t, escapes.ReplaceAllString(colored, ""), plain)
		})
	}
	healthy := viewCases()["healthy, paused by spec, stale"]
	if got := RenderRollout(healthy, ViewOptions{Now: testNow, Color: true}); !strings.Contains(got, "\x1b[32mHealthy (Stable)\x1b[0m") {
		t.Errorf("Healthy is not green:\n%q", got)
	}
}

func TestRenderMeasurementsLimit(t *testing.T) {
	v := viewCases()["aborted"]
	got := RenderRollout(v, ViewOptions{Now: testNow, Measurements: 2})
	if !strings.Contains(got, "Measurements (last 2 of 7):") || strings.Count(got, " error-rate  0.") != 2 {
		t.Errorf("want the last 2 measurements, got:\n%s", got)
	}
}

func TestColorEnabled(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	var buf strings.Builder
	if ColorEnabled(&buf, env(nil)) {
		t.Error("colour on for a buffer, which is not a terminal")
	}
	if ColorEnabled(&buf, env(map[string]string{"NO_COLOR": "1"})) {
		t.Error("colour on with NO_COLOR set")
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Minute:                    "1m",
		90 * time.Second:               "1m30s",
		time.Hour:                      "1h",
		time.Hour + 30*time.Minute:     "1h30m",
		2*time.Hour + 5*time.Second:    "2h0m5s",
		1500 * time.Millisecond:        "1.5s",
		30 * time.Second:               "30s",
		10*time.Minute + 0*time.Second: "10m",
	} {
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// assertText reports the first differing line, which is what a person
// needs to fix a rendering.
func assertText(t *testing.T, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("line %d differs:\n got: %q\nwant: %q\n\nfull output:\n%s", i+1, gl, wl, got)
		}
	}
}

// TestRenderJudge: a compared metric shows canary and stable medians, the
// effect, the p-value and the verdict; the analysis shows the score.
func TestRenderJudge(t *testing.T) {
	v := viewCases()["aborted"]
	a := v.Rollout.Status.Analysis
	if a == nil || len(a.Metrics) == 0 {
		t.Fatal("the aborted fixture has no analysis metric")
	}
	a.Score = "33"
	m := &a.Metrics[0]
	m.CanaryMedian, m.StableMedian, m.Effect, m.PValue, m.Verdict = "0.0419115", "0.00987", "3.22", "3.4e-08", "Fail"
	got := RenderRollout(v, ViewOptions{Now: testNow})
	for _, want := range []string{"score 33 (judge)", "canary 0.04191 vs stable 0.00987, effect +322.0%, p=3.4e-08: Fail"} {
		if !strings.Contains(got, want) {
			t.Errorf("view lacks %q:\n%s", want, got)
		}
	}
}

func TestRenderBackgroundAnalysis(t *testing.T) {
	v := viewCases()["aborted"]
	st := &v.Rollout.Status
	st.Reason = stepwisev1.ReasonBackgroundAnalysisFailed
	st.Analysis = nil
	st.BackgroundAnalysis = &stepwisev1.AnalysisStatus{
		StepIndex: 0, Revision: "web-7c9d8", StartedAt: *ago(9 * time.Minute), Phase: stepwisev1.AnalysisFailed,
		Message: "error-rate: 0.2 is above 0.01",
		Metrics: []stepwisev1.MetricStatus{{Name: "error-rate", Phase: stepwisev1.AnalysisFailed, Count: 9, Successful: 8, Failed: 1, LastValue: "0.2"}},
	}
	st.Measurements[6].Analysis = stepwisev1.MeasurementOfBackground
	got := RenderRollout(v, ViewOptions{Now: testNow})
	for _, want := range []string{
		"Background analysis: Failed from step 1, started 9m ago",
		"error-rate  Failed  9 measured  8 successful, 1 failed",
		"2 (background)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("view lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\nAnalysis:") {
		t.Errorf("view shows a step analysis there is none of:\n%s", got)
	}
}
