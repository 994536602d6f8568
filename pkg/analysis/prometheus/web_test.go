package prometheus

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

func TestWebProvider(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			if r.Header.Get("X-Token") != "s3cret" {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			_, _ = io.WriteString(w, `{"data":{"errorRate":0.004,"quoted":"0.5","name":"x"}}`)
		case "/post":
			b, _ := io.ReadAll(r.Body)
			if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || string(b) != `{"q":"errors"}` {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			_, _ = io.WriteString(w, `{"value": 3}`)
		case "/redirect":
			http.Redirect(w, r, "http://169.254.169.254/latest", http.StatusFound)
		case "/huge":
			_, _ = io.WriteString(w, `{"v":"`+strings.Repeat("a", MaxResponseBytes)+`"}`)
		}
	}))
	defer srv.Close()
	cases := []struct {
		name     string
		cfg      WebConfig
		want     analysis.Phase
		wantMsg  string
		wantSeen float64
	}{
		{name: "a number at the path", cfg: WebConfig{URL: srv.URL + "/ok", JSONPath: "{.data.errorRate}", Headers: map[string]string{"X-Token": "s3cret"}},
			want: analysis.PhaseSuccessful, wantSeen: 0.004},
		{name: "a quoted number", cfg: WebConfig{URL: srv.URL + "/ok", JSONPath: "{.data.quoted}", Headers: map[string]string{"X-Token": "s3cret"}},
			want: analysis.PhaseFailed, wantSeen: 0.5},
		{name: "POST with a body", cfg: WebConfig{URL: srv.URL + "/post", Method: "POST", Body: `{"q":"errors"}`, JSONPath: "{.value}"},
			want: analysis.PhaseFailed, wantSeen: 3},
		{name: "an absent field is inconclusive", cfg: WebConfig{URL: srv.URL + "/ok", JSONPath: "{.data.nope}", Headers: map[string]string{"X-Token": "s3cret"}},
			want: analysis.PhaseInconclusive},
		{name: "a string is inconclusive", cfg: WebConfig{URL: srv.URL + "/ok", JSONPath: "{.data.name}", Headers: map[string]string{"X-Token": "s3cret"}},
			want: analysis.PhaseInconclusive},
		{name: "without the Secret header the server refuses", cfg: WebConfig{URL: srv.URL + "/ok", JSONPath: "{.data.errorRate}"},
			want: analysis.PhaseError, wantMsg: "HTTP 401"},
		{name: "a redirect is not followed", cfg: WebConfig{URL: srv.URL + "/redirect", JSONPath: "{.v}"},
			want: analysis.PhaseError, wantMsg: "redirect"},
		{name: "the body is capped", cfg: WebConfig{URL: srv.URL + "/huge", JSONPath: "{.v}"},
			want: analysis.PhaseError, wantMsg: "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWeb(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer w.CloseIdleConnections()
			hi := 0.01
			m := analysis.Measure(context.Background(), w, tc.cfg.URL, analysis.Threshold{Max: &hi})
			if m.Phase != tc.want || !strings.Contains(m.Message, tc.wantMsg) {
				t.Fatalf("measurement %+v, want %s with %q", m, tc.want, tc.wantMsg)
			}
			if tc.wantSeen != 0 && (m.Value == nil || *m.Value != tc.wantSeen) {
				t.Fatalf("value %v, want %v", m.Value, tc.wantSeen)
			}
		})
	}
	for _, bad := range []WebConfig{
		{URL: "http://169.254.169.254/latest/meta-data", JSONPath: "{.a}"},
		{URL: "ftp://example.com/x", JSONPath: "{.a}"},
		{URL: srv.URL, JSONPath: "{.a"},
		{URL: srv.URL, JSONPath: "{.a}", Headers: map[string]string{"Host": "evil"}},
	} {
		if _, err := NewWeb(bad); err == nil {
			t.Errorf("NewWeb(%+v) accepted", bad)
		}
	}
}
