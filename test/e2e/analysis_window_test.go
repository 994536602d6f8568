package e2e

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// An in-place canary keeps its Pods' names, so a window measured right
// after the update reads what the same Pods served on the previous
// revision. These stories run with no pause step, as a new user writes
// them, and with the issue's own numbers: a bad release fails 20 % of its
// requests, and the threshold is 5 %, so a window that still held a few
// seconds of it next to a minute of good history would pass.
const (
	windowMax = "0.05"
	// windowMargin is the scrape margin of these stories: Prometheus
	// scrapes every second.
	windowMargin = 2 * time.Second
	// windowTimeout bounds one wait of these stories: a 1m window, its
	// margin, the in-place restarts and the rollback, on a busy machine.
	windowTimeout = 4 * time.Minute
)

// windowShapes are the query shapes of the bad-release stories, each with
// its window as %s.
var windowShapes = map[string]string{
	"rate": `sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code="500"}[%s]))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[%s]))`,
	"increase": `sum(increase(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code="500"}[%s]))
/ sum(increase(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[%s]))`,
	"ratio-or-vector": `(sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}",code="500"}[%s])) or vector(0))
/ sum(rate(http_requests_total{namespace="{{ .Namespace }}",pod=~"{{ .CanaryPods }}"}[%s]))`,
}

func testAnalysisWindows(t *testing.T, e *rolloutEnv) {
	for _, window := range []string{"30s", "1m"} {
		for _, shape := range []string{"rate", "increase", "ratio-or-vector"} {
			t.Run("BadReleaseAbortedAtFirstStep/"+window+"/"+shape, func(t *testing.T) {
				t.Parallel()
				testBadReleaseWindow(t, e, window, windowShapes[shape])
			})
		}
		t.Run("GoodReleaseAfterAbortedBadOne/"+window, func(t *testing.T) {
			t.Parallel()
			testGoodAfterBad(t, e, window)
		})
	}
	t.Run("StatefulSetBadReleaseAbortedAtFirstStep", func(t *testing.T) {
		t.Parallel()
		testStatefulSetBadReleaseWindow(t, e)
	})
	t.Run("DocsQueryPromotesWithoutAPerson", func(t *testing.T) {
		t.Parallel()
		testDocsQuery(t, e)
	})
}

// windowAnalysis measures the canary three times a second apart with
// query (a format of windowShapes or a template of its own).
func windowAnalysis(address, query string) *stepwisev1.AnalysisSpec {
	return &stepwisev1.AnalysisSpec{
		Interval:     &metav1.Duration{Duration: time.Second},
		Count:        ptr.To[int32](3),
		ScrapeMargin: &metav1.Duration{Duration: windowMargin},
		Metrics: []stepwisev1.Metric{{
			Name:           errorRateMetric,
			Prometheus:     &stepwisev1.PrometheusMetric{Address: address, Query: query, Timeout: &metav1.Duration{Duration: 2 * time.Second}},
			ThresholdRange: &stepwisev1.ThresholdRange{Max: windowMax},
		}},
	}
}

// waitFor is waitRollout with a timeout of its own.
func (s *story) waitFor(what string, timeout time.Duration, check func(g Gomega, ro *stepwisev1.Rollout)) *stepwisev1.Rollout {
	s.t.Helper()
	return s.e.waitRolloutWeb(s.t, s.ns, what, timeout, check)
}

// A bad release whose Pods served the good revision for a whole window
// before the update is aborted at its first step: the first measurement
// waits until the window holds the canary's own traffic only.
func testBadReleaseWindow(t *testing.T, e *rolloutEnv, window, shape string) {
	g := NewWithT(t)
	s := e.newStory(t, "badwin", storyOptions{replicas: 4, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("50%", noPause), step("0", noPause)},
		Analysis: windowAnalysis(e.prom.URL(), strings.ReplaceAll(shape, "%s", window)),
	}})
	lookback, err := time.ParseDuration(window)
	g.Expect(err).NotTo(HaveOccurred())
	time.Sleep(lookback) // the good revision's history fills the window
	canary := s.commit("1.1.0-bad")

	ro := s.waitFor("aborted at the first step", windowTimeout, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
	})
	g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisFailed), ro.Status.Message)
	g.Expect(ro.Status.CanaryRevision).To(Equal(canary))
	g.Eventually(func(g Gomega) {
		g.Expect(s.rec.partitionHistory(g)).To(afterCommit("50%", "100%"), "never past the first step")
	}, windowTimeout, rolloutPoll).Should(Succeed())
	ms := s.rec.measurements(g)
	t.Logf("%s window, measurements of the bad canary: %+v", window, ms)
	g.Expect(ms).NotTo(BeEmpty())
	first := ms[0]
	g.Expect(first.Phase).To(Equal(stepwisev1.MeasurementFailed), "the first measurement already sees the canary's errors: %+v", first)
	g.Expect(valueOf(g, first)).To(BeNumerically(">", 0.15), "the window holds the bad canary's 20 %% only: %+v", first)
	a := ro.Status.Analysis
	g.Expect(a.Metrics[0].Lookback).To(Equal(window))
	g.Expect(first.Time.Time).To(BeTemporally(">=", a.CanaryReadyAt.Add(lookback+windowMargin)), "measured a window and a margin after readiness")
	s.waitEvent(stepwisev1.EventMeasurementScheduled, "step 1/2: metric "+errorRateMetric, "the query looks back "+window)
}

