package rollout_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// A web metric against a server on 127.0.0.1: the URL is rendered with an
// arg, the token header read from a Secret, the value read by JSONPath.
// A good value promotes; a bad one aborts.
func TestWebMetricPromotesAndAborts(t *testing.T) {
	t.Parallel()
	var rate atomic.Value
	rate.Store("0.001")
	var unauthorized atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0ken" || r.URL.Path != "/checkout/errors" {
			unauthorized.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"data":{"errorRate":`+rate.Load().(string)+`}}`)
	}))
	t.Cleanup(srv.Close)

	ns := setup(t, true)
	if err := env.client.Create(testContext(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-token"},
		StringData: map[string]string{"header": "Bearer t0ken\n"}}); err != nil {
		t.Fatal(err)
	}
	ro := newRollout(ns, "web", cloneSetRef("web"), stepAt(pct("50%")), stepAt(num(0)))
	ro.Spec.Analysis = errorRate(2)
	ro.Spec.Analysis.Args = stepwisev1.ArgsFromMap(map[string]string{"service": "checkout"})
	ro.Spec.Analysis.Metrics[0] = stepwisev1.Metric{
		Name: "web-errors",
		Web: &stepwisev1.WebMetric{URL: srv.URL + "/{{ .Args.service }}/errors", JSONPath: "{.data.errorRate}",
			Headers: []stepwisev1.WebHeader{{Name: "Authorization",
				SecretKeyRef: &stepwisev1.SecretKeyReference{Name: "web-token", Key: "header"}}}},
		ThresholdRange: &stepwisev1.ThresholdRange{Max: "0.01"},
	}
	done := releasePromoted(t, ro, "2.0.0", "web-2-0-0")
	if got := measurementsOf(done); got[0] != 2 || got[1] != 2 {
		t.Errorf("measurements by step = %v, want 2 in each step", got)
	}
	if n := unauthorized.Load(); n != 0 {
		t.Errorf("%d requests without the Secret's header or the rendered path", n)
	}

	rate.Store("0.5")
	commit(t, ns, "web", "3.0.0")
	eventually(t, ns, "web", func(g Gomega, ro *stepwisev1.Rollout) {
		g.Expect(ro.Status.Phase).To(Equal(stepwisev1.RolloutAborted))
		g.Expect(ro.Status.Message).To(ContainSubstring("value 0.5 above max 0.01"))
	})
}
