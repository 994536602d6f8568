package prometheus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// DefaultTimeout bounds one query when Config.Timeout is zero. A measurement
// is taken every analysis interval (typically 30s or more), so a query that
// has not answered within 10s is better reported as an error and retried at
// the next interval than allowed to stall the reconcile.
const DefaultTimeout = 10 * time.Second

// Config describes how to reach one Prometheus.
type Config struct {
	// Address is the base URL, for example http://prometheus.monitoring:9090
	// or https://example.com/prometheus (a path prefix is kept).
	Address string
	// Timeout bounds each query, both on the client side (the request is
	// cancelled) and on the server side (sent as the query's timeout
	// parameter, so Prometheus stops evaluating too). Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// InsecureSkipVerify disables TLS certificate verification.
	InsecureSkipVerify bool
	// CACert is an optional PEM bundle to verify the server with instead of
	// the system roots.
	CACert []byte
	// Headers are added to every request, for example X-Scope-OrgID for a
	// multi-tenant Prometheus-compatible backend. Each must pass
	// ValidateHeader: Host, hop-by-hop and framing headers are refused.
	Headers map[string]string
	// BearerToken, when set, is sent as "Authorization: Bearer <token>".
	// Surrounding whitespace is trimmed because tokens copied into Secrets
	// often carry a trailing newline, which would make every request invalid.
	BearerToken string
	// Allow is the operator's allow-list: New refuses an address it does
	// not allow, and the dialer refuses link-local and metadata addresses
	// but the IPs it names (AllowList.Dialer). The zero AllowList allows
	// any address but those.
	Allow AllowList
	// Budget, shared by every Provider of the manager, bounds the memory
	// of answers being read at once; nil bounds only each answer
	// (MaxResponseBytes).
	Budget *Budget
}

// Provider queries one Prometheus. It is safe for concurrent use; keep one
// per distinct Config so that connections are reused.
type Provider struct {
	// address is the redacted address, for error messages.
	address string
	// endpoint is the query endpoint: the address with /api/v1/query
	// joined to its path.
	endpoint  *url.URL
	timeout   time.Duration
	client    *http.Client
	transport *http.Transport
	budget    *Budget
}

var _ analysis.Provider = (*Provider)(nil)

// Redact returns address without its password, for messages; an address
// that does not parse is not repeated at all.
func Redact(address string) string {
	u, err := url.Parse(address)
	if err != nil {
		return "(not a valid URL)"
	}
	return u.Redacted()
}

// New checks cfg and builds a Provider. It does not contact the server.
func New(cfg Config) (*Provider, error) {
	u, err := url.Parse(cfg.Address)
	if err != nil {
		// url.Error quotes the raw address, which may hold a password;
		// report only the cause.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("prometheus address is not a valid URL: %w", err)
	}
	redacted := u.Redacted()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("prometheus address %q: scheme must be http or https", redacted)
	case u.Host == "":
		return nil, fmt.Errorf("prometheus address %q: no host", redacted)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("prometheus %s: negative timeout %s", redacted, cfg.Timeout)
	case cfg.Allow.RefusesHost(cfg.Address):
		return nil, fmt.Errorf("prometheus %s: %w", redacted, &RefusedAddressError{})
	case !cfg.Allow.Allows(cfg.Address):
		return nil, fmt.Errorf("prometheus %s: the address is not allowed", redacted)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}

	tlsConfig, err := newTLSConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", redacted, err)
	}
	headers, err := newHeaders(cfg)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", redacted, err)
	}

	// Clone the default transport to keep its proxy-from-environment and
	// pool settings, but own the copy: its dialer, TLS config and
	// connection pool belong to this Provider only.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	transport.DialContext = cfg.Allow.Dialer().DialContext

	endpoint := *u
	// path.Join resolves "..", as the allow-list judges the path.
	endpoint.Path = path.Join(strings.TrimRight(u.Path, "/"), "/api/v1/query")
	endpoint.RawPath = ""
	return &Provider{
		address:  redacted,
		endpoint: &endpoint,
		timeout:  timeout,
		client: &http.Client{
			Transport:     &guard{next: headers.wrap(transport), limit: MaxResponseBytes},
			CheckRedirect: refuseRedirect,
		},
		transport: transport,
		budget:    cfg.Budget,
	}, nil
}

