package realnode

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		"/var/tmp/stepwise-realnode/a": "/var/tmp/stepwise-realnode/a",
		`/var/tmp/with\040space`:       "/var/tmp/with space",
		`/tab\011and\134backslash`:     "/tab\tand\\backslash",
		`/short\04`:                    `/short\04`,
		`/not\999octal`:                `/not\999octal`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMilestones(t *testing.T) {
	const (
		settled   = "Running Ready=True ContainersReady=True InPlaceUpdateReady=True | app{v1 running ready=true started=true restarts=0 cid=#1 iid=#1 last=-} sidecar{x running ready=true started=true restarts=0 cid=#1 iid=#1 last=-}"
		gateFalse = "Running Ready=True ContainersReady=True InPlaceUpdateReady=False | app{v1 running ready=true started=true restarts=0 cid=#1 iid=#1 last=-} sidecar{x running ready=true started=true restarts=0 cid=#1 iid=#1 last=-}"
		notReady  = "Running Ready=False ContainersReady=True InPlaceUpdateReady=False | app{v1 running ready=true started=true restarts=0 cid=#1 iid=#1 last=-} sidecar{x running ready=true started=true restarts=0 cid=#1 iid=#1 last=-}"
		stopped   = "Running Ready=False ContainersReady=False InPlaceUpdateReady=False | app{v1 terminated ready=false started=false restarts=0 cid=#1 iid=#1 last=-} sidecar{x running ready=true started=true restarts=0 cid=#1 iid=#1 last=-}"
		started   = "Running Ready=False ContainersReady=False InPlaceUpdateReady=False | app{v2 running ready=false started=true restarts=1 cid=#2 iid=#2 last=terminated} sidecar{x running ready=true started=true restarts=0 cid=#1 iid=#1 last=-}"
		probed    = "Running Ready=False ContainersReady=True InPlaceUpdateReady=False | app{v2 running ready=true started=true restarts=1 cid=#2 iid=#2 last=terminated} sidecar{x running ready=true started=true restarts=0 cid=#1 iid=#1 last=-}"
		gateTrue  = "Running Ready=False ContainersReady=True InPlaceUpdateReady=True | app{v2 running ready=true started=true restarts=1 cid=#2 iid=#2 last=terminated} sidecar{x running ready=true started=true restarts=0 cid=#1 iid=#1 last=-}"
		done      = "Running Ready=True ContainersReady=True InPlaceUpdateReady=True | app{v2 running ready=true started=true restarts=1 cid=#2 iid=#2 last=terminated} sidecar{x running ready=true started=true restarts=0 cid=#1 iid=#1 last=-}"
	)
	all := []string{"gate False", "Pod not Ready", "app not ready", "app restarted on v2", "new app ready", "gate True again", "Pod Ready again"}
	for name, tc := range map[string]struct {
		lines []string
		want  []string
	}{
		"kubelet":                     {[]string{settled, gateFalse, notReady, started, probed, gateTrue, done}, all},
		"kwok, terminated in between": {[]string{settled, gateFalse, notReady, stopped, started, probed, gateTrue, done}, all},
		// A simulator that restarts the container without the Pod ever
		// leaving service.
		"no drain":        {[]string{settled, done}, []string{"app restarted on v2", "new app ready", "gate True again", "Pod Ready again"}},
		"nothing happens": {[]string{settled, settled}, nil},
	} {
		if got := milestones(tc.lines); !slices.Equal(got, tc.want) {
			t.Errorf("%s: milestones %q, want %q", name, got, tc.want)
		}
	}
	if got := withoutTerminated([]string{settled, stopped, done}); !slices.Equal(got, []string{settled, done}) {
		t.Errorf("withoutTerminated kept %q", got)
	}
}

func TestInService(t *testing.T) {
	slice := func(rv int64, name string, ready map[string]bool) record {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for ip, r := range ready {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
		}
		return record{rv: rv, slice: s}
	}
	recs := []record{
		slice(1, "a", map[string]bool{"10.244.0.2": true, "10.244.0.3": true}),
		{rv: 2}, // a Pod write: no new state
		slice(3, "a", map[string]bool{"10.244.0.2": false, "10.244.0.3": true}),
		slice(4, "a", map[string]bool{"10.244.0.3": true}),
		slice(5, "b", map[string]bool{"10.244.0.2": true}),
	}
	got := inService(recs, "10.244.0.2")
	want := []serviceState{{1, true}, {3, false}, {4, false}, {5, true}}
	if !slices.Equal(got, want) {
		t.Errorf("inService = %+v, want %+v", got, want)
	}
}

func TestParseProcAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1",
		"0100F40A:0050":                         "10.244.0.1",
		"00000000:0000":                         "0.0.0.0",
		"0000000000000000FFFF00000100007F:9C4B": "127.0.0.1",
		"00000000000000000000000001000000:0050": "::1",
	} {
		got, err := parseProcAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("parseProcAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "zz:0050", "0100007F00:0050"} {
		if _, err := parseProcAddr(bad); err == nil {
			t.Errorf("parseProcAddr(%q): no error", bad)
		}
	}
}
