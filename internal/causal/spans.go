package causal

import (
	"fmt"
	"math"
	"time"

	"github.com/tierscope/tierscope/internal/stats"
)

// SpanKind is the role of a span in an RPC, as in OpenTelemetry.
type SpanKind uint8

const (
	KindUnspecified SpanKind = iota
	KindInternal
	KindServer
	KindClient
	KindProducer
	KindConsumer
)

// RemoteEntry reports whether a span of this kind is entered from another process,
// so that its parent, if any, is a CLIENT or PRODUCER span elsewhere.
func (k SpanKind) RemoteEntry() bool { return k == KindServer || k == KindConsumer }

// RemoteCaller reports whether a span of this kind calls another process.
func (k SpanKind) RemoteCaller() bool { return k == KindClient || k == KindProducer }

// Span is a span as span stitching sees it: a call pair seen from one side. The
// adapter that builds it interns names into small integers.
type Span struct {
	Start, End int64 // nanoseconds
	Service    int32 // the service the span belongs to (service.name)
	Instance   int32 // the process it ran in; local parents share it
	Name       int32 // the span name (operation)
	Kind       SpanKind
	Peer       int32 // for CLIENT/PRODUCER: the service it calls when known, else -1
	// Endpoint is an interned address (host:port), -1 when unknown: for a CLIENT
	// span the address it called, for a SERVER span the address it answered on.
	Endpoint int32
	Parent   int32 // index of the parent known from context, else -1
	// Orphan marks a span whose context was lost, so its parent is inferred. A
	// span with no parent that is not marked stays a root.
	Orphan bool
}

// StitchConfig holds the parameters of span stitching.
type StitchConfig struct {
	// SkewWindow tolerates clock differences between processes: a SERVER span may
	// start up to w before its CLIENT span and end up to w after it.
	SkewWindow time.Duration
	// LocalWindow tolerates timestamp rounding within one process (some SDKs stamp
	// the server span in whole milliseconds).
	LocalWindow time.Duration
	// AsyncWindow bounds how long after a PRODUCER span a CONSUMER span may start.
	AsyncWindow time.Duration
	// Bins index the scoreboard by the nesting delay (child start − parent start).
	Bins stats.LogBins
	// OverlapPenalty is the paper's x for local parents; ExclusivePenalty applies
	// the same form to a CLIENT span that already has a SERVER child, since one
	// call reaches one server.
	OverlapPenalty, ExclusivePenalty float64
}

