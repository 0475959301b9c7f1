package causal

import (
	"fmt"
	"math"
	"slices"
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
	// nanoseconds; the paper uses log base 1.05 with 340 bins from 1 ms. Negative
	// delays, which only clock skew produces, get mirrored bins of their own, so
	// that a skewed nesting is not lumped with every short one in bin 0.
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
// visited by certainty.
func DefaultNestingConfig() NestingConfig {
	return NestingConfig{
		Bins:           stats.LogBins{Base: 1.05, Min: float64(time.Millisecond), Count: 340},
		OverlapPenalty: 2,
	}
}

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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(pairs) > math.MaxInt32 {
		return nil, fmt.Errorf("nesting: %d call pairs exceed the supported %d", len(pairs), math.MaxInt32)
	}
	n := &Nesting{Pairs: pairs}
	byCall := orderByCall(pairs)
	cands, candStart := collectCandidates(pairs, byCall, int64(cfg.SkewWindow), cfg.UsePathIDs)
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
	order := byCall
	if cfg.Order == OrderByCertainty {
		order = board.certaintyOrder(byCall, candStart)
	}
	n.findNestedPairs(order, cands, candStart, board, cfg)
	return n, nil
}

// orderByCall returns pair indices sorted by call time (then return time, then
// index), the order in which children are considered.
func orderByCall(pairs []CallPair) []int32 {
	order := make([]int32, len(pairs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		pa, pb := &pairs[a], &pairs[b]
		switch {
		case pa.Call != pb.Call:
			return cmpInt64(pa.Call, pb.Call)
		case pa.Return != pb.Return:
			return cmpInt64(pa.Return, pb.Return)
		}
		return int(a - b)
	})
	return order
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
// able to contain a later child; the cost is O(pairs × mean parallelism).
func collectCandidates(pairs []CallPair, byCall []int32, w int64, samePath bool) (cands []int32, start []uint32) {
	numNodes := 0
	for i := range pairs {
		numNodes = max(numNodes, int(pairs[i].Caller)+1, int(pairs[i].Callee)+1)
	}
	// Bucket pairs by callee (incoming) and by caller (outgoing), each in call order.
	inStart, in := bucket(byCall, numNodes, func(i int32) NodeID { return pairs[i].Callee })
	outStart, out := bucket(byCall, numNodes, func(i int32) NodeID { return pairs[i].Caller })

	// The sweep runs twice, first counting candidates, so that the CSR array is
	// allocated once at its exact size.
	var active []int32
	sweep := func(visit func(child, parent int32)) {
		for b := 0; b < numNodes; b++ {
			incoming := in[inStart[b]:inStart[b+1]]
			active = active[:0]
			next := 0
			for _, child := range out[outStart[b]:outStart[b+1]] {
				c := &pairs[child]
				for next < len(incoming) && pairs[incoming[next]].Call <= c.Call+w {
					active = append(active, incoming[next])
					next++
				}
				// A parent that returned before t2−w cannot contain this child nor
				// any later one, whose returns are all at or after t2.
				kept := active[:0]
				for _, p := range active {
					if pairs[p].Return >= c.Call-w {
						kept = append(kept, p)
					}
				}
				active = kept
				for _, p := range active {
					pp := &pairs[p]
					if p == child || pp.Return < c.Return-w || (samePath && pp.PathID != c.PathID) {
						continue
					}
					visit(child, p)
				}
			}
		}
	}
	counts := make([]uint32, len(pairs))
	sweep(func(child, _ int32) { counts[child]++ })
	start = make([]uint32, len(pairs)+1)
	for i, k := range counts {
		start[i+1] = start[i] + k
	}
	cands = make([]int32, start[len(pairs)])
	fill := slices.Clone(start[:len(pairs)])
	sweep(func(child, parent int32) {
		cands[fill[child]] = parent
		fill[child]++
	})
	return cands, start
}

// bucket groups indices (already in the wanted order) by key with a counting sort.
func bucket(order []int32, numKeys int, key func(int32) NodeID) (start []int, out []int32) {
	start = make([]int, numKeys+1)
	for _, i := range order {
		start[key(i)+1]++
	}
	for k := 0; k < numKeys; k++ {
		start[k+1] += start[k]
	}
	out = make([]int32, len(order))
	pos := slices.Clone(start[:numKeys])
	for _, i := range order {
		k := key(i)
		out[pos[k]] = i
		pos[k]++
	}
	return start, out
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
// procedure ScoreNestings of figure 4.
func scoreNestings(pairs []CallPair, cands []int32, start []uint32, cfg NestingConfig) *scoreboard {
	sb := &scoreboard{
		index:    make(map[triple]int32),
		candHist: make([]int32, len(cands)),
		candBin:  make([]uint16, len(cands)),
	}
	for child := range pairs {
		lo, hi := start[child], start[child+1]
		if lo == hi {
			continue
		}
		c := &pairs[child]
		weight := 1 / float64(hi-lo)
		for k := lo; k < hi; k++ {
			p := &pairs[cands[k]]
			key := triple{p.Caller, c.Caller, c.Callee}
			h, ok := sb.index[key]
			if !ok {
				h = int32(len(sb.hists))
				sb.index[key] = h
				sb.hists = append(sb.hists, make([]float64, 2*cfg.Bins.Count-1))
			}
			bin := signedBin(cfg.Bins, c.Call-p.Call)
			sb.hists[h][bin] += weight
			sb.candHist[k], sb.candBin[k] = h, uint16(bin)
		}
	}
	return sb
}

// signedBin places a nesting delay on a symmetric log axis: bin Count−1 holds
// |delay| < Min, higher bins positive delays and lower bins negative ones, so that
// neighbouring bins hold neighbouring delays and smoothing can cross zero.
func signedBin(bins stats.LogBins, delay int64) int {
	if delay < 0 {
		return bins.Count - 1 - bins.Index(-float64(delay))
	}
	return bins.Count - 1 + bins.Index(float64(delay))
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
// figure 4. Children are taken in call order, so the penalties count the children
// assigned to a parent before this one, and the parent with the highest penalised
// score wins; among equal scores the earliest candidate wins (§5.1.1.3). A
// candidate that would close a cycle (possible with a skew window, or with equal
// timestamps) is skipped. Unlike figure 4, whose maxscore starts at 0, a child with
// candidates always gets one: every candidate's own nesting put weight in its bin.
func (n *Nesting) findNestedPairs(byCall []int32, cands []int32, start []uint32, sb *scoreboard, cfg NestingConfig) {
	pairs := n.Pairs
	n.Parent = make([]int32, len(pairs))
	n.Confidence = make([]float32, len(pairs))
	n.firstChild = make([]int32, len(pairs))
	n.lastChild = make([]int32, len(pairs))
	n.nextSibling = make([]int32, len(pairs))
	for i := range pairs {
		n.Parent[i], n.firstChild[i], n.lastChild[i], n.nextSibling[i] = -1, -1, -1, -1
	}
	overlap := newPenaltyFactor(cfg.OverlapPenalty)
	same := newPenaltyFactor(cfg.SameChildPenalty)
	generic := newPenaltyFactor(cfg.GenericPenalty)
	for _, child := range byCall {
		lo, hi := start[child], start[child+1]
		if lo == hi {
			continue
		}
		c := &pairs[child]
		best, bestScore, sum := int32(-1), math.Inf(-1), 0.0
		for k := lo; k < hi; k++ {
			p := cands[k]
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
			score := sb.hists[sb.candHist[k]][sb.candBin[k]] * overlap.of(nOverlap) * same.of(nSame) * generic.of(nAny)
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

// insertChild links child into parent's children, kept in call order.
func (n *Nesting) insertChild(parent, child int32) {
	call := n.Pairs[child].Call
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
	share := make([]float64, len(start)-1)
	for _, child := range byCall {
		share[child] = bestShare(start[child], start[child+1], func(k uint32) float64 {
			return sb.hists[sb.candHist[k]][sb.candBin[k]]
		})
	}
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

// byDecreasingShare sorts order by decreasing share; ties keep their order, so
// callers pass order sorted by time.
func byDecreasingShare(order []int32, share []float64) {
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case share[a] > share[b]:
			return -1
		case share[a] < share[b]:
			return 1
		}
		return 0
	})
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

// sortStableBy sorts indices by a key, stably.
func sortStableBy(idx []int32, key func(int32) int64) {
	slices.SortStableFunc(idx, func(a, b int32) int { return cmpInt64(key(a), key(b)) })
}
