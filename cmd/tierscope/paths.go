package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/msgtrace"
	"github.com/tierscope/tierscope/internal/stats"
)

// truthTopN is the largest N of the top-N false-negative metric (paper 001 §7.5.1).
const truthTopN = 20

// runPaths infers causal path patterns from a message trace with the
// nesting or the convolution algorithm (paper 001 §5), and with --truth
// scores them against the trace's path column.
func runPaths(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("paths", "paths --algorithm nesting|convolution --in trace.tsv [--out paths.json] [--format json|dot|text] [--top N] [--quantum 10ms] [--truth]", stderr)
	f := definePathsFlags(fs, causal.DefaultNestingConfig())
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	cfg, err := f.nestingConfig()
	if err != nil {
		return err
	}
	var ccfg causal.ConvolutionConfig
	if *f.algorithm == "convolution" {
		var err error
		if ccfg, err = f.conv.config(*f.quantum, *f.skew); err != nil {
			return err
		}
	}

	if *f.cpuProfile != "" {
		stop, err := startCPUProfile(*f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	progress := newStageLog(stderr, *f.verbose)
	r, name, closeIn, err := input(*f.in, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	opt := msgtrace.ReadOptions{SkipPathIDs: !*f.truth}
	if *f.algorithm == "convolution" {
		tr, err := msgtrace.ReadWithOptions(r, name, opt)
		if err != nil {
			return err
		}
		if err := checkTrace(name, len(tr.Messages), len(tr.PathIDs), *f.truth); err != nil {
			return err
		}
		progress.stage("read %d messages", len(tr.Messages))
		return runConvolution(tr, ccfg, f.conv, convolutionOutput{out: *f.out, format: *f.format, top: *f.top, sortBy: *f.sortBy, truth: *f.truth}, stdout, progress)
	}
	return runNesting(r, name, opt, cfg, f, stdout, progress)
}

// pathsFlags are the paths command's flag values.
type pathsFlags struct {
	algorithm, in, out, format, sortBy, order, cpuProfile *string
	top, binCount, binsBelow                              *int
	quantum, skew, binMin                                 *time.Duration
	smooth, penOverlap, penSame, penGeneric, binBase      *float64
	truth, verbose                                        *bool
	conv                                                  *convFlags
}

// definePathsFlags defines the paths flags on fs, with the nesting
// algorithm's defaults from def.
func definePathsFlags(fs *flag.FlagSet, def causal.NestingConfig) *pathsFlags {
	return &pathsFlags{
		algorithm:  fs.String("algorithm", "nesting", "inference algorithm: nesting (RPC traces, §5.1) or convolution (any messages, §5.2)"),
		in:         fs.String("in", "", "message trace (docs/formats.md §1); - for standard input"),
		out:        fs.String("out", "", "output file (default standard output)"),
		format:     fs.String("format", "json", "output format: json, dot or text"),
		top:        fs.Int("top", 0, "write only the first N patterns (0 = all)"),
		sortBy:     fs.String("sort", "count", "pattern order: count (docs/formats.md §2) or latency (total latency, as in figure 11)"),
		quantum:    fs.Duration("quantum", 10*time.Millisecond, "convolution time quantum μ (nesting ignores it)"),
		truth:      fs.Bool("truth", false, "score against the path column (paper 001 §7.5.1)"),
		skew:       fs.Duration("skew-window", 0, "skew window tolerance (§7.5.6): for nesting comparisons, and the negative delays convolution admits"),
		smooth:     fs.Float64("smooth", 0, "Gaussian smoothing of the scoreboard, sigma in bins (0 = off)"),
		penOverlap: fs.Float64("penalty-overlap", def.OverlapPenalty, "overlapping-child penalty exponent x"),
		penSame:    fs.Float64("penalty-same", def.SameChildPenalty, "same-child penalty exponent y"),
		penGeneric: fs.Float64("penalty-generic", def.GenericPenalty, "generic-child penalty exponent z"),
		binBase:    fs.Float64("bin-base", def.Bins.Base, "scoreboard bin growth factor"),
		binCount:   fs.Int("bins", def.Bins.Count, "scoreboard bins in all, those below --bin-min included"),
		binMin:     fs.Duration("bin-min", time.Duration(def.Bins.Min), "the scoreboard edge from which bins are counted"),
		binsBelow:  fs.Int("bins-below", def.Bins.Below, "scoreboard bins below --bin-min, of the same ratio (0: every shorter delay in one bin)"),
		order:      fs.String("order", "certainty", "order in which children choose parents: certainty (most certain first) or call (paper's figure 4)"),
		cpuProfile: fs.String("cpuprofile", "", "write a Go CPU profile to this file"),
		verbose:    fs.Bool("v", false, "report each stage's time and the memory used on standard error"),
		conv:       convolutionFlags(fs),
	}
}

// check refuses an unknown algorithm, format or sort order, a negative
// --top and a non-positive --quantum, as usage errors.
func (f *pathsFlags) check() error {
	if *f.algorithm != "nesting" && *f.algorithm != "convolution" {
		return usagef("--algorithm %q is not available (available: nesting, convolution)", *f.algorithm)
	}
	if *f.format != "json" && *f.format != "dot" && *f.format != "text" {
		return usagef("--format must be json, dot or text, not %q", *f.format)
	}
	if *f.sortBy != "count" && *f.sortBy != "latency" {
		return usagef("--sort must be count or latency, not %q", *f.sortBy)
	}
	if *f.top < 0 {
		return usagef("--top must be ≥ 0")
	}
	if *f.quantum <= 0 {
		return usagef("--quantum must be > 0")
	}
	return nil
}

// nestingConfig builds and validates the nesting algorithm's configuration
// from the flags; convolution uses its skew window too.
func (f *pathsFlags) nestingConfig() (causal.NestingConfig, error) {
	cfg := causal.NestingConfig{
		SkewWindow:       *f.skew,
		Bins:             stats.LogBins{Base: *f.binBase, Min: float64(*f.binMin), Count: *f.binCount, Below: *f.binsBelow},
		SmoothSigma:      *f.smooth,
		OverlapPenalty:   *f.penOverlap,
		SameChildPenalty: *f.penSame,
		GenericPenalty:   *f.penGeneric,
	}
	switch *f.order {
	case "certainty":
		cfg.Order = causal.OrderByCertainty
	case "call":
		cfg.Order = causal.OrderByCall
	default:
		return cfg, usagef("--order must be certainty or call, not %q", *f.order)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err.Error()}
	}
	return cfg, nil
}

// runNesting reads the trace's call pairs from r (nesting needs only those,
// matched while the trace is read), infers the path patterns, orders and
// trims them as the flags say, and writes them.
func runNesting(r io.Reader, name string, opt msgtrace.ReadOptions, cfg causal.NestingConfig, f *pathsFlags, stdout io.Writer, progress *stageLog) error {
	cp, err := msgtrace.ReadCallPairs(r, name, cfg.SkewWindow, opt)
	if err != nil {
		return err
	}
	if err := checkTrace(name, cp.Messages, len(cp.PathIDs), *f.truth); err != nil {
		return err
	}
	progress.stage("read %d messages, matched %d call pairs", cp.Messages, len(cp.Pairs))
	report, err := inferPaths(cp, cfg, *f.truth, progress)
	if err != nil {
		return err
	}
	if *f.sortBy == "latency" {
		slices.SortStableFunc(report.Patterns, func(a, b api.PathPattern) int { return cmp.Compare(b.TotalLatencyMs, a.TotalLatencyMs) })
	}
	if *f.top > 0 && len(report.Patterns) > *f.top {
		report.Patterns = report.Patterns[:*f.top]
	}
	if err := writeReport(*f.out, stdout, *f.format, report,
		func(w io.Writer) error { return writeDot(w, report) },
		func(w io.Writer) error { return writeText(w, report) }); err != nil {
		return err
	}
	progress.stage("wrote %d patterns", len(report.Patterns))
	return nil
}

// checkTrace refuses a trace with no messages, and --truth without path ids.
func checkTrace(name string, messages, pathIDs int, truth bool) error {
	if messages == 0 {
		return fmt.Errorf("%s: empty trace: no messages", name)
	}
	if truth && pathIDs <= 1 {
		return fmt.Errorf("%s: --truth needs the path column (6th), and no message has one", name)
	}
	return nil
}

// inferPaths runs the nesting algorithm and, when asked, the cheat-mode truth.
func inferPaths(cp *msgtrace.CallPairs, cfg causal.NestingConfig, withTruth bool, progress *stageLog) (*api.PathsReport, error) {
	pairs := cp.Pairs
	nesting, err := causal.NestInCallOrder(pairs, cp.CallOrder, cfg)
	if err != nil {
		return nil, err
	}
	progress.stage("nested (mean parallelism %.3f)", nesting.MeanParallelism())
	patterns := nesting.Patterns(cp.Nodes)
	progress.stage("aggregated %d patterns", len(patterns))
	report := &api.PathsReport{
		Algorithm:         "nesting",
		Messages:          cp.Messages,
		CallPairs:         len(pairs),
		DiscardedMessages: cp.Discards.Total(),
		Discarded:         &api.Discards{ReturnWithoutCall: cp.Discards.ReturnWithoutCall, CallWithoutReturn: cp.Discards.CallWithoutReturn, OneWay: cp.Discards.OneWay},
		MeanParallelism:   nesting.MeanParallelism(),
		Patterns:          toAPIPatterns(patterns),
	}
	if withTruth {
		cheat := cfg
		cheat.UsePathIDs = true
		truth, err := causal.NestInCallOrder(pairs, cp.CallOrder, cheat)
		if err != nil {
			return nil, err
		}
		truthPatterns := truth.Patterns(cp.Nodes)
		a := causal.Compare(nesting, truth, patterns, truthPatterns, truthTopN)
		report.Truth = &api.PathsTruth{
			TopNFalseNegatives:        a.TopNFalseNegatives,
			FalsePositivePatterns:     a.FalsePositivePatterns,
			FalseNegativeInstances:    a.FalseNegativeInstances,
			MessageAttributionError:   a.MessageAttributionError,
			FalsePositiveInstances:    a.FalsePositiveInstances,
			TruthInstances:            a.TruthInstances,
			TruthPatterns:             len(truthPatterns),
			FalseNegativeInstanceRate: a.FalseNegativeInstanceRate,
		}
		progress.stage("scored against %d true patterns", len(truthPatterns))
	}
	return report, nil
}

func toAPIPatterns(ps []*causal.Pattern) []api.PathPattern {
	out := make([]api.PathPattern, len(ps))
	for i, p := range ps {
		out[i] = api.PathPattern{Signature: p.Signature, Count: p.Count, TotalLatencyMs: p.TotalLatency, Root: toAPINode(p.Root)}
	}
	return out
}

func toAPINode(n *causal.PatternNode) api.PathNode {
	out := api.PathNode{Node: n.Node, Children: make([]api.PathNode, len(n.Children))}
	if n.Latency != nil {
		out.LatencyMs = quantiles(n.Latency)
		out.CallDelayMs = quantiles(n.CallDelay)
	}
	for i, c := range n.Children {
		out.Children[i] = toAPINode(c)
	}
	return out
}

func quantiles(h *stats.LogHistogram) *api.Quantiles {
	return &api.Quantiles{Mean: h.Mean(), P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99)}
}

// stageLog prints the time and heap of each stage when verbose.
type stageLog struct {
	w     io.Writer
	on    bool
	start time.Time
	last  time.Time
}

func newStageLog(w io.Writer, on bool) *stageLog {
	now := time.Now()
	return &stageLog{w: w, on: on, start: now, last: now}
}

func (s *stageLog) stage(format string, args ...any) {
	if !s.on {
		return
	}
	now := time.Now()
	fmt.Fprintf(s.w, "%s: %7.3fs (+%.3fs) %s\n", programName, now.Sub(s.start).Seconds(), now.Sub(s.last).Seconds(), fmt.Sprintf(format, args...))
	s.last = now
}

// convFlags are the flags of `paths --algorithm convolution`; nesting ignores
// them, as convolution ignores the nesting flags (except --skew-window, the
// tolerance for negative delays).
type convFlags struct {
	maxDelay, tolerance     *time.Duration
	spikeN, spikeS          *float64
	minMessages, minCount   *int
	maxDepth                *int
	correlation, disable    *string
	frequent                *int
	roots                   rootFlags
	shortFraction, overlaps *float64
}

// rootFlags collects repeated --root NODE flags.
type rootFlags []string

func (r *rootFlags) String() string     { return strings.Join(*r, ",") }
func (r *rootFlags) Set(v string) error { *r = append(*r, v); return nil }

func convolutionFlags(fs *flag.FlagSet) *convFlags {
	d := causal.DefaultConvolutionConfig(10 * time.Millisecond)
	c := &convFlags{
		maxDelay:      fs.Duration("max-delay", 0, "convolution: longest causal delay searched (default 1000 quanta)"),
		tolerance:     fs.Duration("tolerance", 0, "convolution: v of §5.2.2, messages are taken at a spike's delay ± v (default one quantum)"),
		spikeN:        fs.Float64("spike-n", d.SpikeN, "convolution: a spike is a local maximum N σ above the mean"),
		spikeS:        fs.Float64("spike-s", d.SpikeS, "convolution: spikes are separated by a point below S σ"),
		minMessages:   fs.Int("min-messages", d.MinMessages, "convolution: fewest messages on an edge that is followed"),
		minCount:      fs.Int("min-count", d.MinCount, "convolution: fewest instances of a reported pattern"),
		maxDepth:      fs.Int("max-depth", d.MaxDepth, "convolution: longest path followed, in edges"),
		shortFraction: fs.Float64("short-fraction", d.ShortFraction, "convolution: a path that ends inside a longer one needs this share of its last vertex's messages"),
		overlaps:      fs.Float64("derived-overlap", d.DerivedOverlap, "convolution: share of an edge explained by a longer chain that makes it derived (§5.3.1)"),
		correlation:   fs.String("correlation", "auto", "convolution: how correlations are computed: auto, fft or direct"),
		disable:       fs.String("disable", "", "convolution: filters to switch off, comma-separated: low-frequency, short, cycles, negative, derived"),
		frequent:      fs.Int("frequent", 100, "convolution --truth: instances that make a path frequent (paper 001 §7.5.7)"),
	}
	fs.Var(&c.roots, "root", "convolution: a node whose paths are followed (repeatable; default the sources)")
	return c
}

// config builds the convolution configuration; roots are resolved later, once
// the trace's nodes are known.
func (c *convFlags) config(quantum, skew time.Duration) (causal.ConvolutionConfig, error) {
	cfg := causal.DefaultConvolutionConfig(quantum)
	cfg.MaxDelay, cfg.Tolerance, cfg.SkewWindow = *c.maxDelay, *c.tolerance, skew
	cfg.SpikeN, cfg.SpikeS, cfg.Significance = *c.spikeN, *c.spikeS, *c.spikeN
	cfg.MinMessages, cfg.MinCount, cfg.MaxDepth = *c.minMessages, *c.minCount, *c.maxDepth
	cfg.ShortFraction, cfg.DerivedOverlap = *c.shortFraction, *c.overlaps
	switch *c.correlation {
	case "auto":
		cfg.Method = causal.CorrelateAuto
	case "fft":
		cfg.Method = causal.CorrelateFFT
	case "direct":
		cfg.Method = causal.CorrelateDirect
	default:
		return cfg, usagef("--correlation must be auto, fft or direct, not %q", *c.correlation)
	}
	filters := map[string]causal.ConvolutionFilter{
		"low-frequency": causal.FilterLowFrequency, "short": causal.FilterShort, "cycles": causal.FilterCycles,
		"negative": causal.FilterNegative, "derived": causal.FilterDerived,
	}
	if *c.disable != "" {
		for _, name := range strings.Split(*c.disable, ",") {
			f, ok := filters[strings.TrimSpace(name)]
			if !ok {
				return cfg, usagef("--disable: unknown filter %q (known: low-frequency, short, cycles, negative, derived)", name)
			}
			cfg.Disable |= f
		}
	}
	if *c.spikeN <= 0 || *c.spikeS <= 0 {
		return cfg, usagef("--spike-n and --spike-s must be > 0")
	}
	if *c.maxDepth < 1 || *c.minMessages < 1 || *c.minCount < 1 {
		return cfg, usagef("--max-depth, --min-messages and --min-count must be ≥ 1")
	}
	if *c.frequent < 1 {
		return cfg, usagef("--frequent must be ≥ 1")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err.Error()}
	}
	return cfg, nil
}