// DefaultStitchConfig returns settings measured on the TrainTicket traces.
func DefaultStitchConfig() StitchConfig {
	return StitchConfig{
		SkewWindow:       5 * time.Millisecond,
		LocalWindow:      time.Millisecond,
		AsyncWindow:      10 * time.Second,
		Bins:             stats.LogBins{Base: 1.05, Min: float64(10 * time.Microsecond), Count: 500},
		OverlapPenalty:   2,
		ExclusivePenalty: 10,
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
	if c.SkewWindow < 0 || c.LocalWindow < 0 || c.AsyncWindow < 0 {
		return fmt.Errorf("stitch: windows must be ≥ 0")
	}
	if !(c.OverlapPenalty >= 0) || !(c.ExclusivePenalty >= 0) || math.IsInf(c.OverlapPenalty+c.ExclusivePenalty, 0) {
		return fmt.Errorf("stitch: penalties must be finite and ≥ 0")
	}
	return nil
}

// StitchResult is the parent of every span after inference.
type StitchResult struct {
	// Parent is the known or inferred parent of each span, -1 for a root.
	Parent []int32
	// Inferred marks the spans whose parent was inferred here.
	Inferred []bool
	// Confidence is, for an inferred parent, its share of the penalised scores of
	// all candidates: 1 when it was the only candidate.
	Confidence []float32
	// Orphans counts the spans marked Orphan; LeftOrphan those with no candidate.
	Orphans, LeftOrphan int
}

// stitchKey is a scoreboard key: parent (service, name) to child (service, name).
type stitchKey struct{ ps, pn, cs, cn int32 }

// Stitch infers the parents of orphan spans with the nesting algorithm of paper
// 001 §5.1 carried over from messages to spans:
//
//   - candidates: an orphan SERVER/CONSUMER span may nest in a CLIENT/PRODUCER span
//     of any process that encloses it within the skew window (a CONSUMER only needs
//     to start within AsyncWindow after its PRODUCER); any other orphan may nest in
//     a span of its own process that encloses it within the local window. A known
//     peer (the CLIENT span's resolved callee) must be the orphan's service.
//   - scoreboard: for every orphan, 1/|candidates| goes to the bin of
//     start(child) − start(parent) under the key (parent service, parent name,
//     child service, child name); spans whose parent is known add weight 1, so
//     the delays learned from intact traces guide the broken ones.
//   - choice: by decreasing certainty, each orphan takes the candidate with the
//     highest score times (1+c)^−x, c counting the candidate's children that
//     overlap the orphan in time (ExclusivePenalty instead of x when a CLIENT
//     span already has a SERVER child). A candidate that would close a cycle is
//     skipped.
func Stitch(spans []Span, cfg StitchConfig) (*StitchResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(spans) > math.MaxInt32 {
		return nil, fmt.Errorf("stitch: %d spans exceed the supported %d", len(spans), math.MaxInt32)
	}
	n := len(spans)
	res := &StitchResult{Parent: make([]int32, n), Inferred: make([]bool, n), Confidence: make([]float32, n)}
	for i := range spans {
		res.Parent[i] = spans[i].Parent
		if spans[i].Orphan && spans[i].Parent < 0 {
			res.Orphans++
		}
	}
	cands, start := spanCandidates(spans, cfg)

	// Score: orphans spread 1/N over their candidates, known links count fully.
	index := make(map[stitchKey]int32)
	var hists [][]float64
	histOf := func(p, c int32) int32 {
		k := stitchKey{spans[p].Service, spans[p].Name, spans[c].Service, spans[c].Name}
		h, ok := index[k]
		if !ok {
			h = int32(len(hists))
			index[k] = h
			hists = append(hists, make([]float64, 2*cfg.Bins.Count-1))
		}
		return h
	}
	candHist := make([]int32, len(cands))
	candBin := make([]uint16, len(cands))
	for c := range spans {
		if p := spans[c].Parent; p >= 0 && int(p) < n {
			hists[histOf(p, int32(c))][signedBin(cfg.Bins, spans[c].Start-spans[p].Start)]++
		}
		lo, hi := start[c], start[c+1]
		for k := lo; k < hi; k++ {
			p := cands[k]
			candHist[k] = histOf(p, int32(c))
			candBin[k] = uint16(signedBin(cfg.Bins, spans[c].Start-spans[p].Start))
			hists[candHist[k]][candBin[k]] += 1 / float64(hi-lo)
		}
	}

	// Children already known, for the penalties.
	kids := make([][]int32, n)
	for c := range spans {
		if p := spans[c].Parent; p >= 0 && int(p) < n {
			kids[p] = append(kids[p], int32(c))
		}
	}

	// Order: most decisive raw score share first, ties by start.
	var order []int32
	share := make([]float64, n)
	for _, c := range orderSpansByStart(spans) {
		lo, hi := start[c], start[c+1]
		if lo == hi {
			if spans[c].Orphan && spans[c].Parent < 0 {
				res.LeftOrphan++
			}
			continue
		}
		share[c] = bestShare(lo, hi, func(k uint32) float64 { return hists[candHist[k]][candBin[k]] })
		order = append(order, c)
	}
	byDecreasingShare(order, share)

	overlap := newPenaltyFactor(cfg.OverlapPenalty)
	exclusive := newPenaltyFactor(cfg.ExclusivePenalty)
	for _, c := range order {
		cs := &spans[c]
		best, bestScore, sum := int32(-1), math.Inf(-1), 0.0
		for k := start[c]; k < start[c+1]; k++ {
			p := cands[k]
			if isSpanAncestorOrSelf(res.Parent, c, p) {
				continue
			}
			var nOverlap, nServers int
			for _, s := range kids[p] {
				ss := &spans[s]
				if ss.Kind.RemoteEntry() {
					nServers++
				}
				if ss.Start < cs.End && cs.Start < ss.End {
					nOverlap++
				}
			}
			score := hists[candHist[k]][candBin[k]]
			if spans[p].Kind.RemoteCaller() && cs.Kind.RemoteEntry() {
				score *= exclusive.of(nServers)
			} else {
				score *= overlap.of(nOverlap)
			}
			sum += score
			if score > bestScore {
				best, bestScore = p, score
			}
		}
		if best < 0 {
			res.LeftOrphan++
			continue
		}
		res.Parent[c] = best
		res.Inferred[c] = true
		kids[best] = append(kids[best], c)
		conf := 1.0
		if sum > 0 {
			conf = bestScore / sum
		}
		res.Confidence[c] = float32(conf)
	}
	return res, nil
}

func isSpanAncestorOrSelf(parent []int32, a, p int32) bool {
	for steps := 0; p >= 0 && steps <= len(parent); steps++ {
		if p == a {
			return true
		}
		p = parent[p]
	}
	return false
}

// spanCandidates returns, in CSR form, the candidate parents of every orphan span
// without a known parent, sorted by start time (earliest first breaks ties).
func spanCandidates(spans []Span, cfg StitchConfig) (cands []int32, start []uint32) {
	byStart := orderSpansByStart(spans)

	w, lw, aw := int64(cfg.SkewWindow), int64(cfg.LocalWindow), int64(cfg.AsyncWindow)
	// Active spans that may still be the parent of a later orphan: one list per
	// process for local parents, CLIENT spans (kept while they may enclose) and
	// PRODUCER spans (kept for the async window) for remote parents.
	local := make(map[int32][]int32)
	var clients, producers []int32
	lists := make([][]int32, len(spans))
	next := 0
	for _, c := range byStart {
		cs := &spans[c]
		horizon := cs.Start + max(w, lw)
		for next < len(byStart) && spans[byStart[next]].Start <= horizon {
			p := byStart[next]
			local[spans[p].Instance] = append(local[spans[p].Instance], p)
			switch spans[p].Kind {
			case KindClient:
				clients = append(clients, p)
			case KindProducer:
				producers = append(producers, p)
			}
			next++
		}
		if !cs.Orphan || cs.Parent >= 0 {
			continue
		}
		if cs.Kind.RemoteEntry() {
			remote := &clients
			if cs.Kind == KindConsumer {
				producers = pruneStarted(spans, producers, cs.Start-aw)
				remote = &producers
			} else {
				clients = prune(spans, clients, cs.Start-w)
			}
			// Clocks of different processes disagree, so the window always applies
			// to where the caller ends (the outer callers it lets in are dropped by
			// innermost). A caller starts before its callee, though, unless skew is
			// larger than the network delay: callers starting later are looked at
			// only when no caller started first.
			lists[c] = remoteFilter(spans, c, remoteCandidates(spans, *remote, c, 0, w, aw, lists[c][:0]))
			if len(lists[c]) == 0 && w > 0 {
				lists[c] = remoteFilter(spans, c, remoteCandidates(spans, *remote, c, w, w, aw, lists[c][:0]))
			}
		} else {
			act := prune(spans, local[cs.Instance], cs.Start-lw)
			local[cs.Instance] = act
			// One clock: strict enclosure first, the rounding window only if none.
			lists[c] = innermost(spans, localCandidates(spans, act, c, 0, lists[c][:0]), false)
			if len(lists[c]) == 0 && lw > 0 {
				lists[c] = innermost(spans, localCandidates(spans, act, c, lw, lists[c][:0]), false)
			}
		}
	}
	start = make([]uint32, len(spans)+1)
	for i, l := range lists {
		start[i+1] = start[i] + uint32(len(l))
	}
	cands = make([]int32, 0, start[len(spans)])
	for _, l := range lists {
		cands = append(cands, l...)
	}
	return cands, start
}

// remoteCandidates appends the CLIENT (for a SERVER span) or PRODUCER (for a
// CONSUMER span) spans of other processes that may have called span c: starting at
// most startW after c, and for a CLIENT ending at most endW before c ends. A
// caller whose peer is known must name c's service.
func remoteCandidates(spans []Span, active []int32, c int32, startW, endW, aw int64, dst []int32) []int32 {
	cs := &spans[c]
	for _, p := range active {
		ps := &spans[p]
		if p == c || ps.Instance == cs.Instance || ps.Start > cs.Start+startW || (ps.Peer >= 0 && ps.Peer != cs.Service) {
			continue
		}
		if cs.Kind == KindConsumer {
			if ps.Kind != KindProducer || cs.Start-ps.Start > aw {
				continue
			}
		} else if ps.Kind != KindClient || ps.End < cs.End-endW {
			continue
		}
		dst = append(dst, p)
	}
	return dst
}

// localCandidates appends the spans of c's process that enclose c, with tolerance w.
func localCandidates(spans []Span, active []int32, c int32, w int64, dst []int32) []int32 {
	cs := &spans[c]
	for _, p := range active {
		ps := &spans[p]
		if p != c && ps.Start <= cs.Start+w && ps.End >= cs.End-w {
			dst = append(dst, p)
		}
	}
	return dst
}

// remoteFilter narrows the callers of c: those that called exactly its address
// first, then the innermost along chains of calls across processes, then those
// that enclose it.
func remoteFilter(spans []Span, c int32, cands []int32) []int32 {
	// A caller that encloses a caller in another process is further up the same
	// chain of calls (a gateway's call enclosing the call its callee made); the
	// callers of one process that nest in time are parallel calls, all kept.
	return enclosingFirst(spans, c, innermost(spans, sameEndpointFirst(spans, c, cands), true))
}

// innermost keeps the candidates that enclose no other candidate (of another
// process, when acrossOnly). Within a thread spans form a stack, so every ancestor
// of a span encloses it, but only the innermost is its parent; the scoreboard
// then decides between the innermost spans of concurrent requests. Identical
// intervals are kept, for the scoreboard to decide.
func innermost(spans []Span, cands []int32, acrossOnly bool) []int32 {
	if len(cands) < 2 {
		return cands
	}
	kept := cands[:0:0]
	for _, p := range cands {
		ps := &spans[p]
		outer := false
		for _, q := range cands {
			qs := &spans[q]
			if q != p && (!acrossOnly || qs.Instance != ps.Instance) &&
				ps.Start <= qs.Start && qs.End <= ps.End && (ps.Start != qs.Start || ps.End != qs.End) {
				outer = true
				break
			}
		}
		if !outer {
			kept = append(kept, p)
		}
	}
	return kept
}

// enclosingFirst keeps, when some candidates end after c does, only those: a
// caller that returned before its callee did is explained only by skew, while the
// window that admits it also admits the callee's previous sibling call. After
// innermost, the outer callers that enclose anything are already gone.
func enclosingFirst(spans []Span, c int32, cands []int32) []int32 {
	end := spans[c].End
	n := 0
	for _, p := range cands {
		if spans[p].End >= end {
			n++
		}
	}
	if n == 0 || n == len(cands) {
		return cands
	}
	kept := cands[:0]
	for _, p := range cands {
		if spans[p].End >= end {
			kept = append(kept, p)
		}
	}
	return kept
}

// sameEndpointFirst keeps, when some candidates called exactly the address the
// server span answered on, only those. It is a preference, not a rule: behind a
// proxy, NAT or a service name the two addresses differ for the right caller too.
func sameEndpointFirst(spans []Span, c int32, cands []int32) []int32 {
	ep := spans[c].Endpoint
	if ep < 0 || len(cands) < 2 {
		return cands
	}
	n := 0
	for _, p := range cands {
		if spans[p].Endpoint == ep {
			n++
		}
	}
	if n == 0 || n == len(cands) {
		return cands
	}
	kept := cands[:0]
	for _, p := range cands {
		if spans[p].Endpoint == ep {
			kept = append(kept, p)
		}
	}
	return kept
}

// prune drops spans that ended before horizon, keeping start order.
func prune(spans []Span, active []int32, horizon int64) []int32 {
	kept := active[:0]
	for _, p := range active {
		if spans[p].End >= horizon {
			kept = append(kept, p)
		}
	}
	return kept
}

// pruneStarted drops spans that started before horizon: a PRODUCER stays a
// candidate for the async window after its start, whenever it ended.
func pruneStarted(spans []Span, active []int32, horizon int64) []int32 {
	i := 0
	for i < len(active) && spans[active[i]].Start < horizon {
		i++
	}
	return active[i:]
}
