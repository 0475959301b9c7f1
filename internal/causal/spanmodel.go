package causal

import (
	"math"
	"slices"
	"sort"

	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/stats"
)

// Delay models of span stitching. Each is a histogram over signed log bins of a
// delay, keyed by who the spans are; a score is the smoothed count at the
// delay's bin per unit of its width (a density, timeUnit), per span of the
// parent's kind, so that frequent and precisely timed relations score high, as
// in the paper's scoreboard (paper 001 §5.1.1).
//
//   - link (caller service → callee service): request delay
//     start(callee) − start(caller) − θ, and response delay
//     end(caller) − end(callee) + θ as a distribution (its share at the
//     delay), θ the fitted clock offset of the two processes;
//   - first (parent service and name → child service and name): offset
//     start(child) − start(parent) of a parent's first child;
//   - next (same key): gap start(child) − end(previous sibling) when the
//     previous sibling has ended (sequential), or start(child) −
//     start(previous sibling) when it is still running (parallel);
//   - per kind of child (service and name), how many outlive their parent.

// modelKind separates the models that share a key space.
type modelKind uint8

const (
	modelRequest modelKind = iota
	modelResponse
	modelFirst
	modelSequential
	modelParallel
	modelTail
	// modelAfter is the start of a child after its parent ended (c.start −
	// p.end): work handed to another thread as the request finishes.
	modelAfter
	// modelConnPrev and modelConnNext place a caller between the requests
	// before and after its callee on the callee's connection (spancaller.go).
	modelConnPrev
	modelConnNext
	// modelOutlive keys, by the child's service and name alone, whether a
	// child outlives its parent (outliveKey).
	modelOutlive
)

type modelKey struct {
	kind       modelKind
	a, b, c, d int32
}

// scoreFloor keeps a delay never seen from scoring zero, so that the posterior
// of a lone candidate is defined and cycles can still be ordered.
const scoreFloor = 1e-7

type delayModels struct {
	// unit is the width, in nanoseconds, in which densities are counted.
	unit  float64
	bins  stats.LogBins
	idx   *stats.LogIndexer // bins, found without a logarithm
	width int
	// packed indexes the keys whose ids fit in 15 bits each (nearly all: a
	// 64-bit key hashes several times faster), index the others.
	packed map[uint64]int32
	index  map[modelKey]int32
	hist   []float32 // width floats per model
	total  []float64
	// sumBin and sumBin2 accumulate the weighted bin index and its square, so
	// that each model's spread gives its kernel width (bandwidth, in bins, 0
	// until computed).
	sumBin, sumBin2 []float64
	bandwidth       []int8
	// peak caches each model's largest smoothed count (0: not yet computed).
	peak []float64
	// lowest and highest are the first and last bins each model was added to:
	// every bin outside them is zero, so sums over bins can skip them exactly.
	lowest, highest []int32
	// outlive counts, per outliveKey, the children seen ending after their
	// parent (per modelAfter local key, starting after it) and all children
	// seen.
	outlive map[modelKey][2]float64
	// outlivePacked indexes into outliveRows the keys that pack (as packed
	// does): a row is found with one lookup, and counted in place.
	outlivePacked map[uint64]int32
	outliveRows   [][2]float64
}

func newDelayModels(bins stats.LogBins) *delayModels {
	return &delayModels{unit: densityUnit, bins: bins, idx: stats.NewLogIndexer(bins), width: 2*bins.Count - 1, packed: make(map[uint64]int32), index: make(map[modelKey]int32),
		outlive: make(map[modelKey][2]float64), outlivePacked: make(map[uint64]int32)}
}

func (m *delayModels) reset() {
	clear(m.packed)
	clear(m.index)
	clear(m.outlive)
	clear(m.outlivePacked)
	m.outliveRows = m.outliveRows[:0]
	m.hist = m.hist[:0]
	m.total = m.total[:0]
	m.sumBin, m.sumBin2, m.bandwidth = m.sumBin[:0], m.sumBin2[:0], m.bandwidth[:0]
	m.peak = m.peak[:0]
	m.lowest, m.highest = m.lowest[:0], m.highest[:0]
}

// pack folds a key into 64 bits when every id fits in 15 bits.
func (k modelKey) pack() (uint64, bool) {
	const limit = 1 << 15
	if uint32(k.a) >= limit || uint32(k.b) >= limit || uint32(k.c) >= limit || uint32(k.d) >= limit {
		return 0, false
	}
	return uint64(k.kind)<<60 | uint64(k.a)<<45 | uint64(k.b)<<30 | uint64(k.c)<<15 | uint64(k.d), true
}

