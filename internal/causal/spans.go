package causal

import (
	"fmt"
	"math"
	"time"

	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/stats"
)

// StitchConfig holds the parameters of span stitching. Every tolerance is an
// upper bound: the delays that decide are learned from the spans themselves.
type StitchConfig struct {
	// SkewWindow bounds the clock difference between processes: a SERVER span may
	// start up to w before its CLIENT span and end up to w after it. Within it,
	// the learned call delays decide.
	SkewWindow time.Duration
	// MaxSkew bounds the clock difference searched for between processes
	// (learnSkew): a pair measured further apart than SkewWindow/2 has its
	// window moved to the offset measured. 0 searches no further than
	// SkewWindow.
	MaxSkew time.Duration
	// LocalWindow is the timestamp rounding tolerated within one process; 0
	// learns it from the timestamps (a process whose timestamps are all whole
	// milliseconds gets 1 ms).
	LocalWindow time.Duration
	// AsyncWindow bounds how long after a PRODUCER span a CONSUMER span may start.
	AsyncWindow time.Duration
	// Bins index the delay models (signed log bins, nanoseconds).
	Bins stats.LogBins
	// Rounds is the number of times the delay models are refitted to the
	// assignment and the assignment redone (0: the scoreboard's choice only).
	Rounds int
	// MaxCandidates bounds the candidate parents of one orphan (those that
	// started last before it are kept); 0 keeps all.
	MaxCandidates int
}

// DefaultStitchConfig returns settings that hold from microsecond hops to
// second-long calls: bins 10% wide from 100 ns to about 1.6 hours.
func DefaultStitchConfig() StitchConfig {
	return StitchConfig{
		SkewWindow:    5 * time.Millisecond,
		MaxSkew:       100 * time.Millisecond,
		AsyncWindow:   10 * time.Second,
		Bins:          stats.LogBins{Base: 1.1, Min: 100, Count: 256},
		Rounds:        2,
		MaxCandidates: 128,
	}
}

// Validate reports settings that cannot be used.
func (c StitchConfig) Validate() error {
	if err := c.Bins.Validate(); err != nil {
		return fmt.Errorf("stitch: %w", err)
	}
	if c.Bins.Count > maxBins {
		return fmt.Errorf("stitch: at most %d bins, got %d", maxBins, c.Bins.Count)
	}
	if c.SkewWindow < 0 || c.LocalWindow < 0 || c.AsyncWindow < 0 || c.MaxSkew < 0 {
		return fmt.Errorf("stitch: windows must be ≥ 0")
	}
	if c.MaxCandidates < 0 {
		return fmt.Errorf("stitch: max candidates must be ≥ 0, got %d", c.MaxCandidates)
	}
	if c.Rounds < 0 || c.Rounds > 20 {
		return fmt.Errorf("stitch: rounds must be in [0, 20], got %d", c.Rounds)
	}
	return nil
}

// StitchResult is the parent of every span after inference.
type StitchResult struct {
	// Parent is the known or inferred parent of each span, -1 for a root.
	Parent []int32
	// Inferred marks the spans whose parent was inferred here.
	Inferred []bool
	// Confidence is, for an inferred parent, the probability that it is the
	// parent given the learned delay models and the other spans' parents.
	Confidence []float32
	// Runner is, for an inferred parent, the next most likely parent, -1 if none.
	Runner []int32
	// Orphans counts the spans marked Orphan; LeftOrphan those with no candidate.
	Orphans, LeftOrphan int
	// Guests counts the client-only processes placed in a host process;
	// Capped the orphans whose candidates were cut to MaxCandidates.
	Guests, Capped int
	// ByStart is every span's index by start, ties by index: SpanPaths of
	// the same spans can take it instead of sorting again.
	ByStart []int32
}

// Stitch infers the parents of orphan spans. It carries the nesting algorithm of
// paper 001 §5.1 over from messages to spans and makes it hold under
// concurrency, where the spans of one process belong to several requests at
// once and do not nest like one thread:
//
//   - Candidates follow the span kinds. An orphan SERVER span's parent is a
//     CLIENT span of another process that encloses it within the skew window,
//     whose known peer and operation agree with it; a CONSUMER's is a PRODUCER
//     that started at most AsyncWindow before it. Any other orphan's parent is a
//     SERVER, CONSUMER or INTERNAL span of its own process during which it
//     started (it may outlive its parent: fire-and-forget work). CLIENT and
//     PRODUCER spans are leaves in their process. Where spans name their
//     thread, candidates on the child's thread are preferred when any is.
//   - Client-only processes (spans under a back end's service.name reported
//     from the caller's process) are placed in the process of their host that
//     encloses nearly all of their spans (guests).
//   - Delay models replace the fixed windows: the request and response delays
//     of every caller → callee link, the offset of a first child from its
//     parent's start, the gap after the previous sibling, the share of a
//     parent's children that overlap a sibling (parallel fan-out) and that
//     outlive it. They start as the paper's scoreboard (each orphan spreads 1/N
//     over its candidates, known links count fully) and are refitted to the
//     assignment Rounds times, as an EM would.
//   - Assignment is joint: a CLIENT span has one SERVER child, so orphan SERVER
//     spans take their callers in a maximum-likelihood one-to-one assignment
//     (an auction, solved per round), and so do each service's CONSUMER spans
//     with PRODUCER spans; the children of one process are assigned in start
//     order, each scored against what its candidate parents already hold (the
//     gap after their last child, or the offset from a child still running).
//   - Confidence is the posterior of the chosen parent among the candidates,
//     given the other spans' parents; for a one-to-one caller, a swap with the
//     span that holds it counts as an alternative; a parent the last round still
//     changed is capped at 0.5. A writer trusts a parent only above a
//     confidence it chooses.
//
// A candidate that would close a cycle is never taken.
func Stitch(spans []span.Span, cfg StitchConfig) (*StitchResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(spans) > math.MaxInt32 {
		return nil, fmt.Errorf("stitch: %d spans exceed the supported %d", len(spans), math.MaxInt32)
	}
	s := newSpanStitcher(spans, cfg)
	return s.run(), nil
}
