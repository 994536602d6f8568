package rollout

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

func TestAppendMeasurementKeepsTheNewest(t *testing.T) {
	var st v1alpha1.RolloutStatus
	for i := range v1alpha1.MaxMeasurements + 5 {
		appendMeasurement(&st, v1alpha1.Measurement{Metric: "m", Step: int32(i)})
	}
	if len(st.Measurements) != v1alpha1.MaxMeasurements {
		t.Fatalf("%d measurements kept, want %d", len(st.Measurements), v1alpha1.MaxMeasurements)
	}
	if first, last := st.Measurements[0].Step, st.Measurements[len(st.Measurements)-1].Step; first != 5 || last != int32(v1alpha1.MaxMeasurements+4) {
		t.Errorf("kept steps %d..%d, want the newest, 5..%d", first, last, v1alpha1.MaxMeasurements+4)
	}
}

// A metric naming an address outside the manager's allow-list gets an Error
// measurement that names the flag, before its Secret is read and before
// any provider is built.
func TestMeasureRefusesAddressesOutsideTheAllowList(t *testing.T) {
	var built []string
	r := &Reconciler{
		APIReader:         noReads{t},
		AnalysisAddresses: []string{"http://prometheus.monitoring:9090", "https://thanos.example/tenant-a"},
		ProviderFactory: func(m v1alpha1.PrometheusMetric, _ ResolvedRefs, _ ProviderLimits) (analysis.Provider, error) {
			built = append(built, m.Address)
			return constProvider{}, nil
		},
	}
	ro := &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	metric := func(address string) v1alpha1.Metric {
		return v1alpha1.Metric{
			Name: "error-rate",
			Prometheus: &v1alpha1.PrometheusMetric{
				Address:              address,
				Query:                "up",
				BearerTokenSecretRef: &v1alpha1.SecretKeyReference{Name: "prom-token", Key: "token"},
			},
			ThresholdRange: v1alpha1.ThresholdRange{Max: "1"},
		}
	}
	for _, address := range []string{
		"http://attacker.example:9090",
		"http://prometheus.monitoring:9090@attacker.example",
		"https://thanos.example/tenant-b",
		"https://user:hunter2@thanos.example/tenant-a/../tenant-b",
	} {
		m := (&measurer{r: r, ro: ro}).Measure(context.Background(), metric(address), "up")
		if m.Phase != analysis.PhaseError || !strings.Contains(m.Message, "is not allowed by the manager's --analysis-allowed-addresses") {
			t.Errorf("Measure(%s) = %+v, want an Error naming the flag", address, m)
		}
		if strings.Contains(m.Message, "hunter2") {
			t.Errorf("Measure(%s) message %q leaks the password", address, m.Message)
		}
	}
	if len(built) != 0 {
		t.Fatalf("providers built for refused addresses: %v", built)
	}

	m := (&measurer{r: r, ro: ro}).Measure(context.Background(), func() v1alpha1.Metric {
		mt := metric("https://thanos.example/tenant-a/")
		mt.Prometheus.BearerTokenSecretRef = nil
		return mt
	}(), "up")
	if m.Phase != analysis.PhaseSuccessful || len(built) != 1 {
		t.Errorf("Measure(allowed) = %+v with providers %v, want Successful through one provider", m, built)
	}
}

// constProvider answers every query with 0.
type constProvider struct{}

func (constProvider) Query(context.Context, string) (analysis.Result, error) {
	return analysis.Result{Kind: analysis.KindScalar, Type: "scalar", Samples: []analysis.Sample{{Value: 0}}}, nil
}

// noReads fails the test on any read: a refused metric reads no Secret.
type noReads struct{ t *testing.T }

func (n noReads) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	n.t.Errorf("read %s", key)
	return errors.New("no reads expected")
}

func (n noReads) List(context.Context, client.ObjectList, ...client.ListOption) error {
	n.t.Error("list")
	return errors.New("no reads expected")
}
