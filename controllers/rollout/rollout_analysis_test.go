package rollout

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/controllers/rollout/stepanalysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
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
			ThresholdRange: &v1alpha1.ThresholdRange{Max: "1"},
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

// The metadata address is refused even when no allow-list is set, before
// any Secret is read or provider built; an operator allows a link-local
// IP by naming it, and the provider gets that allow-list and the manager's
// budget.
func TestMeasureRefusesTheMetadataAddressBeforeAnySecret(t *testing.T) {
	var built int
	r := &Reconciler{
		APIReader: noReads{t},
		ProviderFactory: func(v1alpha1.PrometheusMetric, ResolvedRefs, ProviderLimits) (analysis.Provider, error) {
			built++
			return constProvider{}, nil
		},
	}
	ro := &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	metric := func(address string, ref *v1alpha1.SecretKeyReference) v1alpha1.Metric {
		return v1alpha1.Metric{Name: "error-rate", ThresholdRange: &v1alpha1.ThresholdRange{Max: "1"},
			Prometheus: &v1alpha1.PrometheusMetric{Address: address, Query: "up", BearerTokenSecretRef: ref}}
	}
	token := &v1alpha1.SecretKeyReference{Name: "prom-token", Key: "token"}
	for _, address := range []string{"http://169.254.169.254/", "http://[fd00:ec2::254]:80", "http://[::ffff:169.254.169.254]/latest"} {
		m := (&measurer{r: r, ro: ro}).Measure(context.Background(), metric(address, token), "up")
		if m.Phase != analysis.PhaseError || !strings.Contains(m.Message, "is a link-local or cloud metadata address, which analysis never queries unless the manager's --analysis-allowed-addresses names that IP") {
			t.Errorf("Measure(%s) = %+v, want an Error saying the address is refused", address, m)
		}
	}
	if built != 0 {
		t.Fatalf("%d providers built for refused addresses", built)
	}

	var got ProviderLimits
	budget := prometheus.NewBudget(1 << 20)
	r = &Reconciler{
		APIReader:         noReads{t},
		AnalysisAddresses: []string{"http://169.254.10.5:9090"},
		AnalysisBudget:    budget,
		ProviderFactory: func(_ v1alpha1.PrometheusMetric, _ ResolvedRefs, limits ProviderLimits) (analysis.Provider, error) {
			got = limits
			return constProvider{}, nil
		},
	}
	m := (&measurer{r: r, ro: ro}).Measure(context.Background(), metric("http://169.254.10.5:9090", nil), "up")
	if m.Phase != analysis.PhaseSuccessful {
		t.Fatalf("Measure(the link-local IP the allow-list names) = %+v", m)
	}
	if got.Budget != budget || !got.Allow.Permits(netip.MustParseAddr("169.254.10.5")) || got.Allow.Permits(netip.MustParseAddr("169.254.169.254")) {
		t.Errorf("the provider's limits %+v: want the manager's budget and an allow-list permitting 169.254.10.5 only", got)
	}
}

// Past its namespace's share, a round is refused at once, counted by
// namespace; another namespace is not; a share given back is taken again.
func TestAdmitDefersPastTheNamespaceShare(t *testing.T) {
	r := &Reconciler{Metrics: NewMetrics(), mem: memory{shares: stepanalysis.NewShares(4)}} // 1 per namespace
	in := func(ns string) *measurer {
		return &measurer{r: r, ro: &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}}
	}
	done, refused := in("team-a").Admit()
	if refused != "" {
		t.Fatalf("the first round of team-a refused: %s", refused)
	}
	if _, refused := in("team-a").Admit(); !strings.Contains(refused, "namespace team-a already has 1 analysis rounds measuring, its share of the manager's 4 Rollout workers") {
		t.Errorf("a second round of team-a: refused %q", refused)
	}
	if other, refused := in("team-b").Admit(); refused != "" {
		t.Errorf("team-b refused while team-a holds its share: %s", refused)
	} else {
		other()
	}
	if n := testutil.ToFloat64(r.Metrics.AnalysisDeferred.WithLabelValues("team-a")); n != 1 {
		t.Errorf("deferred rounds of team-a counted %v, want 1", n)
	}
	done()
	if again, refused := in("team-a").Admit(); refused != "" {
		t.Errorf("team-a refused after giving its share back: %s", refused)
	} else {
		again()
	}
}

func TestBudgetGaugesReadTheReconcilersBudget(t *testing.T) {
	m := NewMetrics()
	if got := testutil.ToFloat64(m.AnalysisBytesLimit); got != 0 {
		t.Errorf("limit before a budget is watched = %v, want 0", got)
	}
	m.watchBudget(prometheus.NewBudget(0))
	if got := testutil.ToFloat64(m.AnalysisBytesLimit); got != prometheus.DefaultBudget {
		t.Errorf("limit = %v, want %d", got, prometheus.DefaultBudget)
	}
	if got := testutil.ToFloat64(m.AnalysisBytesInFlight); got != 0 {
		t.Errorf("in flight = %v, want 0", got)
	}
}
