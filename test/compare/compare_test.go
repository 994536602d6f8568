package compare

import (
	"strings"
	"testing"
	"time"
)

func TestCountWrites(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	line := func(agent, verb, resource, sub, group string, code int, at time.Duration) string {
		return `{"kind":"Event","stage":"ResponseComplete","verb":"` + verb + `","userAgent":"` + agent +
			`","objectRef":{"resource":"` + resource + `","subresource":"` + sub + `","apiGroup":"` + group +
			`"},"responseStatus":{"code":` + itoa(code) + `},"stageTimestamp":"` + t0.Add(at).Format(time.RFC3339Nano) + `"}`
	}
	log := strings.Join([]string{
		line("kruise-manager/v1.9.0 (linux/amd64)", "patch", "pods", "", "", 200, time.Second),
		line("kruise-manager/v1.9.0 (linux/amd64)", "patch", "pods", "", "", 200, 2*time.Second),
		line("kruise-manager/v1.9.0 (linux/amd64)", "update", "clonesets", "status", "apps.kruise.io", 409, 3*time.Second),
		line("kruise-manager/v1.9.0 (linux/amd64)", "patch", "pods", "", "", 200, 20*time.Second),           // after the window
		line("kwok/v0.8.0", "patch", "pods", "status", "", 200, time.Second),                                // another client
		strings.Replace(line("kruise-manager/x", "get", "pods", "", "", 200, time.Second), "get", "get", 1), // a read
		"",
	}, "\n")
	got, err := CountWrites(strings.NewReader(log), "kruise-manager/", t0, t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := Writes{
		{Resource: "pods", Verb: "patch"}:                                             2,
		{Resource: "clonesets.apps.kruise.io/status", Verb: "update", Conflict: true}: 1,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: got %d, want %d", k, got[k], n)
		}
	}
	if total, conflicts := got.Total(); total != 3 || conflicts != 1 {
		t.Errorf("Total() = %d, %d; want 3, 1", total, conflicts)
	}
	if _, err := CountWrites(strings.NewReader("not json\n"), "x", t0, t0); err == nil {
		t.Error("a line that is not an audit event must be an error")
	}
}

