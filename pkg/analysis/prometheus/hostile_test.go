package prometheus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// Whoever writes a Rollout chooses the Prometheus address. These tests play
// a server that answers as an attacker (or a broken proxy) would.

// recorder is a server that must never be reached.
type recorder struct {
	mu       sync.Mutex
	requests []http.Header
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.Header.Clone())
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(scalarBody))
}

func (r *recorder) seen() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.requests...)
}

// The bearer token and headers must never follow a redirect to another
// host, so no redirect is followed, whatever its code.
func TestQueryRefusesRedirects(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			elsewhere := &recorder{}
			target := httptest.NewServer(elsewhere)
			defer target.Close()
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", strings.Replace(target.URL, "http://", "http://user:pw@", 1)+"/api/v1/query?token=leak#frag")
				w.WriteHeader(code)
				_, _ = w.Write([]byte("body of the redirect"))
			}))
			defer server.Close()

			p := newProvider(t, Config{Address: server.URL, BearerToken: "s3cret", Headers: map[string]string{"X-Scope-OrgID": "team-a"}})
			_, err := p.Query(context.Background(), "up")
			if got := elsewhere.seen(); len(got) != 0 {
				t.Fatalf("the redirect was followed, the target saw %v", got)
			}
			want := fmt.Sprintf("query prometheus at %s: Prometheus answered with a redirect (HTTP %d) to %s/api/v1/query; redirects are not followed", server.URL, code, target.URL)
			if err == nil || err.Error() != want {
				t.Fatalf("Query() error = %v\nwant %s", err, want)
			}
			var redirect *RedirectError
			if !errors.As(err, &redirect) || redirect.StatusCode != code {
				t.Errorf("Query() error = %#v, want a *RedirectError with code %d", err, code)
			}
		})
	}
}

// A padded but valid answer larger than the cap is refused rather than
// buffered, whether or not the server declares its length.
func TestQueryCapsTheResponseBody(t *testing.T) {
	padded := scalarBody + strings.Repeat(" ", MaxResponseBytes)
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("length declared %v", declared), func(t *testing.T) {
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if declared {
					w.Header().Set("Content-Length", strconv.Itoa(len(padded)))
				}
				_, _ = w.Write([]byte(padded))
			}))
			defer server.Close()

			p := newProvider(t, Config{Address: server.URL})
			got, err := p.Query(context.Background(), "up")
			var tooLarge *TooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("Query() = %+v, %v; want a *TooLargeError", got, err)
			}
			if !strings.Contains(err.Error(), "larger than 4 MiB") {
				t.Errorf("Query() error = %q, want it to name the limit", err)
			}
		})
	}
	t.Run("an answer at the limit is read", func(t *testing.T) {
		body := scalarBody + strings.Repeat(" ", MaxResponseBytes-len(scalarBody))
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(body))
		}))
		defer server.Close()
		p := newProvider(t, Config{Address: server.URL})
		if got, err := p.Query(context.Background(), "up"); err != nil || got.Kind != analysis.KindScalar {
			t.Errorf("Query() = %+v, %v; want the scalar", got, err)
		}
	})
}

