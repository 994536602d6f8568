package notification

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

func testMessage() Message {
	step := int32(1)
	return Message{
		ID: "uid-1/3", Namespace: "shop", Rollout: "web", Phase: "Aborted", PreviousPhase: "Progressing",
		Reason: "AnalysisFailed", Message: "error-rate 0.2 above 0.01", StableRevision: "web-1", CanaryRevision: "web-2",
		Step: &step, Steps: 3, Time: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC),
	}
}

func TestBody(t *testing.T) {
	cases := []struct {
		format stepwisev1.NotificationFormat
		want   map[string]any
	}{
		{"", map[string]any{"id": "uid-1/3", "namespace": "shop", "rollout": "web", "phase": "Aborted", "previousPhase": "Progressing",
			"reason": "AnalysisFailed", "message": "error-rate 0.2 above 0.01", "stableRevision": "web-1", "canaryRevision": "web-2",
			"step": float64(1), "steps": float64(3), "time": "2026-12-01T06:00:00Z"}},
		{stepwisev1.NotificationJSON, map[string]any{"id": "uid-1/3"}},
		{stepwisev1.NotificationSlack, map[string]any{"text": "Rollout shop/web is Aborted (was Progressing): AnalysisFailed. error-rate 0.2 above 0.01 (step 2/3, canary web-2, stable web-1)"}},
	}
	for _, c := range cases {
		t.Run(string(c.format), func(t *testing.T) {
			b, err := Body(c.format, testMessage())
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s = %#v, want %#v (body %s)", k, got[k], v, b)
				}
			}
		})
	}
	if _, err := Body("XML", testMessage()); err == nil {
		t.Error("an unknown format was accepted")
	}
	first := Message{Namespace: "shop", Rollout: "web", Phase: "Healthy", Steps: 3}
	if got := SlackText(first); got != "Rollout shop/web is Healthy" {
		t.Errorf("SlackText = %q", got)
	}
}

func TestCheckURL(t *testing.T) {
	allow, err := prometheus.ParseAllowList([]string{"hooks.slack.com", "http://127.0.0.1:8080/hooks"})
	if err != nil {
		t.Fatal(err)
	}
	linkLocal, err := prometheus.ParseAllowList([]string{"169.254.10.5"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url   string
		allow prometheus.AllowList
		want  string // error substring; "" for allowed
	}{
		{"https://hooks.slack.com/services/T0/B0/SECRET", allow, ""},
		{"http://127.0.0.1:8080/hooks/a", allow, ""},
		{"http://127.0.0.1:8080/other/SECRET", allow, "host 127.0.0.1:8080 is not allowed by the manager's --notification-allowed-addresses"},
		{"https://evil.example/SECRET", allow, "host evil.example is not allowed"},
		{"https://anything.example/SECRET", prometheus.AllowList{}, ""},
		{"ftp://hooks.slack.com/SECRET", prometheus.AllowList{}, "not http or https"},
		{"https:///SECRET", prometheus.AllowList{}, "no host"},
		{"://SECRET", prometheus.AllowList{}, "does not parse"},
		{"http://169.254.169.254/latest/SECRET", prometheus.AllowList{}, "host 169.254.169.254 is a link-local or cloud metadata address, which webhooks never reach unless the manager's --notification-allowed-addresses names that IP"},
		{"http://[fd00:ec2::254]/SECRET", allow, "is a link-local or cloud metadata address"},
		{"http://169.254.10.5:8080/SECRET", linkLocal, ""},
	}
	for _, c := range cases {
		_, err := CheckURL(c.url, c.allow)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err = %v, want %q", c.url, err, c.want)
		case err != nil && strings.Contains(err.Error(), "SECRET"):
			t.Errorf("%s: the error quotes the URL's path: %v", c.url, err)
		}
	}
}

// receiver answers each POST with the next status of answers (the last one
// repeats), after delay.
type receiver struct {
	srv   *httptest.Server
	calls atomic.Int32
	keys  chan string
}

