package prometheus

import (
	"errors"
	"net/http"
	"strings"
)

// headers holds what every request to one Prometheus must carry.
type headers struct {
	header http.Header
	// host overrides the request's Host: net/http ignores a "Host" entry in
	// the header map.
	host string
}

func newHeaders(cfg Config) (headers, error) {
	h := headers{header: http.Header{}}
	for name, value := range cfg.Headers {
		if name == "" {
			return headers{}, errors.New("header with an empty name")
		}
		if strings.EqualFold(name, "Host") {
			h.host = value
			continue
		}
		h.header.Set(name, value)
	}
	if token := strings.TrimSpace(cfg.BearerToken); token != "" {
		// Two sources for one header would make the winner depend on map
		// order; refuse instead.
		if h.header.Get("Authorization") != "" {
			return headers{}, errors.New("both a bearer token and an Authorization header are set")
		}
		h.header.Set("Authorization", "Bearer "+token)
	}
	return h, nil
}

// wrap returns next itself when there is nothing to add.
func (h headers) wrap(next http.RoundTripper) http.RoundTripper {
	if len(h.header) == 0 && h.host == "" {
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
	if rt.headers.host != "" {
		req.Host = rt.headers.host
	}
	return rt.next.RoundTrip(req)
}