func (m *delayModels) id(k modelKey, create bool) int32 {
	pk, packed := k.pack()
	var h int32
	var ok bool
	if packed {
		h, ok = m.packed[pk]
	} else {
		h, ok = m.index[k]
	}
	if ok {
		return h
	}
	if !create {
		return -1
	}
	h = int32(len(m.total))
	if packed {
		m.packed[pk] = h
	} else {
		m.index[k] = h
	}
	// Rows are reused between rounds: grow, then clear only the new row.
	n := len(m.hist)
	m.hist = slices.Grow(m.hist, m.width)[:n+m.width]
	clear(m.hist[n:])
	m.total = append(m.total, 0)
	m.sumBin, m.sumBin2, m.bandwidth = append(m.sumBin, 0), append(m.sumBin2, 0), append(m.bandwidth, 0)
	m.peak = append(m.peak, 0)
	m.lowest, m.highest = append(m.lowest, int32(m.width)), append(m.highest, -1)
	return h
}

func (m *delayModels) add(k modelKey, delay int64, w float64) {
	h := m.id(k, true)
	b := indexedSignedBin(m.idx, delay)
	m.hist[int(h)*m.width+b] += float32(w)
	m.lowest[h], m.highest[h] = min(m.lowest[h], int32(b)), max(m.highest[h], int32(b))
	m.total[h] += w
	m.sumBin[h] += w * float64(b)
	m.sumBin2[h] += w * float64(b) * float64(b)
	m.bandwidth[h] = 0
	m.peak[h] = 0
}

// maxBandwidth bounds the kernel's half-width in bins (10% bins: a factor 2.6).
const maxBandwidth = 10

// kernelWidth is the half-width in bins of the triangular kernel that smooths
// model h: Silverman's rule, 1.06·σ·n^(−1/5) with σ the spread of the model's
// bins and n its weight, at least 1 bin. A model learned from few spans is
// smoothed more, so that a delay between two observed ones is not taken for
// impossible (a spiky histogram makes every near miss of another candidate
// look certain), and one learned from many keeps its resolution.
func (m *delayModels) kernelWidth(h int32) int {
	if bw := m.bandwidth[h]; bw > 0 {
		return int(bw)
	}
	n := m.total[h]
	bw := 1
	if n > 0 {
		mean := m.sumBin[h] / n
		sd := math.Sqrt(max(m.sumBin2[h]/n-mean*mean, 0))
		bw = int(math.Round(1.06 * sd * math.Pow(n, -0.2)))
		bw = min(max(bw, 1), maxBandwidth)
	}
	m.bandwidth[h] = int8(bw)
	return bw
}

// count is the smoothed density of model k at delay: its bin plus half of
// each neighbour (a delay near a bin edge belongs to both), per unit (about a
// microsecond, timeUnit) of the bin's width. A count per log bin would favour long delays, whose bins are
// wide: a candidate of another request, at a random delay, would score as well
// as the true parent at its precise one.
// The width counts at least res, the resolution of the timestamps the delay
// was read from.
func (m *delayModels) count(k modelKey, delay, res int64) float64 {
	w := m.binWidth(delay)
	if float64(res) <= w {
		return m.rawCount(k, delay) * m.unit / w
	}
	// Coarse timestamps: the delay is known to ±res, so the density is that of
	// every bin the interval covers.
	h := m.id(k, false)
	if h < 0 {
		return 0
	}
	row := m.hist[int(h)*m.width : int(h+1)*m.width]
	lo, hi := indexedSignedBin(m.idx, delay-res), indexedSignedBin(m.idx, delay+res)
	lo, hi = max(lo, int(m.lowest[h])), min(hi, int(m.highest[h]))
	var v float64
	for b := lo; b <= hi; b++ {
		v += float64(row[b])
	}
	return v * m.unit / float64(2*res)
}

// densityUnit is the width in which densities are counted (1 µs) when the
// spans give no scale of their own (timeUnit). Bins keep their own width
// however narrow: microsecond hops are resolved as finely as millisecond ones.
const densityUnit = 1000

func (m *delayModels) binWidth(delay int64) float64 {
	d := float64(delay)
	if d < 0 {
		d = -d
	}
	w := 2 * m.bins.Min
	if d >= m.bins.Min {
		w = d * (1 - 1/m.bins.Base)
	}
	return w
}

