package paperexp

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tierscope/tierscope/internal/workfactor"
)

// Outcome is one replay scored.
type Outcome struct {
	Run     *Run
	Table   *Table
	Verdict Verdict
	Ests    []*workfactor.Estimate
}

// Evaluate generates (or reuses) a run and replays it with cfg.
func Evaluate(run *Run, cfg workfactor.Config, perProcess bool) (*Outcome, error) {
	ests, err := Replay(run, cfg, perProcess)
	if err != nil {
		return nil, err
	}
	tab, err := Score(run, ests)
	if err != nil {
		return nil, err
	}
	return &Outcome{Run: run, Table: tab, Verdict: Judge(tab), Ests: ests}, nil
}

// TailRelErr returns the worst tail relative power error of a flow over all
// phases, and of the flows drawing at least HeavyShare of a stage's power.
func (o *Outcome) TailRelErr(flow string) float64 {
	worst := 0.0
	for _, r := range o.Table.Rows {
		if r.Tail {
			worst = max(worst, r.MaxRelErr[flow])
		}
	}
	return worst
}

func stageName(tail bool) string {
	if tail {
		return "tail"
	}
	return "transient"
}

// WriteReport runs every experiment of the report (docs/workfactor-report.md)
// and writes its tables as Markdown. It takes about a minute.
func WriteReport(w io.Writer) error {
	start := time.Now()
	base := DefaultConfig()
	run, err := Generate(base)
	if err != nil {
		return err
	}
	rep := &reporter{w: w, base: base, run: run, def: workfactor.DefaultConfig(), paper: workfactor.PaperConfig()}
	for _, section := range []func() error{rep.reportBaseline, rep.reportSeeds, rep.reportBackground, rep.reportSolvers, rep.reportCollinearity, rep.reportHyperthreading, rep.reportVariants} {
		if err := section(); err != nil {
			return err
		}
	}
	rep.p("\n_Generated in %.0f s._\n", time.Since(start).Seconds())
	return nil
}

// reporter holds what the report's sections share: the baseline run and
// configuration, and the estimator's default and paper configurations.
type reporter struct {
	w          io.Writer
	base       Config
	run        *Run
	def, paper workfactor.Config
}

func (rep *reporter) p(format string, args ...any) { fmt.Fprintf(rep.w, format, args...) }

// reportBaseline writes the setup and the baseline run's tables: machine and
// per-process CPU, the paper's algorithm and the defaults, and the true power
// per flow.
func (rep *reporter) reportBaseline() error {
	p := rep.p
	base := rep.base
	run := rep.run
	def := rep.def
	paper := rep.paper
	w := rep.w
	p("## Setup\n\nScenario %s, seed %d, %d periods of 1 minute, 4 machines of %d standard MHz. Machine utilization readings span %.1f%%–%.1f%% (bursts of background work included). Noise: %+v.\n\n",
		base.Scenario.Name, base.Seed, len(run.Periods), CapacityMHz, 100*run.MinUtil, 100*run.MaxUtil, base.Noise)

	sections := []struct {
		title string
		cfg   workfactor.Config
		proc  bool
	}{
		{"Machine CPU, paper's algorithm only (PaperConfig)", paper, false},
		{"Machine CPU, default configuration (outliers and shifts)", def, false},
		{"Per-process CPU, paper's algorithm only (PaperConfig)", paper, true},
		{"Per-process CPU, default configuration", def, true},
	}
	for _, s := range sections {
		o, err := Evaluate(run, s.cfg, s.proc)
		if err != nil {
			return err
		}
		p("### %s\n\nMaximum power error λ·|α̃ − α| in standard MHz per flow, phase and stage; Table 5's value in parentheses; ✗ marks a flow drawing ≥ 1%% of the stage's power whose error is not below Table 5's.\n\n", s.title)
		o.Table.WriteMarkdown(w, true)
		writeVerdict(w, o.Verdict)
	}
	p("### True power per flow (mean standard MHz, share of the stage)\n\n")
	o, _ := Evaluate(run, def, false)
	o.Table.WritePowers(w)
	p("\n")

	return nil
}

// reportSeeds writes the other seeds: significant cells beaten and heavy tails within 15%, per seed.
func (rep *reporter) reportSeeds() error {
	p := rep.p
	p("## Other seeds\n\nSignificant cells (flows ≥ 1%% of the stage's power) beaten out of the cells, heavy-flow tail cells (≥ 5%%) within 15%%.\n\n| seed | machine, paper | machine, default | per-process, paper | per-process, default |\n|---|---|---|---|---|\n")
	results, err := ReplaySeeds(rep.base, Seeds(1, 6), rep.paper, rep.def)
	if err != nil {
		return err
	}
	for _, r := range results {
		p("| %d |", r.Seed)
		for _, v := range append(r.Machine, r.PerProcess...) {
			p(" %d/%d, tails %d/%d |", v.Beaten, v.SignificantCells, v.TailWithin, v.TailCells)
		}
		p("\n")
	}
	p("\n")

	return nil
}

