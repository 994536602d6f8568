package compare

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"
)

// NodeResult is one controller's figures for one image change on the real
// node (make bench-node).
type NodeResult struct {
	Name       string
	Pods       int
	Wall       time.Duration // change to all updated and ready; -1 if it never got there
	FirstReady time.Duration // change to the first Pod ready on the new image; -1 if none
	// Unavailable is how long each serving slot went without a ready Pod
	// (Unavailability).
	Unavailable Spread
	// What a recreate costs the user, counted against the Pods before.
	IPsChanged, SandboxesCreated, SidecarsRestarted, VolumesLost int
	// Requests sent through the data plane during the change, and how many
	// failed (an error or a status other than 200).
	Requests, Failed int
	// CPU seconds of the node's kubelet and containerd during the change.
	KubeletCPU, ContainerdCPU float64
}

// Unavailability follows how long the Pods' serving slots stay empty during
// a change. A slot empties when a Pod that was ready before the change stops
// being ready (a readiness gate goes False, the Pod is deleted); it fills
// when a Pod becomes ready on the new image. Slots are matched in time
// order, the k-th to empty with the k-th to fill, so a Pod updated in place
// is matched with itself in effect, and a recreate's new Pod with the old
// one it replaced; a new Pod ready before an old one leaves (a surge) fills
// its slot at once.
type Unavailability struct {
	Start    time.Time
	wasReady map[string]bool
	left     map[string]time.Duration
	readyNew map[string]time.Duration
}

// NewUnavailability starts following a change that began at start.
func NewUnavailability(start time.Time) *Unavailability {
	return &Unavailability{Start: start, wasReady: map[string]bool{}, left: map[string]time.Duration{}, readyNew: map[string]time.Duration{}}
}

// Seed records a Pod as it was when the change began.
func (u *Unavailability) Seed(uid string, s PodState) {
	u.wasReady[uid] = s.Ready && !s.NewImage
}

// Observe records a Pod's state seen at a moment.
func (u *Unavailability) Observe(uid string, s PodState, at time.Time) {
	since := max(at.Sub(u.Start), 0)
	if u.wasReady[uid] && (!s.Ready || s.Deleting) {
		u.leave(uid, since)
	}
	if s.Ready && s.NewImage && !s.Deleting {
		if _, done := u.readyNew[uid]; !done {
			u.readyNew[uid] = since
		}
	}
}

// Delete records that a Pod is gone.
func (u *Unavailability) Delete(uid string, at time.Time) {
	if u.wasReady[uid] {
		u.leave(uid, max(at.Sub(u.Start), 0))
	}
}

func (u *Unavailability) leave(uid string, since time.Duration) {
	if _, done := u.left[uid]; !done {
		u.left[uid] = since
	}
}

// Spread is the distribution of the slots' empty time; a slot that never
// filled counts from its emptying to the end.
func (u *Unavailability) Spread(end time.Duration) Spread {
	var left, filled []time.Duration
	for _, d := range u.left {
		left = append(left, d)
	}
	for _, d := range u.readyNew {
		filled = append(filled, d)
	}
	slices.Sort(left)
	slices.Sort(filled)
	gaps := make([]time.Duration, 0, len(left))
	for i, l := range left {
		f := end
		if i < len(filled) {
			f = filled[i]
		}
		gaps = append(gaps, max(f-l, 0))
	}
	return spreadOf(gaps)
}

// WriteNodeTable prints one image case's results as a Markdown table.
func WriteNodeTable(w io.Writer, title string, results []NodeResult) {
	_, _ = fmt.Fprintf(w, "\n%s\n\n", title)
	_, _ = fmt.Fprint(w, "| Controller | Pods | All updated and ready | First ready on new | Unavailable per Pod p50 / p99 | IPs changed | Sandboxes created | Sidecars restarted | emptyDir data lost | Requests failed | kubelet CPU s | containerd CPU s |\n")
	_, _ = fmt.Fprint(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		_, _ = fmt.Fprintf(w, "| %s | %d | %s | %s | %.1f / %.1f s | %d | %d | %d | %d | %d of %d | %.1f | %.1f |\n",
			r.Name, r.Pods, seconds(r.Wall), seconds(r.FirstReady), r.Unavailable.P50.Seconds(), r.Unavailable.P99.Seconds(),
			r.IPsChanged, r.SandboxesCreated, r.SidecarsRestarted, r.VolumesLost, r.Failed, r.Requests, r.KubeletCPU, r.ContainerdCPU)
	}
}

// NodeCase is one image case's results, for the chart.
type NodeCase struct {
	Title   string
	Results []NodeResult
}

// WriteNodeSVG draws, per image case, one bar per controller: its wall
// time, with its per-Pod unavailable p50 as a darker inner bar.
func WriteNodeSVG(w io.Writer, title string, cases []NodeCase) error {
	const width, left, right, barH, gap, top = 760, 230, 80, 18, 6, 50
	var maxT float64
	rows := 0
	for _, c := range cases {
		rows += len(c.Results)
		for _, r := range c.Results {
			maxT = max(maxT, r.Wall.Seconds(), r.Unavailable.P50.Seconds())
		}
	}
	maxT = niceCeil(maxT)
	plotW := float64(width - left - right)
	x := func(s float64) float64 { return float64(left) + max(s, 0)/maxT*plotW }
	height := top + len(cases)*30 + rows*(barH+gap) + 50

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="14">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="40" fill="#555">bar: all updated and ready; dark: per-Pod unavailable time, median</text>`+"\n")
	y := top
	for _, c := range cases {
		y += 22
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y, html.EscapeString(c.Title))
		y += 8
		for i, r := range c.Results {
			color := chartColors[i%len(chartColors)]
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-6, y+barH-5, html.EscapeString(r.Name))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.45"/>`+"\n", left, y, x(r.Wall.Seconds())-float64(left), barH, color)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y+4, x(r.Unavailable.P50.Seconds())-float64(left), barH-8, color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", x(r.Wall.Seconds())+4, y+barH-5, seconds(r.Wall))
			y += barH + gap
		}
	}
	y += 10
	for i := 0; i <= 4; i++ {
		t := maxT * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ccc"/><text x="%.1f" y="%d" text-anchor="middle">%g s</text>`+"\n",
			x(t), x(t), top, y, x(t), y+16, t)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
