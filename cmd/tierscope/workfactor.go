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
	f := defineWorkfactorFlags(fs, def)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := f.config(fs, def)
	if err != nil {
		return err
	}

	r, name, closeIn, err := input(*f.in, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	samples, err := readWorkfactorSamples(r, name)
	if err != nil {
		return err
	}
	cfg.PerProcess = samples.hasProcess
	switch *f.perProcess {
	case "on":
		cfg.PerProcess = true
	case "off":
		cfg.PerProcess = false
	}
	e, err := workfactor.New(cfg)
	if err != nil {
		return usageError{err.Error()}
	}

	last, err := writeWorkfactorEstimates(e, samples, name, *f.out, *f.everyPeriod, stdout)
	if err != nil {
		return err
	}
	if *f.stateOut != "" {
		b, err := json.Marshal(e.State())
		if err != nil {
			return err
		}
		if err := os.WriteFile(*f.stateOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if c := last.Counters; c.Skipped() > 0 || c.MissingPeriods > 0 {
		fmt.Fprintf(stderr, "tierscope workfactor: %s: skipped %d observations (bad utilization %d, bad capacity %d, bad rate %d, all-zero rates %d, wrong mode %d); %d missing periods\n",
			name, c.Skipped(), c.BadUtilization, c.BadCapacity, c.BadRate, c.ZeroRates, c.WrongMode, c.MissingPeriods)
	}
	return nil
}

// workfactorFlags are the workfactor command's flag values.
type workfactorFlags struct {
	in, out, method, background, combining, utilPoly, perProcess, stateOut *string
	halfLife, ridgeLambda, smooth, delta, combine, maxHalfLife             *float64
	cusum, collinear, bgMaxVIF, shiftSigma                                 *float64
	q                                                                      *int
	everyPeriod, noDiscount, discount, paper                               *bool
}

// defineWorkfactorFlags defines the workfactor flags on fs, with the
// estimator's defaults from def.
func defineWorkfactorFlags(fs *flag.FlagSet, def workfactor.Config) *workfactorFlags {
	return &workfactorFlags{
		in:          fs.String("in", "", "work-factor samples CSV (docs/formats.md §5); - for standard input"),
		out:         fs.String("out", "", "output file (default standard output)"),
		halfLife:    fs.Float64("half-life", def.HalfLife, "aging half-life h, in periods (paper §3.4)"),
		everyPeriod: fs.Bool("every-period", false, "write one document per period as JSON lines"),
		method:      fs.String("method", "plain", "solver: plain (the paper's least squares), ridge or nnls"),
		ridgeLambda: fs.Float64("ridge-lambda", def.RidgeLambda, "ridge λ, relative to the standardized diagonal"),
		smooth:      fs.Float64("smooth-half-life", def.SmoothHalfLife, "smoothing half-life t, in periods (paper §4.4)"),
		delta:       fs.Float64("delta", def.Delta, "flow rejection threshold δ (paper §4.1)"),
		q:           fs.Int("q", def.Q, "flow combining q (paper §4.3)"),
		combine:     fs.Float64("combine-threshold", def.CombineThreshold, "flows below this × the mean flow rate start combined (paper §4.3)"),
		background:  fs.String("background", def.Background.String(), "background column (paper §4.8): auto (when the data identify it), off, shared or per-source"),
		noDiscount:  fs.Bool("no-discount", def.NoDiscount, "no utilization discounting f(ρ) (paper §4.2); the default, see --discount"),
		discount:    fs.Bool("discount", false, "weigh rows by the utilization discounting f(ρ) of paper §4.2"),
		maxHalfLife: fs.Float64("max-half-life", def.MaxHalfLife, "longest memory, in periods: the half-life grows from --half-life while the work factors hold (0 = fixed)"),
		cusum:       fs.Float64("cusum", def.CusumThreshold, "CUSUM alarm level of the residuals, in σ (0 = off)"),
		combining:   fs.String("combining", def.Combining.String(), "which flows share a column: collinear (rate correlation ≥ --collinear-correlation) or rate (paper §4.3)"),
		collinear:   fs.Float64("collinear-correlation", def.CollinearCorrelation, "rate correlation from which flows are one collinear group"),
		bgMaxVIF:    fs.Float64("background-max-vif", def.BackgroundMaxVIF, "largest variance inflation of an automatic background column"),
		utilPoly:    fs.String("util-poly", "", "utilization correction polynomial, constant term first, e.g. 0,2.1,-1.9,0.8 (hyperthreading, paper §5.6)"),
		shiftSigma:  fs.Float64("shift-sigma", def.ShiftSigma, "outlier and shift detection threshold in σ (0 = off, the paper's behaviour)"),
		paper:       fs.Bool("paper", false, "only what the paper describes: no shift detection or CUSUM, fixed memory, combining by rate, no background, discounting"),
		perProcess:  fs.String("per-process", "auto", "per-process mode (paper §4.6): auto (when the CSV has a process column), on or off"),
		stateOut:    fs.String("state-out", "", "also write the estimator's final state (JSON) to this file"),
	}
}

// config builds the estimator's configuration from def and the parsed flags
// (fs tells which were set, for --paper), and checks it; every problem is a
// usage error. PerProcess is left for the caller, which needs the input.
func (f *workfactorFlags) config(fs *flag.FlagSet, def workfactor.Config) (workfactor.Config, error) {
	cfg := def
	cfg.HalfLife, cfg.SmoothHalfLife, cfg.Delta, cfg.Q = *f.halfLife, *f.smooth, *f.delta, *f.q
	cfg.CombineThreshold, cfg.RidgeLambda, cfg.NoDiscount = *f.combine, *f.ridgeLambda, *f.noDiscount && !*f.discount
	cfg.ShiftSigma, cfg.MaxHalfLife, cfg.CusumThreshold = *f.shiftSigma, *f.maxHalfLife, *f.cusum
	cfg.CollinearCorrelation, cfg.BackgroundMaxVIF = *f.collinear, *f.bgMaxVIF
	if cfg.MaxHalfLife > 0 {
		cfg.MaxHalfLife = max(cfg.MaxHalfLife, cfg.HalfLife)
	}
	var err error
	if cfg.Background, err = workfactor.ParseBackground(*f.background); err != nil {
		return cfg, usagef("--background: %v", err)
	}
	if cfg.Combining, err = workfactor.ParseCombining(*f.combining); err != nil {
		return cfg, usagef("--combining: %v", err)
	}
	if *f.paper {
		applyPaperConfig(fs, &cfg, *f.discount)
	}
	if cfg.Method, err = workfactor.ParseMethod(*f.method); err != nil {
		return cfg, usagef("--method: %v", err)
	}
	if cfg.UtilizationPolynomial, err = workfactor.ParsePolynomial(*f.utilPoly); err != nil {
		return cfg, usagef("--util-poly: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err.Error()}
	}
	if *f.perProcess != "auto" && *f.perProcess != "on" && *f.perProcess != "off" {
		return cfg, usagef("--per-process must be auto, on or off, not %q", *f.perProcess)
	}
	return cfg, nil
}

// applyPaperConfig switches cfg to the paper's algorithm (--paper), except
// for the settings whose flags fs saw set explicitly.
func applyPaperConfig(fs *flag.FlagSet, cfg *workfactor.Config, discount bool) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	p := workfactor.PaperConfig()
	for name, apply := range map[string]func(){
		"shift-sigma":   func() { cfg.ShiftSigma = p.ShiftSigma },
		"max-half-life": func() { cfg.MaxHalfLife = p.MaxHalfLife },
		"cusum":         func() { cfg.CusumThreshold = p.CusumThreshold },
		"combining":     func() { cfg.Combining = p.Combining },
		"background":    func() { cfg.Background = p.Background },
		"no-discount":   func() { cfg.NoDiscount = p.NoDiscount && !discount },
	} {
		if !set[name] {
			apply()
		}
	}
}

// writeWorkfactorEstimates feeds the samples to e period by period and
// writes the estimates to out (standard output when empty): every period's
// as JSON lines with everyPeriod, else the last one, indented. It returns
// the last estimate; nothing is written when no sample was usable.
func writeWorkfactorEstimates(e *workfactor.Estimator, samples *workfactorSamples, name, out string, everyPeriod bool, stdout io.Writer) (*workfactor.Estimate, error) {
	o, err := openOutput(out, stdout)
	if err != nil {
		return nil, err
	}
	enc := json.NewEncoder(o)
	if !everyPeriod {
		enc.SetIndent("", "  ")
	}
	var last *workfactor.Estimate
	for _, p := range samples.periods {
		est, err := e.AddPeriod(p, samples.byPeriod[p])
		if err != nil {
			o.abort()
			return nil, fmt.Errorf("%s: period %d: %w", name, p, err)
		}
		last = est
		if everyPeriod {
			if err := enc.Encode(est); err != nil {
				o.abort()
				return nil, err
			}
		}
	}
	if last.Counters.Equations == 0 {
		o.abort()
		c := last.Counters
		return nil, fmt.Errorf("%s: no usable sample: %d observations skipped (bad utilization %d, bad capacity %d, bad rate %d, all-zero rates %d, wrong mode %d)",
			name, c.Skipped(), c.BadUtilization, c.BadCapacity, c.BadRate, c.ZeroRates, c.WrongMode)
	}
	if !everyPeriod {
		if err := enc.Encode(last); err != nil {
			o.abort()
			return nil, err
		}
	}
	if err := o.commit(); err != nil {
		return nil, err
	}
	return last, nil
}

// maxSampleValue bounds a rate, capacity or utilization: 1e15 is no real
// host's, and squares of larger ones overflow the estimator.
const maxSampleValue = 1e15

// workfactorSamples are the observations of a samples CSV, grouped by period.
type workfactorSamples struct {
	periods    []int64
	byPeriod   map[int64][]workfactor.Observation
	hasProcess bool
	// index locates each source's observation in byPeriod[period].
	index map[workfactorSourceKey]int
}

// workfactorSourceKey names one observation: a machine, or a process on it,
// in one period.
type workfactorSourceKey struct {
	period           int64
	machine, process string
}

// workfactorRow is one parsed line of a samples CSV.
type workfactorRow struct {
	period                 int64
	machine, process, flow string
	capacity, util, rate   float64
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
	header, col, err := readWorkfactorHeader(cr, name)
	if err != nil {
		return nil, err
	}
	pcol, hasProcess := col["process"]
	s := &workfactorSamples{byPeriod: map[int64][]workfactor.Observation{}, hasProcess: hasProcess,
		index: map[workfactorSourceKey]int{}}
	rows := 0
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// encoding/csv's ParseError names the line and column.
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		row, err := parseWorkfactorRow(rec, header, col, pcol, hasProcess, name, line)
		if err != nil {
			return nil, err
		}
		if err := s.add(row, name, line); err != nil {
			return nil, err
		}
		rows++
	}
	if rows == 0 {
		return nil, fmt.Errorf("%s: no samples", name)
	}
	slices.Sort(s.periods)
	return s, nil
}

// readWorkfactorHeader reads the header line and maps each column name,
// lower-cased, to its index; a required column missing is an error.
func readWorkfactorHeader(cr *csv.Reader, name string) ([]string, map[string]int, error) {
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("%s: empty input: no header", name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(h))] = i
	}
	required := []string{"period", "machine", "capacity_mhz", "cpu_utilization", "flow", "rate"}
	for _, h := range required {
		if _, ok := col[h]; !ok {
			return nil, nil, fmt.Errorf("%s:1: missing column %q (want %s[,process])", name, h, strings.Join(required, ","))
		}
	}
	return header, col, nil
}

