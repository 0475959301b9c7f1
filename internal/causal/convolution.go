package causal

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// ConvolutionConfig holds the parameters of the convolution algorithm (§5.2). The
// zero value of a field selects its default; DefaultConvolutionConfig spells
// them out.
type ConvolutionConfig struct {
	// Quantum is the time quantum μ of the indicator functions (§5.2.1).
	Quantum time.Duration
	// MaxDelay is the longest causal delay searched for. The correlation is
	// computed, and its mean and deviation estimated, over the lags ±MaxDelay.
	// Default: 1000 quanta (at most the trace's length).
	MaxDelay time.Duration
	// Tolerance is v of §5.2.2: messages are selected at a spike's delay d ± v,
	// widened to the extent of the spike's region. Default: one quantum, the
	// uncertainty that quantisation alone leaves.
	Tolerance time.Duration
	// SpikeN and SpikeS are N and S of §5.2: a spike is a local maximum N σ above
	// the mean, and spikes must be separated by a point below S σ. Defaults 4, 3.
	SpikeN, SpikeS float64
	// Significance is how many standard deviations a destination's causal
	// excess (significant) must reach after a spike that could be chance, before
	// the correction for the number of lags searched (the low-frequency filter of
	// edges). Default 4, as SpikeN.
	Significance float64
	// MinMessages is the fewest messages an edge must carry to be followed.
	// Default 5.
	MinMessages int
	// MinCount drops patterns with fewer instances (the low-frequency filter of
	// paths). Default 1.
	MinCount int
	// ShortFraction: a path that ends inside a longer one, at a vertex where most
	// messages go on, is reported only if at least this fraction of the vertex's
	// messages end there (the filter of accidentally short paths). Default 0.1.
	ShortFraction float64
	// DerivedOverlap: an edge is RPC-derived (§5.3.1) when at least this fraction
	// of its messages are also reached, from the same vertex, by a longer chain
	// through another edge. Default 0.5.
	DerivedOverlap float64
	// CycleOverlap: an edge closes a cycle when at least this fraction of its
	// messages already lie on the path that leads to it. Default 0.5.
	CycleOverlap float64
	// SkewWindow admits delays down to −SkewWindow, for clocks that disagree;
	// shorter ones are suppressed as negative. Default 0.
	SkewWindow time.Duration
	// MaxDepth and MaxVertices bound the path graph. Defaults 64 and 20000.
	MaxDepth, MaxVertices int
	// Roots are the nodes whose paths are followed. Default: the sources, nodes
	// that send calls or one-way messages but receive none; failing those, nodes
	// that send but receive nothing; failing those, every sender.
	Roots []NodeID
	// Method chooses how correlations are computed (default CorrelateAuto).
	Method CorrelationMethod
	// Disable switches filters off, for experiments (default: all on).
	Disable ConvolutionFilter
	// KeepMessages keeps each vertex's message indices in the result, which
	// scoring against the truth needs.
	KeepMessages bool
}

// ConvolutionFilter is a set of the filters of §5.2.3 and §5.3.1.
type ConvolutionFilter uint8

const (
	// FilterLowFrequency drops edges whose messages could be coincidence and
	// patterns with fewer than MinCount instances.
	FilterLowFrequency ConvolutionFilter = 1 << iota
	// FilterShort drops paths that end where most of their messages go on.
	FilterShort
	// FilterCycles drops edges that reuse messages already on their path.
	FilterCycles
	// FilterNegative drops spikes at negative lags and messages sent before their
	// apparent cause.
	FilterNegative
	// FilterDerived drops edges that a longer chain through the same nodes
	// explains, such as A→B→A beside A→B→C→B→A (§5.3.1).
	FilterDerived
)

// DefaultConvolutionConfig returns the defaults at quantum mu.
func DefaultConvolutionConfig(mu time.Duration) ConvolutionConfig {
	return ConvolutionConfig{
		Quantum:        mu,
		SpikeN:         4,
		SpikeS:         3,
		Significance:   4,
		MinMessages:    5,
		MinCount:       1,
		ShortFraction:  0.1,
		DerivedOverlap: 0.5,
		CycleOverlap:   0.5,
		MaxDepth:       64,
		MaxVertices:    20000,
	}
}

