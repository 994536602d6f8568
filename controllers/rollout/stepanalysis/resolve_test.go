package stepanalysis

import (
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
)

func TestResolve(t *testing.T) {
	str := func(s string) *string { return &s }
	m := func(name string) v1alpha1.Metric {
		return v1alpha1.Metric{Name: name, Prometheus: &v1alpha1.PrometheusMetric{Address: "http://p", Query: "q"},
			ThresholdRange: &v1alpha1.ThresholdRange{Max: "1"}}
	}
	templates := map[TemplateKey]v1alpha1.AnalysisTemplateSpec{
		{Name: "errors"}: {Args: []v1alpha1.TemplateArg{{Name: "service"}, {Name: "window", Value: str("1m")}},
			Metrics: []v1alpha1.Metric{m("error-rate")}},
		{Name: "latency", ClusterScope: true}: {Metrics: []v1alpha1.Metric{m("p95")}},
	}
	cases := []struct {
		name       string
		inline     []v1alpha1.Metric
		refs       []v1alpha1.AnalysisTemplateRef
		args       map[string]string
		want       []string // metric names
		wantArgs   map[string]string
		wantErr    string
		wantMissed bool
	}{
		{name: "inline only", inline: []v1alpha1.Metric{m("a")}, want: []string{"a"}},
		{name: "a template's default and the Rollout's value", refs: []v1alpha1.AnalysisTemplateRef{{Name: "errors"}},
			args: map[string]string{"service": "checkout"}, want: []string{"error-rate"},
			wantArgs: map[string]string{"service": "checkout", "window": "1m"}},
		{name: "the Rollout's value wins over the default", refs: []v1alpha1.AnalysisTemplateRef{{Name: "errors"}},
			args: map[string]string{"service": "checkout", "window": "5m"}, want: []string{"error-rate"},
			wantArgs: map[string]string{"service": "checkout", "window": "5m"}},
		{name: "a missing arg is named", refs: []v1alpha1.AnalysisTemplateRef{{Name: "errors"}},
			wantErr: `AnalysisTemplate errors needs arg "service"`, wantMissed: true},
		{name: "a missing template is named", refs: []v1alpha1.AnalysisTemplateRef{{Name: "nope"}},
			wantErr: "AnalysisTemplate nope not found", wantMissed: true},
		{name: "scope matters: a namespaced name is not a cluster template",
			refs: []v1alpha1.AnalysisTemplateRef{{Name: "errors", ClusterScope: true}}, args: map[string]string{"service": "x"},
			wantErr: "ClusterAnalysisTemplate errors not found", wantMissed: true},
		{name: "inline and templates together", inline: []v1alpha1.Metric{m("a")},
			refs: []v1alpha1.AnalysisTemplateRef{{Name: "latency", ClusterScope: true}}, want: []string{"a", "p95"}},
		{name: "a name twice is refused", inline: []v1alpha1.Metric{m("p95")},
			refs: []v1alpha1.AnalysisTemplateRef{{Name: "latency", ClusterScope: true}}, wantErr: `metric "p95" is defined twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.inline, tc.refs, templates, tc.args)
			if tc.wantErr != "" {
				var missing *MissingError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.As(err, &missing) != tc.wantMissed {
					t.Fatalf("err = %v, want %q (missing: %v)", err, tc.wantErr, tc.wantMissed)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range got {
				names = append(names, r.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("metrics %v, want %v", names, tc.want)
			}
			if tc.wantArgs != nil {
				for k, v := range tc.wantArgs {
					if got[len(got)-1].Args[k] != v {
						t.Errorf("arg %s = %q, want %q", k, got[len(got)-1].Args[k], v)
					}
				}
			}
		})
	}
	if templates[TemplateKey{Name: "errors"}].Metrics[0].Name != "error-rate" {
		t.Fatal("Resolve changed its input")
	}
}