func newReceiver(t *testing.T, delay time.Duration, answers ...int) *receiver {
	r := &receiver{keys: make(chan string, 16)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := int(r.calls.Add(1))
		r.keys <- req.Header.Get("Idempotency-Key")
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		time.Sleep(delay)
		status := answers[min(n, len(answers))-1]
		if status >= 300 && status < 400 {
			w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("answer\nwith a newline"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) url(t *testing.T) *url.URL {
	u, err := url.Parse(r.srv.URL + "/hook/SECRET")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestPost(t *testing.T) {
	fast := Policy{Attempts: 3, Backoff: 10 * time.Millisecond, Timeout: 2 * time.Second}
	cases := []struct {
		name         string
		answers      []int
		delay        time.Duration
		policy       Policy
		wantAttempts int
		wantErr      string
	}{
		{name: "accepted", answers: []int{204}, policy: fast, wantAttempts: 1},
		{name: "503_is_retried", answers: []int{503, 503, 200}, policy: fast, wantAttempts: 3},
		{name: "429_is_retried_until_the_attempts_run_out", answers: []int{429}, policy: fast, wantAttempts: 3, wantErr: "the webhook answered HTTP 429"},
		{name: "500_is_not_retried_as_it_may_have_been_acted_on", answers: []int{500}, policy: fast, wantAttempts: 1, wantErr: "HTTP 500"},
		{name: "404_is_not_retried", answers: []int{404}, policy: fast, wantAttempts: 1, wantErr: "HTTP 404"},
		{name: "redirect_is_not_followed", answers: []int{307}, policy: fast, wantAttempts: 1, wantErr: "redirect (HTTP 307); redirects are not followed"},
		{name: "timeout_is_not_retried", answers: []int{200}, delay: 300 * time.Millisecond,
			policy: Policy{Attempts: 3, Backoff: time.Millisecond, Timeout: 50 * time.Millisecond}, wantAttempts: 1, wantErr: "did not answer in time"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t, c.delay, c.answers...)
			n, err := Post(context.Background(), NewClient(), r.url(t), "uid-1/3", []byte(`{}`), c.policy)
			if n != c.wantAttempts {
				t.Errorf("%d attempts, want %d", n, c.wantAttempts)
			}
			if got := int(r.calls.Load()); got != c.wantAttempts {
				t.Errorf("the receiver got %d requests, want %d", got, c.wantAttempts)
			}
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("err = %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("err = %v, want %q", err, c.wantErr)
			case err != nil && strings.Contains(err.Error(), "newline"):
				// The receiver chooses its answer; it would land in an Event.
				t.Errorf("err = %v quotes the answer's body", err)
			}
			for range c.wantAttempts {
				if k := <-r.keys; k != "uid-1/3" {
					t.Errorf("Idempotency-Key %q", k)
				}
			}
		})
	}
}

// TestPostReceiverDown: a connection that cannot be made is retried (the
// receiver cannot have acted on it), then given up, and the error does not
// quote the URL's path.
func TestPostReceiverDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	u, _ := url.Parse("http://" + addr + "/hook/SECRET")
	start := time.Now()
	n, err := Post(context.Background(), NewClient(), u, "id", []byte(`{}`), Policy{Attempts: 3, Backoff: 20 * time.Millisecond, Timeout: time.Second})
	if n != 3 || err == nil || err.Error() != "could not connect to "+addr {
		t.Errorf("attempts %d, err %v; want 3 and could not connect to %s, without the cause", n, err, addr)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("the error quotes the URL's path: %v", err)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("gave up after %v: the backoff (20ms, 40ms) was not waited", d)
	}
}

// The client's dialer refuses the metadata address whatever the URL
// passed to Post (CheckURL refuses it earlier), at once and without a
// retry: no packet is sent to it. An IP the allow-list names is dialed.
func TestClientRefusesMetadataAtDialTime(t *testing.T) {
	u, _ := url.Parse("http://169.254.169.254/hook/SECRET")
	start := time.Now()
	n, err := Post(context.Background(), NewClient(), u, "id", []byte(`{}`), Policy{Attempts: 3, Backoff: time.Second, Timeout: 5 * time.Second})
	var refused *prometheus.RefusedAddressError
	if n != 1 || !errors.As(err, &refused) || !strings.HasPrefix(err.Error(), "could not connect to 169.254.169.254: link-local and cloud metadata addresses are refused") {
		t.Errorf("attempts %d, err %v; want 1 refused attempt", n, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refused after %s, want at once", d)
	}

	list, err := prometheus.ParseAllowList([]string{"169.254.10.5"})
	if err != nil {
		t.Fatal(err)
	}
	dial := NewClientFor(list).Transport.(*http.Transport).DialContext
	if _, err := dial(context.Background(), "tcp", "169.254.169.254:80"); !errors.As(err, &refused) {
		t.Errorf("NewClientFor() dialing another link-local IP: %v, want refused", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if conn, err := dial(ctx, "tcp", "169.254.10.5:9"); errors.As(err, &refused) {
		t.Errorf("NewClientFor() dialing the IP its list names: %v", err)
	} else if conn != nil {
		_ = conn.Close()
	}
}

// A receiver whose certificate is not trusted: the Event says so, without
// the certificate's names.
func TestPostUntrustedCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/hook/SECRET")
	n, err := Post(context.Background(), NewClient(), u, "id", []byte(`{}`), Policy{Attempts: 3, Timeout: 2 * time.Second})
	want := "could not connect to " + u.Host + ": TLS: the certificate was not accepted"
	if n != 1 || err == nil || err.Error() != want {
		t.Errorf("attempts %d, err %v; want 1 and %q", n, err, want)
	}
}
