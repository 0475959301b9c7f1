package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	se "github.com/tierscope/tierscope/internal/stitcheval"
)

// writeFigures draws each curve as three panels (accuracy, precision, best
// candidate) and a legend, and the calibration at overlap 8.
func writeFigures(dir string, cs []*curve, base *report) error {
	for _, c := range cs {
		var b *report
		if c.ID == "concurrency" {
			b = base
		}
		if err := curveFigure(filepath.Join(dir, c.ID+".png"), c, b); err != nil {
			return err
		}
		if c.ID == "concurrency" && containsX(c.X, 8) {
			if err := calibrationFigures(dir, c); err != nil {
				return err
			}
		}
	}
	return nil
}

type metric struct {
	title string
	get   func(se.Point) se.Stat
	base  func(*pointOut) se.Stat
}

var metrics = []metric{
	{"accuracy (parent links right)", func(p se.Point) se.Stat { return p.Accuracy }, func(p *pointOut) se.Stat { return p.Accuracy }},
	{"precision (right among written)", func(p se.Point) se.Stat { return p.Precision }, func(p *pointOut) se.Stat { return p.Precision }},
	{"best candidate right", func(p se.Point) se.Stat { return p.BestAccuracy }, func(p *pointOut) se.Stat { return p.BestAccuracy }},
}

// errXYs is a line's points with min–max bars.
type errXYs struct {
	plotter.XYs
	plotter.YErrors
}

func curveFigure(path string, c *curve, base *report) error {
	var series []string
	for _, p := range c.points {
		if !contains(series, p.Series) {
			series = append(series, p.Series)
		}
	}
	pos := func(x float64) float64 {
		for i, v := range c.X {
			if v == x {
				return float64(i)
			}
		}
		return -1
	}
	ticks := make(plot.ConstantTicks, len(c.X))
	for i := range c.X {
		ticks[i] = plot.Tick{Value: float64(i), Label: c.Labels[i]}
	}
	row := make([]*plot.Plot, 0, len(metrics)+1)
	legend := plot.New()
	legend.HideAxes()
	legend.Legend.Top, legend.Legend.Left = true, true
	legend.Legend.TextStyle.Font.Size = vg.Points(9)
	for m, mt := range metrics {
		p := plot.New()
		p.Title.Text = mt.title
		p.X.Label.Text = c.XLabel
		p.X.Tick.Marker = ticks
		p.X.Min, p.X.Max = -0.3, float64(len(c.X)-1)+0.3
		p.Y.Min, p.Y.Max = 0, 1.02
		p.Add(plotter.NewGrid())
		for _, s := range series {
			col, variant := seriesStyle(series, s)
			for _, algo := range []string{"stitch", "naive"} {
				if algo == "naive" && !c.Naive {
					continue
				}
				var pts errXYs
				for _, pt := range c.points {
					if pt.Series != s || pt.Algorithm != algo {
						continue
					}
					st := mt.get(pt)
					pts.XYs = append(pts.XYs, plotter.XY{X: pos(pt.X), Y: st.Mean})
					pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{st.Mean - st.Min, st.Max - st.Mean})
				}
				if len(pts.XYs) == 0 {
					continue
				}
				line, scatter, err := plotter.NewLinePoints(pts.XYs)
				if err != nil {
					return err
				}
				line.Color, scatter.Color = col, col
				scatter.Shape = plotutil.Shape(variant)
				line.Width = vg.Points(1.5)
				if variant > 0 {
					line.Dashes = []vg.Length{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}
				}
				if algo == "naive" {
					line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
					line.Width = vg.Points(1)
				}
				bars, err := plotter.NewYErrorBars(pts)
				if err != nil {
					return err
				}
				bars.Color = col
				p.Add(line, scatter, bars)
				if m == 0 {
					name := s
					if algo == "naive" {
						name += " (naive)"
					}
					legend.Legend.Add(name, line, scatter)
				}
			}
			if base == nil {
				continue
			}
			line, err := baselineLine(c, base, s, mt, pos, col)
			if err != nil {
				return err
			}
			if line != nil {
				p.Add(line)
				if m == 0 {
					legend.Legend.Add(s+" ("+base.Name+")", line)
				}
			}
		}
		row = append(row, p)
	}
	row = append(row, legend)
	return savePanels(path, c.Title, [][]*plot.Plot{row}, vg.Points(1400), vg.Points(420))
}

