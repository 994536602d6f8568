package prometheus

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// The dialer's Control sees the address about to be connected to, after
// name resolution: these are what it may see.
func TestDialerControl(t *testing.T) {
	open, err := ParseAllowList(nil)
	if err != nil {
		t.Fatal(err)
	}
	named, err := ParseAllowList([]string{"http://169.254.10.5:9090", "[fe80::1%eth0]", "prometheus.monitoring:9090"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		list    AllowList
		address string
		refused bool
	}{
		{"AWS, GCP and Azure metadata", open, "169.254.169.254:80", true},
		{"any link-local IPv4", open, "169.254.0.1:9090", true},
		{"IPv6 link-local with a zone", open, "[fe80::1%eth0]:80", true},
		{"AWS IPv6 metadata", open, "[fd00:ec2::254]:80", true},
		{"IPv4-mapped metadata", open, "[::ffff:169.254.169.254]:80", true},
		{"metadata behind NAT64", open, "[64:ff9b::a9fe:a9fe]:80", true},
		{"a Pod", open, "10.244.0.7:9090", false},
		{"loopback", open, "127.0.0.1:9090", false},
		{"next to AWS IPv6 metadata", open, "[fd00:ec2::253]:80", false},
		{"next to link-local", open, "169.255.0.1:80", false},
		{"not an IP", open, "metadata.google.internal:80", true},
		{"the IP an entry names", named, "169.254.10.5:9090", false},
		{"the IP an entry names, on another port", named, "169.254.10.5:80", false},
		{"another link-local IP", named, "169.254.169.254:80", true},
		{"the IPv6 an entry names, any zone", named, "[fe80::1%eth1]:80", false},
		{"another IPv6 link-local", named, "[fe80::2%eth0]:80", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.list.control("tcp", tt.address, nil)
			var refused *RefusedAddressError
			if got := errors.As(err, &refused); got != tt.refused {
				t.Errorf("control(%s) = %v, want refused %v", tt.address, err, tt.refused)
			}
		})
	}
}

func TestRefusesHost(t *testing.T) {
	named, err := ParseAllowList([]string{"169.254.10.5"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		list    AllowList
		address string
		want    bool
	}{
		{AllowList{}, "http://169.254.169.254/", true},
		{AllowList{}, "http://169.254.169.254:80/latest/meta-data", true},
		{AllowList{}, "http://[fd00:ec2::254]/", true},
		{AllowList{}, "http://[fe80::1%25eth0]:9090", true},
		{AllowList{}, "http://[::ffff:169.254.169.254]/", true},
		{AllowList{}, "http://prometheus.monitoring:9090", false}, // a name is judged at dial time
		{AllowList{}, "http://10.0.0.1:9090", false},
		{named, "http://169.254.10.5:9090", false},
		{named, "http://169.254.10.6:9090", true},
	}
	for _, tt := range tests {
		if got := tt.list.RefusesHost(tt.address); got != tt.want {
			t.Errorf("RefusesHost(%q) = %v, want %v", tt.address, got, tt.want)
		}
	}
}

// A name that resolves to the metadata address is refused at dial time:
// the resolver is asked, no connection is made.
func TestDialerRefusesANameThatResolvesToMetadata(t *testing.T) {
	dns := fakeDNS(t, netip.MustParseAddr("169.254.169.254"))
	d := AllowList{}.Dialer()
	d.Resolver = dns.resolver()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp4", "metadata.attacker.example:80")
	if err == nil {
		_ = conn.Close()
		t.Fatal("DialContext() connected")
	}
	var refused *RefusedAddressError
	if !errors.As(err, &refused) {
		t.Fatalf("DialContext() error = %v, want a *RefusedAddressError", err)
	}
	if dns.asked.Load() == 0 {
		t.Error("the name was never resolved: the refusal did not come after resolution")
	}
	if strings.Contains(refused.Error(), "169.254") {
		t.Errorf("the refusal %q names the resolved address", refused)
	}
}

// The Provider's connections go through that dialer; an IP literal of a
// refused range is refused by New already.
func TestProviderDialsThroughTheGuard(t *testing.T) {
	p := newProvider(t, Config{Address: "http://prometheus.monitoring:9090"})
	start := time.Now()
	_, err := p.transport.DialContext(context.Background(), "tcp", "169.254.169.254:80")
	var refused *RefusedAddressError
	if !errors.As(err, &refused) || time.Since(start) > time.Second {
		t.Errorf("the Provider's dialer: %v after %s, want an immediate *RefusedAddressError", err, time.Since(start))
	}

	for _, address := range []string{"http://169.254.169.254/", "http://[fd00:ec2::254]:80"} {
		_, err := New(Config{Address: address})
		if !errors.As(err, &refused) {
			t.Errorf("New(%s) error = %v, want a *RefusedAddressError", address, err)
		}
	}
	list, _ := ParseAllowList([]string{"http://169.254.169.254"})
	if _, err := New(Config{Address: "http://169.254.169.254/", Allow: list}); err != nil {
		t.Errorf("New() of an address the allow-list names by its IP: %v", err)
	}
	if _, err := New(Config{Address: "http://elsewhere:9090", Allow: list}); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("New() of an address the allow-list does not name: %v", err)
	}
}

// dnsServer answers every A question with one address, over UDP on
// 127.0.0.1, and counts the questions.
type dnsServer struct {
	addr  string
	asked atomic.Int32
}

func fakeDNS(t *testing.T, answer netip.Addr) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	s := &dnsServer{addr: pc.LocalAddr().String()}
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			s.asked.Add(1)
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: answer.As4()})
			}
			msg, err := b.Finish()
			if err == nil {
				_, _ = pc.WriteTo(msg, from)
			}
		}
	}()
	return s
}

func (s *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", s.addr)
	}}
}
