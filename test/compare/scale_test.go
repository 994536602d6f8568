package compare

import (
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	cases := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"median of an odd count, unsorted", ms(30, 10, 20), 50, 20 * time.Millisecond},
		{"nearest rank rounds up", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 100 values is the 99th", ms(seq(1, 100)...), 99, 99 * time.Millisecond},
		{"p99 of 10 values is the largest", ms(seq(1, 10)...), 99, 10 * time.Millisecond},
		{"p0 is the smallest", ms(5, 3, 9), 0, 3 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Percentile(c.in, c.p); got != c.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", c.in, c.p, got, c.want)
			}
		})
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestThresholds(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	var th Thresholds
	th.Observe(1, t0)
	th.Observe(3, t0.Add(time.Second))   // 2 and 3 reached together
	th.Observe(2, t0.Add(2*time.Second)) // a fall keeps the first moments
	th.Observe(3, t0.Add(3*time.Second))
	for _, c := range []struct {
		k    int
		want time.Time
		ok   bool
	}{
		{0, time.Time{}, false},
		{1, t0, true},
		{2, t0.Add(time.Second), true},
		{3, t0.Add(time.Second), true},
		{4, time.Time{}, false},
	} {
		got, ok := th.First(c.k)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("First(%d) = %v, %v; want %v, %v", c.k, got, ok, c.want, c.ok)
		}
	}
}

func TestSumSeries(t *testing.T) {
	exposition := `# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="cloneset",result="success"} 120
controller_runtime_reconcile_total{controller="cloneset",result="requeue_after"} 30
controller_runtime_reconcile_total{controller="rollout",result="success"} 7
controller_runtime_reconcile_total_other{controller="cloneset"} 1000
workqueue_depth{controller="cloneset",name="cloneset"} 4
workqueue_depth{controller="rollout",name="rollout"} 0
prometheus_http_requests_total{code="200",handler="/api/v1/query"} 2.5e+03
prometheus_http_requests_total{code="400",handler="/api/v1/query"} 3
prometheus_http_requests_total{code="200",handler="/api/v1/query_range"} 9
`
	got, err := SumSeries(strings.NewReader(exposition), map[string]SeriesMatch{
		"cs":      {Metric: "controller_runtime_reconcile_total", Labels: []string{`controller="cloneset"`}},
		"ro":      {Metric: "controller_runtime_reconcile_total", Labels: []string{`controller="rollout"`}},
		"depth":   {Metric: "workqueue_depth", Labels: []string{`name="cloneset"`}},
		"queries": {Metric: "prometheus_http_requests_total", Labels: []string{`handler="/api/v1/query"`}},
		"absent":  {Metric: "nothing_here"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"cs": 150, "ro": 7, "depth": 4, "queries": 2503}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["absent"]; ok {
		t.Errorf("absent metric has a value: %v", got["absent"])
	}
}

func TestRates(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	samples := []Sample{
		{At: t0, Values: map[string]float64{"n": 100}},
		{At: t0.Add(2 * time.Second), Values: map[string]float64{"n": 120}},
		{At: t0.Add(4 * time.Second), Values: map[string]float64{"n": 180}},
		{At: t0.Add(6 * time.Second), Values: map[string]float64{"n": 10}}, // restarted
	}
	r := Rates(samples, "n")
	want := []float64{10, 30, 5}
	if len(r) != len(want) {
		t.Fatalf("Rates = %+v, want %d points", r, len(want))
	}
	for i, w := range want {
		if r[i].PerSec != w {
			t.Errorf("point %d: %v/s, want %v/s", i, r[i].PerSec, w)
		}
	}
	if got := MaxRate(r); got != 30 {
		t.Errorf("MaxRate = %v, want 30", got)
	}
	if got := MeanRate(r); got != 15 {
		t.Errorf("MeanRate = %v, want 15", got)
	}
	if got := MeanRate(nil); got != 0 {
		t.Errorf("MeanRate(nil) = %v, want 0", got)
	}
	// 20 + 60, then 10 counted from zero after the restart.
	if got := Increase(r); got != 90 {
		t.Errorf("Increase = %v, want 90", got)
	}
}

func TestGoMemoryAtPeak(t *testing.T) {
	const mib = 1 << 20
	sample := func(rss, objects, live, total float64) Sample {
		return Sample{Values: map[string]float64{
			"rss_anon": rss * mib, "go_heap_objects": objects * mib, "go_heap_live": live * mib,
			"go_heap_goal": 2 * live * mib, "go_heap_free": 10 * mib, "go_heap_unused": 5 * mib,
			"go_heap_released": 20 * mib, "go_total": total * mib,
		}}
	}
	samples := []Sample{
		sample(100, 60, 50, 120),
		sample(140, 80, 55, 160),                            // the highest RSS
		sample(120, 70, 58, 150),                            // the highest live heap
		{Values: map[string]float64{"rss_anon": 200 * mib}}, // no runtime series: not a candidate
	}
	m, ok := GoMemoryAtPeak(samples, "rss_anon")
	if !ok {
		t.Fatal("no sample found")
	}
	want := GoMemory{HeapObjects: 80 * mib, HeapLive: 55 * mib, HeapGoal: 110 * mib, HeapFree: 10 * mib, HeapUnused: 5 * mib,
		Other: (160 - 20 - 80 - 10 - 5) * mib, PeakLive: 58 * mib}
	if m != want {
		t.Errorf("GoMemoryAtPeak = %+v, want %+v", m, want)
	}
	if _, ok := GoMemoryAtPeak([]Sample{{Values: map[string]float64{"rss_anon": 1}}}, "rss_anon"); ok {
		t.Error("found the runtime's memory in samples without its series")
	}
}

func TestUpdateProgress(t *testing.T) {
	done := CloneSetCounts{Generation: 2, ObservedGeneration: 2, Replicas: 10, Ready: 10, UpdatedReady: 10, CurrentRevision: "v2", UpdateRevision: "v2"}
	stale := done // the image patched, the status not yet written since
	stale.Generation = 3
	moving := done
	moving.UpdatedReady, moving.Ready, moving.UpdateRevision = 4, 9, "v3"
	readyNotCurrent := done
	readyNotCurrent.CurrentRevision = "v1"
	cases := []struct {
		name             string
		in               []CloneSetCounts
		wantLeft         int
		wantUpdatedReady int32
	}{
		{name: "none", wantLeft: 0, wantUpdatedReady: 0},
		{name: "done", in: []CloneSetCounts{done}, wantLeft: 0, wantUpdatedReady: 10},
		{name: "a stale status counts no Pod", in: []CloneSetCounts{stale, done}, wantLeft: 1, wantUpdatedReady: 10},
		{name: "moving", in: []CloneSetCounts{moving, done}, wantLeft: 1, wantUpdatedReady: 14},
		{name: "all ready but the current revision behind", in: []CloneSetCounts{readyNotCurrent}, wantLeft: 1, wantUpdatedReady: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			left, ready := UpdateProgress(tc.in)
			if left != tc.wantLeft || ready != tc.wantUpdatedReady {
				t.Errorf("UpdateProgress = %d left, %d updated and ready; want %d, %d", left, ready, tc.wantLeft, tc.wantUpdatedReady)
			}
		})
	}
}
