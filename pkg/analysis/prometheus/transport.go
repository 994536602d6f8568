package prometheus

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// RefusedHeaders are the header names a metric may not set (compared
// without regard to case). The CRD refuses the same list.
//
//   - Host and the forwarding headers (Forwarded, X-Forwarded-*, X-Real-IP)
//     would make the request claim another target or origin than the one
//     the address names: a shared ingress or gateway routes on them, so a
//     Host entry reaches a virtual host that the operator's allow-list
//     (--analysis-allowed-addresses) never saw, and a proxy that trusts
//     X-Forwarded-For would take the controller for someone else.
//   - Hop-by-hop headers (RFC 9110 section 7.6.1) steer the connection or
//     a proxy on the way, not the query: Connection, Keep-Alive,
//     Proxy-Connection, Proxy-Authenticate, Proxy-Authorization (the
//     operator's egress proxy, if any, is theirs to authenticate to), TE,
//     Trailer, Transfer-Encoding and Upgrade.
//   - Content-Length and Content-Type frame the form-encoded query, which
//     the client writes itself.
var RefusedHeaders = []string{
	"Host", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-IP",
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"TE", "Trailer", "Transfer-Encoding", "Upgrade",
	"Content-Length", "Content-Type",
}

// ValidateHeader checks one header a metric sets: its name must be an
// RFC 9110 token and not refused (see RefusedHeaders), and its value must
// hold no control character but tab (no CR or LF that could start another
// header, no NUL). The CRD checks the same; this is for objects stored
// before it did.
func ValidateHeader(name, value string) error {
	if name == "" {
		return errors.New("header with an empty name")
	}
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("header name %q is not a token (letters, digits and !#$%%&'*+-.^_`|~)", name)
	}
	for _, refused := range RefusedHeaders {
		if strings.EqualFold(name, refused) {
			return fmt.Errorf("header %s cannot be set by a metric", refused)
		}
	}
	if !httpguts.ValidHeaderFieldValue(value) {
		return fmt.Errorf("header %s: value holds a control character (CR, LF, NUL...)", name)
	}
	return nil
}

// headers holds what every request to one Prometheus must carry.
type headers struct {
	header http.Header
}

func newHeaders(cfg Config) (headers, error) {
	h := headers{header: http.Header{}}
	// Sorted, so that the first bad header reported is always the same.
	names := make([]string, 0, len(cfg.Headers))
	for name := range cfg.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		value := cfg.Headers[name]
		if err := ValidateHeader(name, value); err != nil {
			return headers{}, err
		}
		h.header.Set(name, value)
	}
	if token := strings.TrimSpace(cfg.BearerToken); token != "" {
		// Two sources for one header would make the winner depend on map
		// order; refuse instead.
		if h.header.Get("Authorization") != "" {
			return headers{}, errors.New("both a bearer token and an Authorization header are set")
		}
		if !httpguts.ValidHeaderFieldValue(token) {
			// The token is a Secret's content: never quote it.
			return headers{}, errors.New("bearer token holds a control character (CR, LF, NUL...)")
		}
		h.header.Set("Authorization", "Bearer "+token)
	}
	return h, nil
}

// wrap returns next itself when there is nothing to add.
func (h headers) wrap(next http.RoundTripper) http.RoundTripper {
	if len(h.header) == 0 {
		return next
	}
	return &headerRoundTripper{headers: h, next: next}
}

// headerRoundTripper adds fixed headers to each request. It is written here
// rather than taken from prometheus/common/config because that package pulls
// in OAuth2 and YAML dependencies for two lines of work.
type headerRoundTripper struct {
	headers headers
	next    http.RoundTripper
}

func (rt *headerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper must not modify the request it is given.
	req = req.Clone(req.Context())
	for name, values := range rt.headers.header {
		req.Header[name] = append([]string(nil), values...)
	}
	return rt.next.RoundTrip(req)
}
