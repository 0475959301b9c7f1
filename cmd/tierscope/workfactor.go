package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tierscope/tierscope/internal/inputlimit"
	"github.com/tierscope/tierscope/internal/workfactor"
)

// runWorkfactor estimates work factors from a samples CSV (docs/formats.md §5).
func runWorkfactor(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("workfactor", "workfactor --in samples.csv [--half-life 10] [--every-period] [--out estimates.json]", stderr)
	def := workfactor.DefaultConfig()
	var (
		in          = fs.String("in", "", "work-factor samples CSV (docs/formats.md §5); - for standard input")
		out         = fs.String("out", "", "output file (default standard output)")
		halfLife    = fs.Float64("half-life", def.HalfLife, "aging half-life h, in periods (paper §3.4)")
		everyPeriod = fs.Bool("every-period", false, "write one document per period as JSON lines")
		method      = fs.String("method", "plain", "solver: plain (the paper's least squares), ridge or nnls")
		ridgeLambda = fs.Float64("ridge-lambda", def.RidgeLambda, "ridge λ, relative to the standardized diagonal")
		smooth      = fs.Float64("smooth-half-life", def.SmoothHalfLife, "smoothing half-life t, in periods (paper §4.4)")
		delta       = fs.Float64("delta", def.Delta, "flow rejection threshold δ (paper §4.1)")
		q           = fs.Int("q", def.Q, "flow combining q (paper §4.3)")
		combine     = fs.Float64("combine-threshold", def.CombineThreshold, "flows below this × the mean flow rate start combined (paper §4.3)")
		background  = fs.String("background", def.Background.String(), "background column (paper §4.8): auto (when the data identify it), off, shared or per-source")
		noDiscount  = fs.Bool("no-discount", def.NoDiscount, "no utilization discounting f(ρ) (paper §4.2); the default, see --discount")
		discount    = fs.Bool("discount", false, "weigh rows by the utilization discounting f(ρ) of paper §4.2")
		maxHalfLife = fs.Float64("max-half-life", def.MaxHalfLife, "longest memory, in periods: the half-life grows from --half-life while the work factors hold (0 = fixed)")
		cusum       = fs.Float64("cusum", def.CusumThreshold, "CUSUM alarm level of the residuals, in σ (0 = off)")
		combining   = fs.String("combining", def.Combining.String(), "which flows share a column: collinear (rate correlation ≥ --collinear-correlation) or rate (paper §4.3)")
		collinear   = fs.Float64("collinear-correlation", def.CollinearCorrelation, "rate correlation from which flows are one collinear group")
		bgMaxVIF    = fs.Float64("background-max-vif", def.BackgroundMaxVIF, "largest variance inflation of an automatic background column")
		utilPoly    = fs.String("util-poly", "", "utilization correction polynomial, constant term first, e.g. 0,2.1,-1.9,0.8 (hyperthreading, paper §5.6)")
		shiftSigma  = fs.Float64("shift-sigma", def.ShiftSigma, "outlier and shift detection threshold in σ (0 = off, the paper's behaviour)")
		paper       = fs.Bool("paper", false, "only what the paper describes: no shift detection or CUSUM, fixed memory, combining by rate, no background, discounting")
		perProcess  = fs.String("per-process", "auto", "per-process mode (paper §4.6): auto (when the CSV has a process column), on or off")
		stateOut    = fs.String("state-out", "", "also write the estimator's final state (JSON) to this file")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := def
	cfg.HalfLife, cfg.SmoothHalfLife, cfg.Delta, cfg.Q = *halfLife, *smooth, *delta, *q
	cfg.CombineThreshold, cfg.RidgeLambda, cfg.NoDiscount = *combine, *ridgeLambda, *noDiscount && !*discount
	cfg.ShiftSigma, cfg.MaxHalfLife, cfg.CusumThreshold = *shiftSigma, *maxHalfLife, *cusum
	cfg.CollinearCorrelation, cfg.BackgroundMaxVIF = *collinear, *bgMaxVIF
	if cfg.MaxHalfLife > 0 {
		cfg.MaxHalfLife = max(cfg.MaxHalfLife, cfg.HalfLife)
	}
	var err error
	if cfg.Background, err = workfactor.ParseBackground(*background); err != nil {
		return usagef("--background: %v", err)
	}
	if cfg.Combining, err = workfactor.ParseCombining(*combining); err != nil {
		return usagef("--combining: %v", err)
	}
	if *paper {
		// The paper's algorithm, except for what was set explicitly.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		p := workfactor.PaperConfig()
		for name, apply := range map[string]func(){
			"shift-sigma":   func() { cfg.ShiftSigma = p.ShiftSigma },
			"max-half-life": func() { cfg.MaxHalfLife = p.MaxHalfLife },
			"cusum":         func() { cfg.CusumThreshold = p.CusumThreshold },
			"combining":     func() { cfg.Combining = p.Combining },
			"background":    func() { cfg.Background = p.Background },
			"no-discount":   func() { cfg.NoDiscount = p.NoDiscount && !*discount },
		} {
			if !set[name] {
				apply()
			}
		}
	}
	if cfg.Method, err = workfactor.ParseMethod(*method); err != nil {
		return usagef("--method: %v", err)
	}
	if cfg.UtilizationPolynomial, err = workfactor.ParsePolynomial(*utilPoly); err != nil {
		return usagef("--util-poly: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if *perProcess != "auto" && *perProcess != "on" && *perProcess != "off" {
		return usagef("--per-process must be auto, on or off, not %q", *perProcess)
	}

	r, name, closeIn, err := input(*in, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	samples, err := readWorkfactorSamples(r, name)
	if err != nil {
		return err
	}
	cfg.PerProcess = samples.hasProcess
	switch *perProcess {
	case "on":
		cfg.PerProcess = true
	case "off":
		cfg.PerProcess = false
	}
	e, err := workfactor.New(cfg)
	if err != nil {
		return usageError{err.Error()}
	}

	o, err := openOutput(*out, stdout)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(o)
	if !*everyPeriod {
		enc.SetIndent("", "  ")
	}
	var last *workfactor.Estimate
	for _, p := range samples.periods {
		est, err := e.AddPeriod(p, samples.byPeriod[p])
		if err != nil {
			o.abort()
			return fmt.Errorf("%s: period %d: %w", name, p, err)
		}
		last = est
		if *everyPeriod {
			if err := enc.Encode(est); err != nil {
				o.abort()
				return err
			}
		}
	}
	if last.Counters.Equations == 0 {
		o.abort()
		c := last.Counters
		return fmt.Errorf("%s: no usable sample: %d observations skipped (bad utilization %d, bad capacity %d, bad rate %d, all-zero rates %d, wrong mode %d)",
			name, c.Skipped(), c.BadUtilization, c.BadCapacity, c.BadRate, c.ZeroRates, c.WrongMode)
	}
	if !*everyPeriod {
		if err := enc.Encode(last); err != nil {
			o.abort()
			return err
		}
	}
	if err := o.commit(); err != nil {
		return err
	}
	if *stateOut != "" {
		b, err := json.Marshal(e.State())
		if err != nil {
			return err
		}
		if err := os.WriteFile(*stateOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if c := last.Counters; c.Skipped() > 0 || c.MissingPeriods > 0 {
		fmt.Fprintf(stderr, "tierscope workfactor: %s: skipped %d observations (bad utilization %d, bad capacity %d, bad rate %d, all-zero rates %d, wrong mode %d); %d missing periods\n",
			name, c.Skipped(), c.BadUtilization, c.BadCapacity, c.BadRate, c.ZeroRates, c.WrongMode, c.MissingPeriods)
	}
	return nil
}

// maxSampleValue bounds a rate, capacity or utilization: 1e15 is no real
// host's, and squares of larger ones overflow the estimator.
const maxSampleValue = 1e15

// workfactorSamples are the observations of a samples CSV, grouped by period.
type workfactorSamples struct {
	periods    []int64
	byPeriod   map[int64][]workfactor.Observation
	hasProcess bool
}

// readWorkfactorSamples parses docs/formats.md §5. Columns are found by their header
// names; a malformed field, a utilization or capacity that disagrees between rows
// of the same machine (process) and period, or a flow given twice for one of
// them, is an error naming the line. Values that parse but are invalid (NaN,
// negative) are left to the estimator, which skips and counts them.
func readWorkfactorSamples(r io.Reader, name string) (*workfactorSamples, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: empty input: no header", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(h))] = i
	}
	required := []string{"period", "machine", "capacity_mhz", "cpu_utilization", "flow", "rate"}
	for _, h := range required {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("%s:1: missing column %q (want %s[,process])", name, h, strings.Join(required, ","))
		}
	}
	pcol, hasProcess := col["process"]
	s := &workfactorSamples{byPeriod: map[int64][]workfactor.Observation{}, hasProcess: hasProcess}
	type key struct {
		period           int64
		machine, process string
	}
	index := map[key]int{} // into byPeriod[period]
	rows := 0
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		field := func(h string) string {
			if i := col[h]; i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		if len(rec) < len(header) {
			return nil, fmt.Errorf("%s:%d: %d fields, want %d", name, line, len(rec), len(header))
		}
		period, err := strconv.ParseInt(field("period"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: period %q is not an integer", name, line, field("period"))
		}
		num := func(h string) (float64, error) {
			// NaN stays for the estimator to skip and count; Inf and
			// absurd sizes are errors (inputlimit.Float).
			if s := field(h); !strings.EqualFold(s, "nan") {
				if _, err := inputlimit.Float(s, maxSampleValue); err != nil {
					return 0, fmt.Errorf("%s:%d: %s %v", name, line, h, err)
				}
			}
			v, err := strconv.ParseFloat(field(h), 64)
			if err != nil {
				return 0, fmt.Errorf("%s:%d: %s %q is not a number", name, line, h, field(h))
			}
			return v, nil
		}
		capacity, err := num("capacity_mhz")
		if err != nil {
			return nil, err
		}
		util, err := num("cpu_utilization")
		if err != nil {
			return nil, err
		}
		rate, err := num("rate")
		if err != nil {
			return nil, err
		}
		machine, flow := field("machine"), field("flow")
		if machine == "" {
			return nil, fmt.Errorf("%s:%d: empty machine", name, line)
		}
		if flow == "" {
			return nil, fmt.Errorf("%s:%d: empty flow", name, line)
		}
		process := ""
		if hasProcess && pcol < len(rec) {
			process = strings.TrimSpace(rec[pcol])
		}
		k := key{period, machine, process}
		obs := s.byPeriod[period]
		i, ok := index[k]
		if !ok {
			i = len(obs)
			index[k] = i
			s.byPeriod[period] = append(obs, workfactor.Observation{Machine: machine, Process: process,
				CapacityMHz: capacity, Utilization: util, Rates: map[string]float64{}})
			if !ok && len(obs) == 0 {
				s.periods = append(s.periods, period)
			}
		}
		o := &s.byPeriod[period][i]
		if !sameNumber(o.Utilization, util) || !sameNumber(o.CapacityMHz, capacity) {
			return nil, fmt.Errorf("%s:%d: cpu_utilization %v and capacity_mhz %v differ from an earlier row of %s in period %d (%v, %v)",
				name, line, util, capacity, describeSource(machine, process), period, o.Utilization, o.CapacityMHz)
		}
		if _, dup := o.Rates[flow]; dup {
			return nil, fmt.Errorf("%s:%d: flow %q given twice for %s in period %d", name, line, flow, describeSource(machine, process), period)
		}
		o.Rates[flow] = rate
		rows++
	}
	if rows == 0 {
		return nil, fmt.Errorf("%s: no samples", name)
	}
	slices.Sort(s.periods)
	return s, nil
}

func sameNumber(a, b float64) bool {
	return a == b || (math.IsNaN(a) && math.IsNaN(b))
}

func describeSource(machine, process string) string {
	if process == "" {
		return "machine " + machine
	}
	return "process " + process + " on " + machine
}