// Query runs an instant query at the server's current time. Using the
// server's clock rather than the controller's avoids querying "the future"
// of a Prometheus whose clock lags, which would return no data.
//
// An error means no answer (transport, authentication, timeout, a rejected
// query, an answer that is not a query response, or one the memory budget
// had no room for); an answer that holds no usable value is returned as a
// Result for analysis.Evaluate to judge.
func (p *Provider) Query(ctx context.Context, query string) (analysis.Result, error) {
	qctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// Released once the answer is decoded and reduced: the Result holds
	// one value, whatever the answer held.
	c := p.budget.newCharge()
	defer c.close()
	result, err := p.query(qctx, c, query)
	if err == nil {
		return result, nil
	}
	var budget *BudgetError
	// Tell our own timeout apart from the caller cancelling, since only
	// the former is a slow Prometheus; an answer that waited for memory
	// until then says so instead.
	if !errors.As(err, &budget) && ctx.Err() == nil && errors.Is(qctx.Err(), context.DeadlineExceeded) {
		return analysis.Result{}, &queryError{
			msg: fmt.Sprintf("query prometheus at %s: no answer within %s", p.address, p.timeout),
			err: errors.Join(err, context.DeadlineExceeded),
		}
	}
	return analysis.Result{}, &queryError{
		msg: fmt.Sprintf("query prometheus at %s: %s", p.address, describe(err)),
		err: err,
	}
}

// query sends the form by POST, as the official client does, and again by
// GET when the server (or a proxy before it) refuses POST; then reads the
// answer under the budget.
func (p *Provider) query(ctx context.Context, c *charge, query string) (analysis.Result, error) {
	form := p.endpoint.Query()
	form.Set("query", query)
	form.Set("timeout", p.timeout.String())
	resp, err := p.send(ctx, http.MethodPost, form)
	if err == nil && postRefused(resp.StatusCode) {
		_ = resp.Body.Close()
		resp, err = p.send(ctx, http.MethodGet, form)
	}
	if err != nil {
		return analysis.Result{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body := &readErr{r: c.meter(ctx, resp.Body)}
	if resp.StatusCode/100 != 2 {
		return analysis.Result{}, apiFailure(resp.StatusCode, body)
	}
	dec, a, err := decodeAnswer(body)
	if body.err != nil && !errors.Is(body.err, io.EOF) {
		// The transport, the size cap or the budget cut the answer.
		return analysis.Result{}, body.err
	}
	if err == nil {
		// Whatever follows the object must be blank, and the whole answer
		// within MaxResponseBytes; it is read unmetered, as it is thrown
		// away.
		err = blankRest(io.MultiReader(dec.Buffered(), resp.Body))
		if err != nil && !errors.Is(err, errNotAnAnswer) {
			return analysis.Result{}, err
		}
	}
	switch {
	case err != nil:
		return analysis.Result{}, &answerError{status: resp.StatusCode, reason: errNotAnAnswer.Error()}
	case a.status == "error":
		return analysis.Result{}, &answerError{status: resp.StatusCode, api: true, errorType: a.errorType, errorText: a.errorText}
	case a.status != "success":
		return analysis.Result{}, &answerError{status: resp.StatusCode, reason: errNotAnAnswer.Error()}
	}
	result, err := a.toResult()
	if err != nil {
		return analysis.Result{}, &answerError{status: resp.StatusCode, reason: err.Error()}
	}
	return result, nil
}

func (p *Provider) send(ctx context.Context, method string, form url.Values) (*http.Response, error) {
	u := *p.endpoint
	var body io.Reader
	if method == http.MethodGet {
		u.RawQuery = form.Encode()
	} else {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		// The query reads only: let the transport retry it on a pooled
		// connection the server closed, without sending the header.
		req.Header["Idempotency-Key"] = nil
	}
	return p.client.Do(req)
}

// postRefused: the answers on which the official client retries by GET.
func postRefused(status int) bool {
	return status == http.StatusForbidden || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented
}

// readErr remembers the error of the reader under a decoder, which a
// decoding error would hide.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// blankRest reads r to its end and fails on anything but JSON whitespace.
func blankRest(r io.Reader) error {
	var buf [4096]byte
	for {
		n, err := r.Read(buf[:])
		for _, c := range buf[:n] {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return errNotAnAnswer
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// CloseIdleConnections releases pooled connections, for a caller that drops
// this Provider (for example after its Config changed).
func (p *Provider) CloseIdleConnections() {
	p.transport.CloseIdleConnections()
}

func newTLSConfig(cfg Config) (*tls.Config, error) {
	tlsConfig := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Skipping verification is an explicit, per-metric choice of the
		// user (self-signed in-cluster Prometheus).
		InsecureSkipVerify: cfg.InsecureSkipVerify, //nolint:gosec // opt-in by configuration
	}
	if len(cfg.CACert) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CACert) {
			return nil, errors.New("CA certificate: no PEM certificate found")
		}
		tlsConfig.RootCAs = pool
	}
	return tlsConfig, nil
}