// convolutionReport is docs/formats.md §2 for the convolution algorithm: the common
// fields, what the run was (quantum, quanta, roots, filter counts), and a truth
// object that adds the frequent-path view of §7.5.7 to the common one.
type convolutionReport struct {
	*api.PathsReport
	Convolution *convolutionInfo  `json:"convolution"`
	Truth       *convolutionTruth `json:"truth,omitempty"`
}

type convolutionInfo struct {
	QuantumMs  float64                 `json:"quantum_ms"`
	Quanta     int                     `json:"quanta"`
	MaxDelayMs float64                 `json:"max_delay_ms"`
	Roots      []string                `json:"roots"`
	Vertices   int                     `json:"vertices"`
	Stats      causal.ConvolutionStats `json:"stats"`
}

type convolutionTruth struct {
	api.PathsTruth
	Frequent               int `json:"frequent"`
	FrequentTruthPatterns  int `json:"frequent_truth_patterns"`
	FrequentFalsePositives int `json:"frequent_false_positives"`
	FrequentFalseNegatives int `json:"frequent_false_negatives"`
}

type convolutionOutput struct {
	out, format, sortBy string
	top                 int
	truth               bool
}

// runConvolution runs the convolution algorithm over tr and writes its report.
func runConvolution(tr *causal.Trace, cfg causal.ConvolutionConfig, flags *convFlags, o convolutionOutput, stdout io.Writer, progress *stageLog) error {
	for _, name := range flags.roots {
		id := slices.Index(tr.Nodes, name)
		if id < 0 {
			return fmt.Errorf("--root %q: no such node in the trace", name)
		}
		cfg.Roots = append(cfg.Roots, causal.NodeID(id))
	}
	cfg.KeepMessages = o.truth
	res, err := causal.Convolve(tr.Messages, tr.Nodes, cfg)
	if err != nil {
		return err
	}
	progress.stage("convolved: %d quanta, %d correlations (%d FFT), %d vertices, %d patterns",
		res.Bins, res.Stats.Correlations, res.Stats.FFTs, len(res.Vertices), len(res.Patterns))
	report := convolutionAPIReport(tr, res)
	if o.truth {
		t := causal.ChainTruth(tr.Messages, tr.Nodes)
		a := t.Score(res, truthTopN, *flags.frequent)
		report.Truth = &convolutionTruth{
			PathsTruth: api.PathsTruth{
				TopNFalseNegatives:        a.TopNFalseNegatives,
				FalsePositivePatterns:     a.FalsePositivePatterns,
				FalseNegativeInstances:    a.FalseNegativeInstances,
				MessageAttributionError:   a.MessageAttributionError,
				FalsePositiveInstances:    a.FalsePositiveInstances,
				TruthInstances:            a.TruthInstances,
				TruthPatterns:             a.TruthPatterns,
				FalseNegativeInstanceRate: a.FalseNegativeInstanceRate,
			},
			Frequent:               a.Frequent,
			FrequentTruthPatterns:  a.FrequentTruth,
			FrequentFalsePositives: a.FrequentFalsePositives,
			FrequentFalseNegatives: a.FrequentFalseNegatives,
		}
		progress.stage("scored against %d true chains", len(t.Chains))
	}
	if o.sortBy == "latency" {
		slices.SortStableFunc(report.Patterns, func(a, b api.PathPattern) int { return cmp.Compare(b.TotalLatencyMs, a.TotalLatencyMs) })
	}
	if o.top > 0 && len(report.Patterns) > o.top {
		report.Patterns = report.Patterns[:o.top]
	}
	if err := writeReport(o.out, stdout, o.format, report,
		func(w io.Writer) error { return writeDot(w, report.PathsReport) },
		func(w io.Writer) error { return writeConvolutionText(w, report) }); err != nil {
		return err
	}
	progress.stage("wrote %d patterns", len(report.Patterns))
	return nil
}

