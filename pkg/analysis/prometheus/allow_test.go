package prometheus

import (
	"strings"
	"testing"
)

func TestAllowList(t *testing.T) {
	entries := []string{
		"http://prometheus.monitoring:9090",
		"https://thanos.example/tenant-a/",
		"HTTPS://Mimir.Example",
		"victoria.monitoring.svc:8428",
		"vm.example",
		"[fd00::1]:9090",
		"", // a trailing comma in the flag
	}
	list, err := ParseAllowList(entries)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		address string
		want    bool
	}{
		{"http://prometheus.monitoring:9090", true},
		{"http://prometheus.monitoring:9090/", true},
		{"http://PROMETHEUS.monitoring:9090/prefix", true},
		{"http://user:pw@prometheus.monitoring:9090", true},
		{"https://prometheus.monitoring:9090", false},                // another scheme
		{"http://prometheus.monitoring:9091", false},                 // another port
		{"http://prometheus.monitoring", false},                      // port 80
		{"http://prometheus.monitoring.evil.com:9090", false},        // a longer host is another host
		{"http://prometheus.monitoring:9090@evil.com:9090", false},   // user info, host evil.com
		{"http://evil.com/http://prometheus.monitoring:9090", false}, // a string prefix is not enough
		{"https://thanos.example/tenant-a", true},                    // path prefix, no trailing slash
		{"https://thanos.example:443/tenant-a/sub", true},            // default port written out
		{"https://thanos.example/tenant-ab", false},                  // a prefix ends at a slash
		{"https://thanos.example/tenant-a/../tenant-b", false},       // the client would request /tenant-b
		{"https://thanos.example/tenant-a/%2e%2e/tenant-b", false},   // the same, escaped
		{"https://thanos.example/", false},
		{"https://thanos.example:8443/tenant-a", false},
		{"https://mimir.example/any/path", true},
		{"http://mimir.example", false},
		{"http://victoria.monitoring.svc:8428", true}, // bare host:port, either scheme
		{"https://victoria.monitoring.svc:8428/x", true},
		{"http://victoria.monitoring.svc:8429", false},
		{"http://vm.example:1234", true}, // bare host, any port
		{"https://vm.example", true},
		{"http://[fd00::1]:9090", true},
		{"http://[fd00::2]:9090", false},
		{"ftp://vm.example", false},
		{"vm.example", false}, // not a URL
		{"http://[::1", false},
	}
	for _, tt := range tests {
		if got := list.Allows(tt.address); got != tt.want {
			t.Errorf("Allows(%q) = %v, want %v", tt.address, got, tt.want)
		}
	}

	t.Run("no entries allow everything", func(t *testing.T) {
		for _, entries := range [][]string{nil, {}, {"", " "}} {
			list, err := ParseAllowList(entries)
			if err != nil || !list.Empty() || !list.Allows("http://anything.example:1") {
				t.Errorf("ParseAllowList(%q) = %+v, %v; want an empty list that allows all", entries, list, err)
			}
		}
	})
}

func TestParseAllowListRefusesBadEntries(t *testing.T) {
	for _, entry := range []string{
		"ftp://prometheus",
		"http://",
		"http://user:pw@prometheus",
		"http://prometheus?x=1",
		"http://prometheus#frag",
		"http://[::1",
		"prometheus/path",
		"user@prometheus",
		":9090",
	} {
		_, err := ParseAllowList([]string{"http://ok.example", entry})
		if err == nil || !strings.Contains(err.Error(), "allowed address") {
			t.Errorf("ParseAllowList(%q) error = %v, want one naming the entry", entry, err)
		}
	}
}