// withDefaults fills zero fields with their defaults.
func (c ConvolutionConfig) withDefaults() ConvolutionConfig {
	d := DefaultConvolutionConfig(c.Quantum)
	if c.SpikeN == 0 {
		c.SpikeN = d.SpikeN
	}
	if c.SpikeS == 0 {
		c.SpikeS = d.SpikeS
	}
	if c.Significance == 0 {
		c.Significance = d.Significance
	}
	if c.MinMessages == 0 {
		c.MinMessages = d.MinMessages
	}
	if c.MinCount == 0 {
		c.MinCount = d.MinCount
	}
	if c.ShortFraction == 0 {
		c.ShortFraction = d.ShortFraction
	}
	if c.DerivedOverlap == 0 {
		c.DerivedOverlap = d.DerivedOverlap
	}
	if c.CycleOverlap == 0 {
		c.CycleOverlap = d.CycleOverlap
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = d.MaxDepth
	}
	if c.MaxVertices == 0 {
		c.MaxVertices = d.MaxVertices
	}
	if c.Tolerance == 0 {
		c.Tolerance = c.Quantum
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = 1000 * c.Quantum
	}
	return c
}

// Validate reports a configuration that cannot run.
func (c ConvolutionConfig) Validate() error {
	var errs []error
	if c.Quantum <= 0 {
		errs = append(errs, errors.New("quantum must be > 0"))
	}
	if c.MaxDelay < 0 || c.Tolerance < 0 || c.SkewWindow < 0 {
		errs = append(errs, errors.New("max delay, tolerance and skew window must be ≥ 0"))
	}
	if c.SpikeN < 0 || c.SpikeS < 0 || (c.SpikeN > 0 && c.SpikeS > c.SpikeN) {
		errs = append(errs, fmt.Errorf("spike thresholds must satisfy 0 < S ≤ N (N=%g, S=%g)", c.SpikeN, c.SpikeS))
	}
	if c.Significance < 0 || c.MinMessages < 0 || c.MinCount < 0 || c.MaxDepth < 0 || c.MaxVertices < 0 {
		errs = append(errs, errors.New("significance, min messages, min count, max depth and max vertices must be ≥ 0"))
	}
	for _, f := range []float64{c.ShortFraction, c.DerivedOverlap, c.CycleOverlap} {
		if f < 0 || f > 1 {
			errs = append(errs, errors.New("short fraction, derived overlap and cycle overlap must be in [0, 1]"))
			break
		}
	}
	if c.Quantum > 0 && c.MaxDelay/c.Quantum > 1<<26 {
		errs = append(errs, fmt.Errorf("max delay %v is more than 2^26 quanta of %v", c.MaxDelay, c.Quantum))
	}
	return errors.Join(errs...)
}

// ConvVertex is one vertex of the path graph of §5.2 (figure 6): a node reached
// from its parent's node by the messages of one spike. The roots have Parent −1.
type ConvVertex struct {
	Node   NodeID
	Parent int32
	Depth  int
	// Delay is the time the parent's node spent before sending the messages that
	// reach this vertex: the median, over those messages, of the time since the
	// message that caused each. It refines the spike's position Lag·μ.
	Delay time.Duration
	Lag   int     // spike position in quanta
	Sigma float64 // spike height in standard deviations above the mean
	// Count is the number of messages on the edge into this vertex; Ended those
	// of them that no kept edge out of the vertex continues.
	Count, Ended int
	// Suppressed marks a vertex of a subtree found derived (§5.3.1) only after it
	// had been explored; no pattern uses it.
	Suppressed bool
}

// ConvolutionStats counts the work done and what each filter removed.
// PeakHeld is the most message indices held at once in the candidate edges of
// the vertices on the current path (the only memory not bounded by O(m + S)
// with a constant factor: each message is held at most once per spike of each
// vertex on the path).
type ConvolutionStats struct {
	PeakHeld       int `json:"peak_held_messages"`
	Correlations   int `json:"correlations"`
	FFTs           int `json:"ffts"`
	Direct         int `json:"direct"`
	Spikes         int `json:"spikes"`
	NegativeSpikes int `json:"negative_spikes"`
	Insignificant  int `json:"insignificant_edges"`
	Cycles         int `json:"cycles"`
	Derived        int `json:"derived_edges"`
	ShortPaths     int `json:"short_paths"`
	LowFrequency   int `json:"low_frequency_patterns"`
	Truncated      int `json:"truncated"`
}

// ConvolutionResult is the output of Convolve.
type ConvolutionResult struct {
	Quantum  time.Duration
	Bins     int // S = trace duration / μ
	MaxLag   int // L, in quanta
	Start    int64
	Roots    []NodeID
	Nodes    []string
	Vertices []ConvVertex // in depth-first (pre-)order; a parent precedes its children
	// VertexMessages[v] lists the messages (indices into the input) on the edge
	// into vertex v, in time order; nil unless KeepMessages.
	VertexMessages [][]int32
	Patterns       []*ConvPattern
	Stats          ConvolutionStats
}