// A good release committed right after an aborted bad one is promoted:
// its canaries are the Pods that just served the bad release, and their
// errors are not the good release's.
func testGoodAfterBad(t *testing.T, e *rolloutEnv, window string) {
	g := NewWithT(t)
	s := e.newStory(t, "goodafter", storyOptions{replicas: 4, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("50%", noPause), step("0", noPause)},
		Analysis: windowAnalysis(e.prom.URL(), strings.ReplaceAll(windowShapes["rate"], "%s", window)),
	}})
	bad := s.commit("1.1.0-bad")
	var badCanaries []string
	g.Eventually(func(g Gomega) {
		badCanaries = s.podsOn(g, bad)
		g.Expect(badCanaries).To(HaveLen(2))
	}, windowTimeout, rolloutPoll).Should(Succeed())
	aborted := s.waitFor("the bad release aborted", windowTimeout, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.CanaryRevision).To(Equal(bad))
	})
	g.Eventually(func(g Gomega) {
		g.Expect(s.podsByImage(g)).To(Equal(map[string]int{webImage("1.0.0"): 4}))
	}, windowTimeout, rolloutPoll).Should(Succeed(), "the bad canaries rolled back in place")

	// Right away, with the bad release's errors still in every window.
	// Measurement times have second precision and an abort can take less
	// than a second, so the bad release's measurements are told apart by
	// identity, not by time.
	badOnes := map[string]bool{}
	for _, m := range append(s.rec.measurements(g), aborted.Status.Measurements...) {
		badOnes[measurementKey(m)] = true
	}
	good := s.commit("1.2.0")
	g.Eventually(func(g Gomega) {
		g.Expect(s.podsOn(g, good)).To(Equal(badCanaries), "the good release's canaries are the Pods that served the bad one")
	}, windowTimeout, rolloutPoll).Should(Succeed())
	s.waitFor("the good release promoted", windowTimeout, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).NotTo(Equal(stepwisev1.RolloutAborted), ro.Status.Message)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(good))
	})
	var judged []stepwisev1.Measurement
	for _, m := range s.rec.measurements(g) {
		if !badOnes[measurementKey(m)] {
			judged = append(judged, m)
		}
	}
	t.Logf("%s window, measurements of the good release: %+v", window, judged)
	g.Expect(stepsOf(judged)).To(Equal(map[int32]int{0: 3, 1: 3}))
	for _, m := range judged {
		g.Expect(m.Phase).To(Equal(stepwisev1.MeasurementSuccessful), "judged on its own traffic: %+v", m)
	}
}

// The query docs/analysis.md leads with, on the defaults it documents (the
// scrape margin among them) and no pause: promoted at every step without a
// person, and never a measurement without data. Only the interval and
// count are shortened, so the story takes a minute per step, not three.
func testDocsQuery(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	docs := docsAnalysis(t)
	g.Expect(docs.ScrapeMargin).To(BeNil(), "the docs' example keeps the default scrape margin")
	docs.Metrics[0].Prometheus.Address = e.prom.URL()
	docs.Interval = &metav1.Duration{Duration: 5 * time.Second}
	docs.Count = ptr.To[int32](2)
	s := e.newStory(t, "docs", storyOptions{replicas: 4, spec: stepwisev1.RolloutSpec{
		Steps:    []stepwisev1.RolloutStep{step("50%", noPause), step("0", noPause)},
		Analysis: docs,
	}})
	canary := s.commit("1.1.0")
	ro := s.waitFor("promoted by itself", windowTimeout, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(BeElementOf(stepwisev1.RolloutProgressing, stepwisev1.RolloutHealthy), "never paused: %s", ro.Status.Message)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(canary))
	})
	g.Expect(ro.Status.LastHandledPromoteAt).To(BeEmpty(), "no person promoted")
	ms := s.rec.measurements(g)
	g.Expect(stepsOf(ms)).To(Equal(map[int32]int{0: 2, 1: 2}))
	for _, m := range ms {
		g.Expect(m.Phase).To(Equal(stepwisev1.MeasurementSuccessful), "no inconclusive measurement: %+v", m)
	}
	g.Expect(s.rec.phases(g)).NotTo(ContainElement(string(stepwisev1.RolloutPaused)))
}