// rawCount is the model's weight at the delay's bin, smoothed by a triangular
// kernel of kernelWidth bins and scaled so that one span in the bin counts 2
// (as a bin plus half of each neighbour does at the narrowest width).
func (m *delayModels) rawCount(k modelKey, delay int64) float64 {
	h := m.id(k, false)
	if h < 0 {
		return 0
	}
	return m.rawCountAt(h, indexedSignedBin(m.idx, delay))
}

// rawCountAt is rawCount at bin b of model h.
func (m *delayModels) rawCountAt(h int32, b int) float64 {
	row := m.hist[int(h)*m.width : int(h+1)*m.width]
	bw := m.kernelWidth(h)
	if bw == 1 {
		v := float64(row[b])
		if b > 0 {
			v += 0.5 * float64(row[b-1])
		}
		if b+1 < len(row) {
			v += 0.5 * float64(row[b+1])
		}
		return v
	}
	var v float64
	lo, hi := max(b-bw, 0), min(b+bw, len(row)-1)
	for j := lo; j <= hi; j++ {
		d := j - b
		if d < 0 {
			d = -d
		}
		v += float64(bw+1-d) * float64(row[j])
	}
	// The kernel's weights sum to (bw+1)²; one span counts 2 at its own bin.
	return 2 * v / float64((bw+1)*(bw+1))
}

// share is count over the model's total: the probability of the delay's bin.
func (m *delayModels) share(k modelKey, delay, res int64) float64 {
	h := m.id(k, false)
	if h < 0 || m.total[h] == 0 {
		return 1 / float64(m.width)
	}
	return (m.rawCount(k, delay) + scoreFloor) / (2*m.total[h] + scoreFloor*float64(m.width)) * m.unit / max(m.binWidth(delay), float64(res))
}

// relative is the model's density at the delay (per unit, as share)
// over its largest: a likelihood ratio in (0, 1] against the likeliest delay,
// so that a factor some spans have and others lack does not change the scale
// of their scores. A model with no weight says nothing (1).
func (m *delayModels) relative(k modelKey, delay int64) float64 {
	h := m.id(k, false)
	if h < 0 || m.total[h] == 0 {
		return 1
	}
	if m.peak[h] == 0 {
		for b := range m.width {
			m.peak[h] = max(m.peak[h], m.rawCountAt(h, b)*m.unit/m.binWidth(m.binDelay(b)))
		}
	}
	v := m.rawCount(k, delay) * m.unit / m.binWidth(delay)
	return min((v+relativeFloor)/(m.peak[h]+relativeFloor), 1)
}

// relativeFloor is relative's floor, in densities per unit.
const relativeFloor = 1e-4

// binDelay is a delay inside signed bin b.
func (m *delayModels) binDelay(b int) int64 {
	i := b - (m.bins.Count - 1)
	if i < 0 {
		return -int64(m.bins.Lower(-i))
	}
	return int64(m.bins.Lower(i))
}

func (m *delayModels) addOutlive(k modelKey, outlived bool, w float64) {
	pk, packed := k.pack()
	if !packed {
		v := m.outlive[k]
		countOutlive(&v, outlived, w)
		m.outlive[k] = v
		return
	}
	row, ok := m.outlivePacked[pk]
	if !ok {
		row = int32(len(m.outliveRows))
		m.outlivePacked[pk] = row
		m.outliveRows = append(m.outliveRows, [2]float64{})
	}
	countOutlive(&m.outliveRows[row], outlived, w)
}

func countOutlive(v *[2]float64, outlived bool, w float64) {
	if outlived {
		v[0] += w
	}
	v[1] += w
}

// outliveFactor is the probability that a child of key k does (or does not)
// outlive its parent, with a prior that makes outliving rare until seen.
func (m *delayModels) outliveFactor(k modelKey, outlives bool) float64 {
	var v [2]float64
	if pk, packed := k.pack(); packed {
		if row, ok := m.outlivePacked[pk]; ok {
			v = m.outliveRows[row]
		}
	} else {
		v = m.outlive[k]
	}
	p := (v[0] + 0.01) / (v[1] + 1)
	if outlives {
		return p
	}
	return 1 - p
}

