package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// PlotSVG draws req/s against concurrency, one line per mode, with a log-scale x axis.
func PlotSVG(results []Result) string {
	const w, h, left, right, top, bottom = 720.0, 420.0, 70.0, 130.0, 30.0, 50.0
	modes := []string{}
	maxY, minX, maxX := 1.0, math.Inf(1), math.Inf(-1)
	for _, r := range results {
		if !slices.Contains(modes, r.Mode) {
			modes = append(modes, r.Mode)
		}
		maxY = math.Max(maxY, r.ReqPerSec)
		x := math.Log10(float64(r.Concurrency))
		minX, maxX = math.Min(minX, x), math.Max(maxX, x)
	}
	if maxX-minX < 1e-9 {
		minX, maxX = minX-0.5, maxX+0.5
	}
	maxY *= 1.1
	px := func(c int) float64 {
		return left + (math.Log10(float64(c))-minX)/(maxX-minX)*(w-left-right)
	}
	py := func(v float64) float64 { return h - bottom - v/maxY*(h-top-bottom) }
	colors := []string{"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">codexpool bench: req/s against concurrency</text>`+"\n", left)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for i := 0; i <= 5; i++ {
		v := maxY * float64(i) / 5
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text>`+"\n", left-6, py(v)+4, v)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#ddd"/>`+"\n", left, py(v), w-right, py(v))
	}
	seen := map[int]bool{}
	for _, r := range results {
		if !seen[r.Concurrency] {
			seen[r.Concurrency] = true
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%d</text>`+"\n", px(r.Concurrency), h-bottom+16, r.Concurrency)
		}
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">concurrency (log scale)</text>`+"\n", (left+w-right)/2, h-12)
	fmt.Fprintf(&b, `<text x="16" y="%.0f" transform="rotate(-90 16 %.0f)" text-anchor="middle">req/s</text>`+"\n", (top+h-bottom)/2, (top+h-bottom)/2)
	for i, m := range modes {
		c := colors[i%len(colors)]
		var pts []string
		for _, r := range results {
			if r.Mode == m {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(r.Concurrency), py(r.ReqPerSec)))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(r.Concurrency), py(r.ReqPerSec), c)
			}
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), c)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", w-right+10, top+20+float64(i)*18, c, m)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
