package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/msgtrace"
	"github.com/tierscope/tierscope/internal/stats"
)

// truthTopN is the largest N of the top-N false-negative metric (paper 001 §7.5.1).
const truthTopN = 20

func runPaths(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("paths", "paths --algorithm nesting --in trace.tsv [--out paths.json] [--format json|dot|text] [--top N] [--truth]", stderr)
	def := causal.DefaultNestingConfig()
	var (
		algorithm  = fs.String("algorithm", "nesting", "inference algorithm: nesting")
		in         = fs.String("in", "", "message trace (FORMATS.md §1); - for standard input")
		out        = fs.String("out", "", "output file (default standard output)")
		format     = fs.String("format", "json", "output format: json, dot or text")
		top        = fs.Int("top", 0, "write only the first N patterns (0 = all)")
		sortBy     = fs.String("sort", "count", "pattern order: count (FORMATS.md §2) or latency (total latency, as in figure 11)")
		quantum    = fs.Duration("quantum", 10*time.Millisecond, "convolution time quantum μ (nesting ignores it)")
		truth      = fs.Bool("truth", false, "score against the path column (paper 001 §7.5.1)")
		skew       = fs.Duration("skew-window", 0, "skew window tolerance for nesting comparisons (§7.5.6)")
		smooth     = fs.Float64("smooth", 0, "Gaussian smoothing of the scoreboard, sigma in bins (0 = off)")
		penOverlap = fs.Float64("penalty-overlap", def.OverlapPenalty, "overlapping-child penalty exponent x")
		penSame    = fs.Float64("penalty-same", def.SameChildPenalty, "same-child penalty exponent y")
		penGeneric = fs.Float64("penalty-generic", def.GenericPenalty, "generic-child penalty exponent z")
		binBase    = fs.Float64("bin-base", def.Bins.Base, "scoreboard bin growth factor")
		binCount   = fs.Int("bins", def.Bins.Count, "scoreboard bins")
		binMin     = fs.Duration("bin-min", time.Duration(def.Bins.Min), "upper edge of the first scoreboard bin")
		order      = fs.String("order", "certainty", "order in which children choose parents: certainty (most certain first) or call (paper's figure 4)")
		cpuProfile = fs.String("cpuprofile", "", "write a Go CPU profile to this file")
		verbose    = fs.Bool("v", false, "report each stage's time and the memory used on standard error")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *algorithm != "nesting" {
		return usagef("--algorithm %q is not available (available: nesting)", *algorithm)
	}
	if *format != "json" && *format != "dot" && *format != "text" {
		return usagef("--format must be json, dot or text, not %q", *format)
	}
	if *sortBy != "count" && *sortBy != "latency" {
		return usagef("--sort must be count or latency, not %q", *sortBy)
	}
	if *top < 0 {
		return usagef("--top must be ≥ 0")
	}
	if *quantum <= 0 {
		return usagef("--quantum must be > 0")
	}
	cfg := causal.NestingConfig{
		SkewWindow:       *skew,
		Bins:             stats.LogBins{Base: *binBase, Min: float64(*binMin), Count: *binCount},
		SmoothSigma:      *smooth,
		OverlapPenalty:   *penOverlap,
		SameChildPenalty: *penSame,
		GenericPenalty:   *penGeneric,
	}
	switch *order {
	case "certainty":
		cfg.Order = causal.OrderByCertainty
	case "call":
		cfg.Order = causal.OrderByCall
	default:
		return usagef("--order must be certainty or call, not %q", *order)
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}

	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	progress := newStageLog(stderr, *verbose)
	r, name, closeIn, err := input(*in, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	tr, err := msgtrace.ReadWithOptions(r, name, msgtrace.ReadOptions{SkipPathIDs: !*truth})
	if err != nil {
		return err
	}
	if len(tr.Messages) == 0 {
		return fmt.Errorf("%s: empty trace: no messages", name)
	}
	if *truth && len(tr.PathIDs) <= 1 {
		return fmt.Errorf("%s: --truth needs the path column (6th), and no message has one", name)
	}
	progress.stage("read %d messages", len(tr.Messages))

	report, err := inferPaths(tr, cfg, *truth, progress)
	if err != nil {
		return err
	}
	if *sortBy == "latency" {
		slices.SortStableFunc(report.Patterns, func(a, b api.PathPattern) int { return cmp.Compare(b.TotalLatencyMs, a.TotalLatencyMs) })
	}
	if *top > 0 && len(report.Patterns) > *top {
		report.Patterns = report.Patterns[:*top]
	}
	o, err := openOutput(*out, stdout)
	if err != nil {
		return err
	}
	switch *format {
	case "json":
		enc := json.NewEncoder(o)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	case "dot":
		err = writeDot(o, report)
	case "text":
		err = writeText(o, report)
	}
	if err != nil {
		o.abort()
		return err
	}
	if err := o.commit(); err != nil {
		return err
	}
	progress.stage("wrote %d patterns", len(report.Patterns))
	return nil
}

// inferPaths runs the nesting algorithm and, when asked, the cheat-mode truth.
func inferPaths(tr *causal.Trace, cfg causal.NestingConfig, withTruth bool, progress *stageLog) (*api.PathsReport, error) {
	pairs, disc := causal.FindCallPairs(tr.Messages, cfg.SkewWindow)
	messages := len(tr.Messages)
	// The call pairs hold everything the later stages need. Dropping the messages
	// and id strings, and collecting them now, lets those stages reuse that memory
	// instead of growing the heap: on a 2M-message trace that is a third of the
	// peak, and fresh pages are what the run spends its system time on.
	tr.Messages, tr.CallIDs, tr.PathIDs = nil, nil, nil
	runtime.GC()
	progress.stage("matched %d call pairs", len(pairs))
	nesting, err := causal.Nest(pairs, cfg)
	if err != nil {
		return nil, err
	}
	progress.stage("nested (mean parallelism %.3f)", nesting.MeanParallelism())
	patterns := nesting.Patterns(tr.Nodes)
	progress.stage("aggregated %d patterns", len(patterns))
	report := &api.PathsReport{
		Algorithm:         "nesting",
		Messages:          messages,
		CallPairs:         len(pairs),
		DiscardedMessages: disc.Total(),
		Discarded:         &api.Discards{ReturnWithoutCall: disc.ReturnWithoutCall, CallWithoutReturn: disc.CallWithoutReturn, OneWay: disc.OneWay},
		MeanParallelism:   nesting.MeanParallelism(),
		Patterns:          toAPIPatterns(patterns),
	}
	if withTruth {
		cheat := cfg
		cheat.UsePathIDs = true
		truth, err := causal.Nest(pairs, cheat)
		if err != nil {
			return nil, err
		}
		truthPatterns := truth.Patterns(tr.Nodes)
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
