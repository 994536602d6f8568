package prometheus_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

// One instant query, its answer judged against a threshold. The server
// stands in for Prometheus on loopback and answers as its HTTP API does.
func Example() {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1764547200,"0.002"]}]}}`)
	}))
	defer server.Close()

	provider, err := prometheus.New(prometheus.Config{Address: server.URL})
	if err != nil {
		panic(err)
	}
	maxRate := 0.01
	m := analysis.Measure(context.Background(), provider, `sum(rate(http_requests_total{code=~"5.."}[1m]))`, analysis.Threshold{Max: &maxRate})
	fmt.Println(m.Phase, m.Message)
	// Output:
	// Successful value 0.002 within max 0.01
}
