package judge

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
)

// Figure draws one compared metric as a small SVG: the canary's and the
// stable samples side by side as dots on one vertical scale, each side's
// median as a bar, and a caption with the effect, the p-value and the
// verdict. Without samples (a figure drawn from status, which keeps only
// the summary, without counts) it draws the medians alone; n is
// Result.CanaryN and StableN. The dashboard shows it per metric and docs/images holds one
// (TestDocsFigure), so the picture and the numbers cannot disagree.
// The output is deterministic: same input, same bytes.
func Figure(title string, canary, stable []float64, r Result) string {
	const w, h = 320, 200
	const top, bottom, left = 28, 150, 56
	canary, stable = finite(canary), finite(stable)
	lo, hi := math.Inf(1), math.Inf(-1)
	all := append(append([]float64{}, canary...), stable...)
	// The medians too: a figure drawn from status alone has no samples.
	// Status keeps no counts either: a median is shown when its side had
	// samples, or, with no count known, unless the verdict is Inconclusive
	// (whose medians may stand for an empty side).
	shown := func(n int, vals []float64) bool {
		return n > 0 || (len(vals) == 0 && n == 0 && r.Verdict != Inconclusive)
	}
	canaryShown, stableShown := shown(r.CanaryN, canary), shown(r.StableN, stable)
	if canaryShown {
		all = append(all, r.CanaryMedian)
	}
	if stableShown {
		all = append(all, r.StableMedian)
	}
	for _, v := range finite(all) {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if hi == lo {
		lo, hi = lo-0.5*math.Abs(lo)-1e-9, hi+0.5*math.Abs(hi)+1e-9
	}
	pad := (hi - lo) * 0.08
	lo, hi = lo-pad, hi+pad
	y := func(v float64) float64 { return bottom - (v-lo)/(hi-lo)*(bottom-top) }

	color := map[Verdict]string{Pass: "#1a7f37", Fail: "#cf222e", Inconclusive: "#9a6700"}[r.Verdict]
	if color == "" {
		color = "#57606a"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="8" y="16" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%d" y="16" text-anchor="end" fill="%s" font-weight="bold">%s</text>`+"\n", w-8, color, r.Verdict)
	// Axis with the extremes and the middle labelled.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#8c959f"/>`+"\n", left, top, left, bottom)
	for _, v := range []float64{lo + pad, (lo + hi) / 2, hi - pad} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#57606a">%s</text>`+"\n", left-4, y(v)+4, short(v))
	}
	side := func(name string, vals []float64, n int, show bool, cx float64, fill string, median float64) {
		s := append([]float64(nil), vals...)
		sort.Float64s(s)
		for i, v := range s {
			// Spread the dots a little sideways so equal values stay visible.
			dx := float64(i%5-2) * 5
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s" fill-opacity="0.6"/>`+"\n", cx+dx, y(v), fill)
		}
		if show && !math.IsNaN(median) && !math.IsInf(median, 0) {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"/>`+"\n", cx-22, y(median), cx+22, y(median), fill)
		}
		label := name
		if n > 0 || len(vals) > 0 || r.Verdict == Inconclusive {
			label = fmt.Sprintf("%s (n=%d)", name, n)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", cx, bottom+16, label)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#57606a">median %s</text>`+"\n", cx, bottom+29, short(median))
	}
	side("stable", stable, r.StableN, stableShown, 130, "#0969da", r.StableMedian)
	side("canary", canary, r.CanaryN, canaryShown, 250, "#bc4c00", r.CanaryMedian)
	fmt.Fprintf(&b, `<text x="8" y="%d" fill="#24292f">effect %s, p=%s</text>`+"\n", h-6, html.EscapeString(pct(r.Effect)), short(r.P))
	b.WriteString("</svg>\n")
	return b.String()
}

// short formats v in at most 4 significant digits, "?" for NaN (a status
// field that did not parse).
func short(v float64) string {
	if math.IsNaN(v) {
		return "?"
	}
	return fmt.Sprintf("%.4g", v)
}