// A StatefulSet's canaries are recreated under the same names, so their
// series carry the previous revision's traffic too: the same wait applies.
func testStatefulSetBadReleaseWindow(t *testing.T, e *rolloutEnv) {
	g := NewWithT(t)
	ns := e.namespace(t, "stswin")
	s := &story{e: e, t: t, ns: ns, rec: e.record(t, ns)}
	labels := map[string]string{"app": "web"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](4), ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: webImage("1.0.0")}}},
			},
		},
	}
	g.Expect(e.client.Create(t.Context(), sts)).To(Succeed())
	stable := e.waitStatefulSet(t, ns, "web", func(g Gomega, sts *appsv1.StatefulSet) {
		g.Expect(sts.Status.ReadyReplicas).To(BeEquivalentTo(4))
		g.Expect(sts.Status.CurrentRevision).To(Equal(sts.Status.UpdateRevision))
	}).Status.CurrentRevision
	s.waitRates(4)
	ro := &stepwisev1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: stepwisev1.RolloutSpec{
		WorkloadRef: stepwisev1.WorkloadReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web"},
		Steps:       []stepwisev1.RolloutStep{step("2", noPause), step("0", noPause)},
		Analysis:    windowAnalysis(e.prom.URL(), strings.ReplaceAll(windowShapes["rate"], "%s", "30s")),
	}}
	g.Expect(e.client.Create(t.Context(), ro)).To(Succeed())
	s.waitRollout("adopts the running revision", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutHealthy))
		g.Expect(ro.Status.StableRevision).To(Equal(stable))
	})
	time.Sleep(30 * time.Second) // the good revision's history fills the window

	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &appsv1.StatefulSet{}
		if err := e.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, cur); err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = webImage("1.1.0-bad")
		return e.client.Update(t.Context(), cur)
	})).To(Succeed())
	aborted := s.waitFor("aborted at the first step", windowTimeout, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
	})
	g.Expect(aborted.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisFailed), aborted.Status.Message)
	g.Expect(aborted.Status.Message).To(ContainSubstring("aborted at step 1/2"))
	ms := s.rec.measurements(g)
	t.Logf("StatefulSet, measurements of the bad canary: %+v", ms)
	g.Expect(ms).NotTo(BeEmpty())
	g.Expect(ms[0].Phase).To(Equal(stepwisev1.MeasurementFailed), "the first measurement already sees the canary's errors: %+v", ms[0])
	g.Expect(valueOf(g, ms[0])).To(BeNumerically(">", 0.15))
	g.Expect(ms[0].Time.Time).To(BeTemporally(">=", aborted.Status.Analysis.CanaryReadyAt.Add(30*time.Second+windowMargin)))
}

// docsAnalysis reads the first example of docs/analysis.md, the one the
// page leads with, so that the docs stay what runs.
func docsAnalysis(t *testing.T) *stepwisev1.AnalysisSpec {
	t.Helper()
	page, err := os.ReadFile("../../docs/analysis.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(page)
	if block == nil {
		t.Fatal("docs/analysis.md has no yaml example")
	}
	var example struct {
		Spec struct {
			Analysis stepwisev1.AnalysisSpec `json:"analysis"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(block[1], &example); err != nil {
		t.Fatalf("the first example of docs/analysis.md: %v", err)
	}
	if len(example.Spec.Analysis.Metrics) != 1 {
		t.Fatalf("the docs' example has %d metrics, want 1", len(example.Spec.Analysis.Metrics))
	}
	return &example.Spec.Analysis
}

func valueOf(g Gomega, m stepwisev1.Measurement) float64 {
	v, err := strconv.ParseFloat(m.Value, 64)
	g.Expect(err).NotTo(HaveOccurred(), "measurement %+v has a value", m)
	return v
}
