package prometheus

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// scalarBody is a Prometheus instant-query answer holding the scalar 0.005.
const scalarBody = `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"0.005"]}}`

// fakePrometheus answers every query with body and records the last request.
type fakePrometheus struct {
	mu      sync.Mutex
	request *http.Request
	form    map[string]string
}

func (f *fakePrometheus) handler(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		f.request = r
		f.form = map[string]string{"query": r.Form.Get("query"), "timeout": r.Form.Get("timeout"), "time": r.Form.Get("time")}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

func (f *fakePrometheus) last() (*http.Request, map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.request, f.form
}

func newProvider(t *testing.T, cfg Config) *Provider {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v) error = %v", cfg, err)
	}
	t.Cleanup(p.CloseIdleConnections)
	return p
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"empty address", Config{}, "scheme must be http or https"},
		{"no scheme", Config{Address: "prometheus:9090"}, "scheme must be http or https"},
		{"unsupported scheme", Config{Address: "ftp://prometheus:9090"}, "scheme must be http or https"},
		{"no host", Config{Address: "http:///api"}, "no host"},
		{"unparsable", Config{Address: "http://[::1"}, "not a valid URL"},
		{"unparsable with a password", Config{Address: "http://user:hunter2@[::1"}, "not a valid URL"},
		{"negative timeout", Config{Address: "http://127.0.0.1:9090", Timeout: -time.Second}, "negative timeout"},
		{"token and authorization header", Config{Address: "http://127.0.0.1:9090", BearerToken: "t", Headers: map[string]string{"authorization": "Basic x"}}, "both a bearer token and an Authorization header"},
		{"empty header name", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"": "x"}}, "empty name"},
		{"header name with a space", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"X Org": "x"}}, `header name "X Org" is not a token`},
		{"header name with a colon", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"X-Org:": "x"}}, "is not a token"},
		{"header value with CR LF", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"X-Org": "a\r\nX-Injected: 1"}}, "header X-Org: value holds a control character"},
		{"header value with LF", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"X-Org": "a\nb"}}, "control character"},
		{"header value with NUL", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"X-Org": "a\x00b"}}, "control character"},
		{"Host header", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"host": "admin.internal"}}, "header Host cannot be set by a metric"},
		{"forwarding header", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"X-Forwarded-For": "10.0.0.1"}}, "header X-Forwarded-For cannot be set"},
		{"hop-by-hop header", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"transfer-encoding": "chunked"}}, "header Transfer-Encoding cannot be set"},
		{"proxy credentials", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"Proxy-Authorization": "Basic x"}}, "header Proxy-Authorization cannot be set"},
		{"framing header", Config{Address: "http://127.0.0.1:9090", Headers: map[string]string{"Content-Length": "0"}}, "header Content-Length cannot be set"},
		{"bearer token with a line break inside", Config{Address: "http://127.0.0.1:9090", BearerToken: "abc\nX-Injected: 1"}, "bearer token holds a control character"},
		{"CA without certificate", Config{Address: "https://127.0.0.1:9090", CACert: []byte("not pem")}, "no PEM certificate"},
		{"password is redacted", Config{Address: "ftp://user:hunter2@prometheus:9090"}, "user:xxxxx@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil {
				t.Fatalf("New() succeeded, want error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New() error = %q, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("New() error = %q leaks the password", err)
			}
		})
	}
}

