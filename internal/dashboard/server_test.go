package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

// fakeViews serves one Rollout, shop/web, and lets a test announce changes.
type fakeViews struct {
	mu      sync.Mutex
	rollout *stepwisev1.Rollout
	subs    []chan struct{}
}

func (f *fakeViews) List() ListView {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ListView{Namespace: "shop", Rollouts: List([]Source{{Rollout: f.rollout}})}
}

func (f *fakeViews) Detail(ns, name string, now time.Time) DetailView {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns != "shop" || name != "web" {
		return DetailView{Namespace: ns, Name: name, Error: "not found"}
	}
	d := BuildDetail(Source{Rollout: f.rollout}, now)
	return DetailView{Namespace: ns, Name: name, Rollout: &d}
}

func (f *fakeViews) Rollout(ns, name string) (*stepwisev1.Rollout, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns != "shop" || name != "web" {
		return nil, false
	}
	return f.rollout.DeepCopy(), true
}

func (f *fakeViews) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.mu.Unlock()
	return ch, func() {}
}

func (f *fakeViews) change(fn func(r *stepwisev1.Rollout)) {
	f.mu.Lock()
	fn(f.rollout)
	subs := f.subs
	f.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

type sent struct{ namespace, name, action, token string }

// newTestServer runs the server on a real loopback listener, as the
// command does, since the Host and Origin checks depend on its port.
func newTestServer(t *testing.T) (*Server, *fakeViews, *[]sent, string) {
	t.Helper()
	r := newTestRollout()
	stepping(r, 0, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
	views := &fakeViews{rollout: r}
	var mu sync.Mutex
	requests := &[]sent{}
	request := func(_ context.Context, ns, name string, a cli.Action, token string) error {
		mu.Lock()
		defer mu.Unlock()
		*requests = append(*requests, sent{ns, name, a.Name, token})
		return nil
	}
	l, port, err := Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(views, request, port, func() time.Time { return testNow })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, views, requests, "http://127.0.0.1:" + strconv.Itoa(port)
}

// noRedirect lets a test see the sign-in redirect and its cookie.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, method, u string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var b strings.Builder
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return res.StatusCode, b.String()
}

func TestSignInSwapsTheTokenForACookie(t *testing.T) {
	s, _, _, base := newTestServer(t)
	res, err := noRedirect.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("sign-in: %d to %q, want 303 to /", res.StatusCode, res.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		cookie = c
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value != s.Token() {
		t.Fatalf("cookie %+v: want the token, HttpOnly, SameSite=Strict", cookie)
	}
	code, body := do(t, "GET", base+"/", http.Header{"Cookie": {cookie.String()}})
	if code != http.StatusOK || !strings.Contains(body, `<meta name="stepwise-token" content="`+s.Token()+`">`) {
		t.Errorf("page: %d, token not embedded:\n%s", code, body)
	}

	if code, _ := do(t, "GET", base+"/?token=wrong", nil); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	for _, path := range []string{"/", "/api/rollouts", "/api/stream", "/assets/app.js"} {
		if code, _ := do(t, "GET", base+path, nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the cookie: %d, want 401", path, code)
		}
	}
}

func TestGuards(t *testing.T) {
	s, _, requests, base := newTestServer(t)
	cookie := (&http.Cookie{Name: s.cookieName(), Value: s.Token()}).String()
	u, _ := url.Parse(base)
	good := func() http.Header {
		return http.Header{"Cookie": {cookie}, "Origin": {base}, "X-Stepwise-Token": {s.Token()}, "Sec-Fetch-Site": {"same-origin"}}
	}
	cases := []struct {
		name   string
		change func(h http.Header, req *string)
		host   string
		code   int
	}{
		{"the page's own request", func(http.Header, *string) {}, "", http.StatusOK},
		{"localhost is the same machine", func(h http.Header, _ *string) { h.Set("Origin", "http://localhost:"+u.Port()) }, "localhost:" + u.Port(), http.StatusOK},
		{"another site's Origin", func(h http.Header, _ *string) { h.Set("Origin", "https://evil.example") }, "", http.StatusForbidden},
		{"no Origin", func(h http.Header, _ *string) { h.Del("Origin") }, "", http.StatusForbidden},
		{"cross-site fetch metadata", func(h http.Header, _ *string) { h.Set("Sec-Fetch-Site", "cross-site") }, "", http.StatusForbidden},
		{"no token header (a plain form post)", func(h http.Header, _ *string) { h.Del("X-Stepwise-Token") }, "", http.StatusForbidden},
		{"wrong token header", func(h http.Header, _ *string) { h.Set("X-Stepwise-Token", "guess") }, "", http.StatusForbidden},
		{"no cookie", func(h http.Header, _ *string) { h.Del("Cookie") }, "", http.StatusUnauthorized},
		{"a rebound DNS name", func(h http.Header, _ *string) { h.Set("Origin", "http://evil.example:"+u.Port()) }, "evil.example:" + u.Port(), http.StatusForbidden},
		{"a disabled button", func(_ http.Header, req *string) { *req = "/api/rollouts/shop/web/resume" }, "", http.StatusConflict},
		{"a rollout not shown", func(_ http.Header, req *string) { *req = "/api/rollouts/other/web/abort" }, "", http.StatusNotFound},
		{"an unknown request", func(_ http.Header, req *string) { *req = "/api/rollouts/shop/web/delete" }, "", http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(*requests)
			h := good()
			path := "/api/rollouts/shop/web/abort"
			c.change(h, &path)
			req, err := http.NewRequest("POST", base+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = h
			if c.host != "" {
				req.Host = c.host
			}
			res, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if res.StatusCode != c.code {
				t.Errorf("status %d, want %d", res.StatusCode, c.code)
			}
			sentNow := len(*requests) - before
			if want := map[bool]int{true: 1, false: 0}[c.code == http.StatusOK]; sentNow != want {
				t.Errorf("%d requests sent to the cluster, want %d", sentNow, want)
			}
		})
	}
	last := (*requests)[len(*requests)-1]
	if want := (sent{"shop", "web", "abort", cli.RequestToken(testNow)}); last != want {
		t.Errorf("sent %+v, want %+v (the CLI's token)", last, want)
	}
}

func TestGetRefusesAnotherHost(t *testing.T) {
	s, _, _, base := newTestServer(t)
	req, _ := http.NewRequest("GET", base+"/api/rollouts", nil)
	req.Host = "attacker.example"
	req.AddCookie(&http.Cookie{Name: s.cookieName(), Value: s.Token()})
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want 403", res.StatusCode)
	}
}

// TestStreamPushesChanges reads the event stream as a browser would: the
// views at once, then each change, and nothing for no change.
func TestStreamPushesChanges(t *testing.T) {
	s, views, _, base := newTestServer(t)
	req, _ := http.NewRequest("GET", base+"/api/stream?rollout=shop/web", nil)
	req.AddCookie(&http.Cookie{Name: s.cookieName(), Value: s.Token()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan [2]string, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var event string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				events <- [2]string{event, v}
			}
		}
		close(events)
	}()
	next := func() (string, string) {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("stream ended")
			}
			return e[0], e[1]
		case <-ctx.Done():
			t.Fatal("no event")
		}
		return "", ""
	}
	if ev, data := next(); ev != "list" || !strings.Contains(data, `"step":"1/3"`) {
		t.Fatalf("first event %s %s", ev, data)
	}
	ev, data := next()
	var d DetailView
	if err := json.Unmarshal([]byte(data), &d); ev != "rollout" || err != nil || d.Rollout == nil || d.Rollout.Steps[0].State != "current" {
		t.Fatalf("second event %s %s (%v)", ev, data, err)
	}

	views.change(func(r *stepwisev1.Rollout) {
		stepping(r, 1, stepwisev1.RolloutProgressing, stepwisev1.ReasonWaitingForPods)
	})
	for _, want := range []string{"list", "rollout"} {
		ev, data := next()
		if ev != want || !strings.Contains(data, `"step":"2/3"`) {
			t.Fatalf("after the change: %s %s, want %s at step 2/3", ev, data, want)
		}
	}
	// No change: nothing more, even as the page's clock ticks.
	select {
	case e := <-events:
		t.Errorf("event %s without a change", e[0])
	case <-time.After(1500 * time.Millisecond):
	}
}

// TestAssetsAreEmbeddedAndConfined: the page and its script come from the
// binary, and the policy lets the page load nothing from elsewhere.
func TestAssetsAreEmbeddedAndConfined(t *testing.T) {
	s, _, _, base := newTestServer(t)
	cookie := (&http.Cookie{Name: s.cookieName(), Value: s.Token()}).String()
	for path, want := range map[string]string{
		"/assets/app.js":  "new EventSource(",
		"/assets/app.css": "svg.chart",
		"/":               `<script src="/assets/app.js" defer></script>`,
	} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Cookie", cookie)
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(b.String(), want) {
			t.Errorf("GET %s: %d, want 200 with %q", path, res.StatusCode, want)
		}
		csp := res.Header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("GET %s: policy %q lacks %q", path, csp, d)
			}
		}
		// The SVG namespace is a name, not an address.
		body := strings.ReplaceAll(b.String(), `"http://www.w3.org/2000/svg"`, "")
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("GET %s names another origin:\n%s", path, body)
		}
	}
}