func (s *spanStitcher) linkKey(kind modelKind, p, c int32) modelKey {
	return modelKey{kind: kind, a: s.spans[p].Service, b: s.spans[c].Service, c: int32(s.spans[p].Kind)}
}

// outliveKey keys whether c outlives its parent by c's service and name:
// asynchronous work is the child's nature, whichever span it is given to. A
// key by parent too was learned only from lone candidates, which favoured
// whichever parent happened to be alone (an async span's SERVER span, where a
// few of the handlers between them were dropped, over the handler that
// encloses it everywhere else), and the factor then gave that parent every
// instance, surely.
func (s *spanStitcher) outliveKey(c int32) modelKey {
	cs := &s.spans[c]
	return modelKey{kind: modelOutlive, c: cs.Service, d: cs.Name}
}

func (s *spanStitcher) localKey(kind modelKind, p, c int32) modelKey {
	ps, cs := &s.spans[p], &s.spans[c]
	return modelKey{kind: kind, a: ps.Service, b: ps.Name, c: cs.Service, d: cs.Name}
}

// fit rebuilds the models: from known links with weight 1 and, in round 0,
// from every orphan's candidates with weight 1/N (the scoreboard); in later
// rounds from the assignment, weighted by its confidence.
func (s *spanStitcher) fit(round int) {
	m := s.models
	m.reset()
	s.site.reset()
	s.callers.reset()
	s.fitQueues()
	s.roundStamp++
	spans := s.spans
	n := len(spans)
	if s.perParent == nil {
		population := make(map[[2]int32]int)
		for i := range spans {
			population[s.populationKey(int32(i))]++
		}
		s.perParent = make([]float64, n)
		for i := range spans {
			s.perParent[i] = 1 / float64(population[s.populationKey(int32(i))])
		}
	}
	if s.kids == nil {
		s.kids = make([][]int32, n)
	}
	for i := range s.kids {
		s.kids[i] = s.kids[i][:0]
	}
	for c := range spans {
		p := s.parent[c]
		if p < 0 || (round == 0 && !s.known[c]) {
			continue
		}
		if s.isRemote(p, int32(c)) {
			continue
		}
		s.kids[p] = append(s.kids[p], int32(c))
	}
	for p := range s.kids {
		if len(s.kids[p]) > 1 {
			s.sortByStart(s.kids[p])
		}
	}
	if round > 0 {
		s.fitCounts()
		s.fitSequences()
		s.fitTails()
	}
	for c := range spans {
		ci := int32(c)
		p := s.parent[c]
		if p >= 0 && s.known[c] {
			s.addLink(p, ci, 1, round == 0)
			continue
		}
		if p >= 0 && round > 0 {
			s.addLink(p, ci, float64(s.conf[c]), false)
			continue
		}
		if round > 0 || !spans[c].Orphan || s.known[c] {
			continue
		}
		// The scoreboard spreads each orphan over the candidates it would take:
		// a SERVER span's callers in time when any are.
		lo, hi := s.start[c], s.start[c+1]
		inTime := 0
		if spans[c].Kind == span.KindServer {
			for k := lo; k < hi; k++ {
				if s.inTime(s.cands[k], ci) {
					inTime++
				}
			}
		}
		for k := lo; k < hi; k++ {
			switch {
			case inTime == 0:
				s.addLink(s.cands[k], ci, 1/float64(hi-lo), true)
			case s.inTime(s.cands[k], ci):
				s.addLink(s.cands[k], ci, 1/float64(inTime), true)
			}
		}
	}
}

// populationKey groups the spans that share a parent model: callers by
// service and kind, other spans by service and name.
func (s *spanStitcher) populationKey(p int32) [2]int32 {
	sp := &s.spans[p]
	if sp.Kind.RemoteCaller() {
		return [2]int32{sp.Service, -1 - int32(sp.Kind)}
	}
	return [2]int32{sp.Service, sp.Name}
}

func (s *spanStitcher) isRemote(p, c int32) bool {
	return s.spans[c].Kind.RemoteEntry() && s.spans[p].Kind.RemoteCaller()
}