func TestQuerySendsQueryTimeoutHeadersAndPathPrefix(t *testing.T) {
	fake := &fakePrometheus{}
	server := httptest.NewServer(fake.handler(scalarBody))
	defer server.Close()

	p := newProvider(t, Config{
		Address:     server.URL + "/prom/",
		Timeout:     3 * time.Second,
		BearerToken: "  s3cret\n",
		Headers:     map[string]string{"X-Scope-OrgID": "team-a", "Accept-Language": "fr\tbe"},
	})
	got, err := p.Query(context.Background(), "sum(up)")
	if err != nil {
		t.Fatalf("Query() error = %v", err)
	}
	want := analysis.Result{Kind: analysis.KindScalar, Type: "scalar", Samples: []analysis.Sample{{Value: 0.005}}}
	if got.Kind != want.Kind || got.Type != want.Type || len(got.Samples) != 1 || got.Samples[0].Value != 0.005 {
		t.Errorf("Query() = %+v, want %+v", got, want)
	}

	req, form := fake.last()
	checks := []struct{ what, got, want string }{
		{"path", req.URL.Path, "/prom/api/v1/query"},
		{"query", form["query"], "sum(up)"},
		{"server-side timeout", form["timeout"], "3s"},
		{"time (server's clock is used)", form["time"], ""},
		{"Authorization", req.Header.Get("Authorization"), "Bearer s3cret"},
		{"X-Scope-OrgID", req.Header.Get("X-Scope-OrgID"), "team-a"},
		{"Accept-Language", req.Header.Get("Accept-Language"), "fr\tbe"},
		{"Host (the address's, never a header's)", req.Host, strings.TrimPrefix(server.URL, "http://")},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
}

func TestQueryTimeout(t *testing.T) {
	release := make(chan struct{})
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Hang until the client gives up (or the test ends).
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer server.Close()
	defer close(release)

	p := newProvider(t, Config{Address: server.URL, Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := p.Query(context.Background(), "up")
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("Query() succeeded against a hanging server")
	}
	if !strings.Contains(err.Error(), "no answer within 200ms") || !strings.Contains(err.Error(), server.URL) {
		t.Errorf("Query() error = %q, want it to name the address and the timeout", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Query() error = %v, want it to wrap context.DeadlineExceeded", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("Query() returned after %s, want about 200ms", elapsed)
	}
	m := analysis.Measure(context.Background(), p, "up", analysis.Threshold{Max: ptr(1)})
	if m.Phase != analysis.PhaseError || m.Value != nil {
		t.Errorf("Measure() = %+v, want Error without a value", m)
	}
}

func TestQueryCallerCancelIsNotReportedAsTimeout(t *testing.T) {
	release := make(chan struct{})
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer server.Close()
	defer close(release)

	p := newProvider(t, Config{Address: server.URL, Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := p.Query(ctx, "up")
	if err == nil || strings.Contains(err.Error(), "no answer within") {
		t.Errorf("Query() error = %v, want the caller's cancellation, not our timeout", err)
	}
}

func TestQueryUnreachable(t *testing.T) {
	// A port that was just free: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := "http://" + l.Addr().String()
	_ = l.Close()

	p := newProvider(t, Config{Address: address, Timeout: 2 * time.Second})
	_, err = p.Query(context.Background(), "up")
	if err == nil || !strings.Contains(err.Error(), "query prometheus at "+address) {
		t.Fatalf("Query() error = %v, want one naming %s", err, address)
	}
	// Whatever the threshold, an unreachable Prometheus never passes.
	m := analysis.Measure(context.Background(), p, "up", analysis.Threshold{Min: ptr(-1e300), Max: ptr(1e300)})
	if m.Phase != analysis.PhaseError || m.Value != nil || !strings.Contains(m.Message, address) {
		t.Errorf("Measure() = %+v, want Error without a value naming the address", m)
	}
}

func TestQueryTLS(t *testing.T) {
	fake := &fakePrometheus{}
	server := httptest.NewTLSServer(fake.handler(scalarBody))
	defer server.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})

	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"unknown authority is refused", Config{Address: server.URL}, true},
		{"insecure skip verify", Config{Address: server.URL, InsecureSkipVerify: true}, false},
		{"CA certificate", Config{Address: server.URL, CACert: caPEM}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, tt.cfg)
			got, err := p.Query(context.Background(), "up")
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "certificate") {
					t.Errorf("Query() = %+v, %v; want a certificate error", got, err)
				}
				return
			}
			if err != nil || got.Kind != analysis.KindScalar {
				t.Errorf("Query() = %+v, %v; want a scalar", got, err)
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }
