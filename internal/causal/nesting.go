package causal

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tierscope/tierscope/internal/stats"
)

// NestingConfig holds the parameters of the nesting algorithm (paper 001 §5.1).
type NestingConfig struct {
	// SkewWindow loosens the timestamp comparisons that establish a nesting
	// (§7.5.6): a call B→C [t2,t3] may nest in X→B [t1,t4] when t1 ≤ t2+w and
	// t4 ≥ t3−w. Zero requires strict containment.
	SkewWindow time.Duration
	// Bins index each scoreboard histogram by the nesting delay t2−t1 in
	// nanoseconds. The paper uses log base 1.05 with 340 bins from 1 ms, which puts
	// every delay under 1 ms in one bin; the default adds 142 bins below 1 ms, down
	// to 0.98 µs, so that sub-millisecond tiers are told apart while every edge
	// above 1 ms stays the paper's. Negative delays, which only clock skew produces,
	// get mirrored bins of their own, so that a skewed nesting is not lumped with
	// every short one in bin 0.
	Bins stats.LogBins
	// SmoothSigma is the standard deviation, in bins, of the Gaussian that the
	// scoreboard histograms are convolved with after scoring (§5.1.1.2). Zero
	// disables smoothing. It widens peaks so that skewed delays still hit them.
	SmoothSigma float64
	// The child penalties of §5.1.1.3: a candidate parent's score is multiplied by
	// (1+c)^−p, where c counts the children already assigned to it that overlap the
	// child in time (OverlapPenalty, x), that call the same node (SameChildPenalty,
	// y), or all of them (GenericPenalty, z). The paper's defaults are x=2, y=z=0.
	OverlapPenalty, SameChildPenalty, GenericPenalty float64
	// UsePathIDs restricts candidate parents to those carrying the child's
	// ground-truth path id: the paper's "cheat" mode (§7.5.1), which yields the
	// true paths against which inference is scored.
	UsePathIDs bool
	// Order is the order in which children choose their parents. Because the
	// penalties count the children already assigned, it matters; figure 4 leaves it
	// open ("for each child in call pairs").
	Order NestingOrder
}

// NestingOrder is the order in which FindNestedPairs visits children.
type NestingOrder uint8

const (
	// OrderByCertainty visits children by decreasing share of their best raw
	// score among their candidates, ties in call order. Unambiguous nestings are
	// settled first, so the penalties of an ambiguous child see the children its
	// candidates really have: a parent whose own later child is certain is not
	// free to take a stranger's child first.
	OrderByCertainty NestingOrder = iota
	// OrderByCall visits children by call time, the literal reading of figure 4.
	OrderByCall
)

// DefaultNestingConfig returns the paper's settings: no skew window, no smoothing,
// 340 bins of log base 1.05 from 1 ms, and penalties x=2, y=z=0; children are
// visited by certainty. To the paper's bins it adds ScoreboardBinsBelow1ms below
// 1 ms.
func DefaultNestingConfig() NestingConfig {
	return NestingConfig{
		Bins:           stats.DurationBins(float64(time.Millisecond)),
		OverlapPenalty: 2,
	}
}

// ScoreboardBinsBelow1ms is the number of scoreboard bins of the default layout
// (stats.DurationBins) under 1 ms: 1.05^−142 ms ≈ 0.98 µs is its floor; finer
// delays are below what message timestamps resolve in practice. The edges from
// 1 ms up are the paper's, so only candidates nested within 1 ms of their
// parent's call, which the paper scores as one bin, are scored apart.
const ScoreboardBinsBelow1ms = stats.BinsBelowMs

// Validate reports settings the algorithm cannot run with.
func (c NestingConfig) Validate() error {
	if err := c.Bins.Validate(); err != nil {
		return fmt.Errorf("nesting: %w", err)
	}
	if c.Bins.Count > maxBins {
		return fmt.Errorf("nesting: at most %d bins, got %d", maxBins, c.Bins.Count)
	}
	if c.Order != OrderByCertainty && c.Order != OrderByCall {
		return fmt.Errorf("nesting: unknown order %d", c.Order)
	}
	if c.SkewWindow < 0 {
		return fmt.Errorf("nesting: skew window must be ≥ 0, got %v", c.SkewWindow)
	}
	if !(c.SmoothSigma >= 0) || math.IsInf(c.SmoothSigma, 0) {
		return fmt.Errorf("nesting: smoothing sigma must be a finite number ≥ 0, got %v", c.SmoothSigma)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"overlap", c.OverlapPenalty}, {"same-child", c.SameChildPenalty}, {"generic-child", c.GenericPenalty}} {
		if !(p.v >= 0) || math.IsInf(p.v, 0) {
			return fmt.Errorf("nesting: %s penalty must be a finite number ≥ 0, got %v", p.name, p.v)
		}
	}
	return nil
}

// Nesting is the outcome of the nesting algorithm over a set of call pairs: the
// chosen causal parent of every pair, and the candidate statistics.
type Nesting struct {
	Pairs []CallPair
	// Parent[i] is the index of the pair that pair i is nested in, or -1 when
	// pair i starts a causal path.
	Parent []int32
	// Confidence[i] is the chosen parent's share of the penalised scores of all of
	// pair i's candidates: 1 when there was only one candidate, 0 for a root.
	Confidence []float32
	// Nestings is the number of (child, candidate parent) relations considered,
	// and Children the number of pairs that had at least one candidate; their
	// ratio is the mean per-node parallelism of §5.1.2 and table 1.
	Nestings, Children int

	firstChild, lastChild, nextSibling []int32 // children in call-time order
}

// MeanParallelism is the mean number of candidate parents per pair that had any.
func (n *Nesting) MeanParallelism() float64 {
	if n.Children == 0 {
		return 0
	}
	return float64(n.Nestings) / float64(n.Children)
}

// ChildrenOf appends the children of pair i, in order of their calls, to dst.
func (n *Nesting) ChildrenOf(i int32, dst []int32) []int32 {
	for c := n.firstChild[i]; c >= 0; c = n.nextSibling[c] {
		dst = append(dst, c)
	}
	return dst
}

// maxBins keeps a signed bin index within the uint16 that each candidate stores.
const maxBins = 1 << 15

// triple is a scoreboard key: a call A→B with a nested call B→C.
type triple struct{ a, b, c NodeID }

// Nest runs steps 2 and 3 of the nesting algorithm (figure 4, ScoreNestings and
// FindNestedPairs) over pairs from FindCallPairs. Candidate parents are collected
// per node by a sweep over calls in time order, which is equivalent to the paper's
// look-up in T_opencalls at each return but also admits the skew window's parents
// that returned slightly before the child.
func Nest(pairs []CallPair, cfg NestingConfig) (*Nesting, error) {
	return NestInCallOrder(pairs, nil, cfg)
}

// NestInCallOrder is Nest for pairs whose order by call time is known, as
// CallPairer.CallOrder gives it, which saves sorting them. An order that is not a
// permutation of the pairs sorted by call time is ignored (the pairs are sorted),
// so the result is always Nest's.
func NestInCallOrder(pairs []CallPair, callOrder []int32, cfg NestingConfig) (*Nesting, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(pairs) > math.MaxInt32 {
		return nil, fmt.Errorf("nesting: %d call pairs exceed the supported %d", len(pairs), math.MaxInt32)
	}
	n := &Nesting{Pairs: pairs}
	byCall, times := inCallOrder(pairs, callOrder, cfg.UsePathIDs)
	if byCall == nil {
		byCall = orderByCall(pairs)
		times = timesInCallOrder(pairs, byCall, cfg.UsePathIDs)
	}
	cands, candStart := collectCandidates(len(pairs), byCall, times, int64(cfg.SkewWindow))
	for i := range pairs {
		if k := candStart[i+1] - candStart[i]; k > 0 {
			n.Children++
			n.Nestings += int(k)
		}
	}
	board := scoreNestings(pairs, cands, candStart, cfg)
	if cfg.SmoothSigma > 0 {
		board.smooth(cfg.SmoothSigma)
	}
	// Only children with candidates choose; the rest would only be skipped.
	order := make([]int32, 0, n.Children)
	for _, c := range byCall {
		if candStart[c+1] > candStart[c] {
			order = append(order, c)
		}
	}
	if cfg.Order == OrderByCertainty {
		order = board.certaintyOrder(order, candStart)
	}
	n.findNestedPairs(order, cands, candStart, board, cfg)
	return n, nil
}

// orderByCall returns pair indices sorted by call time (then return time, then
// index), the order in which children are considered. A radix sort on the call
// time, stable so that ties stay in index order, does most of it; runs of equal
// call times, rare at nanosecond resolution, are then ordered by return time.
func orderByCall(pairs []CallPair) []int32 {
	order := make([]int32, len(pairs))
	if len(pairs) == 0 {
		return order
	}
	first := pairs[0].Call
	for i := range pairs {
		first = min(first, pairs[i].Call)
	}
	items := make([]keyed, len(pairs))
	for i := range pairs {
		items[i] = keyed{uint64(pairs[i].Call) - uint64(first), int32(i)}
	}
	sorted := radixSort(items, make([]keyed, len(items)))
	for i, it := range sorted {
		order[i] = it.idx
	}
	// The keys, not pairs[order[k]], which would cost a cache miss each.
	sortEqualCalls(pairs, order, func(k int) int64 { return int64(sorted[k].key) })
	return order
}

// inCallOrder returns order as orderByCall would, with what the candidate sweep
// reads of the pairs in that order, or nil if order is not a permutation of the
// pairs sorted by call time. Runs of equal call times are put in orderByCall's
// order, by return time and then index. The check reads the times gathered for
// the sweep, so it costs no pass of its own over the pairs.
func inCallOrder(pairs []CallPair, order []int32, withPath bool) ([]int32, *callTimes) {
	if order == nil || len(order) != len(pairs) {
		return nil, nil
	}
	for _, i := range order {
		if i < 0 || int(i) >= len(pairs) {
			return nil, nil
		}
	}
	t := timesInCallOrder(pairs, order, withPath)
	seen := make([]uint64, (len(pairs)+63)/64)
	ties := false
	for k, i := range order {
		if seen[i/64]&(1<<(i%64)) != 0 || k > 0 && t.call[k] < t.call[k-1] {
			return nil, nil
		}
		seen[i/64] |= 1 << (i % 64)
		ties = ties || k > 0 && t.call[k] == t.call[k-1]
	}
	if !ties {
		return order, t
	}
	byCall := slices.Clone(order)
	sortEqualCalls(pairs, byCall, func(k int) int64 { return t.call[k] })
	for k, i := range byCall {
		if i != order[k] {
			t.set(k, &pairs[i])
		}
	}
	return byCall, t
}

// sortEqualCalls orders each run of equal call times in order (call(k) is the
// time at position k) by return time, then index.
func sortEqualCalls(pairs []CallPair, order []int32, call func(k int) int64) {
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && call(j) == call(i) {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(order[i:j], func(a, b int32) int {
				if c := cmpInt64(pairs[a].Return, pairs[b].Return); c != 0 {
					return c
				}
				return int(a - b)
			})
		}
		i = j
	}
}

func cmpInt64(a, b int64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// collectCandidates finds, for every pair B→C [t2,t3], the pairs X→B [t1,t4] with
// t1 ≤ t2+w and t4 ≥ t3−w. It returns them in CSR form: the candidates of pair i
// are cands[start[i]:start[i+1]], sorted by call time so that ties go to the
// earliest parent. Per node, one sweep keeps the calls into the node that are still
// able to contain a later child; the cost is O(pairs × mean parallelism). Nodes
// are independent, so they are swept in parallel, each range of nodes into lists
// of its own that are then gathered by child.
func collectCandidates(numPairs int, byCall []int32, t *callTimes, w int64) (cands []int32, start []uint32) {
	numNodes := t.numNodes
	in, out := bucketByNode(t, numNodes)
	// Each worker sweeps a contiguous range of nodes of about equal work (the
	// calls into and out of them) and lists, per child that has candidates, the
	// child, its count and its candidates in order. Each child is in one list,
	// so the result does not depend on the lists' order.
	cum := make([]int, numNodes+1)
	for b := range numNodes {
		if len(in.of(b)) > 0 { // with no calls into it, no call out of it has a parent
			cum[b+1] = len(in.of(b)) + len(out.of(b))
		}
		cum[b+1] += cum[b]
	}
	var (
		mu    sync.Mutex
		found []*sweepOut
	)
	parallel(cum[numNodes], 1<<16, func(lo, hi int) {
		o := &sweepOut{}
		var active []int32
		for b := range numNodes {
			// A node belongs to the range that holds the start of its work; one
			// without work has nothing to sweep.
			if cum[b] >= lo && cum[b] < hi && cum[b+1] > cum[b] {
				active = sweepNode(t, in.of(b), out.of(b), w, active, o)
			}
		}
		for k, child := range o.children { // positions to pair indices
			o.children[k] = byCall[child]
		}
		for k, p := range o.parents {
			o.parents[k] = byCall[p]
		}
		mu.Lock()
		found = append(found, o)
		mu.Unlock()
	})
	start = make([]uint32, numPairs+1)
	total := 0
	for _, o := range found {
		for k, child := range o.children {
			start[child+1] = o.counts[k]
		}
		total += len(o.parents)
	}
	for i := range numPairs {
		start[i+1] += start[i]
	}
	cands = make([]int32, total)
	parallel(len(found), 1, func(lo, hi int) {
		for _, o := range found[lo:hi] {
			at := 0
			for k, child := range o.children {
				n := int(o.counts[k])
				copy(cands[start[child]:], o.parents[at:at+n])
				at += n
			}
		}
	})
	return cands, start
}

// callTimes holds, at each position of the call order, what the sweeps read of
// the pair there, copied so that they read it in sequence rather than from the
// pairs in the order their returns came.
type callTimes struct {
	call, ret      []int64
	caller, callee []NodeID
	path           []uint32 // only to keep to a path (UsePathIDs)
	numNodes       int      // 1 + the largest node id
}

func timesInCallOrder(pairs []CallPair, byCall []int32, withPath bool) *callTimes {
	n := len(byCall)
	t := &callTimes{call: make([]int64, n), ret: make([]int64, n), caller: make([]NodeID, n), callee: make([]NodeID, n)}
	if withPath {
		t.path = make([]uint32, n)
	}
	var mu sync.Mutex
	parallel(n, 1<<16, func(lo, hi int) {
		nodes := 0
		for k := lo; k < hi; k++ {
			p := &pairs[byCall[k]]
			t.set(k, p)
			nodes = max(nodes, int(p.Caller)+1, int(p.Callee)+1)
		}
		mu.Lock()
		t.numNodes = max(t.numNodes, nodes)
		mu.Unlock()
	})
	return t
}

func (t *callTimes) set(k int, p *CallPair) {
	t.call[k], t.ret[k], t.caller[k], t.callee[k] = p.Call, p.Return, p.Caller, p.Callee
	if t.path != nil {
		t.path[k] = p.PathID
	}
}

// sweepOut is what one worker's sweep found: children with their candidate
// counts, and all their candidates in the same order.
type sweepOut struct {
	children []int32
	counts   []uint32
	parents  []int32
}

// sweepNode collects the candidates of node b's outgoing calls (children) among
// its incoming ones, both given as positions in call order, and lists them, as
// positions, in o.
func sweepNode(t *callTimes, incoming, children []int32, w int64, active []int32, o *sweepOut) []int32 {
	active = active[:0]
	next := 0
	for _, child := range children {
		call, ret := t.call[child], t.ret[child]
		for next < len(incoming) && t.call[incoming[next]] <= call+w {
			active = append(active, incoming[next])
			next++
		}
		// A parent that returned before t2−w cannot contain this child nor
		// any later one, whose returns are all at or after t2.
		kept := active[:0]
		for _, p := range active {
			if t.ret[p] >= call-w {
				kept = append(kept, p)
			}
		}
		active = kept
		before := len(o.parents)
		for _, p := range active {
			if p == child || t.ret[p] < ret-w || (t.path != nil && t.path[p] != t.path[child]) {
				continue
			}
			o.parents = append(o.parents, p)
		}
		if n := len(o.parents) - before; n > 0 {
			o.children = append(o.children, child)
			o.counts = append(o.counts, uint32(n))
		}
	}
	return active
}

// nodeLists holds positions in call order grouped by node, in CSR form.
type nodeLists struct {
	start []int
	list  []int32
}

func (l nodeLists) of(b int) []int32 { return l.list[l.start[b]:l.start[b+1]] }

// bucketByNode groups the positions of the call order by callee and by caller
// with counting sorts; each group stays in call order.
func bucketByNode(t *callTimes, numNodes int) (in, out nodeLists) {
	in.start, out.start = make([]int, numNodes+1), make([]int, numNodes+1)
	for k := range t.call {
		in.start[t.callee[k]+1]++
		out.start[t.caller[k]+1]++
	}
	for b := range numNodes {
		in.start[b+1] += in.start[b]
		out.start[b+1] += out.start[b]
	}
	in.list, out.list = make([]int32, len(t.call)), make([]int32, len(t.call))
	inPos, outPos := slices.Clone(in.start[:numNodes]), slices.Clone(out.start[:numNodes])
	for k := range t.call {
		in.list[inPos[t.callee[k]]] = int32(k)
		inPos[t.callee[k]]++
		out.list[outPos[t.caller[k]]] = int32(k)
		outPos[t.caller[k]]++
	}
	return in, out
}

// scoreboard holds one histogram per (A,B,C) triple over the nesting delay t2−t1
// (§5.1.1.2). The bin and histogram of every (child, candidate) are remembered so
// that FindNestedPairs reads them without recomputing logarithms or hashing.
type scoreboard struct {
	index    map[triple]int32
	hists    [][]float64
	candHist []int32
	candBin  []uint16
}

// scoreNestings adds 1/|parents| to the bin of every candidate nesting, the
// procedure ScoreNestings of figure 4. The bins, a logarithm each, are found in
// parallel; the weights are then added in the order of the children, as one
// goroutine would, so the sums are the same to the last bit.
func scoreNestings(pairs []CallPair, cands []int32, start []uint32, cfg NestingConfig) *scoreboard {
	sb := &scoreboard{
		index:    make(map[triple]int32),
		candHist: make([]int32, len(cands)),
		candBin:  make([]uint16, len(cands)),
	}
	// The parallel pass also notes each candidate's caller in candHist, which the
	// sequential one then reads in order and replaces by the histogram.
	bins := stats.NewLogIndexer(cfg.Bins)
	parallel(len(pairs), 1<<14, func(lo, hi int) {
		for child := lo; child < hi; child++ {
			call := pairs[child].Call
			for k := start[child]; k < start[child+1]; k++ {
				p := &pairs[cands[k]]
				sb.candBin[k] = uint16(indexedSignedBin(bins, call-p.Call))
				sb.candHist[k] = int32(p.Caller)
			}
		}
	})
	// Traces have few nodes: then a dense table finds a triple's histogram without
	// hashing. The map serves traces with many.
	numNodes := 0
	for i := range pairs {
		numNodes = max(numNodes, int(pairs[i].Caller)+1, int(pairs[i].Callee)+1)
	}
	var dense []int32
	if numNodes <= 64 {
		dense = make([]int32, numNodes*numNodes*numNodes)
	}
	width := 2*cfg.Bins.Count - 1
	for child := range pairs {
		lo, hi := start[child], start[child+1]
		if lo == hi {
			continue
		}
		c := &pairs[child]
		weight := 1 / float64(hi-lo)
		for k := lo; k < hi; k++ {
			a := NodeID(sb.candHist[k])
			var h int32
			if dense != nil {
				slot := &dense[(int(a)*numNodes+int(c.Caller))*numNodes+int(c.Callee)]
				if *slot == 0 {
					*slot = sb.newHist(triple{a, c.Caller, c.Callee}, width) + 1
				}
				h = *slot - 1
			} else {
				var ok bool
				if h, ok = sb.index[triple{a, c.Caller, c.Callee}]; !ok {
					h = sb.newHist(triple{a, c.Caller, c.Callee}, width)
				}
			}
			sb.hists[h][sb.candBin[k]] += weight
			sb.candHist[k] = h
		}
	}
	return sb
}

func (sb *scoreboard) newHist(key triple, width int) int32 {
	h := int32(len(sb.hists))
	sb.index[key] = h
	sb.hists = append(sb.hists, make([]float64, width))
	return h
}

// indexedSignedBin places a nesting delay on a symmetric log axis, its bins
// found by a LogIndexer: bin Count−1 holds |delay| < Min, higher bins positive
// delays and lower bins negative ones, so that neighbouring bins hold
// neighbouring delays and smoothing can cross zero.
func indexedSignedBin(x *stats.LogIndexer, delay int64) int {
	count := x.Bins().Count
	if delay < 0 {
		return count - 1 - x.Index(-float64(delay))
	}
	return count - 1 + x.Index(float64(delay))
}

// smooth convolves every histogram with a Gaussian of the given width in bins,
// truncated at 3σ and normalised so that the total weight is preserved.
func (sb *scoreboard) smooth(sigma float64) {
	radius := int(math.Ceil(3 * sigma))
	kernel := make([]float64, 2*radius+1)
	var total float64
	for i := range kernel {
		d := float64(i - radius)
		kernel[i] = math.Exp(-d * d / (2 * sigma * sigma))
		total += kernel[i]
	}
	for i := range kernel {
		kernel[i] /= total
	}
	var buf []float64
	for _, h := range sb.hists {
		buf = append(buf[:0], h...)
		for i := range h {
			var s float64
			for j, kv := range kernel {
				if src := i + j - radius; src >= 0 && src < len(buf) {
					s += kv * buf[src]
				}
			}
			h[i] = s
		}
	}
}

// penaltyFactor returns (1+c)^−p from a small table for the common small counts.
type penaltyFactor struct {
	p     float64
	table [16]float64
}

func newPenaltyFactor(p float64) *penaltyFactor {
	f := &penaltyFactor{p: p}
	for c := range f.table {
		f.table[c] = math.Pow(1+float64(c), -p)
	}
	return f
}

func (f *penaltyFactor) of(c int) float64 {
	if f.p == 0 {
		return 1
	}
	if c < len(f.table) {
		return f.table[c]
	}
	return math.Pow(1+float64(c), -f.p)
}

// findNestedPairs chooses one parent per child, the procedure FindNestedPairs of
// figure 4. Children are taken in the given order (by call or by certainty), so the
// penalties count the children assigned to a parent before this one, and the
// parent with the highest penalised
// score wins; among equal scores the earliest candidate wins (§5.1.1.3). A
// candidate that would close a cycle (possible with a skew window, or with equal
// timestamps) is skipped. Unlike figure 4, whose maxscore starts at 0, a child with
// candidates always gets one: every candidate's own nesting put weight in its bin.
func (n *Nesting) findNestedPairs(order []int32, cands []int32, start []uint32, sb *scoreboard, cfg NestingConfig) {
	pairs := n.Pairs
	n.Parent = make([]int32, len(pairs))
	n.Confidence = make([]float32, len(pairs))
	n.firstChild = make([]int32, len(pairs))
	n.lastChild = make([]int32, len(pairs))
	n.nextSibling = make([]int32, len(pairs))
	parallel(len(pairs), 1<<16, func(lo, hi int) { // fresh pages: their faults are most of the cost
		for i := lo; i < hi; i++ {
			n.Parent[i], n.firstChild[i], n.lastChild[i], n.nextSibling[i] = -1, -1, -1, -1
		}
	})
	// Children choose in an order unrelated to memory, so what each reads of its
	// own (its call, its candidates and their raw scores) is gathered first into
	// arrays in that order, in parallel, where the cache misses overlap; the
	// choices, which depend on one another, then read those arrays in sequence.
	g := gatherChoices(order, pairs, cands, start, sb)
	overlap := newPenaltyFactor(cfg.OverlapPenalty)
	same := newPenaltyFactor(cfg.SameChildPenalty)
	generic := newPenaltyFactor(cfg.GenericPenalty)
	for pos, child := range order {
		lo, hi := g.start[pos], g.start[pos+1]
		if lo == hi {
			continue
		}
		if hi-lo == 1 {
			// One candidate: its penalties cannot change the choice, and the
			// confidence is 1 either way (score/score, or 1/1 for a score of 0).
			if p := g.cands[lo]; !n.isAncestorOrSelf(child, p) {
				n.Parent[child], n.Confidence[child] = p, 1
				n.insertChild(p, child)
			}
			continue
		}
		c := &g.calls[pos]
		best, bestScore, sum := int32(-1), math.Inf(-1), 0.0
		for k := lo; k < hi; k++ {
			p := g.cands[k]
			if n.isAncestorOrSelf(child, p) {
				continue
			}
			var nOverlap, nSame, nAny int
			for s := n.firstChild[p]; s >= 0; s = n.nextSibling[s] {
				sp := &pairs[s]
				nAny++
				if sp.Callee == c.Callee {
					nSame++
				}
				if sp.Call < c.Return && c.Call < sp.Return {
					nOverlap++
				}
			}
			score := g.raw[k] * overlap.of(nOverlap) * same.of(nSame) * generic.of(nAny)
			sum += score
			if score > bestScore {
				best, bestScore = p, score
			}
		}
		if best < 0 {
			continue
		}
		n.Parent[child] = best
		if sum > 0 {
			n.Confidence[child] = float32(bestScore / sum)
		} else {
			n.Confidence[child] = float32(1 / float64(hi-lo))
		}
		n.insertChild(best, child)
	}
}

// choices is what each child in a visiting order reads of its own: its call and,
// at start[pos]:start[pos+1], its candidates and their raw scores.
type choices struct {
	calls []CallPair
	start []uint32
	cands []int32
	raw   []float64
}

func gatherChoices(order []int32, pairs []CallPair, cands []int32, start []uint32, sb *scoreboard) *choices {
	g := &choices{calls: make([]CallPair, len(order)), start: make([]uint32, len(order)+1)}
	for pos, child := range order {
		g.start[pos+1] = g.start[pos] + start[child+1] - start[child]
	}
	g.cands, g.raw = make([]int32, g.start[len(order)]), make([]float64, g.start[len(order)])
	parallel(len(order), 1<<12, func(lo, hi int) {
		for pos := lo; pos < hi; pos++ {
			child := order[pos]
			g.calls[pos] = pairs[child]
			at := g.start[pos]
			for k := start[child]; k < start[child+1]; k++ {
				g.cands[at] = cands[k]
				g.raw[at] = sb.hists[sb.candHist[k]][sb.candBin[k]]
				at++
			}
		}
	})
	return g
}

// insertChild links child into parent's children, kept in call order.
func (n *Nesting) insertChild(parent, child int32) {
	call := n.Pairs[child].Call
	if last := n.lastChild[parent]; last >= 0 && n.Pairs[last].Call <= call {
		// After every child so far, the common case: no walk along the list.
		n.nextSibling[last], n.lastChild[parent] = child, child
		return
	}
	prev := int32(-1)
	for s := n.firstChild[parent]; s >= 0 && n.Pairs[s].Call <= call; s = n.nextSibling[s] {
		prev = s
	}
	if prev < 0 {
		n.nextSibling[child] = n.firstChild[parent]
		n.firstChild[parent] = child
	} else {
		n.nextSibling[child] = n.nextSibling[prev]
		n.nextSibling[prev] = child
	}
	if n.nextSibling[child] < 0 {
		n.lastChild[parent] = child
	}
}

// certaintyOrder sorts children by decreasing share of their best raw score among
// their candidates, so that unambiguous nestings are settled before ambiguous ones
// are weighed with the penalties. Ties keep call order.
func (sb *scoreboard) certaintyOrder(byCall []int32, start []uint32) []int32 {
	share := make([]float64, len(byCall))
	parallel(len(byCall), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			child := byCall[i]
			share[i] = bestShare(start[child], start[child+1], func(k uint32) float64 {
				return sb.hists[sb.candHist[k]][sb.candBin[k]]
			})
		}
	})
	order := slices.Clone(byCall)
	byDecreasingShare(order, share)
	return order
}

