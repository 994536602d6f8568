package prometheus

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// MaxResponseBytes caps what is read of one answer. The answer to a query
// for one number is a few hundred bytes; a query that matches thousands of
// series (a mistake Evaluate reports as Inconclusive) stays well under this.
// Anything larger is an error, so that a hostile or broken server cannot
// make the controller read an unbounded body; the Budget bounds what all
// answers being read hold at once.
const MaxResponseBytes = 4 << 20

// RedirectError is a 3xx answer. Redirects are never followed: the bearer
// token and the metric's headers would go wherever the Location says,
// including a host the operator's allow-list does not name.
type RedirectError struct {
	StatusCode int
	// Location is the target with credentials, query and fragment removed,
	// and truncated: it is server-supplied text that ends up in status.
	Location string
}

func (e *RedirectError) Error() string {
	to := ""
	if e.Location != "" {
		to = " to " + e.Location
	}
	return fmt.Sprintf("Prometheus answered with a redirect (HTTP %d)%s; redirects are not followed", e.StatusCode, to)
}

// TooLargeError is an answer whose body exceeds MaxResponseBytes.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("Prometheus answer is larger than %d MiB; a query for one number needs far less", e.Limit>>20)
}

// guard is the outermost RoundTripper: it refuses redirects and caps the
// body.
type guard struct {
	next  http.RoundTripper
	limit int64
}

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.StatusCode != http.StatusNotModified {
		_ = resp.Body.Close()
		return nil, &RedirectError{StatusCode: resp.StatusCode, Location: redactLocation(resp.Header.Get("Location"))}
	}
	if resp.ContentLength > g.limit {
		_ = resp.Body.Close()
		return nil, &TooLargeError{Limit: g.limit}
	}
	resp.Body = &cappedBody{body: resp.Body, left: g.limit, limit: g.limit}
	return resp, nil
}

// refuseRedirect stops http.Client from following a redirect, should one
// ever get past the guard (for example if the guard were left out of the
// chain): the 3xx answer is then returned as is and reported as an error.
func refuseRedirect(*http.Request, []*http.Request) error {
	return http.ErrUseLastResponse
}

// redactLocation keeps the scheme, host and path of a redirect target: its
// user info and query may hold credentials, and the whole is
// server-supplied, so it is also truncated and made printable.
func redactLocation(location string) string {
	if location == "" {
		return ""
	}
	u, err := url.Parse(location)
	if err != nil {
		return "an unparsable location"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return printable(u.String(), maxLocation)
}

// cappedBody fails a read past its limit instead of ending early: a
// truncated answer could still decode into a wrong value.
type cappedBody struct {
	body  io.ReadCloser
	left  int64
	limit int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// The limit is used up: one more byte makes the answer too large.
		var probe [1]byte
		n, err := b.body.Read(probe[:])
		if n > 0 {
			return 0, &TooLargeError{Limit: b.limit}
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.body.Close() }
