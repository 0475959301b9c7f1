package scenario

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Series is one line of a plot.
type Series struct {
	Name string
	X, Y []float64
}

// Plot is a minimal line chart written as SVG: linear axes, a dashed
// horizontal reference line, a legend.
type Plot struct {
	Title, XLabel, YLabel string
	Series                []Series
	// YMax caps the y axis (values above are drawn at the cap); 0 = the data's.
	YMax float64
	// Ref is the y of the dashed reference line (0 = none).
	Ref float64
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// WriteSVG draws the plot.
func (p Plot) WriteSVG(w io.Writer) error {
	const W, H, l, r, t, b = 640.0, 400.0, 70.0, 20.0, 40.0, 55.0
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymax := 0.0
	for _, s := range p.Series {
		for i := range s.X {
			xmin, xmax = math.Min(xmin, s.X[i]), math.Max(xmax, s.X[i])
			if !math.IsInf(s.Y[i], 0) {
				ymax = math.Max(ymax, s.Y[i])
			}
		}
	}
	if p.YMax > 0 {
		ymax = p.YMax
	}
	ymax = math.Max(ymax, p.Ref*1.2)
	if !(xmax > xmin) {
		xmax = xmin + 1
	}
	if !(ymax > 0) {
		ymax = 1
	}
	px := func(x float64) float64 { return l + (x-xmin)/(xmax-xmin)*(W-l-r) }
	py := func(y float64) float64 {
		if math.IsInf(y, 1) || y > ymax {
			y = ymax
		}
		return H - b - y/ymax*(H-t-b)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" font-family="sans-serif" font-size="12">`+"\n", W, H+16*float64(len(p.Series))+8)
	fmt.Fprintf(&sb, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&sb, `<text x="%g" y="22" font-size="14" text-anchor="middle">%s</text>`+"\n", W/2, esc(p.Title))
	fmt.Fprintf(&sb, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", l, H-b, W-r, H-b)
	fmt.Fprintf(&sb, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", l, t, l, H-b)
	for i := 0; i <= 5; i++ {
		y := ymax * float64(i) / 5
		fmt.Fprintf(&sb, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/>`+"\n", l, py(y), W-r, py(y))
		fmt.Fprintf(&sb, `<text x="%g" y="%.1f" text-anchor="end">%s</text>`+"\n", l-6, py(y)+4, tick(y))
	}
	last := math.Inf(-1)
	for _, x := range p.xTicks(xmin, xmax) {
		if px(x)-last < 32 {
			continue // too close to the label before it
		}
		last = px(x)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%g" text-anchor="middle">%s</text>`+"\n", px(x), H-b+18, tick(x))
	}
	fmt.Fprintf(&sb, `<text x="%g" y="%g" text-anchor="middle">%s</text>`+"\n", (l+W-r)/2, H-12, esc(p.XLabel))
	fmt.Fprintf(&sb, `<text transform="translate(16 %g) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (t+H-b)/2, esc(p.YLabel))
	if p.Ref > 0 {
		fmt.Fprintf(&sb, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="gray" stroke-dasharray="6 4"/>`+"\n", l, py(p.Ref), W-r, py(p.Ref))
	}
	for i, s := range p.Series {
		col := palette[i%len(palette)]
		var pts []string
		for j := range s.X {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.X[j]), py(s.Y[j])))
		}
		fmt.Fprintf(&sb, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		if len(s.X) <= 12 {
			for j := range s.X {
				fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(s.X[j]), py(s.Y[j]), col)
			}
		}
	}
	// The legend below the plot, where it hides no curve.
	for i, s := range p.Series {
		y := H + 4 + float64(i)*16
		fmt.Fprintf(&sb, `<rect x="%g" y="%g" width="14" height="3" fill="%s"/><text x="%g" y="%g">%s</text>`+"\n",
			l, y, palette[i%len(palette)], l+20, y+5, esc(s.Name))
	}
	sb.WriteString("</svg>\n")
	_, err := io.WriteString(w, sb.String())
	return err
}

// xTicks are the x values labelled: the series' own when there are few (a
// sweep's settings), else round steps (1, 2 or 5 × 10^k) across the range.
func (p Plot) xTicks(xmin, xmax float64) []float64 {
	var xs []float64
	for _, s := range p.Series {
		xs = append(xs, s.X...)
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	if len(xs) <= 12 {
		return xs
	}
	base := math.Pow(10, math.Floor(math.Log10((xmax-xmin)/5)))
	step := base
	for _, m := range []float64{1, 2, 5, 10} {
		if step = base * m; (xmax-xmin)/step <= 6 {
			break
		}
	}
	var ticks []float64
	for x := math.Ceil(xmin/step) * step; x <= xmax+step*1e-9; x += step {
		ticks = append(ticks, x)
	}
	return ticks
}

func tick(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		return fmt.Sprintf("%g", v)
	case math.Abs(v) >= 100 && math.Abs(v) < 1e6:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
