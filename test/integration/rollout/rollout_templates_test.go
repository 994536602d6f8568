package rollout_test

import (
	"time"

	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// errorRateTemplate is errorRate's metric as an AnalysisTemplate whose
// namespace comes from an arg: the fake Prometheus answers by the
// namespace a query names, so a query rendered without the arg's value
// gets no answer and can never pass.
func errorRateTemplate(ns, name string) *stepwisev1.AnalysisTemplate {
	return &stepwisev1.AnalysisTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: stepwisev1.AnalysisTemplateSpec{
			Args: []stepwisev1.TemplateArg{{Name: "target"}},
			Metrics: []stepwisev1.Metric{{
				Name: "error-rate",
				Prometheus: &stepwisev1.PrometheusMetric{
					Address: promAddress,
					Query:   `sum(rate(http_requests_total{namespace="{{ .Args.target }}",pod=~"{{ .CanaryPods }}",code=~"5.."}[{{ .CanaryAge }}]))`,
				},
				ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.01"},
			}},
		},
	}
}

func templateAnalysis(template string, args ...stepwisev1.AnalysisArg) *stepwisev1.AnalysisSpec {
	a := errorRate(2)
	a.Metrics = nil
	a.Templates = []stepwisev1.AnalysisTemplateRef{{Name: template}}
	a.Args = args
	return a
}

// A template that does not exist stalls the Rollout with a message naming
// it, and so does an arg the template needs that the Rollout does not
// give: the canary waits, the analysis never passes.
func TestMissingTemplateOrArgStallsNamingIt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		template bool
		args     []stepwisev1.AnalysisArg
		want     string
	}{
		{name: "missing template", want: "AnalysisTemplate errors not found"},
		{name: "missing arg", template: true, want: `AnalysisTemplate errors needs arg "target"`},
		{name: "missing Secret", template: true, want: `analysis arg "target": Secret analysis-args not found`,
			args: []stepwisev1.AnalysisArg{{Name: "target", ValueFrom: &stepwisev1.ArgValueFrom{
				SecretKeyRef: &stepwisev1.SecretKeyReference{Name: "analysis-args", Key: "namespace"}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := setup(t, true)
			env.prom.set(ns, answer{value: 0.001})
			if tc.template {
				if err := env.client.Create(testContext(t), errorRateTemplate(ns, "errors")); err != nil {
					t.Fatal(err)
				}
			}
			ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
			ro.Spec.Analysis = templateAnalysis("errors", tc.args...)
			createRollout(t, ro)
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

			commit(t, ns, "web", "2.0.0")
			eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
				c := condition(ro, "Stalled")
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(stepwisev1.ReasonAnalysisTemplateMissing))
				g.Expect(c.Message).To(ContainSubstring(tc.want))
				stepIs(g, ro, 0)
			})
			waitForEvent(t, ns, "web", stepwisev1.ReasonAnalysisTemplateMissing, tc.want)
			consistently(t, ns, "web", 1500*time.Millisecond, func(g Gomega, ro *stepwisev1.Rollout) {
				stepIs(g, ro, 0)
				g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
			})
			if n := env.prom.count(ns); n != 0 {
				t.Errorf("%d queries, want none without the template and its args", n)
			}
		})
	}
}

// One template, its arg read from one Secret, used by two Rollouts: both
// are promoted on the value the Secret holds, and each records the
// template it started with.
func TestTemplateArgFromSecretUsedByTwoRollouts(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for _, name := range []string{"web", "api"} {
		createCloneSet(t, newCloneSet(ns, name, 10, "1.0.0"))
		autopilot(t, ns, name)
	}
	startController(t, ns)
	env.prom.set(ns, answer{value: 0.001})
	ctx := testContext(t)
	if err := env.client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "analysis-args"},
		StringData: map[string]string{"namespace": ns}}); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Create(ctx, errorRateTemplate(ns, "errors")); err != nil {
		t.Fatal(err)
	}
	fromSecret := stepwisev1.AnalysisArg{Name: "target", ValueFrom: &stepwisev1.ArgValueFrom{
		SecretKeyRef: &stepwisev1.SecretKeyReference{Name: "analysis-args", Key: "namespace"}}}
	for _, name := range []string{"web", "api"} {
		ro := newRollout(ns, name, cloneSetRef(name), stepAt(pct("50%")), stepAt(num(0)))
		ro.Spec.Analysis = templateAnalysis("errors", fromSecret)
		createRollout(t, ro)
		eventually(t, ns, name, func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })
	}
	for _, name := range []string{"web", "api"} {
		commit(t, ns, name, "2.0.0")
	}
	for _, name := range []string{"web", "api"} {
		eventually(t, ns, name, func(g Gomega, ro *stepwisev1.Rollout) {
			g.Expect(ro.Status.AnalysisTemplates).To(HaveLen(1))
			g.Expect(ro.Status.AnalysisTemplates[0].Revision).To(Equal(name + "-2-0-0"))
		})
		done := eventually(t, ns, name, func(g Gomega, ro *stepwisev1.Rollout) {
			kstatusHealthy(g, ro)
			g.Expect(ro.Status.StableRevision).To(Equal(name + "-2-0-0"))
		})
		if got := measurementsOf(done); got[0] != 2 || got[1] != 2 {
			t.Errorf("%s: measurements by step = %v, want 2 in each step", name, got)
		}
	}
	if n := env.prom.count(ns); n < 8 {
		t.Errorf("%d queries named the Secret's namespace, want at least 8 (2 Rollouts x 2 steps x 2)", n)
	}
}