// What a failed query says ends up in status and Events: the HTTP status,
// and for an answer in the Prometheus API's format its errorType and error,
// truncated and printable; never a response body.
func TestQueryErrorMessagesHoldNoBody(t *testing.T) {
	long := strings.Repeat("x", 10000)
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        string
		notWant     string
	}{
		{"proxy error page", http.StatusBadGateway, "text/html", "<html>upstream 10.0.0.7 is down</html>", "HTTP 502 Bad Gateway (response body not shown)", "10.0.0.7"},
		{"login page", http.StatusUnauthorized, "text/html", "<form>sign in to internal-sso</form>", "HTTP 401 Unauthorized (response body not shown)", "internal-sso"},
		{"forbidden, then forbidden again over GET", http.StatusForbidden, "text/plain", "denied by policy p-17", "HTTP 403 Forbidden (response body not shown)", "p-17"},
		{"huge plain error", http.StatusInternalServerError, "text/plain", long, "HTTP 500 Internal Server Error (response body not shown)", "xxx"},
		{"API error is kept", http.StatusBadRequest, "application/json", `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected \"}\""}`, `HTTP 400 Bad Request: bad_data: 1:5: parse error: unexpected "}"`, ""},
		{"API error cannot forge lines", http.StatusUnprocessableEntity, "application/json", `{"status":"error","errorType":"execution","error":"boom\nlevel=info msg=forged"}`, "HTTP 422 Unprocessable Entity: execution: boom level=info msg=forged", "\n"},
		{"API error is truncated", http.StatusBadRequest, "application/json", `{"status":"error","errorType":"bad_data","error":"` + long + `"}`, "HTTP 400 Bad Request: bad_data: " + strings.Repeat("x", maxServerText) + "...", ""},
		{"API error type is truncated", http.StatusBadRequest, "application/json", `{"status":"error","errorType":"` + long + `","error":"e"}`, "HTTP 400 Bad Request: " + strings.Repeat("x", maxErrorType) + "...: e", ""},
		{"error in a 200", http.StatusOK, "application/json", `{"status":"error","errorType":"timeout","error":"query timed out"}`, "HTTP 200 OK: timeout: query timed out", ""},
		{"HTML in a 200", http.StatusOK, "text/html", "<html>welcome to intranet</html>", "HTTP 200 OK: bad_response: ", "intranet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer server.Close()

			p := newProvider(t, Config{Address: server.URL})
			m := analysis.Measure(context.Background(), p, "up", analysis.Threshold{Max: ptr(1)})
			if m.Phase != analysis.PhaseError {
				t.Fatalf("Measure() = %+v, want Error", m)
			}
			prefix := "query failed: query prometheus at " + server.URL + ": "
			if !strings.HasPrefix(m.Message, prefix+tt.want) {
				t.Errorf("message = %q\nwant     %q", m.Message, prefix+tt.want)
			}
			if tt.notWant != "" && strings.Contains(m.Message, tt.notWant) {
				t.Errorf("message = %q holds %q from the response body", m.Message, tt.notWant)
			}
			if len(m.Message) > len(prefix)+maxServerText+maxErrorType+64 {
				t.Errorf("message is %d bytes long", len(m.Message))
			}
		})
	}
}

// A server that breaks HTTP itself: Go's error quotes the bad status line,
// which must stay short and printable too.
func TestQueryMalformedAnswerIsBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				buf := make([]byte, 4096)
				_, _ = conn.Read(buf)
				_, _ = conn.Write([]byte("HTTP/1.1 2" + strings.Repeat("\x1b[31mred", 2000) + "\r\n\r\n"))
			}()
		}
	}()

	p := newProvider(t, Config{Address: "http://" + l.Addr().String()})
	_, err = p.Query(context.Background(), "up")
	if err == nil {
		t.Fatal("Query() succeeded against a malformed answer")
	}
	msg := err.Error()
	if strings.ContainsRune(msg, '\x1b') || len(msg) > 200 {
		t.Errorf("Query() error = %q (%d bytes), want it short and printable", msg, len(msg))
	}
}

func TestPrintable(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"line\r\nforged", 20, "line  forged"},
		{"nul\x00and\x7fdel", 20, "nul and del"},
		{"bad utf-8 \xff", 20, "bad utf-8"},
		{"0123456789", 5, "01234..."},
		{"ééé", 5, "éé..."},
	}
	for _, tt := range tests {
		if got := printable(tt.in, tt.max); got != tt.want {
			t.Errorf("printable(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

// A transport error names the address once and says only that no
// connection was made: not refused rather than unreachable, not the
// resolved address, however long the address.
func TestQueryTransportErrorSaysCouldNotConnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := "http://" + l.Addr().String() + "/" + strings.Repeat("p", 400)
	_ = l.Close()

	p := newProvider(t, Config{Address: address, Timeout: 2 * time.Second})
	_, err = p.Query(context.Background(), "up")
	if err == nil || err.Error() != "query prometheus at "+address+": could not connect" {
		t.Errorf("Query() error = %v, want the address once and could not connect", err)
	}
}