func TestWriteTimes(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
	line := func(agent, resource, sub, name string, code int, received, completed time.Duration) string {
		return `{"kind":"Event","stage":"ResponseComplete","verb":"patch","userAgent":"` + agent +
			`","objectRef":{"resource":"` + resource + `","subresource":"` + sub + `","apiGroup":"stepwise.dev","namespace":"ns","name":"` + name +
			`"},"responseStatus":{"code":` + itoa(code) + `},"requestReceivedTimestamp":"` + t0.Add(received).Format(time.RFC3339Nano) +
			`","stageTimestamp":"` + t0.Add(completed).Format(time.RFC3339Nano) + `"}`
	}
	log := strings.Join([]string{
		line("stepwise-manager/v1", "clonesets", "status", "a", 200, 100*time.Millisecond, 180*time.Millisecond),
		line("stepwise-manager/v1", "clonesets", "status", "b", 200, 200*time.Millisecond, 250*time.Millisecond),
		line("stepwise-manager/v1", "clonesets", "status", "a", 409, 300*time.Millisecond, 310*time.Millisecond), // refused: nothing to see
		line("stepwise-manager/v1", "clonesets", "", "a", 200, 400*time.Millisecond, 420*time.Millisecond),       // another resource
		line("kwok/v0.8.0", "clonesets", "status", "a", 200, 500*time.Millisecond, 520*time.Millisecond),         // another client
		line("stepwise-manager/v1", "rollouts", "status", "a", 200, time.Second, 1100*time.Millisecond),
		line("stepwise-manager/v1", "clonesets", "status", "a", 200, 1500*time.Millisecond, 1600*time.Millisecond),
		line("stepwise-manager/v1", "clonesets", "status", "a", 200, 20*time.Second, 21*time.Second), // after the window
	}, "\n")
	got, err := WriteTimes(strings.NewReader(log), "stepwise-manager/", []string{"clonesets.stepwise.dev/status", "rollouts.stepwise.dev/status"}, t0, t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	at := func(received, completed time.Duration) WriteTime {
		return WriteTime{Received: t0.Add(received), Completed: t0.Add(completed)}
	}
	want := map[WrittenObject][]WriteTime{
		{Resource: "clonesets.stepwise.dev/status", Namespace: "ns", Name: "a"}: {at(100*time.Millisecond, 180*time.Millisecond), at(1500*time.Millisecond, 1600*time.Millisecond)},
		{Resource: "clonesets.stepwise.dev/status", Namespace: "ns", Name: "b"}: {at(200*time.Millisecond, 250*time.Millisecond)},
		{Resource: "rollouts.stepwise.dev/status", Namespace: "ns", Name: "a"}:  {at(time.Second, 1100*time.Millisecond)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for obj, ws := range want {
		if len(got[obj]) != len(ws) {
			t.Errorf("%v: got %v, want %v", obj, got[obj], ws)
			continue
		}
		for i := range ws {
			if !got[obj][i].Received.Equal(ws[i].Received) || !got[obj][i].Completed.Equal(ws[i].Completed) {
				t.Errorf("%v[%d]: got %v, want %v", obj, i, got[obj][i], ws[i])
			}
		}
	}
	if _, err := WriteTimes(strings.NewReader("not json\n"), "x", nil, t0, t0); err == nil {
		t.Error("a line that is not an audit event must be an error")
	}
}

func TestLastWrite(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
	done := func(ms ...int) []WriteTime {
		var out []WriteTime
		for _, m := range ms {
			out = append(out, WriteTime{Completed: t0.Add(time.Duration(m) * time.Millisecond)})
		}
		return out
	}
	cases := []struct {
		name     string
		writes   []WriteTime
		from, to int // ms after t0
		want     int // ms after t0 of the write found; -1: none
	}{
		{"none", nil, 0, 1000, -1},
		{"the last before the event", done(100, 200, 300), 0, 250, 200},
		{"one completed as the event was seen", done(100, 250), 0, 250, 250},
		{"all after the event", done(300, 400), 0, 250, -1},
		{"all before the window", done(100, 200), 500, 900, -1},
		{"the window's first moment counts", done(100, 500), 500, 900, 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := LastWrite(c.writes, t0.Add(time.Duration(c.from)*time.Millisecond), t0.Add(time.Duration(c.to)*time.Millisecond))
			if c.want < 0 {
				if ok {
					t.Errorf("got %v, want none", got.Completed)
				}
				return
			}
			if !ok || !got.Completed.Equal(t0.Add(time.Duration(c.want)*time.Millisecond)) {
				t.Errorf("got %v (found %v), want %d ms", got.Completed.Sub(t0), ok, c.want)
			}
		})
	}
}

func TestWriteTimeSplit(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	cases := []struct {
		name                  string
		from, seen            time.Time
		write                 WriteTime
		writer, server, watch int // ms
	}{
		{"in order", ms(0), ms(1000), WriteTime{Received: ms(600), Completed: ms(900)}, 600, 300, 100},
		{"the writer saw the cause first", ms(100), ms(300), WriteTime{Received: ms(50), Completed: ms(250)}, -50, 200, 50},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			writer, server, watch := c.write.Split(c.from, c.seen)
			if writer != time.Duration(c.writer)*time.Millisecond || server != time.Duration(c.server)*time.Millisecond || watch != time.Duration(c.watch)*time.Millisecond {
				t.Errorf("Split = %v, %v, %v; want %d, %d, %d ms", writer, server, watch, c.writer, c.server, c.watch)
			}
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func TestProgress(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	old := PodState{Ready: true}
	tests := []struct {
		name          string
		steps         func(p *Progress)
		firstReady    time.Duration
		done          time.Duration
		maxUnavailble int
	}{
		{
			name: "in place, all at once",
			steps: func(p *Progress) {
				p.Seed("a", old)
				p.Seed("b", old)
				p.Set("a", PodState{}, at(1))
				p.Set("b", PodState{}, at(1))
				p.Set("a", PodState{Ready: true, NewImage: true}, at(3))
				p.Set("b", PodState{Ready: true, NewImage: true}, at(4))
			},
			firstReady: 3 * time.Second, done: 4 * time.Second, maxUnavailble: 2,
		},
		{
			name: "recreated: done only once the old Pods are gone",
			steps: func(p *Progress) {
				p.Seed("a", old)
				p.Seed("b", old)
				p.Set("c", PodState{Ready: true, NewImage: true}, at(2))
				p.Set("d", PodState{Ready: true, NewImage: true}, at(3))
				p.Set("a", PodState{}, at(4))
				p.Delete("a", at(5))
				p.Delete("b", at(6))
			},
			firstReady: 2 * time.Second, done: 6 * time.Second, maxUnavailble: 0,
		},
		{
			name: "never ready",
			steps: func(p *Progress) {
				p.Seed("a", old)
				p.Seed("b", old)
				p.Set("a", PodState{NewImage: true}, at(1))
			},
			firstReady: -1, done: -1, maxUnavailble: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewProgress(2, start)
			tt.steps(p)
			if p.FirstReady != tt.firstReady || p.Done != tt.done || p.MaxUnavail != tt.maxUnavailble {
				t.Errorf("first ready %s, done %s, most unavailable %d; want %s, %s, %d",
					p.FirstReady, p.Done, p.MaxUnavail, tt.firstReady, tt.done, tt.maxUnavailble)
			}
		})
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tt := range []struct{ in, want float64 }{{0, 1}, {0.45, 0.5}, {1, 1}, {7, 8}, {24.2, 25}, {85, 100}, {101, 150}, {226.1, 250}} {
		if got := niceCeil(tt.in); got != tt.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestStepPoints(t *testing.T) {
	pt := func(ms, n int) Point { return Point{At: time.Duration(ms) * time.Millisecond, ReadyNew: n} }
	got := stepPoints([]Point{pt(0, 0), pt(100, 1), pt(400, 2), pt(1200, 3), pt(1300, 4), pt(2500, 5)}, 0.5)
	want := []Point{pt(0, 2), pt(1200, 4), pt(2500, 5)}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("point %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func TestWriteTableAndSVG(t *testing.T) {
	results := []Result{
		{Name: "Stepwise", Pods: 10, Wall: 10 * time.Second, FirstReady: time.Second, Writes: Writes{{Resource: "pods", Verb: "patch"}: 30},
			PeakRSS: 100 << 20, CPUSeconds: 2, Points: []Point{{At: time.Second, ReadyNew: 1}, {At: 10 * time.Second, ReadyNew: 10}}},
		{Name: "Deployment", Pods: 10, Wall: 20 * time.Second, FirstReady: -1, Writes: Writes{{Resource: "pods", Verb: "create"}: 10},
			PeakRSS: 50 << 20, CPUSeconds: 1, Note: "whole kcm"},
	}
	var table strings.Builder
	WriteTable(&table, "title", results)
	for _, want := range []string{"| Stepwise | 10.0 s 1.00× | 1.0 s 1.00× |", "| Deployment (whole kcm) | 20.0 s 2.00× | never", "1.00 (0.00) 0.33×", "pods patch 3.00"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var svg strings.Builder
	if err := WriteSVG(&svg, "Pods <ready>", results); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "Pods &lt;ready&gt;", "<polyline", "Deployment", "</svg>"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}