// convEvent is a message as the convolution sees it: a time, a sender and a
// receiver. orig indexes the caller's slice.
type convEvent struct {
	t        int64
	from, to NodeID
	orig     int32
}

type convEngine struct {
	cfg      ConvolutionConfig
	mu, t0   int64
	ev       []convEvent
	bySender [][]int32 // per node: its sends, indices into ev in time order
	sendT    [][]int64 // per node: the times of bySender
	corr     *correlator
	reach    []int32 // per event: 1 + the vertex that last marked it (see derived)
	onPath   []int32 // per event: how many vertices on the current path carry it
	res      *ConvolutionResult
	scratch  []quantum
	zB       float64 // deviations a destination's own spike must reach (significant)
	sums     []float64
	toTimes  map[signalKey][]int64
	minLag   int // lowest lag a spike may have (0, or −skew window)
	held     int // message indices in candidate lists on the current path
}

// Convolve runs the convolution algorithm of paper 001 §5.2 over msgs, whose
// senders and receivers index nodes. The operation of each message is ignored:
// calls, returns and one-way messages are all just messages, in any order. The
// result is a function of its inputs only.
func Convolve(msgs []Message, nodes []string, cfg ConvolutionConfig) (*ConvolutionResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if len(msgs) == 0 {
		return nil, errors.New("convolution: no messages")
	}
	if len(msgs) > math.MaxInt32 {
		return nil, fmt.Errorf("convolution: %d messages, more than 2^31", len(msgs))
	}
	for _, m := range msgs {
		if int(m.Sender) >= len(nodes) || int(m.Receiver) >= len(nodes) || m.Sender < 0 || m.Receiver < 0 {
			return nil, fmt.Errorf("convolution: node index out of range (%d nodes)", len(nodes))
		}
	}
	for _, r := range cfg.Roots {
		if r < 0 || int(r) >= len(nodes) {
			return nil, fmt.Errorf("convolution: root %d out of range (%d nodes)", r, len(nodes))
		}
	}
	e := &convEngine{cfg: cfg, mu: int64(cfg.Quantum)}
	e.prepare(msgs, len(nodes))
	S := int((e.ev[len(e.ev)-1].t-e.t0)/e.mu) + 1
	if S > 1<<30 {
		return nil, fmt.Errorf("convolution: the trace spans %d quanta of %v, more than 2^30; use a larger quantum", S, cfg.Quantum)
	}
	// L < S, so that every lag overlaps the trace (a trace within one quantum
	// has only lag 0, and no spike).
	L := int(max(0, min(int64(cfg.MaxDelay)/e.mu, int64(S-1))))
	e.corr = newCorrelator(S, L, cfg.Method)
	if !e.on(FilterNegative) {
		e.minLag = -L
	} else if cfg.SkewWindow > 0 {
		e.minLag = -int((int64(cfg.SkewWindow) + e.mu - 1) / e.mu)
	}
	e.zB = math.Sqrt2 * math.Erfcinv(math.Erfc(cfg.Significance/math.Sqrt2)/float64(2*L+1))
	e.reach = make([]int32, len(e.ev))
	e.onPath = make([]int32, len(e.ev))
	e.res = &ConvolutionResult{Quantum: cfg.Quantum, Bins: S, MaxLag: L, Start: e.t0, Nodes: nodes}
	roots := cfg.Roots
	if len(roots) == 0 {
		roots = sources(msgs, len(nodes))
	}
	e.res.Roots = roots
	for _, r := range roots {
		e.fromRoot(r)
	}
	e.res.Stats.FFTs, e.res.Stats.Direct = e.corr.ffts, e.corr.directs
	if cfg.KeepMessages {
		for _, w := range e.res.VertexMessages {
			for i, x := range w {
				w[i] = e.ev[x].orig
			}
		}
	}
	e.res.Patterns = e.patterns()
	return e.res, nil
}

// sources returns the default roots (ConvolutionConfig.Roots).
func sources(msgs []Message, n int) []NodeID {
	sendsCall := make([]bool, n)
	getsCall := make([]bool, n)
	sends := make([]bool, n)
	gets := make([]bool, n)
	for _, m := range msgs {
		sends[m.Sender], gets[m.Receiver] = true, true
		if m.Op != OpReturn {
			sendsCall[m.Sender], getsCall[m.Receiver] = true, true
		}
	}
	pick := func(ok func(i int) bool) []NodeID {
		var out []NodeID
		for i := range n {
			if ok(i) {
				out = append(out, NodeID(i))
			}
		}
		return out
	}
	if r := pick(func(i int) bool { return sendsCall[i] && !getsCall[i] }); len(r) > 0 {
		return r
	}
	if r := pick(func(i int) bool { return sends[i] && !gets[i] }); len(r) > 0 {
		return r
	}
	return pick(func(i int) bool { return sends[i] })
}

