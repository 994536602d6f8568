package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"

	stepwisev1 "github.com/stepwise-dev/stepwise/api/v1alpha1"
	"github.com/stepwise-dev/stepwise/internal/cli"
)

//go:embed assets
var assets embed.FS

// Views is what the server shows; the Hub implements it, tests fake it.
type Views interface {
	List() ListView
	Detail(namespace, name string, now time.Time) DetailView
	Rollout(namespace, name string) (*stepwisev1.Rollout, bool)
	Subscribe() (<-chan struct{}, func())
}

// Requester sends a manual request; RequestFunc wraps cli.Request.
type Requester func(ctx context.Context, namespace, name string, a cli.Action, token string) error

// RequestFunc sends requests with the CLI's own function and client.
func RequestFunc(dyn dynamic.Interface) Requester {
	return func(ctx context.Context, namespace, name string, a cli.Action, token string) error {
		_, err := cli.Request(ctx, dyn, namespace, name, a, token)
		return err
	}
}

// Server is the dashboard's HTTP side. It answers only requests addressed to
// the loopback address it listens on (a Host check that defeats DNS
// rebinding), only from a browser that opened the URL with the session
// token (which sets a cookie), and writes only on a POST that carries the
// token in a header and comes from the page's own origin: a page on another
// site in the same browser can neither read the dashboard nor make it write.
type Server struct {
	views   Views
	request Requester
	now     func() time.Time
	token   string
	port    int
	// tick re-renders a Rollout page this often, from the caches, so that
	// countdowns and ages move; the API is watched, never polled.
	tick time.Duration
	mux  *http.ServeMux
}

// NewServer serves views on port (the listener's, needed for the Host and
// Origin checks). now may be nil.
func NewServer(views Views, request Requester, port int, now func() time.Time) (*Server, error) {
	if now == nil {
		now = time.Now
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	s := &Server{views: views, request: request, now: now, token: token, port: port, tick: time.Second, mux: http.NewServeMux()}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /api/rollouts", s.list)
	s.mux.HandleFunc("GET /api/rollouts/{namespace}/{name}", s.detail)
	s.mux.HandleFunc("GET /api/stream", s.stream)
	s.mux.HandleFunc("POST /api/rollouts/{namespace}/{name}/{action}", s.act)
	return s, nil
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making the session token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// URL is the address to open: it carries the session token once, which the
// server then swaps for a cookie.
func (s *Server) URL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/?token=%s", s.port, s.token)
}

// Token is the session token, for tests.
func (s *Server) Token() string { return s.token }

func (s *Server) cookieName() string { return "stepwise-dashboard-" + strconv.Itoa(s.port) }

// ServeHTTP applies the guards every request passes, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
	if !s.hostAllowed(r.Host) {
		http.Error(w, "this dashboard answers only http://127.0.0.1:"+strconv.Itoa(s.port), http.StatusForbidden)
		return
	}
	if t := r.URL.Query().Get("token"); r.Method == http.MethodGet && r.URL.Path == "/" && t != "" {
		if !s.tokenMatches(t) {
			http.Error(w, "wrong token: open the URL that kubectl stepwise dashboard printed", http.StatusUnauthorized)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if c, err := r.Cookie(s.cookieName()); err != nil || !s.tokenMatches(c.Value) {
		http.Error(w, "not signed in: open the URL that kubectl stepwise dashboard printed", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := s.writeAllowed(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) tokenMatches(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}

func (s *Server) hostAllowed(host string) bool {
	p := strconv.Itoa(s.port)
	return host == "127.0.0.1:"+p || host == "localhost:"+p
}

// writeAllowed is the cross-site request check of a write: the page's own
// origin, and the token the page holds in a header, which a form or a
// cross-origin fetch without a CORS preflight (which this server never
// grants) cannot send.
func (s *Server) writeAllowed(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" || origin != "http://"+r.Host {
		return fmt.Errorf("refused: a write must come from the dashboard's page (Origin %q)", origin)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("refused: a write must come from the dashboard's page (Sec-Fetch-Site %q)", site)
	}
	if !s.tokenMatches(r.Header.Get("X-Stepwise-Token")) {
		return errors.New("refused: the request lacks the page's token")
	}
	return nil
}

var indexTemplate = template.Must(template.ParseFS(assets, "assets/index.html"))

func (s *Server) index(w http.ResponseWriter, _ *http.Request) {
	var b bytes.Buffer
	if err := indexTemplate.Execute(&b, map[string]string{"Token": s.token}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.views.List())
}

func (s *Server) detail(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.views.Detail(r.PathValue("namespace"), r.PathValue("name"), s.now()))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// stream sends the list, and the Rollout named by ?rollout=NS/NAME, as
// server-sent events: once at once, then on every change the watches see.
// An unchanged view is not sent again.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	var ns, name string
	if v := r.URL.Query().Get("rollout"); v != "" {
		var found bool
		if ns, name, found = strings.Cut(v, "/"); !found || ns == "" || name == "" {
			http.Error(w, "rollout must be NAMESPACE/NAME", http.StatusBadRequest)
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	changes, stop := s.views.Subscribe()
	defer stop()
	var tick <-chan time.Time
	if name != "" {
		t := time.NewTicker(s.tick)
		defer t.Stop()
		tick = t.C
	}
	last := map[string][]byte{}
	send := func(event string, v any) bool {
		data, err := json.Marshal(v)
		if err != nil || bytes.Equal(data, last[event]) {
			return err == nil
		}
		last[event] = data
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	for {
		if !send("list", s.views.List()) {
			return
		}
		if name != "" && !send("rollout", s.views.Detail(ns, name, s.now())) {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-changes:
		case <-tick:
		}
	}
}

// ActionResult is the answer to a POST of a request.
type ActionResult struct {
	Message string `json:"message"`
}

// act sends one manual request with the CLI's code, once the Rollout is
// one this dashboard shows and the request is one the controller would act
// on: a disabled button is also refused here, as a page may be stale.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	a, ok := Action(r.PathValue("action"))
	if !ok {
		writeJSON(w, http.StatusNotFound, ActionResult{Message: fmt.Sprintf("unknown request %q", r.PathValue("action"))})
		return
	}
	ro, ok := s.views.Rollout(ns, name)
	if !ok {
		writeJSON(w, http.StatusNotFound, ActionResult{Message: fmt.Sprintf("rollout %s/%s is not shown by this dashboard", ns, name)})
		return
	}
	for _, p := range Permissions(ro) {
		if p.Name == a.Name && !p.Allowed {
			writeJSON(w, http.StatusConflict, ActionResult{Message: fmt.Sprintf("%s not sent: %s", a.Name, p.Reason)})
			return
		}
	}
	token := cli.RequestToken(s.now())
	if err := s.request(r.Context(), ns, name, a, token); err != nil {
		writeJSON(w, http.StatusBadGateway, ActionResult{Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, ActionResult{Message: fmt.Sprintf("rollout %s/%s: %s requested (%s=%s): the controller %s.", ns, name, a.Name, a.Annotation, token, a.Effect)})
}

// Listen opens the dashboard's listener on 127.0.0.1 (port 0: any free one).
func Listen(port int) (net.Listener, int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, 0, fmt.Errorf("listening on 127.0.0.1:%d: %w", port, err)
	}
	return l, l.Addr().(*net.TCPAddr).Port, nil
}

// Serve serves until ctx ends, then closes every connection.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("serving the dashboard: %w", err)
	case <-ctx.Done():
	}
	// Event streams never end by themselves, so a graceful shutdown would
	// only wait for them: close every connection.
	_ = srv.Close()
	return ctx.Err()
}