// bestShare is the best of the candidates lo..hi's scores as a share of their sum:
// 1 for a child with a single or an overwhelming candidate, 1/n for an n-way tie.
func bestShare(lo, hi uint32, score func(k uint32) float64) float64 {
	var best, sum float64
	for k := lo; k < hi; k++ {
		v := score(k)
		sum += v
		best = max(best, v)
	}
	if sum == 0 {
		return 0
	}
	return best / sum
}

// byDecreasingShare sorts order by decreasing share, share[i] being order[i]'s;
// ties keep their order, so callers pass order sorted by time. Shares lie in
// [0, 1], and most are 1 (one candidate, or one that dominates): those keep
// their order at the front, and only the rest is sorted, by a stable radix sort
// on the complemented bits of the shares, which for floats ≥ 0 sort as the
// numbers do.
func byDecreasingShare(order []int32, share []float64) {
	for _, v := range share {
		if !(v >= 0 && v <= 1) { // cannot happen; if it did, sort by value all the same
			byShare := make(map[int32]float64, len(order))
			for i, c := range order {
				byShare[c] = share[i]
			}
			slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(byShare[b], byShare[a]) })
			return
		}
	}
	ones := make([]int32, 0, len(order))
	items := make([]keyed, 0, len(order)/4)
	for i, c := range order {
		if share[i] == 1 {
			ones = append(ones, c)
		} else {
			items = append(items, keyed{^math.Float64bits(share[i]), c})
		}
	}
	n := copy(order, ones)
	for _, it := range radixSort(items, make([]keyed, len(items))) {
		order[n] = it.idx
		n++
	}
}

// isAncestorOrSelf reports whether a is p or one of p's assigned ancestors.
func (n *Nesting) isAncestorOrSelf(a, p int32) bool {
	for ; p >= 0; p = n.Parent[p] {
		if p == a {
			return true
		}
	}
	return false
}
