package compare

import (
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
	"time"
)

// Result is one controller's figures for one rollout.
type Result struct {
	Name           string // "Stepwise CloneSet", ...
	Pods           int
	Wall           time.Duration // change to all updated and ready; -1 if it never got there
	FirstReady     time.Duration // change to the first Pod ready on the new image; -1 if none
	MaxUnavailable int
	Writes         Writes
	UIDsChanged    int
	PeakRSS        int64   // bytes, the controller process's high-water mark during the rollout
	CPUSeconds     float64 // user+system seconds of the controller process during the rollout
	Note           string  // e.g. "kcm: whole kube-controller-manager"
	Points         []Point
	Timeline       TimelineSummary
	// BedCPUSeconds is the CPU time each of the cluster's own processes
	// (kube-apiserver, etcd, kwok-controller, ...) spent during the
	// rollout, and the two seconds after it.
	BedCPUSeconds map[string]float64
}

// PerPod is writes (all, and 409s) per Pod.
func (r Result) PerPod() (all, conflicts float64) {
	t, c := r.Writes.Total()
	return float64(t) / float64(r.Pods), float64(c) / float64(r.Pods)
}

func seconds(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func ratio(v, base float64) string {
	if base <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", v/base)
}

// WriteTable prints the results as a Markdown table, each figure with its
// ratio to the first result (Stepwise), then each result's writes by kind.
func WriteTable(w io.Writer, title string, results []Result) {
	if len(results) == 0 {
		return
	}
	base := results[0]
	bw, _ := base.PerPod()
	_, _ = fmt.Fprintf(w, "\n%s\n\n", title)
	_, _ = fmt.Fprintln(w, "| Controller | Wall to all updated+ready | First Pod ready on new image | Most unavailable | Writes/Pod (409s) | UIDs changed | Peak RSS | CPU s |")
	_, _ = fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		all, conf := r.PerPod()
		name := r.Name
		if r.Note != "" {
			name += " (" + r.Note + ")"
		}
		_, _ = fmt.Fprintf(w, "| %s | %s %s | %s %s | %d | %.2f (%.2f) %s | %d | %.0f MiB %s | %.1f %s |\n",
			name,
			seconds(r.Wall), ratio(r.Wall.Seconds(), base.Wall.Seconds()),
			seconds(r.FirstReady), ratio(r.FirstReady.Seconds(), base.FirstReady.Seconds()),
			r.MaxUnavailable,
			all, conf, ratio(all, bw),
			r.UIDsChanged,
			float64(r.PeakRSS)/(1<<20), ratio(float64(r.PeakRSS), float64(base.PeakRSS)),
			r.CPUSeconds, ratio(r.CPUSeconds, base.CPUSeconds))
	}
	_, _ = fmt.Fprintln(w)
	for _, r := range results {
		var parts []string
		for _, k := range r.Writes.Sorted() {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(r.Writes[k])/float64(r.Pods)))
		}
		_, _ = fmt.Fprintf(w, "- %s writes per Pod: %s\n", r.Name, strings.Join(parts, ", "))
	}
	for _, r := range results {
		if len(r.Timeline.Reached) > 0 {
			WriteTimeline(w, fmt.Sprintf("%s, timeline (seconds after the change, as a watch saw it):", r.Name), r.Timeline)
		}
		if len(r.BedCPUSeconds) > 0 {
			_, _ = fmt.Fprintf(w, "\nCPU seconds of the cluster's processes during it (the controller: %.1f): %s\n", r.CPUSeconds, cpuList(r.BedCPUSeconds))
		}
	}
}

// chartColors are told apart in print and by colour-blind readers.
var chartColors = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00"}

// WriteSVG draws Pods ready on the new image over time, one line per result.
func WriteSVG(w io.Writer, title string, results []Result) error {
	const width, height, left, right, top, bottom = 760, 420, 60, 200, 40, 50
	plotW, plotH := float64(width-left-right), float64(height-top-bottom)
	var maxT float64
	maxPods := 1
	for _, r := range results {
		if n := len(r.Points); n > 0 {
			maxT = max(maxT, r.Points[n-1].At.Seconds())
		}
		maxPods = max(maxPods, r.Pods)
	}
	maxT = niceCeil(maxT)
	x := func(s float64) float64 { return float64(left) + s/maxT*plotW }
	y := func(n int) float64 { return float64(top) + plotH - float64(n)/float64(maxPods)*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">%s</text>`+"\n", left, html.EscapeString(title))
	for i := 0; i <= 4; i++ { // gridlines and labels
		pods := maxPods * i / 4
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n",
			left, x(maxT), y(pods), y(pods), left-6, y(pods)+4, pods)
		t := maxT * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle">%g s</text>`+"\n",
			x(t), x(t), top, y(0), x(t), y(0)+18, t)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">seconds after the image change</text>`+"\n", x(maxT/2), height-8)
	fmt.Fprintf(&b, `<text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">Pods ready on the new image</text>`+"\n", y(maxPods/2))
	for i, r := range results {
		color := chartColors[i%len(chartColors)]
		var pts []string
		prev := 0
		for _, p := range stepPoints(r.Points, maxT/plotW) { // a step line: the count holds until it changes
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(p.At.Seconds()), y(prev), x(p.At.Seconds()), y(p.ReadyNew)))
			prev = p.ReadyNew
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%.1f,%.1f %s"/>`+"\n", color, x(0), y(0), strings.Join(pts, " "))
		}
		ly := top + 10 + 20*i
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			width-right+10, width-right+30, ly, ly, color, width-right+36, ly+4, html.EscapeString(r.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// stepPoints merges points less than a pixel (perPixel seconds) after the one
// kept, keeping the latest count: a chart of thousands of Pod events stays small.
func stepPoints(points []Point, perPixel float64) []Point {
	var out []Point
	for _, p := range points {
		if n := len(out); n > 0 && p.At.Seconds()-out[n-1].At.Seconds() < perPixel {
			out[n-1].ReadyNew = p.ReadyNew // less than a pixel later: drawn at the same x
			continue
		}
		out = append(out, p)
	}
	return out
}

// niceCeil rounds a positive axis maximum up to a round multiple of a power
// of ten (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8), whose quarters read well enough.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for p > v {
		p /= 10
	}
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// cpuList lists CPU seconds by process, most first.
func cpuList(cpu map[string]float64) string {
	names := make([]string, 0, len(cpu))
	for name := range cpu {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if cpu[names[i]] != cpu[names[j]] {
			return cpu[names[i]] > cpu[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", name, cpu[name]))
	}
	return strings.Join(parts, ", ")
}