// reportBackground writes the sensitivity to the steady background (scaled ×0, ½, 1, 2).
func (rep *reporter) reportBackground() error {
	p := rep.p
	gen := Generate
	base := rep.base
	def := rep.def
	p("## Sensitivity to the steady background\n\nThe default noise's steady background (0.65%% of Ω per machine) is scaled; bursts, jitter and drift scale with it. Columns: significant cells beaten, heavy tails within 15%%, worst tail error of A and B.\n\n| background × | machine, default | per-process, default | machine, per-source background column |\n|---|---|---|---|\n")
	bgcol := def
	bgcol.Background = workfactor.BackgroundPerSource
	for _, k := range []float64{0, 0.5, 1, 2} {
		c := base
		c.Noise = base.Noise.Scaled(k)
		r, err := gen(c)
		if err != nil {
			return err
		}
		p("| %.1f |", k)
		for _, x := range []struct {
			cfg  workfactor.Config
			proc bool
		}{{def, false}, {def, true}, {bgcol, false}} {
			o, err := Evaluate(r, x.cfg, x.proc)
			if err != nil {
				return err
			}
			v := o.Verdict
			p(" %d/%d, %d/%d; A %.0f%%, B %.0f%% |", v.Beaten, v.SignificantCells, v.TailWithin, v.TailCells, 100*o.TailRelErr("A"), 100*o.TailRelErr("B"))
		}
		p("\n")
	}
	p("\n")

	return nil
}

// reportSolvers writes each solver with each background column, on the baseline run.
func (rep *reporter) reportSolvers() error {
	p := rep.p
	run := rep.run
	def := rep.def
	p("## Solvers and background columns (no collinearity)\n\n| background | method | machine: sig, tails, worst tail A/B | per-process: sig, tails, worst tail A/B |\n|---|---|---|---|\n")
	for _, bg := range []workfactor.Background{workfactor.BackgroundOff, workfactor.BackgroundShared, workfactor.BackgroundPerSource} {
		for _, m := range []workfactor.Method{workfactor.Plain, workfactor.Ridge, workfactor.NNLS} {
			cfg := def
			cfg.Background, cfg.Method = bg, m
			p("| %s | %s |", bg, m)
			for _, proc := range []bool{false, true} {
				o, err := Evaluate(run, cfg, proc)
				if err != nil {
					return err
				}
				v := o.Verdict
				p(" %d/%d, %d/%d, %.0f%%/%.0f%% |", v.Beaten, v.SignificantCells, v.TailWithin, v.TailCells, 100*o.TailRelErr("A"), 100*o.TailRelErr("B"))
			}
			p("\n")
		}
	}
	p("\n")

	return nil
}

// reportCollinearity writes the collinear scenarios of §5.5, per solver.
func (rep *reporter) reportCollinearity() error {
	p := rep.p
	gen := Generate
	base := rep.base
	def := rep.def
	w := rep.w
	p("## Collinearity (§5.5)\n\n")
	for _, sc := range []Scenario{Collinearity1(), Collinearity2()} {
		c := base
		c.Scenario = sc
		r, err := gen(c)
		if err != nil {
			return err
		}
		p("### %s\n\nWorst relative power error |α̃ − α|/α in the tails (the flow's share of the stage's power in parentheses, for the first tail), and the worst absolute tail power error over A–D.\n\n| CPU | method | A | B | C | D | max tail error A–D (MHz) |\n|---|---|---|---|---|---|---|\n", sc.Name)
		for _, proc := range []bool{false, true} {
			for _, m := range []workfactor.Method{workfactor.Plain, workfactor.Ridge, workfactor.NNLS} {
				cfg := def
				cfg.Method = m
				o, err := Evaluate(r, cfg, proc)
				if err != nil {
					return err
				}
				cpu := "machine"
				if proc {
					cpu = "process"
				}
				p("| %s | %s |", cpu, m)
				worst := 0.0
				for _, f := range []string{"A", "B", "C", "D"} {
					share := 0.0
					for _, row := range o.Table.Rows {
						if row.Tail {
							share = row.Share(f)
							break
						}
					}
					p(" %.0f%% (%.0f%%) |", 100*o.TailRelErr(f), 100*share)
					for _, row := range o.Table.Rows {
						if row.Tail {
							worst = max(worst, row.MaxErrMHz[f])
						}
					}
				}
				p(" %.1f |\n", worst)
			}
		}
		p("\nMaximum power error (standard MHz), machine CPU, plain least squares:\n\n")
		o, err := Evaluate(r, def, false)
		if err != nil {
			return err
		}
		o.Table.WriteMarkdown(w, false)
		p("\n")
	}

	return nil
}