// addLink adds the link p → c to the models. firstOnly counts every local
// child as a first child: round 0 knows no siblings yet.
func (s *spanStitcher) addLink(p, c int32, w float64, firstOnly bool) {
	m := s.models
	ps, cs := &s.spans[p], &s.spans[c]
	if s.isRemote(p, c) {
		theta := s.offset(p, c).theta
		m.add(s.linkKey(modelRequest, p, c), cs.Start-ps.Start-theta, w)
		if cs.Kind == span.KindServer {
			m.add(s.linkKey(modelResponse, p, c), ps.End-cs.End+theta, w)
			s.addConnection(p, c, theta, w)
		}
		s.addSite(p, c, w)
		// The scoreboard's spread votes would be each callee's own evidence.
		if !firstOnly || s.known[c] {
			s.addCaller(p, c, w)
		}
		return
	}
	after := s.startsAfter(p, c)
	// The scoreboard spreads every orphan over all its candidates: counted
	// there, the late candidates would teach that work starts late.
	if !firstOnly || s.known[c] {
		m.addOutlive(s.localKey(modelAfter, p, c), after, w)
	}
	if after {
		m.add(s.localKey(modelAfter, p, c), cs.Start-ps.End, w)
		return
	}
	kind, delay := modelFirst, cs.Start-ps.Start
	if !firstOnly {
		if prev := s.previousSibling(p, c); prev >= 0 {
			kind, delay = s.siblingDelay(prev, c)
		}
	}
	m.add(s.localKey(kind, p, c), delay, w)
	// Outliving is learned only where no other candidate could explain the
	// child: an assignment that chose an outlived candidate over an enclosing
	// one would otherwise teach itself that children outlive such parents.
	if s.known[c] || s.start[c+1]-s.start[c] == 1 {
		m.addOutlive(s.outliveKey(c), cs.End > ps.End+s.tolEnd[c], w)
	}
}

// startsAfter says whether c starts after p has ended (beyond the timestamps'
// resolution).
func (s *spanStitcher) startsAfter(p, c int32) bool {
	return s.spans[p].End+s.tolEnd[p]+s.tolStart[c] < s.spans[c].Start
}

// refTolerance is the resolution of the timestamp a local delay of this kind
// is measured from: the parent's start, the previous sibling's end or its
// start. Some SDKs round only the start of a server span.
func (s *spanStitcher) refTolerance(kind modelKind, p, prev int32) int64 {
	switch kind {
	case modelSequential:
		return s.tolEnd[prev]
	case modelParallel:
		return s.tolStart[prev]
	}
	return s.tolStart[p]
}

// siblingDelay is the gap after a finished previous sibling, or the start
// offset from a running one.
func (s *spanStitcher) siblingDelay(prev, c int32) (modelKind, int64) {
	ps, cs := &s.spans[prev], &s.spans[c]
	if ps.End <= cs.Start+s.tol[c] {
		return modelSequential, cs.Start - ps.End
	}
	return modelParallel, cs.Start - ps.Start
}

// kidsBefore is how many of kids (by start, ties by index) come before c, or,
// with self, before or at c.
func (s *spanStitcher) kidsBefore(kids []int32, c int32, self bool) int {
	cs := s.spans[c].Start
	return sort.Search(len(kids), func(i int) bool {
		k := kids[i]
		ks := s.spans[k].Start
		return ks > cs || (ks == cs && (k > c || (!self && k == c)))
	})
}

// previousSibling is the child of p that started last before c (ties by
// index), or -1.
func (s *spanStitcher) previousSibling(p, c int32) int32 {
	kids := s.kids[p]
	j := s.kidsBefore(kids, c, false)
	for j > 0 {
		j--
		if kids[j] != c {
			return kids[j]
		}
	}
	return -1
}

