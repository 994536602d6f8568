package prometheus

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strings"
)

// AllowList says which Prometheus addresses analysis may query. It judges
// the address as written, before any connection: scheme, host and port,
// and path prefix. It does not resolve names and knows nothing of other
// traffic: what a name resolves to is judged by the dialer (Dialer), which
// refuses RefusedRanges (link-local and cloud metadata addresses) whatever
// the entries, unless an entry names that IP. Redirects, which could lead
// elsewhere, are never followed (see RedirectError).
//
// The zero AllowList allows every address but RefusedRanges.
type AllowList struct {
	entries []allowEntry
	// permitted are the IPs of RefusedRanges that an entry names as an IP
	// literal, which the dialer lets through.
	permitted []netip.Addr
}

// allowEntry is one parsed entry. An empty scheme allows http and https;
// an empty port allows any port.
type allowEntry struct {
	scheme string
	host   string
	port   string
	// path is a cleaned prefix without a trailing slash; "" allows any.
	path string
}

// ParseAllowList parses entries, each either
//
//   - a URL, scheme://host[:port][/path]: that scheme, host and port (the
//     scheme's default when none is written) and any path under /path, or
//   - a bare host[:port]: that host over http or https, on that port or,
//     when none is written, on any port.
//
// Hosts compare without regard to case. Empty entries are skipped, so that
// a flag value with a trailing comma is fine. No entry at all allows every
// address but RefusedRanges. An entry whose host is an IP literal in
// RefusedRanges (169.254.10.5, [fe80::1]) lets the dialer connect to that
// IP: the only way to reach a link-local address.
func ParseAllowList(entries []string) (AllowList, error) {
	var list AllowList
	for _, raw := range entries {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		e, err := parseAllowEntry(raw)
		if err != nil {
			return AllowList{}, fmt.Errorf("allowed address %q: %w", raw, err)
		}
		list.entries = append(list.entries, e)
		if ip, ok := literalIP(e.host); ok && !list.Permits(ip) {
			list.permitted = append(list.permitted, ip)
		}
	}
	return list, nil
}

func parseAllowEntry(raw string) (allowEntry, error) {
	if !strings.Contains(raw, "://") {
		host, port := raw, ""
		if h, p, err := net.SplitHostPort(raw); err == nil {
			host, port = h, p
		}
		if host == "" || strings.ContainsAny(host, "/?#@") {
			return allowEntry{}, errors.New("want host[:port] or scheme://host[:port][/path]")
		}
		return allowEntry{host: strings.ToLower(strings.Trim(host, "[]")), port: port}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return allowEntry{}, err
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return allowEntry{}, errors.New("scheme must be http or https")
	case u.Hostname() == "":
		return allowEntry{}, errors.New("no host")
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return allowEntry{}, errors.New("only scheme, host, port and path are allowed")
	}
	return allowEntry{
		scheme: scheme,
		host:   strings.ToLower(u.Hostname()),
		port:   portOf(u),
		path:   cleanPath(u.Path),
	}, nil
}

// Empty reports whether the list allows every address (but
// RefusedRanges).
func (a AllowList) Empty() bool { return len(a.entries) == 0 }

// Allows reports whether address may be queried. An address that does not
// parse is not allowed (New refuses it anyway).
func (a AllowList) Allows(address string) bool {
	if a.Empty() {
		return true
	}
	u, err := url.Parse(address)
	if err != nil || u.Hostname() == "" {
		return false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return false
	}
	host, port := strings.ToLower(u.Hostname()), portOf(u)
	// The client joins the address' path with /api/v1/query through
	// path.Join, which resolves "..": judge the path it will request.
	p := cleanPath(u.Path)
	for _, e := range a.entries {
		if (e.scheme == "" || e.scheme == scheme) &&
			e.host == host &&
			(e.port == "" || e.port == port) &&
			(e.path == "" || p == e.path || strings.HasPrefix(p, e.path+"/")) {
			return true
		}
	}
	return false
}

// portOf is u's port, or its scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// cleanPath resolves "." and ".." and drops the trailing slash; "/" and ""
// become "".
func cleanPath(p string) string {
	if p == "" {
		return ""
	}
	p = path.Clean("/" + p)
	if p == "/" {
		return ""
	}
	return p
}
