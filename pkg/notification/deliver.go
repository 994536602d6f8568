package notification

import (
	"bytes"
	"context"
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

// maxAnswerBytes is what is read of an answer: enough for an error text.
const maxAnswerBytes = 4 << 10

// NewClient is the HTTP client of deliveries: the default transport
// (proxy from the environment), no cookies, and no redirects followed: a
// redirect could lead to an address the allow-list does not name.
func NewClient() *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
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
	case !allow.Allows(raw):
		return nil, fmt.Errorf("host %s is not allowed by the manager's --%s", u.Host, AllowedAddressesFlag)
	}
	return u, nil
}

// AllowedAddressesFlag is the manager flag that restricts webhook URLs.
const AllowedAddressesFlag = "notification-allowed-addresses"

// StatusError is a receiver's answer other than 2xx.
type StatusError struct {
	StatusCode int
	// Body is the start of the answer, for the Event.
	Body string
}

func (e *StatusError) Error() string {
	switch {
	case e.StatusCode >= 300 && e.StatusCode < 400:
		return fmt.Sprintf("the webhook answered with a redirect (HTTP %d); redirects are not followed", e.StatusCode)
	case e.Body != "":
		return fmt.Sprintf("the webhook answered HTTP %d: %s", e.StatusCode, e.Body)
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
		return notConnected(err), redact(err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	se := &StatusError{StatusCode: resp.StatusCode, Body: printable(answer, 200)}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable:
		return true, se
	}
	return false, se
}

// notConnected reports whether the request never reached the receiver: the
// connection (or the name lookup before it) failed.
func notConnected(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// redact drops the URL that net/http puts in its errors.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if errors.Is(ue.Err, context.DeadlineExceeded) {
			return errors.New("the webhook did not answer in time")
		}
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// printable keeps the start of a server-supplied text, without control
// characters, for an Event.
func printable(b []byte, n int) string {
	out := make([]rune, 0, n)
	for _, r := range string(b) {
		if len(out) == n {
			break
		}
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		out = append(out, r)
	}
	return string(bytes.TrimSpace([]byte(string(out))))
}
