package prometheus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/util/jsonpath"

	"github.com/stepwise-dev/stepwise/pkg/analysis"
)

// WebConfig describes one web metric: a GET or POST whose JSON answer holds
// the value at JSONPath. It shares the Prometheus client's hardening: the
// allow-list and the dialer guard, no redirects, the capped body under the
// shared Budget, a private CA, and validated headers.
type WebConfig struct {
	// URL is the rendered http or https URL.
	URL string
	// Method is GET (the default) or POST.
	Method string
	// Body is the rendered POST body, sent as application/json.
	Body string
	// JSONPath reads the value, in kubectl's syntax ({.data.value}).
	JSONPath string
	// Timeout bounds the request; zero means DefaultTimeout.
	Timeout time.Duration
	// CACert verifies the server instead of the system roots.
	CACert []byte
	// Headers are literal values and values read from Secrets; each must
	// pass ValidateHeader.
	Headers map[string]string
	Allow   AllowList
	Budget  *Budget
}

// Web is the web provider.
type Web struct {
	cfg       WebConfig
	address   string
	parser    *jsonpath.JSONPath
	client    *http.Client
	transport *http.Transport
}

var _ analysis.Provider = (*Web)(nil)

// NewWeb checks cfg and builds the provider. It does not contact the server.
func NewWeb(cfg WebConfig) (*Web, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("web url is not a valid URL: %w", err)
	}
	redacted := u.Redacted()
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("web url %q: scheme must be http or https", redacted)
	case u.Host == "":
		return nil, fmt.Errorf("web url %q: no host", redacted)
	case cfg.Method != "" && cfg.Method != http.MethodGet && cfg.Method != http.MethodPost:
		return nil, fmt.Errorf("web %s: method %q, want GET or POST", redacted, cfg.Method)
	case cfg.Allow.RefusesHost(cfg.URL):
		return nil, fmt.Errorf("web %s: %w", redacted, &RefusedAddressError{})
	case !cfg.Allow.Allows(cfg.URL):
		return nil, fmt.Errorf("web %s: the address is not allowed", redacted)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	parser := jsonpath.New("web")
	if err := parser.Parse(cfg.JSONPath); err != nil {
		return nil, fmt.Errorf("web jsonPath %q: %w", cfg.JSONPath, err)
	}
	tlsConfig, err := newTLSConfig(Config{CACert: cfg.CACert})
	if err != nil {
		return nil, fmt.Errorf("web %s: %w", redacted, err)
	}
	headers, err := newHeaders(Config{Headers: cfg.Headers})
	if err != nil {
		return nil, fmt.Errorf("web %s: %w", redacted, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	transport.DialContext = cfg.Allow.Dialer().DialContext
	return &Web{
		cfg: cfg, address: redacted, parser: parser, transport: transport,
		client: &http.Client{
			Transport:     &guard{next: headers.wrap(transport), limit: MaxResponseBytes},
			CheckRedirect: refuseRedirect,
		},
	}, nil
}

// Query sends the request and reads one number at JSONPath; query is the
// rendered URL, only for messages. A value that is absent, not a number,
// or several is returned as KindOther or as several samples, for
// analysis.Evaluate to call inconclusive.
func (w *Web) Query(ctx context.Context, _ string) (analysis.Result, error) {
	qctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	c := w.cfg.Budget.newCharge()
	defer c.close()
	result, err := w.query(qctx, c)
	if err == nil {
		return result, nil
	}
	if ctx.Err() == nil && errors.Is(qctx.Err(), context.DeadlineExceeded) {
		return analysis.Result{}, &queryError{msg: fmt.Sprintf("web %s: no answer within %s", w.address, w.cfg.Timeout),
			err: errors.Join(err, context.DeadlineExceeded)}
	}
	return analysis.Result{}, &queryError{msg: fmt.Sprintf("web %s: %s", w.address, describe(err)), err: err}
}

func (w *Web) query(ctx context.Context, c *charge) (analysis.Result, error) {
	method := w.cfg.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(w.cfg.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.cfg.URL, body)
	if err != nil {
		return analysis.Result{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return analysis.Result{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(c.meter(ctx, resp.Body))
	if err != nil {
		return analysis.Result{}, err
	}
	if resp.StatusCode/100 != 2 {
		return analysis.Result{}, &answerError{status: resp.StatusCode}
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return analysis.Result{}, &answerError{status: resp.StatusCode, reason: "the answer is not JSON"}
	}
	found, err := w.parser.FindResults(doc)
	if err != nil {
		// An absent field is no data: inconclusive, not an error.
		return analysis.Result{Kind: analysis.KindVector, Type: "no value at " + w.cfg.JSONPath}, nil
	}
	var samples []analysis.Sample
	for _, group := range found {
		for _, v := range group {
			f, ok := number(v.Interface())
			if !ok {
				return analysis.Result{Kind: analysis.KindOther, Type: fmt.Sprintf("%T at %s", v.Interface(), w.cfg.JSONPath)}, nil
			}
			samples = append(samples, analysis.Sample{Value: f})
		}
	}
	return analysis.Result{Kind: analysis.KindVector, Samples: samples, Type: "json"}, nil
}

// number reads a JSON number, or a string holding one (many APIs quote
// their numbers, as Prometheus does).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(n, 64)
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

// CloseIdleConnections releases pooled connections.
func (w *Web) CloseIdleConnections() { w.transport.CloseIdleConnections() }