// prepare sorts the messages by time and indexes them by sender: O(m) memory.
func (e *convEngine) prepare(msgs []Message, nodes int) {
	e.ev = make([]convEvent, len(msgs))
	for i, m := range msgs {
		e.ev[i] = convEvent{m.Time, m.Sender, m.Receiver, int32(i)}
	}
	slices.SortStableFunc(e.ev, func(a, b convEvent) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	e.t0 = e.ev[0].t
	counts := make([]int, nodes)
	for _, m := range e.ev {
		counts[m.from]++
	}
	e.bySender = make([][]int32, nodes)
	e.sendT = make([][]int64, nodes)
	for j, c := range counts {
		e.bySender[j] = make([]int32, 0, c)
		e.sendT[j] = make([]int64, 0, c)
	}
	for i, m := range e.ev {
		e.bySender[m.from] = append(e.bySender[m.from], int32(i))
		e.sendT[m.from] = append(e.sendT[m.from], m.t)
	}
}

func (e *convEngine) on(f ConvolutionFilter) bool { return e.cfg.Disable&f == 0 }

// addVertex appends a vertex and, with KeepMessages, its messages.
func (e *convEngine) addVertex(v ConvVertex, w []int32) int32 {
	id := int32(len(e.res.Vertices))
	e.res.Vertices = append(e.res.Vertices, v)
	if e.cfg.KeepMessages {
		e.res.VertexMessages = append(e.res.VertexMessages, slices.Clone(w))
	}
	return id
}

// fromRoot is FindPathsFromRoot of figure 6: one edge per destination of the
// root's messages, each followed depth-first.
func (e *convEngine) fromRoot(i NodeID) {
	root := e.addVertex(ConvVertex{Node: i, Parent: -1}, nil)
	byDest := map[NodeID][]int32{}
	var dests []NodeID
	for _, x := range e.bySender[i] {
		k := e.ev[x].to
		if _, ok := byDest[k]; !ok {
			dests = append(dests, k)
		}
		byDest[k] = append(byDest[k], x)
	}
	slices.Sort(dests)
	var kids []candidate
	for _, k := range dests {
		w := byDest[k]
		if e.on(FilterLowFrequency) && len(w) < e.cfg.MinMessages {
			e.res.Stats.Insignificant++
			continue
		}
		kids = append(kids, candidate{node: k, w: w})
	}
	e.expand(root, kids, nil)
}

// candidate is a prospective edge out of a vertex: the messages W to one
// destination selected at one spike, the delays from their causes, and which of
// the vertex's incoming messages caused them.
type candidate struct {
	node   NodeID
	w      []int32
	delay  int64
	lag    int
	wlo    int64 // the selection window: delays in [wlo, whi]
	whi    int64
	sigma  float64
	causes []int32 // positions in the vertex's incoming messages
}

// expand turns the surviving candidates of vertex u into child vertices and
// follows each depth-first. Candidates are visited in order of delay: a derived
// edge (§5.3.1) is always longer than the first edge of the chain that explains
// it, so that chain has been explored, and has marked the messages it reaches,
// by the time the derived edge is considered. It sets continued[p] for the
// positions p of u's incoming messages that some kept edge continues (nil at a
// root, whose edges have no causes).
func (e *convEngine) expand(u int32, cands []candidate, continued []bool) {
	slices.SortStableFunc(cands, func(a, b candidate) int {
		switch {
		case a.delay != b.delay:
			return cmpInt64(a.delay, b.delay)
		case len(a.w) != len(b.w):
			return len(b.w) - len(a.w)
		}
		return int(a.node) - int(b.node)
	})
	depth := e.res.Vertices[u].Depth + 1
	var kept []int32
	var keptW, keptCauses [][]int32
	check := e.on(FilterDerived) && e.res.Vertices[u].Parent >= 0
	for i := range cands {
		c := &cands[i]
		if check && e.derived(u, c.node, c.w, c.causes, -1, kept, keptCauses, len(continued)) {
			e.res.Stats.Derived++
			continue
		}
		if len(e.res.Vertices) >= e.cfg.MaxVertices {
			e.res.Stats.Truncated++
			continue
		}
		v := e.addVertex(ConvVertex{Node: c.node, Parent: u, Depth: depth, Delay: time.Duration(c.delay), Lag: c.lag, Sigma: c.sigma, Count: len(c.w)}, c.w)
		for _, p := range c.causes {
			continued[p] = true
		}
		kept = append(kept, v)
		keptW = append(keptW, c.w)
		keptCauses = append(keptCauses, c.causes)
		e.process(v, c.w)
	}
	// Ties in delay (zero-delay forwarding) can put a derived edge before the
	// chain that explains it: check again, now that every sibling's subtree is
	// known, and drop the derived subtrees found late.
	if check {
		for k := len(kept) - 1; k >= 0; k-- {
			if e.derived(u, e.res.Vertices[kept[k]].Node, keptW[k], keptCauses[k], k, kept, keptCauses, len(continued)) {
				e.res.Stats.Derived++
				e.suppress(kept[k])
				kept = slices.Delete(kept, k, k+1)
				keptW = slices.Delete(keptW, k, k+1)
				keptCauses = slices.Delete(keptCauses, k, k+1)
			}
		}
	}
	// Mark the children's messages only now, when all of them are done: a
	// derived edge must be explained by a longer chain, not by a sibling.
	for k, v := range kept {
		for _, x := range keptW[k] {
			e.reach[x] = v + 1
		}
	}
}

// derived reports whether the edge from vertex u to node k, carrying messages w
// caused by the incoming messages at positions causes, is explained by a longer
// chain through a sibling (§5.3.1: A→B→A beside A→B→C→B→A). Either of two kinds
// of evidence suffices, each for DerivedOverlap of the edge:
//
//   - its messages: the same messages were reached, below a sibling, by a
//     vertex at least two edges below u (covered). Exact when selection is;
//   - its causes: the incoming messages that caused them also caused a sibling
//     edge whose subtree comes back to u's node and then sends to k. On dense
//     traffic selection takes stray messages (a window holds several returns to
//     the client, and the one nearest the spike's delay need not be the caused
//     one), so the shortcut's messages differ from the chain's, but its causes
//     do not.
//
// self is the edge's index among the kept siblings, or −1 if it is not kept
// yet; nv is the number of incoming messages of u.
func (e *convEngine) derived(u int32, k NodeID, w, causes []int32, self int, kept []int32, keptCauses [][]int32, nv int) bool {
	if e.covered(w, u) >= e.cfg.DerivedOverlap {
		return true
	}
	if len(causes) == 0 {
		return false
	}
	j := e.res.Vertices[u].Node
	mark := make([]bool, nv)
	any := false
	for s, v := range kept {
		if s == self || !e.returnsTo(v, j, k) {
			continue
		}
		any = true
		for _, p := range keptCauses[s] {
			mark[p] = true
		}
	}
	if !any {
		return false
	}
	n := 0
	for _, p := range causes {
		if mark[p] {
			n++
		}
	}
	return float64(n) >= e.cfg.DerivedOverlap*float64(len(causes))
}

// returnsTo reports whether the subtree below vertex v (v excluded) holds a
// vertex of node k whose parent is a vertex of node j.
func (e *convEngine) returnsTo(v int32, j, k NodeID) bool {
	vs := e.res.Vertices
	for x := int(v) + 1; x < len(vs) && vs[x].Depth > vs[v].Depth; x++ {
		if vs[x].Node == k && !vs[x].Suppressed && vs[vs[x].Parent].Node == j {
			return true
		}
	}
	return false
}

// suppress removes vertex v and its subtree from the output: they stay in the
// graph, which is in depth-first order, but are marked so that no pattern uses
// them.
func (e *convEngine) suppress(v int32) {
	vs := e.res.Vertices
	vs[v].Suppressed = true
	for x := int(v) + 1; x < len(vs) && vs[x].Depth > vs[v].Depth; x++ {
		vs[x].Suppressed = true
	}
}

// covered returns the fraction of w already reached, since vertex u was
// created, by a vertex at least two edges below u.
func (e *convEngine) covered(w []int32, u int32) float64 {
	if len(w) == 0 {
		return 0
	}
	n := 0
	for _, x := range w {
		if e.reach[x] > u+1 {
			n++
		}
	}
	return float64(n) / float64(len(w))
}

// process is ProcessNode of figure 6 for vertex v, reached by the messages w
// (indices into ev, in time order).
func (e *convEngine) process(v int32, w []int32) {
	vx := &e.res.Vertices[v]
	j := vx.Node
	for _, x := range w {
		e.onPath[x]++
	}
	defer func() {
		for _, x := range w {
			e.onPath[x]--
		}
	}()
	if vx.Depth >= e.cfg.MaxDepth {
		e.res.Stats.Truncated++
		e.res.Vertices[v].Ended = len(w)
		return
	}
	wt := make([]int64, len(w))
	for i, x := range w {
		wt[i] = e.ev[x].t
	}
	cands := e.findCaused(wt, j)
	held := len(wt)
	for _, c := range cands {
		held += 2 * len(c.w) // messages and causes
	}
	e.held += held
	e.res.Stats.PeakHeld = max(e.res.Stats.PeakHeld, e.held)
	continued := make([]bool, len(w))
	e.expand(v, cands, continued)
	e.held -= held
	ended := 0
	for _, c := range continued {
		if !c {
			ended++
		}
	}
	e.res.Vertices[v].Ended = ended
}

// findCaused is FindCausedMessages of figure 6: it correlates the incoming
// messages (times vt) with everything node j sends, finds the spikes, and for
// each spike selects j's messages at the spike's delay from some incoming
// message, split by destination. The filters of §5.2.3 that apply to single
// edges run here: negative delays, low frequency and cycles.
func (e *convEngine) findCaused(vt []int64, j NodeID) []candidate {
	zt := e.sendT[j]
	if len(zt) == 0 || len(vt) == 0 {
		return nil
	}
	e.scratch = indicator(e.scratch[:0], vt, e.t0, e.mu)
	c := e.corr.correlate(e.scratch, signalKey{j, allNodes}, zt, e.t0, e.mu)
	e.res.Stats.Correlations++
	L := e.corr.L
	var sum1 float64
	for _, q := range e.scratch {
		sum1 += q.val
	}
	floor := nullSigma(len(vt), len(zt), sum1, e.sumSqrt(j), e.corr.S)
	mean, sigma := SpikeStats(c, e.cfg.SpikeS, floor)
	spikes := FindSpikes(c, L, e.cfg.SpikeN, e.cfg.SpikeS, mean, sigma)
	e.res.Stats.Spikes += len(spikes)
	var out []candidate
	for _, sp := range spikes {
		if sp.Hi < e.minLag {
			e.res.Stats.NegativeSpikes++
			continue
		}
		out = e.selectAt(out, sp, vt, j)
	}
	if e.on(FilterLowFrequency) {
		out = e.significant(out, vt, j)
	}
	return out
}

// significant keeps the candidates whose destination k is caused by the
// incoming messages at the spike's delay, on exact timestamps: with [lo, hi]
// the candidate's selection window, F counts the pairs (incoming message a,
// message z from j to k) with z − a in [lo, hi], and B those with a − z in
// [lo, hi], the mirror image. Causation is one-sided, so F exceeds B by about
// the number of caused messages; coincidence and load (a busy node both
// receives and sends more) raise both alike; and where a message's own cause
// precedes it (a return after its call), B wins. The statistic
//
//	D = (F − B) / √(F + B)
//
// must reach:
//
//   - SpikeS when the combined spike itself stands zB deviations high: its lag
//     is then known to be real, and k is one hypothesis at one known delay;
//   - zB otherwise, where zB is Significance corrected for the 2L+1 lags
//     searched (Bonferroni): the tail probability of Significance Gaussian
//     deviations divided by 2L+1, about 5.7 σ for 4 and L = 1000. A weak spike
//     may be the highest of many chance lags, high by construction.
//
// The tests tried before failed on one trace or another. Counting matched
// messages against chance has no power on dense traffic, where every window
// holds several of j's messages (the multi-tier trace at μ = 100 ms). A
// destination's own correlation in square roots hides a cause in a busy
// quantum (9 calls a quantum reach WS1 there, and one more adds 0.16 to √9);
// in quanta, a return's own call, 10 ms earlier, falls in the same quantum as
// the caused messages, and DB→AP1→DB→… loops of a thousand vertices grew. And
// a plain 4σ count on a weak spike let a chance spike of 23 messages through at
// μ = 5 s on the email trace.
func (e *convEngine) significant(cands []candidate, vt []int64, j NodeID) []candidate {
	out := cands[:0]
	for _, c := range cands {
		f, b := mirrorPairs(vt, e.timesTo(j, c.node), c.wlo, c.whi)
		z := 0.0
		if f+b > 0 {
			z = float64(f-b) / math.Sqrt(float64(f+b))
		}
		need := e.zB
		if c.sigma >= e.zB {
			need = e.cfg.SpikeS
		}
		if z < need {
			e.res.Stats.Insignificant++
			continue
		}
		out = append(out, c)
	}
	return out
}

// mirrorPairs counts the pairs (a, z) of sorted times with z − a in [lo, hi]
// (forward) and with a − z in [lo, hi] (backward). A pair at the same instant
// counts forward only: zero-delay forwarding stamps a message with its cause's
// time, and would otherwise count as much against its edge as for it.
func mirrorPairs(as, zs []int64, lo, hi int64) (fwd, bwd int) {
	blo := max(lo, 1)
	for _, z := range zs {
		// a in [z−hi, z−lo] forward; a in [z+lo, z+hi] backward.
		i, _ := slices.BinarySearch(as, z-hi)
		k, _ := slices.BinarySearch(as, z-lo+1)
		fwd += k - i
		i, _ = slices.BinarySearch(as, z+blo)
		k, _ = slices.BinarySearch(as, z+hi+1)
		bwd += k - i
	}
	return fwd, bwd
}

// timesTo returns the times of j's messages to k, memoised.
func (e *convEngine) timesTo(j, k NodeID) []int64 {
	key := signalKey{j, k}
	if t, ok := e.toTimes[key]; ok {
		return t
	}
	var t []int64
	for i, x := range e.bySender[j] {
		if e.ev[x].to == k {
			t = append(t, e.sendT[j][i])
		}
	}
	if e.toTimes == nil {
		e.toTimes = map[signalKey][]int64{}
	}
	e.toTimes[key] = t
	return t
}

// nullSigma is the standard deviation, from lag to lag, of the correlation of
// two unrelated signals. With x = s1(t) and y = s2(t+d) and their means over
// the quanta removed, C(d) = S·x̄·ȳ + ȳ·Σ(x−x̄) + x̄·Σ(y−ȳ) + Σ(x−x̄)(y−ȳ); the
// first three terms hardly change with the lag, so the spread comes from the
// last, whose variance is S·Var(x)·Var(y). E[x²] is the message rate per
// quantum, so Var(x) = |V|/S − x̄². For sparse signals that is about
// |V|·|T|/S; on dense ones (9 messages a quantum) it is a hundred times smaller
// than that. The spike statistics never go below it, so that two sparse
// signals, whose correlation is mostly zero, do not make every coincidence a
// spike.
func nullSigma(nv, nt int, sum1, sum2 float64, S int) float64 {
	s := float64(S)
	m1, m2 := sum1/s, sum2/s
	return math.Sqrt(s * max(0, float64(nv)/s-m1*m1) * max(0, float64(nt)/s-m2*m2))
}

// selectAt is lines 22-27 of figure 6: the messages of j sent d ± v after some
// incoming message, grouped by destination. The window of delays is
// [min((Lo−1)μ, dμ−v), max((Hi+1)μ, dμ+v)] for a spike at lag d whose region
// spans lags Lo..Hi: a message in quantum b+d after one in quantum b is between
// (d−1)μ and (d+1)μ later. With the negative-delay filter, a message is never
// ascribed to a later one (beyond the skew window).
//
// Selection is a matching: per destination, each incoming message causes at most
// one message at one spike, and each selected message is ascribed to the
// unmatched incoming message whose delay is closest to the spike's (messages in
// time order). Without it, a message that merely falls in some window is taken
// too; at coarse quanta such strays come from other paths through the same
// nodes, and their real continuations then make false paths significant (at
// μ = 30 s on the email trace, a 188-instance shortcut hub→exch1 beside
// hub→exch2→exch1). A node that sends two messages to one destination at the
// same delay from one cause (a fan-out) is counted once.
//
// An edge whose messages mostly lie on the path already is a cycle. Under the
// low-frequency filter an edge needs MinMessages messages, and findCaused then
// checks that its destination is significant.
func (e *convEngine) selectAt(out []candidate, sp Spike, vt []int64, j NodeID) []candidate {
	mu, v := e.mu, int64(e.cfg.Tolerance)
	center := int64(sp.Lag) * mu
	lo := min(int64(sp.Lo)*mu-mu+1, center-v)
	hi := max(int64(sp.Hi)*mu+mu-1, center+v)
	if e.on(FilterNegative) {
		lo = max(lo, -int64(e.cfg.SkewWindow))
	}
	if hi < lo {
		return out
	}
	zs, zt := e.bySender[j], e.sendT[j]
	// Pass 1: the window of incoming messages of every message of j, by
	// destination.
	type hit struct{ zi, p, q int32 } // incoming positions [p, q)
	groups := map[NodeID][]hit{}
	var order []NodeID
	p, q := 0, 0
	for zi, tz := range zt {
		for p < len(vt) && vt[p] < tz-hi {
			p++
		}
		if p == len(vt) {
			break
		}
		q = max(q, p)
		for q < len(vt) && vt[q] <= tz-lo {
			q++
		}
		if q == p {
			continue
		}
		k := e.ev[zs[zi]].to
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], hit{int32(zi), int32(p), int32(q)})
	}
	slices.Sort(order)
	free := newFreeList(len(vt))
	for _, k := range order {
		hits := groups[k]
		if e.on(FilterLowFrequency) && len(hits) < max(1, e.cfg.MinMessages) {
			e.res.Stats.Insignificant++
			continue
		}
		// Pass 2: match.
		free.reset()
		var c candidate
		deltas := make([]int64, 0, len(hits))
		for _, h := range hits {
			tz := zt[h.zi]
			a := free.nearest(vt, int(h.p), int(h.q), tz-center)
			if a < 0 {
				continue
			}
			free.take(a)
			c.w = append(c.w, zs[h.zi])
			c.causes = append(c.causes, int32(a))
			deltas = append(deltas, tz-vt[a])
		}
		n := len(c.w)
		if n == 0 || (e.on(FilterLowFrequency) && n < e.cfg.MinMessages) {
			e.res.Stats.Insignificant++
			continue
		}
		if e.on(FilterCycles) {
			again := 0
			for _, x := range c.w {
				if e.onPath[x] > 0 {
					again++
				}
			}
			if again > 0 && float64(again) >= e.cfg.CycleOverlap*float64(n) {
				e.res.Stats.Cycles++
				continue
			}
		}
		c.node, c.delay, c.lag, c.sigma, c.wlo, c.whi = k, medianInt64(deltas), sp.Lag, sp.Sigmas, lo, hi
		out = append(out, c)
	}
	return out
}

