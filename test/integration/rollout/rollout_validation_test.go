package rollout_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
)

// The CRD refuses a metric's bad Prometheus settings with a message naming
// the field, before any controller sees them.
func TestPrometheusValidationNamesTheField(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	headers := func(h map[string]stepwisev1.HeaderValue) func(*stepwisev1.PrometheusMetric) {
		return func(p *stepwisev1.PrometheusMetric) { p.Headers = h }
	}
	caRef := func(address string, insecure bool, ref stepwisev1.CAReference) func(*stepwisev1.PrometheusMetric) {
		return func(p *stepwisev1.PrometheusMetric) {
			p.Address, p.InsecureSkipVerify = address, insecure
			p.TLS = &stepwisev1.PrometheusTLS{CARef: &ref}
		}
	}
	configMap := stepwisev1.CAReference{Kind: stepwisev1.CAReferenceConfigMap, Name: "prom-ca", Key: "ca.crt"}
	cases := []struct {
		name   string
		mutate func(*stepwisev1.PrometheusMetric)
		want   string // empty: accepted
	}{
		{"header name with a space", headers(map[string]stepwisev1.HeaderValue{"X Org": "a"}), "prometheus.headers names must be HTTP tokens"},
		{"header name with a colon", headers(map[string]stepwisev1.HeaderValue{"X-Org:": "a"}), "prometheus.headers names must be HTTP tokens"},
		{"header name too long", headers(map[string]stepwisev1.HeaderValue{strings.Repeat("x", 129): "a"}), "prometheus.headers names must be HTTP tokens"},
		{"header value with CR LF", headers(map[string]stepwisev1.HeaderValue{"X-Org": "a\r\nX-Injected: 1"}), "prometheus.headers values must not hold control characters"},
		{"header value with NUL", headers(map[string]stepwisev1.HeaderValue{"X-Org": "a\x00"}), "prometheus.headers values must not hold control characters"},
		{"header value too long", headers(map[string]stepwisev1.HeaderValue{"X-Org": stepwisev1.HeaderValue(strings.Repeat("a", 1025))}), "prometheus.headers.X-Org: Too long"},
		{"Host", headers(map[string]stepwisev1.HeaderValue{"host": "admin.internal"}), "prometheus.headers cannot set Host"},
		{"X-Forwarded-For", headers(map[string]stepwisev1.HeaderValue{"X-Forwarded-For": "10.0.0.1"}), "prometheus.headers cannot set Host"},
		{"Transfer-Encoding", headers(map[string]stepwisev1.HeaderValue{"Transfer-Encoding": "chunked"}), "prometheus.headers cannot set Host"},
		{"Proxy-Authorization", headers(map[string]stepwisev1.HeaderValue{"Proxy-Authorization": "Basic x"}), "prometheus.headers cannot set Host"},
		{"CA and insecureSkipVerify", caRef("https://prometheus.example", true, configMap), "prometheus.tls.caRef and prometheus.insecureSkipVerify are mutually exclusive"},
		{"CA over http", caRef("http://prometheus.example", false, configMap), "prometheus.tls.caRef needs an https prometheus.address"},
		{"CA in a Pod", caRef("https://prometheus.example", false, stepwisev1.CAReference{Kind: "Pod", Name: "p", Key: "k"}), "prometheus.tls.caRef.kind: Unsupported value"},
		{"CA key with a slash", caRef("https://prometheus.example", false, stepwisev1.CAReference{Kind: stepwisev1.CAReferenceSecret, Name: "s", Key: "../k"}), "prometheus.tls.caRef.key must be a valid ConfigMap or Secret key"},
		{"a CA over https is accepted", caRef("HTTPS://prometheus.example", false, configMap), ""},
		{"tokens, tab and the widest value are accepted", headers(map[string]stepwisev1.HeaderValue{
			"X-Scope-OrgID": "team-a", "Accept-Language": "fr\tbe", "X!#$%&'*+.^_`|~-1": stepwisev1.HeaderValue(strings.Repeat("a", 1024)),
		}), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ro := newRollout(ns, "invalid", cloneSetRef("web"), stepAt(num(0)))
			ro.Spec.Analysis = errorRate(1)
			tc.mutate(ro.Spec.Analysis.Metrics[0].Prometheus)
			ro.GenerateName, ro.Name = "v-", ""
			err := env.client.Create(testContext(t), ro)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid Rollout refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("the API server accepted the Rollout")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
}

// A background analysis that could never start, and a background or
// post-promotion analysis without a template to measure, are refused.
func TestImpossibleSpanningAnalysisIsRefused(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cases := []struct {
		name   string
		mutate func(*stepwisev1.AnalysisSpec)
		want   string
	}{
		{"background starting past the last step", func(a *stepwisev1.AnalysisSpec) {
			a.Background = &stepwisev1.BackgroundAnalysis{Templates: []stepwisev1.AnalysisTemplateRef{{Name: "smoke"}}, StartingStep: new(int32(1))}
		}, "spec.analysis.background.startingStep must be the index of one of spec.steps"},
		{"background without a template", func(a *stepwisev1.AnalysisSpec) {
			a.Background = &stepwisev1.BackgroundAnalysis{Templates: []stepwisev1.AnalysisTemplateRef{}}
		}, "spec.analysis.background.templates"},
		{"postPromotion without a template", func(a *stepwisev1.AnalysisSpec) {
			a.PostPromotion = &stepwisev1.PostPromotionAnalysis{Window: metav1.Duration{Duration: 10 * time.Minute},
				Templates: []stepwisev1.AnalysisTemplateRef{}}
		}, "spec.analysis.postPromotion.templates"},
		{"postPromotion window under a second", func(a *stepwisev1.AnalysisSpec) {
			a.PostPromotion = &stepwisev1.PostPromotionAnalysis{Window: metav1.Duration{Duration: time.Millisecond},
				Templates: []stepwisev1.AnalysisTemplateRef{{Name: "smoke"}}}
		}, "analysis.postPromotion.window must be a duration of at least 1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ro := newRollout(ns, "invalid", cloneSetRef("web"), stepAt(num(0)))
			ro.Spec.Analysis = errorRate(1)
			tc.mutate(ro.Spec.Analysis)
			ro.GenerateName, ro.Name = "v-", ""
			err := env.client.Create(testContext(t), ro)
			if err == nil {
				t.Fatal("the API server accepted the Rollout")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
}
