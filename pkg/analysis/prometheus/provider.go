// Package prometheus is the Prometheus analysis.Provider: it runs instant
// queries through the official client (github.com/prometheus/client_golang
// api and api/prometheus/v1) and reduces the answer to an analysis.Result.
//
// It only talks HTTP: it neither logs nor reads Kubernetes objects. The
// caller resolves secrets (the bearer token) and decides what to do with
// errors.
package prometheus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

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
}

// Provider queries one Prometheus. It is safe for concurrent use; keep one
// per distinct Config so that connections are reused.
type Provider struct {
	// address is the redacted address, for error messages.
	address   string
	timeout   time.Duration
	api       promv1.API
	transport *http.Transport
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
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("prometheus address %q: scheme must be http or https", redacted)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("prometheus address %q: no host", redacted)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("prometheus %s: negative timeout %s", redacted, cfg.Timeout)
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

	// Clone the default transport to keep its proxy-from-environment and dial
	// settings, but own the copy: its TLS config and connection pool belong
	// to this Provider only.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig

	client, err := api.NewClient(api.Config{
		Address: cfg.Address,
		Client: &http.Client{
			Transport:     &guard{next: headers.wrap(transport), limit: MaxResponseBytes},
			CheckRedirect: refuseRedirect,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", redacted, err)
	}
	return &Provider{
		address:   redacted,
		timeout:   timeout,
		api:       promv1.NewAPI(client),
		transport: transport,
	}, nil
}

// Query runs an instant query at the server's current time. Using the
// server's clock rather than the controller's avoids querying "the future"
// of a Prometheus whose clock lags, which would return no data.
//
// An error means no answer (transport, authentication, timeout, a rejected
// query, and also a string result, which the client library refuses to
// decode); an answer that holds no usable value is returned as a Result for
// analysis.Evaluate to judge.
func (p *Provider) Query(ctx context.Context, query string) (analysis.Result, error) {
	qctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var x exchange
	// Warnings (for example "metric might not be a counter") do not change
	// the value, and this package does not log; they are dropped.
	value, _, _, err := p.api.Query(withExchange(qctx, &x), query, time.Time{}, promv1.WithTimeout(p.timeout))
	if err != nil {
		// Tell our own timeout apart from the caller cancelling, since only
		// the former is a slow Prometheus.
		if ctx.Err() == nil && errors.Is(qctx.Err(), context.DeadlineExceeded) {
			return analysis.Result{}, &queryError{
				msg: fmt.Sprintf("query prometheus at %s: no answer within %s", p.address, p.timeout),
				err: err,
			}
		}
		return analysis.Result{}, &queryError{
			msg: fmt.Sprintf("query prometheus at %s: %s", p.address, describe(err, x.status)),
			err: err,
		}
	}
	result, err := toResult(value)
	if err != nil {
		return analysis.Result{}, fmt.Errorf("query prometheus at %s: %w", p.address, err)
	}
	return result, nil
}

// CloseIdleConnections releases pooled connections, for a caller that drops
// this Provider (for example after its Config changed).
func (p *Provider) CloseIdleConnections() {
	p.transport.CloseIdleConnections()
}

// toResult reduces a client value to an analysis.Result. Shapes that cannot
// be a measurement become KindOther with their type name, so the
// Inconclusive message can say what came back.
func toResult(value model.Value) (analysis.Result, error) {
	switch v := value.(type) {
	case nil:
		return analysis.Result{}, errors.New("response holds no result")
	case *model.Scalar:
		return analysis.Result{
			Kind:    analysis.KindScalar,
			Type:    model.ValScalar.String(),
			Samples: []analysis.Sample{{Value: float64(v.Value)}},
		}, nil
	case model.Vector:
		samples := make([]analysis.Sample, 0, len(v))
		for _, s := range v {
			if s.Histogram != nil {
				// A native histogram sample has no float value; reading
				// s.Value would yield 0, which could pass a max threshold.
				return analysis.Result{Kind: analysis.KindOther, Type: "vector of native histograms"}, nil
			}
			labels := make(map[string]string, len(s.Metric))
			for name, val := range s.Metric {
				labels[string(name)] = string(val)
			}
			samples = append(samples, analysis.Sample{Labels: labels, Value: float64(s.Value)})
		}
		return analysis.Result{Kind: analysis.KindVector, Type: model.ValVector.String(), Samples: samples}, nil
	default:
		// Matrix (a range vector), String, or anything newer.
		return analysis.Result{Kind: analysis.KindOther, Type: value.Type().String()}, nil
	}
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