// freeList finds, among positions 0..n-1 not yet taken, the nearest to a target
// inside a range, in near-constant time: two union-find skip lists, one to the
// next free position at or after i, one to the previous at or before.
type freeList struct {
	next, prev []int32 // next[i] = i when free; indices shifted by one in prev
}

func newFreeList(n int) *freeList {
	return &freeList{next: make([]int32, n+1), prev: make([]int32, n+1)}
}

func (f *freeList) reset() {
	for i := range f.next {
		f.next[i] = int32(i)
		f.prev[i] = int32(i)
	}
}

// findNext returns the first free position ≥ i (n if none).
func (f *freeList) findNext(i int) int {
	r := i
	for int(f.next[r]) != r {
		r = int(f.next[r])
	}
	for int(f.next[i]) != r {
		f.next[i], i = int32(r), int(f.next[i])
	}
	return r
}

// findPrev returns the last free position ≤ i (−1 if none).
func (f *freeList) findPrev(i int) int {
	r := i + 1
	for int(f.prev[r]) != r {
		r = int(f.prev[r])
	}
	for x := i + 1; int(f.prev[x]) != r; {
		f.prev[x], x = int32(r), int(f.prev[x])
	}
	return r - 1
}

func (f *freeList) take(i int) {
	f.next[i] = int32(i + 1)
	f.prev[i+1] = int32(i)
}