// baselineLine is series s of the baseline run as a faded dotted line, nil
// when the baseline has none of its points.
func baselineLine(c *curve, base *report, s string, mt metric, pos func(float64) float64, col color.Color) (*plotter.Line, error) {
	var xys plotter.XYs
	for _, x := range c.X {
		if bp := base.find(c.ID, s, "stitch", x); bp != nil {
			xys = append(xys, plotter.XY{X: pos(x), Y: mt.base(bp).Mean})
		}
	}
	if len(xys) == 0 {
		return nil, nil
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	line.Color = faded(col)
	line.Width = vg.Points(3)
	line.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
	return line, nil
}

// seriesStyle colours a series by its data set and strip mode (its name's first
// two parts) and numbers its variant (the rest: ", no skew"), drawn dashed.
func seriesStyle(series []string, s string) (color.Color, int) {
	split := func(s string) (string, string) {
		parts := strings.SplitN(s, ", ", 3)
		if len(parts) < 3 {
			return s, ""
		}
		return parts[0] + ", " + parts[1], parts[2]
	}
	var bases, variants []string
	for _, x := range series {
		b, v := split(x)
		if !contains(bases, b) {
			bases = append(bases, b)
		}
		if !contains(variants, v) {
			variants = append(variants, v)
		}
	}
	b, v := split(s)
	bi, vi := 0, 0
	for i, x := range bases {
		if x == b {
			bi = i
		}
	}
	for i, x := range variants {
		if x == v {
			vi = i
		}
	}
	return plotutil.Color(bi), vi
}

func faded(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 110}
}

// calibrationFigures draws the reliability diagram and the precision-coverage
// curve of the stitcher at overlap 8, pooled over the runs.
func calibrationFigures(dir string, c *curve) error {
	rel := plot.New()
	rel.Title.Text = "Reliability at overlap 8: accuracy per confidence decile"
	rel.X.Label.Text = "mean confidence of the decile"
	rel.Y.Label.Text = "share of inferred parents right"
	rel.X.Min, rel.X.Max, rel.Y.Min, rel.Y.Max = 0, 1, 0, 1
	rel.Add(plotter.NewGrid())
	diag := plotter.NewFunction(func(x float64) float64 { return x })
	diag.Color = color.Gray{150}
	diag.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	rel.Add(diag)
	rel.Legend.Add("perfect calibration", diag)
	rel.Legend.Top, rel.Legend.Left = false, false // below the diagonal, right: where few deciles fall

	pc := plot.New()
	pc.Title.Text = "Precision against coverage at overlap 8 (thresholds 0…1)"
	pc.X.Label.Text = "coverage: lost links given a parent"
	pc.Y.Label.Text = "precision"
	pc.X.Min, pc.X.Max, pc.Y.Min, pc.Y.Max = 0, 1, 0, 1.02
	pc.Add(plotter.NewGrid())
	pc.Legend.Top, pc.Legend.Left = false, true

	i := 0
	for _, p := range c.points {
		if p.X != 8 || p.Algorithm != "stitch" {
			continue
		}
		col := plotutil.Color(i)
		var xys plotter.XYs
		for _, b := range p.Pooled.Calibration {
			if b.Candidates > 0 {
				xys = append(xys, plotter.XY{X: b.MeanConfidence, Y: b.Accuracy})
			}
		}
		if len(xys) > 0 {
			line, scatter, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			line.Color, scatter.Color, scatter.Shape = col, col, plotutil.Shape(i)
			rel.Add(line, scatter)
			rel.Legend.Add(fmt.Sprintf("%s (%d inferred)", p.Series, p.Pooled.Candidates+p.Pooled.RootsCandidates), line, scatter)
		}
		xys = xys[:0:0]
		for _, q := range p.Pooled.Curve {
			if q.Written > 0 {
				xys = append(xys, plotter.XY{X: q.Coverage, Y: q.Precision})
			}
		}
		if len(xys) > 0 {
			line, scatter, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			line.Color, scatter.Color, scatter.Shape = col, col, plotutil.Shape(i)
			scatter.Radius = vg.Points(2)
			pc.Add(line, scatter)
			pc.Legend.Add(p.Series, line, scatter)
		}
		i++
	}
	if err := rel.Save(vg.Points(560), vg.Points(480), filepath.Join(dir, "reliability.png")); err != nil {
		return err
	}
	return pc.Save(vg.Points(560), vg.Points(480), filepath.Join(dir, "precision-coverage.png"))
}

// savePanels draws plots on a grid under a title.
func savePanels(path, title string, plots [][]*plot.Plot, w, h vg.Length) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	head := plot.New()
	head.HideAxes()
	head.Title.Text = title
	head.Title.TextStyle.Font.Size = vg.Points(14)
	top := draw.Crop(dc, 0, 0, h-vg.Points(24), 0)
	head.Draw(top)
	body := draw.Crop(dc, 0, 0, 0, -vg.Points(24))
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Points(12), PadY: vg.Points(8),
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	canvases := plot.Align(plots, tiles, body)
	for j := range plots {
		for i := range plots[j] {
			if plots[j][i] != nil {
				plots[j][i].Draw(canvases[j][i])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