func (s *spanStitcher) sortByStart(list []int32) {
	slices.SortFunc(list, func(a, b int32) int {
		sa, sb := s.spans[a].Start, s.spans[b].Start
		switch {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return int(a - b)
	})
}

// insertKid adds c to p's children, keeping them by start.
func (s *spanStitcher) insertKid(p, c int32) {
	kids := s.kids[p]
	j := s.kidsBefore(kids, c, true)
	kids = append(kids, 0)
	copy(kids[j+1:], kids[j:])
	kids[j] = c
	s.kids[p] = kids
}

func (s *spanStitcher) removeKid(p, c int32) {
	kids := s.kids[p]
	if i := slices.Index(kids, c); i >= 0 {
		s.kids[p] = slices.Delete(kids, i, i+1)
	}
}

// score is how well p explains c as its parent under the current models and
// the children p already has.
func (s *spanStitcher) score(p, c int32, round int) float64 {
	m := s.models
	ps, cs := &s.spans[p], &s.spans[c]
	// Counts per span of the parent's kind make each model a rate: how many
	// such children a parent has, and where. A parent kind that is merely
	// frequent (and so encloses many children of other requests) gains nothing.
	per := s.perParent[p]
	if s.isRemote(p, c) {
		theta := s.offset(p, c).theta
		v := m.count(s.linkKey(modelRequest, p, c), cs.Start-ps.Start-theta, s.tolStart[p]+s.tolStart[c])*per + scoreFloor
		if cs.Kind == span.KindServer {
			v *= m.share(s.linkKey(modelResponse, p, c), ps.End-cs.End+theta, s.tolEnd[p]+s.tolEnd[c])
		}
		return v * s.siteFactor(p, c)
	}
	prev := s.previousSibling(p, c)
	if round == 0 {
		// The scoreboard knows no sibling models yet, so it takes the paper's
		// overlap penalty: a parent already running a child is a less likely
		// parent of another (a thread makes one call at a time).
		v := s.scoreAfter(p, -1, c, round)
		// A previous child that outlives p runs on a thread of its own.
		if prev >= 0 && s.spans[prev].End > s.spans[c].Start+s.tol[c] && s.spans[prev].End <= ps.End+s.tolEnd[prev] {
			v *= overlapPrior
		}
		return v
	}
	return s.scoreAfter(p, prev, c, round)
}

// overlapPrior is the factor round 0 gives a parent whose previous child still
// runs: the paper's penalty (1+c)^−x with one overlapping child and x = 3.3.
const overlapPrior = 0.1

// asyncBeside reports whether p is asynchronous work (it outlives its parent,
// in the current assignment) whose parent also encloses c.
func (s *spanStitcher) asyncBeside(p, c int32) bool {
	pp := s.parent[p]
	if pp < 0 || s.proc[pp] != s.proc[c] {
		return false
	}
	ps, pps, cs := &s.spans[p], &s.spans[pp], &s.spans[c]
	return ps.End > pps.End+s.tolEnd[p] && pps.Start <= cs.Start+s.tolStart[c] && pps.End+s.tolEnd[pp] >= cs.End
}

// asyncConfidence caps the confidence of a child given to asynchronous work
// (a span that outlives its parent) whose own parent encloses the child too.
// Timing cannot tell the two apart: the calls the work makes and those the
// handler makes meanwhile start at the same kind of offsets, and the models,
// refitted to whichever side the assignment took, grow sure of it (an
// application whose async spans make no call had their handler's next call
// written under them, at confidence 1). Even odds, then, moved only by what
// the threads say: the cap is f/(f+g), f and g the thread factors of the
// work and of its parent, ½ where threads say nothing. Skipping the cap
// whenever the factors differed at all let a reactive service's event-loop
// threads, which say little, make such a child sure.
func (s *spanStitcher) asyncConfidence() {
	for c, p := range s.parent {
		if p < 0 || s.known[c] || !s.asyncBeside(p, int32(c)) {
			continue
		}
		f, g := s.threadFactor(p, int32(c)), s.threadFactor(s.parent[p], int32(c))
		if f+g <= 0 {
			continue
		}
		s.conf[c] = min(s.conf[c], float32(f/(f+g)))
	}
}

// scoreAfter is score with c placed right after prev among p's children (as
// p's first child when prev is -1).
func (s *spanStitcher) scoreAfter(p, prev, c int32, round int) float64 {
	m := s.models
	ps, cs := &s.spans[p], &s.spans[c]
	per := s.perParent[p]
	if s.startsAfter(p, c) {
		v := m.count(s.localKey(modelAfter, p, c), cs.Start-ps.End, s.tolStart[c]+s.tolEnd[p])*per + scoreFloor
		return v * m.outliveFactor(s.localKey(modelAfter, p, c), true)
	}
	kind, delay := modelFirst, cs.Start-ps.Start
	if prev >= 0 {
		kind, delay = s.siblingDelay(prev, c)
	}
	v := m.count(s.localKey(kind, p, c), delay, s.tolStart[c]+s.refTolerance(kind, p, prev))*per + scoreFloor
	v *= s.threadFactor(p, c)
	v *= m.outliveFactor(s.outliveKey(c), cs.End > ps.End+s.tolEnd[c])
	v *= m.outliveFactor(s.localKey(modelAfter, p, c), false)
	if round > 0 {
		v *= s.countFactor(p, c) * s.seqFactor(p, prev, c)
	}
	return v
}