// nearest returns the free position in [p, q) whose time is closest to target
// (the earlier on a tie), or −1.
func (f *freeList) nearest(ts []int64, p, q int, target int64) int {
	i, _ := slices.BinarySearch(ts[p:q], target)
	i += p
	best := -1
	if n := f.findNext(i); n < q {
		best = n
	}
	if pr := f.findPrev(i - 1); pr >= p && (best < 0 || target-ts[pr] <= ts[best]-target) {
		best = pr
	}
	return best
}

// sumSqrt returns Σ s2 for node j's sends, memoised.
func (e *convEngine) sumSqrt(j NodeID) float64 {
	if e.sums == nil {
		e.sums = make([]float64, len(e.bySender))
		for i := range e.sums {
			e.sums[i] = -1
		}
	}
	if e.sums[j] < 0 {
		var s float64
		for _, q := range indicator(nil, e.sendT[j], e.t0, e.mu) {
			s += q.val
		}
		e.sums[j] = s
	}
	return e.sums[j]
}

// OneWayMessage is a message given by node names, for callers that do not hold
// a Trace, such as the perfmodel exporter with PRODUCER/CONSUMER spans.
type OneWayMessage struct {
	Time     int64 // nanoseconds since the Unix epoch
	From, To string
}

// ConvolveOneWay interns the names of msgs and runs Convolve. Patterns and
// result name nodes as the messages did; ConvolutionConfig.Roots, if set,
// index the order in which names first appear in msgs.
func ConvolveOneWay(msgs []OneWayMessage, cfg ConvolutionConfig) (*ConvolutionResult, error) {
	index := map[string]NodeID{}
	var nodes []string
	id := func(name string) NodeID {
		n, ok := index[name]
		if !ok {
			n = NodeID(len(nodes))
			nodes = append(nodes, name)
			index[name] = n
		}
		return n
	}
	ms := make([]Message, len(msgs))
	for i, m := range msgs {
		ms[i] = Message{Time: m.Time, Sender: id(m.From), Receiver: id(m.To), Op: OpMessage}
	}
	return Convolve(ms, nodes, cfg)
}