// convolutionAPIReport converts a result into docs/formats.md §2: each pattern's root
// is a chain, each node after the root carrying delays_ms (spike positions by
// declining frequency) and messages (the count with those delays) for the edge
// into it, as in figure 9. The root's own edge has no delay.
func convolutionAPIReport(tr *causal.Trace, res *causal.ConvolutionResult) *convolutionReport {
	r := &api.PathsReport{Algorithm: "convolution", Messages: len(tr.Messages), Patterns: make([]api.PathPattern, len(res.Patterns))}
	for i, p := range res.Patterns {
		r.Patterns[i] = api.PathPattern{Signature: p.Signature, Count: p.Count, TotalLatencyMs: p.TotalLatency, Root: chainNode(p, 0)}
	}
	info := &convolutionInfo{
		QuantumMs:  float64(res.Quantum) / 1e6,
		Quanta:     res.Bins,
		MaxDelayMs: float64(res.MaxLag) * float64(res.Quantum) / 1e6,
		Roots:      make([]string, len(res.Roots)),
		Vertices:   len(res.Vertices),
		Stats:      res.Stats,
	}
	for i, n := range res.Roots {
		info.Roots[i] = tr.Nodes[n]
	}
	return &convolutionReport{PathsReport: r, Convolution: info}
}

// chainNode builds the chain of p from its node h on.
func chainNode(p *causal.ConvPattern, h int) api.PathNode {
	n := api.PathNode{Node: p.Nodes[h], Children: []api.PathNode{}}
	if h > 0 {
		hop := p.Hops[h-1]
		n.Messages = hop.Messages
		for _, d := range hop.Delays {
			n.DelaysMs = append(n.DelaysMs, float64(d.Delay)/1e6)
		}
	}
	if h+1 < len(p.Nodes) {
		n.Children = []api.PathNode{chainNode(p, h+1)}
	}
	return n
}

// writeReport writes a paths report in its format (json, dot or text) to the
// output named by path, replacing it only once the whole report is written.
func writeReport(path string, stdout io.Writer, format string, doc any, dot, text func(io.Writer) error) error {
	o, err := openOutput(path, stdout)
	if err != nil {
		return err
	}
	switch format {
	case "json":
		enc := json.NewEncoder(o)
		enc.SetIndent("", "  ")
		err = enc.Encode(doc)
	case "dot":
		err = dot(o)
	case "text":
		err = text(o)
	}
	if err != nil {
		o.abort()
		return err
	}
	return o.commit()
}
