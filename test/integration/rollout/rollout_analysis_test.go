package rollout_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// Every step's analysis passes: the rollout walks the steps, the canary
// becomes stable and the partition is armed again.
func TestAnalysisPassPromotesStepByStepToHealthy(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.001})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(2)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisRunning))
		g.Expect(ro.Status.Analysis).NotTo(BeNil())
		kstatusProgressing(g, ro)
	})
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { stepIs(g, ro, 1) })
	done := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	if done.Status.Analysis != nil {
		t.Errorf("status.analysis = %+v, want it cleared once the rollout completed", done.Status.Analysis)
	}
	if got := measurementsOf(done); got[0] != 2 || got[1] != 2 {
		t.Errorf("measurements by step = %v, want 2 in each step", got)
	}
	for _, m := range done.Status.Measurements {
		if m.Phase != stepwisev1.MeasurementSuccessful || m.Value != "0.001" {
			t.Errorf("measurement %+v, want Successful with value 0.001", m)
		}
	}
	if p := partitionOf(t, ns, "web"); p != "0" {
		t.Fatalf("partition = %s, want the stable revision granted to every Pod (0)", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventAnalysisPassed, "step 1/2")
	waitForEvent(t, ns, "web", stepwisev1.EventAnalysisPassed, "step 2/2")
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutCompleted, "web-2-0-0")
}

// A failing measurement aborts: partition back to 100%, Aborted with the
// measurement in the message, Stalled for kstatus. A retry request starts
// the same revision again from step 0.
func TestAnalysisFailureAbortsAndRetryStartsAgain(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.5})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(2)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	aborted := eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisFailed))
		g.Expect(ro.Status.Message).To(ContainSubstring("value 0.5 above max 0.01"))
		g.Expect(ro.Status.CanaryRevision).To(Equal("web-2-0-0"))
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
		kstatusStalled(g, ro)
	})
	if a := aborted.Status.Analysis; a == nil || a.Phase != stepwisev1.AnalysisFailed {
		t.Errorf("status.analysis = %+v, want the failed tally kept on show", a)
	}
	if p := partitionOf(t, ns, "web"); p != "100%" {
		t.Fatalf("partition = %s, want 100%% after the abort", p)
	}
	waitForEvent(t, ns, "web", stepwisev1.EventRolloutAborted, "value 0.5 above max 0.01")
	waitForEvent(t, ns, "web", stepwisev1.EventAnalysisFailed, "error-rate")
	consistently(t, ns, "web", time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
	})

	env.prom.set(ns, answer{value: 0.001})
	token := annotate(t, ns, "web", stepwisev1.RetryAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.LastHandledRetryAt).To(Equal(token))
		g.Expect(ro.Status.Phase).NotTo(Equal(stepwisev1.RolloutAborted))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventRetried, "web-2-0-0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
}

// No data is inconclusive, never a pass: by default the rollout pauses, and
// a promote request moves it on.
func TestInconclusiveAnalysisPausesAndPromoteContinues(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{empty: true})
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0), skipAnalysis()))
	ro.Spec.Analysis = errorRate(2)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
		g.Expect(ro.Status.Message).To(ContainSubstring("empty vector"))
		kstatusProgressing(g, ro)
	})
	waitForEvent(t, ns, "web", stepwisev1.EventAnalysisInconclusive, "promote, retry or abort")
	queries := env.prom.count(ns)
	consistently(t, ns, "web", 1500*time.Millisecond, func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
	})
	if n := env.prom.count(ns); n != queries {
		t.Errorf("%d queries while paused on an inconclusive verdict, want none", n-queries)
	}

	annotate(t, ns, "web", stepwisev1.PromoteAtAnnotation)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		kstatusHealthy(g, ro)
		g.Expect(ro.Status.StableRevision).To(Equal("web-2-0-0"))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventPromoted, "analysis skipped")
}

// A Prometheus that cannot be reached gives errors, which are never a
// pass: past consecutiveErrorLimit the analysis is inconclusive and the
// rollout pauses on its step.
func TestUnreachablePrometheusNeverPromotes(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(2)
	ro.Spec.Analysis.ConsecutiveErrorLimit = new(int32(1))
	ro.Spec.Analysis.Metrics[0].Prometheus.Address = unreachableAddress(t)
	createRollout(t, ro)
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) { kstatusHealthy(g, ro) })

	commit(t, ns, "web", "2.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Reason).To(Equal(stepwisev1.ReasonAnalysisInconclusive))
		g.Expect(ro.Status.Message).To(ContainSubstring("2 errors in a row"))
		g.Expect(ro.Status.Message).To(ContainSubstring("could not connect"))
	})
	waitForEvent(t, ns, "web", stepwisev1.EventMeasurementError, "could not connect")
	consistently(t, ns, "web", 2*time.Second, func(g Gomega, ro *stepwisev1.Rollout) {
		stepIs(g, ro, 0)
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutPaused))
		g.Expect(ro.Status.StableRevision).To(Equal("web-1-0-0"))
	})
	if p := partitionOf(t, ns, "web"); p != "50%" {
		t.Fatalf("partition = %s, want step 0's 50%% kept", p)
	}
}

// The bearer token is read from a Secret (around the cache, which holds no
// Secrets) and sent to Prometheus.
func TestBearerTokenIsReadFromItsSecret(t *testing.T) {
	t.Parallel()
	ns := setup(t, true)
	env.prom.set(ns, answer{value: 0.001, token: "s3cr3t"})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom-token"},
		Data:       map[string][]byte{"token": []byte("s3cr3t\n")},
	}
	if err := env.client.Create(testContext(t), secret); err != nil {
		t.Fatal(err)
	}
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(1)
	ro.Spec.Analysis.Metrics[0].Prometheus.BearerTokenSecretRef = &stepwisev1.SecretKeyReference{Name: "prom-token", Key: "token"}
	done := releasePromoted(t, ro, "2.0.0", "web-2-0-0")
	if len(done.Status.Measurements) != 1 || done.Status.Measurements[0].Phase != stepwisev1.MeasurementSuccessful {
		t.Errorf("measurements = %+v, want one Successful", done.Status.Measurements)
	}
}
