package prometheus

import (
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// RefusedRanges are the addresses that no connection of analysis or
// notifications reaches unless an allow-list entry names the IP itself:
//
//   - 169.254.0.0/16 and fe80::/10, link-local: clouds serve instance
//     metadata and credentials at 169.254.169.254 (AWS, GCP, Azure,
//     OpenStack...), and nothing a Rollout measures lives on a link-local
//     address;
//   - fd00:ec2::254, AWS's IPv6 metadata address;
//   - 64:ff9b::a9fe:0/112, 169.254.0.0/16 behind the well-known NAT64
//     prefix, which a NAT64 gateway translates back.
//
// Whatever the allow-list says, a DNS name is judged by the address it
// resolves to, at dial time (see AllowList.Dialer).
var RefusedRanges = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("64:ff9b::a9fe:0/112"),
}

// RefusedAddressError is a connection refused because its address is in
// RefusedRanges. It does not say which address: for a DNS name, that is
// what the name resolved to, which is not the Rollout author's to learn.
type RefusedAddressError struct{}

func (*RefusedAddressError) Error() string {
	return "link-local and cloud metadata addresses are refused unless the manager's allow-list names the IP"
}

// dialKeepAlive and dialTimeout are http.DefaultTransport's.
const (
	dialTimeout   = 30 * time.Second
	dialKeepAlive = 30 * time.Second
)

// Dialer returns the dialer of every connection analysis and
// notifications make. Its Control runs after name resolution, on the
// address about to be connected to, and refuses RefusedRanges but for the
// IPs an entry of a names (see Permits): a name that resolves to a
// metadata address is refused like the address itself, and no packet is
// sent to it.
//
// Through an HTTP proxy (HTTP_PROXY, HTTPS_PROXY), the dialer connects to
// the proxy and the proxy resolves the name: only IP literals are then
// refused (by RefusesHost, before any request).
func (a AllowList) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: dialTimeout, KeepAlive: dialKeepAlive, Control: a.control}
}

func (a AllowList) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !a.Permits(ap.Addr()) {
		// Not an IP after resolution is not expected: refuse rather than
		// guess.
		return &RefusedAddressError{}
	}
	return nil
}

// Permits reports whether a connection to ip may be made: any address
// outside RefusedRanges, and inside them only one that an entry names as
// an IP literal (an operator who runs Prometheus on a link-local address
// writes it, for example http://169.254.10.5:9090).
func (a AllowList) Permits(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range RefusedRanges {
		if p.Contains(ip) {
			return slices.Contains(a.permitted, ip)
		}
	}
	return true
}

// RefusesHost reports whether address names, as an IP literal, an address
// that Permits refuses. Callers check it before reading any credential,
// with a message that says why; the dialer would refuse the connection
// anyway.
func (a AllowList) RefusesHost(address string) bool {
	u, err := url.Parse(address)
	if err != nil {
		return false
	}
	ip, ok := literalIP(u.Hostname())
	return ok && !a.Permits(ip)
}

// literalIP parses host as an IP literal, without brackets or zone.
func literalIP(host string) (netip.Addr, bool) {
	host = strings.Trim(host, "[]")
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}
