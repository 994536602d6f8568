package notification

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/analysis/prometheus"
)

// Policy bounds one delivery.
type Policy struct {
	// Attempts is how many times a delivery is tried, at least 1.
	Attempts int
	// Backoff is the wait before the second attempt, doubled after each.
	Backoff time.Duration
	// Timeout bounds each attempt, connection and answer included.
	Timeout time.Duration
}

// DefaultPolicy: three attempts over about 6 s of backoff, 10 s each, so
// that a webhook that is down is given up on within a minute.
var DefaultPolicy = Policy{Attempts: 3, Backoff: 2 * time.Second, Timeout: 10 * time.Second}

// maxAnswerBytes is what is read of an answer, and thrown away, so that
// the connection can be reused; no answer is ever quoted.
const maxAnswerBytes = 4 << 10

// NewClient is the HTTP client of deliveries when the manager's allow-list
// names no link-local IP: NewClientFor an empty list.
func NewClient() *http.Client {
	return NewClientFor(prometheus.AllowList{})
}

// NewClientFor is the HTTP client of deliveries: the default transport
// (proxy from the environment) with a dialer that refuses link-local and
// cloud metadata addresses but the IPs allow names, at dial time, so a
// name that resolves there is refused too (prometheus.AllowList.Dialer);
// no cookies, and no redirects followed: a redirect could lead to an
// address the allow-list does not name.
func NewClientFor(allow prometheus.AllowList) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = allow.Dialer().DialContext
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// CheckURL checks a webhook URL before any connection: http or https, a
// host, and allowed by allow. Its errors never quote the URL, whose path
// often is the webhook's credential.
func CheckURL(raw string, allow prometheus.AllowList) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("the URL does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("the URL is not http or https")
	case u.Hostname() == "":
		return nil, errors.New("the URL has no host")
	case allow.RefusesHost(raw):
		return nil, fmt.Errorf("host %s is a link-local or cloud metadata address, which webhooks never reach unless the manager's --%s names that IP", u.Host, AllowedAddressesFlag)
	case !allow.Allows(raw):
		return nil, fmt.Errorf("host %s is not allowed by the manager's --%s", u.Host, AllowedAddressesFlag)
	}
	return u, nil
}

// AllowedAddressesFlag is the manager flag that restricts webhook URLs.
const AllowedAddressesFlag = "notification-allowed-addresses"

// StatusError is a receiver's answer other than 2xx. Its body is not kept:
// whoever runs the receiver chooses it, and the error ends up in an Event.
type StatusError struct {
	StatusCode int
}

func (e *StatusError) Error() string {
	if e.StatusCode >= 300 && e.StatusCode < 400 {
		return fmt.Sprintf("the webhook answered with a redirect (HTTP %d); redirects are not followed", e.StatusCode)
	}
	return fmt.Sprintf("the webhook answered HTTP %d", e.StatusCode)
}

// Post delivers body to u as a JSON POST, with id in an Idempotency-Key
// header. It retries only what the receiver cannot have acted on: a
// connection that could not be made, or an answer that asks for a retry
// (429, 502, 503). A timeout or a reset after the request was sent is not
// retried, since the receiver may have taken it: a transition is posted
// at most once. It returns the number of attempts made.
func Post(ctx context.Context, c *http.Client, u *url.URL, id string, body []byte, p Policy) (int, error) {
	attempts := max(p.Attempts, 1)
	backoff := p.Backoff
	var err error
	for i := 1; ; i++ {
		var retry bool
		retry, err = postOnce(ctx, c, u, id, body, p.Timeout)
		if err == nil || !retry || i == attempts {
			return i, err
		}
		select {
		case <-ctx.Done():
			return i, errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func postOnce(ctx context.Context, c *http.Client, u *url.URL, id string, body []byte, timeout time.Duration) (retry bool, err error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return false, errors.New("building the request failed")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "stepwise-rollout")
	req.Header.Set("Idempotency-Key", id)
	resp, err := c.Do(req)
	if err != nil {
		var refused *prometheus.RefusedAddressError
		return notConnected(err) && !errors.As(err, &refused), describe(err, u.Host)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	se := &StatusError{StatusCode: resp.StatusCode}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable:
		return true, se
	}
	return false, se
}

// notConnected reports whether the request never reached the receiver: the
// connection (or the name lookup before it, or the proxy's CONNECT)
// failed.
func notConnected(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// describe says why a delivery got no answer, naming the host (never the
// URL, whose path often is the webhook's credential) and nothing the
// network told: not the resolved address, not refused rather than
// unreachable, not the DNS server.
func describe(err error, host string) error {
	var (
		refused *prometheus.RefusedAddressError
		badCert *tls.CertificateVerificationError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errors.New("the webhook did not answer in time")
	case errors.As(err, &refused):
		return fmt.Errorf("could not connect to %s: %w", host, refused)
	case errors.As(err, &badCert):
		// What is wrong with it is the receiver's to say, not the Event's.
		return fmt.Errorf("could not connect to %s: TLS: the certificate was not accepted", host)
	case notConnected(err):
		return fmt.Errorf("could not connect to %s", host)
	}
	return fmt.Errorf("the connection to %s failed before an answer", host)
}