// parseWorkfactorRow parses record rec, at line of file name, into a row;
// col maps column names to indexes and pcol is the process column when
// hasProcess. Fields are checked in a fixed order, whatever the columns'
// order: the count, period, capacity, utilization, rate, machine, flow.
func parseWorkfactorRow(rec, header []string, col map[string]int, pcol int, hasProcess bool, name string, line int) (workfactorRow, error) {
	field := func(h string) string {
		if i := col[h]; i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	if len(rec) < len(header) {
		return workfactorRow{}, fmt.Errorf("%s:%d: %d fields, want %d", name, line, len(rec), len(header))
	}
	period, err := strconv.ParseInt(field("period"), 10, 64)
	if err != nil {
		return workfactorRow{}, fmt.Errorf("%s:%d: period %q is not an integer", name, line, field("period"))
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
		return workfactorRow{}, err
	}
	util, err := num("cpu_utilization")
	if err != nil {
		return workfactorRow{}, err
	}
	rate, err := num("rate")
	if err != nil {
		return workfactorRow{}, err
	}
	machine, flow := field("machine"), field("flow")
	if machine == "" {
		return workfactorRow{}, fmt.Errorf("%s:%d: empty machine", name, line)
	}
	if flow == "" {
		return workfactorRow{}, fmt.Errorf("%s:%d: empty flow", name, line)
	}
	process := ""
	if hasProcess && pcol < len(rec) {
		process = strings.TrimSpace(rec[pcol])
	}
	return workfactorRow{period: period, machine: machine, process: process, flow: flow,
		capacity: capacity, util: util, rate: rate}, nil
}

// add files row's rate under its source's observation of its period,
// creating the observation on the source's first row; a utilization or
// capacity that disagrees with that first row, or a flow given twice, is an
// error naming line of file name.
func (s *workfactorSamples) add(row workfactorRow, name string, line int) error {
	period, machine, process := row.period, row.machine, row.process
	k := workfactorSourceKey{period, machine, process}
	obs := s.byPeriod[period]
	i, ok := s.index[k]
	if !ok {
		i = len(obs)
		s.index[k] = i
		s.byPeriod[period] = append(obs, workfactor.Observation{Machine: machine, Process: process,
			CapacityMHz: row.capacity, Utilization: row.util, Rates: map[string]float64{}})
		if !ok && len(obs) == 0 {
			s.periods = append(s.periods, period)
		}
	}
	o := &s.byPeriod[period][i]
	if !sameNumber(o.Utilization, row.util) || !sameNumber(o.CapacityMHz, row.capacity) {
		return fmt.Errorf("%s:%d: cpu_utilization %v and capacity_mhz %v differ from an earlier row of %s in period %d (%v, %v)",
			name, line, row.util, row.capacity, describeSource(machine, process), period, o.Utilization, o.CapacityMHz)
	}
	if _, dup := o.Rates[row.flow]; dup {
		return fmt.Errorf("%s:%d: flow %q given twice for %s in period %d", name, line, row.flow, describeSource(machine, process), period)
	}
	o.Rates[row.flow] = row.rate
	return nil
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