// reportHyperthreading writes hyperthreaded readings, uncorrected and corrected (§5.6).
func (rep *reporter) reportHyperthreading() error {
	p := rep.p
	gen := Generate
	base := rep.base
	run := rep.run
	def := rep.def
	p("## Hyperthreading (§5.6)\n\nMachines deliver 1.25 × Ω and report utilization distorted by d(u) = 0.55u + 0.15u² + 0.3u³ (35%% at half power). The correction is the degree-3 inverse fitted by InvertPolynomial: %s.\n\n| readings | machine, default | per-process, default |\n|---|---|---|\n", polyString(hyperInverse()))
	ht := base
	ht.Hyperthreading = DefaultHyperthreading()
	rht, err := gen(ht)
	if err != nil {
		return err
	}
	corr := def
	corr.UtilizationPolynomial = hyperInverse()
	for _, x := range []struct {
		name string
		run  *Run
		cfg  workfactor.Config
	}{{"not hyperthreaded", run, def}, {"hyperthreaded, uncorrected", rht, def}, {"hyperthreaded, corrected", rht, corr}} {
		p("| %s |", x.name)
		for _, proc := range []bool{false, true} {
			o, err := Evaluate(x.run, x.cfg, proc)
			if err != nil {
				return err
			}
			v := o.Verdict
			p(" sig %d/%d, tails %d/%d; worst tail A %.0f%%, B %.0f%% |", v.Beaten, v.SignificantCells, v.TailWithin, v.TailCells, 100*o.TailRelErr("A"), 100*o.TailRelErr("B"))
		}
		p("\n")
	}
	p("\n")

	return nil
}

// reportVariants writes the workload variants (rates, shared sessions, no noise).
func (rep *reporter) reportVariants() error {
	p := rep.p
	gen := Generate
	base := rep.base
	def := rep.def
	p("## Workload variants\n\n| variant | machine utilization | machine, default | per-process, default |\n|---|---|---|---|\n")
	for _, x := range []struct {
		name string
		mod  func(*Config)
	}{
		{"baseline", func(*Config) {}},
		{"rates × 2.3 (utilization up to ~40%)", func(c *Config) { c.RateScale = 2.3 }},
		{"shared sessions", func(c *Config) { c.SharedSessions = true }},
		{"no noise at all", func(c *Config) { c.Noise = Noise{} }},
	} {
		c := base
		x.mod(&c)
		r, err := gen(c)
		if err != nil {
			return err
		}
		p("| %s | %.1f%%–%.1f%% |", x.name, 100*r.MinUtil, 100*r.MaxUtil)
		for _, proc := range []bool{false, true} {
			o, err := Evaluate(r, def, proc)
			if err != nil {
				return err
			}
			v := o.Verdict
			p(" sig %d/%d, tails %d/%d; worst tail A %.0f%%, B %.0f%% |", v.Beaten, v.SignificantCells, v.TailWithin, v.TailCells, 100*o.TailRelErr("A"), 100*o.TailRelErr("B"))
		}
		p("\n")
	}
	return nil
}

func writeVerdict(w io.Writer, v Verdict) {
	fmt.Fprintf(w, "\nSignificant cells beaten: %d of %d (all cells: %d of %d). Heavy-flow tail cells within 15%% of the true power: %d of %d.",
		v.Beaten, v.SignificantCells, v.AllBeaten, v.AllCells, v.TailWithin, v.TailCells)
	if len(v.TailFailures) > 0 {
		fmt.Fprintf(w, " Outside: %s.", strings.Join(v.TailFailures, "; "))
	}
	fmt.Fprintf(w, "\n\n")
}

// hyperInverse is the correction of DefaultHyperthreading's distortion.
func hyperInverse() []float64 {
	d := DefaultHyperthreading().Distort
	return workfactor.InvertPolynomial(func(u float64) float64 { return workfactor.Polynomial(d, u) }, 3, 201)
}

func polyString(c []float64) string {
	parts := make([]string, len(c))
	for i, v := range c {
		parts[i] = fmt.Sprintf("%.4g", v)
	}
	return strings.Join(parts, ", ")
}
