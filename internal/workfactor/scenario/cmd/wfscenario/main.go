// Command wfscenario runs the work-factor scenarios of docs/workfactor-report.md
// (issue 37): generated problems with known truth, scored by the power error of
// every flow drawing at least 5% of the CPU. It prints the report's tables
// (Markdown) and writes its plots (SVG) into -plots.
//
//	wfscenario -seeds 20 -plots docs/workfactor > out/workfactor/scenarios.md
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/tierscope/tierscope/internal/workfactor"
	"github.com/tierscope/tierscope/internal/workfactor/scenario"
)

func main() {
	seeds := flag.Int("seeds", 20, "seeds per setting")
	plots := flag.String("plots", "", "directory for the SVG plots (none when empty)")
	flag.Parse()
	if err := run(os.Stdout, *seeds, *plots); err != nil {
		fmt.Fprintln(os.Stderr, "wfscenario:", err)
		os.Exit(1)
	}
}

type estimator struct {
	name string
	cfg  workfactor.Config
}

var estimators = []estimator{
	{"default", workfactor.DefaultConfig()},
	{"paper (PaperConfig)", workfactor.PaperConfig()},
}

// batch evaluates one setting over seeds 1…n, in parallel.
func batch(c scenario.Config, cfg workfactor.Config, n int) ([]scenario.Outcome, error) {
	outs := make([]scenario.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			ci := c
			ci.Seed = uint64(i + 1)
			outs[i], errs[i] = scenario.Evaluate(ci, cfg)
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return outs, nil
}

func withRelease(c scenario.Config) scenario.Config {
	c.ReleaseAt, c.ReleaseFlows = 0.75, 3
	return c
}

func run(w io.Writer, n int, plots string) error {
	fmt.Fprintf(w, "Seeds 1–%d per setting. A run passes when every unit drawing ≥ 5%% of the CPU is within 15%% of its true power at the last period (a combined group is one unit only if its flows are truly collinear). Columns: runs passed, median and 90th percentile of the runs' worst power error.\n\n", n)
	// 1. The must-show scenario.
	fmt.Fprintf(w, "### The must-show scenario (3 machines, 7 flows, 2%% noise, 1%% background, one collinear pair)\n\n")
	fmt.Fprintln(w, "| estimator | stationary: passed | median | p90 | release at 75%: passed | median | p90 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, e := range estimators {
		st, err := batch(scenario.Default(), e.cfg, n)
		if err != nil {
			return err
		}
		rel, err := batch(withRelease(scenario.Default()), e.cfg, n)
		if err != nil {
			return err
		}
		a, b := scenario.Summarise("", st), scenario.Summarise("", rel)
		fmt.Fprintf(w, "| %s | %d/%d | %s | %s | %d/%d | %s | %s |\n", e.name, a.Passed, a.Runs, scenario.Pct(a.Median), scenario.Pct(a.P90), b.Passed, b.Runs, scenario.Pct(b.Median), scenario.Pct(b.P90))
	}
	// The reference: least squares with the true model on the 100 periods
	// after the release alone, what forgetting everything at a release allows.
	ref := make([]scenario.Outcome, n)
	for i := range ref {
		c := withRelease(scenario.Default())
		c.Seed = uint64(i + 1)
		var err error
		if ref[i], err = scenario.EvaluateAfterRelease(c); err != nil {
			return err
		}
	}
	r := scenario.Summarise("", ref)
	fmt.Fprintf(w, "| reference: least squares, true model, the periods after the release only | — | — | — | %d/%d | %s | %s |\n", r.Passed, r.Runs, scenario.Pct(r.Median), scenario.Pct(r.P90))
	fmt.Fprintln(w)
	// 2. Sweeps.
	type sweep struct {
		title, file, xlabel string
		xs                  []float64
		set                 func(*scenario.Config, float64)
		xfmt                func(float64) string
	}
	pct := func(x float64) string { return fmt.Sprintf("%g%%", 100*x) }
	num := func(x float64) string { return fmt.Sprintf("%g", x) }
	sweeps := []sweep{
		{"utilization noise", "error-vs-noise.svg", "utilization noise σ (% of the machine)", []float64{0.005, 0.01, 0.02, 0.03}, func(c *scenario.Config, x float64) { c.Noise = x }, pct},
		{"number of flows", "error-vs-flows.svg", "flows", []float64{3, 7, 12, 20}, func(c *scenario.Config, x float64) { c.Flows = int(x) }, num},
		{"collinear pairs", "error-vs-collinear.svg", "collinear pairs", []float64{0, 1, 2}, func(c *scenario.Config, x float64) { c.Collinear = int(x) }, num},
		{"background load", "error-vs-background.svg", "background (% of the machine)", []float64{0, 0.01, 0.03}, func(c *scenario.Config, x float64) { c.Background = x }, pct},
	}
	for _, s := range sweeps {
		fmt.Fprintf(w, "### Error against %s (others as the must-show scenario)\n\n", s.title)
		fmt.Fprintln(w, "| "+s.title+" | estimator | stationary: passed | median | p90 | release at 75%: passed | median | p90 |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
		var series []scenario.Series
		for _, e := range estimators {
			stS := scenario.Series{Name: e.name + ", stationary"}
			relS := scenario.Series{Name: e.name + ", after a release"}
			for _, x := range s.xs {
				c := scenario.Default()
				s.set(&c, x)
				if c.Flows < 2*c.Collinear || c.Flows < c.ReleaseFlows {
					continue
				}
				st, err := batch(c, e.cfg, n)
				if err != nil {
					return err
				}
				rc := withRelease(c)
				rc.ReleaseFlows = min(rc.ReleaseFlows, c.Flows)
				rel, err := batch(rc, e.cfg, n)
				if err != nil {
					return err
				}
				a, b := scenario.Summarise("", st), scenario.Summarise("", rel)
				fmt.Fprintf(w, "| %s | %s | %d/%d | %s | %s | %d/%d | %s | %s |\n", s.xfmt(x), e.name, a.Passed, a.Runs, scenario.Pct(a.Median), scenario.Pct(a.P90), b.Passed, b.Runs, scenario.Pct(b.Median), scenario.Pct(b.P90))
				xv := x
				if s.xfmt(0.01) == "1%" {
					xv = 100 * x
				}
				stS.X, stS.Y = append(stS.X, xv), append(stS.Y, 100*a.Median)
				relS.X, relS.Y = append(relS.X, xv), append(relS.Y, 100*b.Median)
			}
			series = append(series, stS, relS)
		}
		fmt.Fprintln(w)
		if plots != "" {
			p := scenario.Plot{Title: "Median worst power error against " + s.title, XLabel: s.xlabel,
				YLabel: "median over seeds of the worst error (%)", Series: series, Ref: 15, YMax: 100}
			if err := writePlot(filepath.Join(plots, s.file), p); err != nil {
				return err
			}
		}
	}
	// 3. Error against periods since a release: a release at the middle of an
	// 800-period run, read every period after it.
	fmt.Fprintf(w, "### Error against periods since a release (800 periods, release at period 401, 3 of 7 flows change)\n\n")
	fmt.Fprintln(w, "| periods since the release | estimator | runs within 15% | median worst error | p90 |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	var series []scenario.Series
	marks := []int{10, 25, 50, 100, 200, 399}
	for _, e := range estimators {
		c := scenario.Default()
		c.Periods, c.ReleaseAt, c.ReleaseFlows = 800, 0.5, 3
		outs, err := batch(c, e.cfg, n)
		if err != nil {
			return err
		}
		s := scenario.Series{Name: e.name}
		for d := 0; d < len(outs[0].SinceRelease); d++ {
			var ws []float64
			within := 0
			for _, o := range outs {
				ws = append(ws, o.SinceRelease[d])
				if o.SinceRelease[d] <= scenario.Target {
					within++
				}
			}
			s.X, s.Y = append(s.X, float64(d)), append(s.Y, 100*scenario.Quantile(ws, 0.5))
			for _, m := range marks {
				if d == m {
					fmt.Fprintf(w, "| %d | %s | %d/%d | %s | %s |\n", d, e.name, within, len(outs), scenario.Pct(scenario.Quantile(ws, 0.5)), scenario.Pct(scenario.Quantile(ws, 0.9)))
				}
			}
		}
		series = append(series, s)
	}
	fmt.Fprintln(w)
	if plots != "" {
		p := scenario.Plot{Title: "Median worst power error after a release", XLabel: "periods since the release",
			YLabel: "median over seeds of the worst error (%)", Series: series, Ref: 15, YMax: 100}
		if err := writePlot(filepath.Join(plots, "error-since-release.svg"), p); err != nil {
			return err
		}
	}
	return nil
}

func writePlot(path string, p scenario.Plot) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
