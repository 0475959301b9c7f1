package causal

import (
	"cmp"
	"math"
	"slices"

	"github.com/tierscope/tierscope/internal/span"
)

// assign gives every orphan a parent under the current models: orphan SERVER
// spans by a one-to-one assignment to CLIENT spans, every other orphan in start
// order against what its candidates already hold.
func (s *spanStitcher) assign(round int) {
	s.assignOneToOne(round, func(c int32) bool { return s.spans[c].Kind == span.KindServer })
	// A message is consumed once per consuming service: the CONSUMER spans of
	// each service take PRODUCER spans one to one too (a queue hands messages
	// out in the order they came, which the request-delay model learns).
	var services []int32
	seen := make(map[int32]bool)
	for _, c := range s.sweepOrder() {
		if cs := &s.spans[c]; s.remote[c] && cs.Kind == span.KindConsumer && !seen[cs.Service] {
			seen[cs.Service] = true
			services = append(services, cs.Service)
		}
	}
	for _, svc := range services {
		s.assignOneToOne(round, func(c int32) bool { return s.spans[c].Kind == span.KindConsumer && s.spans[c].Service == svc })
	}
	s.sweepLocal(round, s.sweepOrder())
	if round > 0 {
		s.uncross(s.sweepOrder())
	}
}

// sweepLocal places every orphan but SERVER spans, in the given order, each
// scored against what its candidates hold at that moment.
func (s *spanStitcher) sweepLocal(round int, order []int32) {
	if s.bestScore == nil {
		s.bestScore = make([]float64, len(s.spans))
	}
	others := s.nullBuf[:0]
	for _, c := range order {
		if s.remote[c] {
			continue // assigned one to one
		}
		if old := s.parent[c]; old >= 0 {
			if !s.isRemote(old, c) {
				s.removeKid(old, c)
			}
			s.parent[c] = -1
		}
		best, runner := int32(-1), int32(-1)
		bestScore, runnerScore, sum := 0.0, 0.0, 0.0
		scored := len(others)
		s.markOuter(c)
		for k := s.start[c]; k < s.start[c+1]; k++ {
			p := s.cands[k]
			if isSpanAncestorOrSelf(s.parent, c, p) {
				continue
			}
			if s.outer[p] == s.stamp {
				// Ruled out by an inferred chain: still an alternative as
				// likely as that chain is wrong.
				if sure := float64(s.outerSure[p]); sure < 1 {
					sum += s.score(p, c, round) * (1 - sure)
				}
				continue
			}
			v := s.score(p, c, round)
			sum += v
			others = append(others, v)
			switch {
			case v > bestScore:
				runner, runnerScore = best, bestScore
				best, bestScore = p, v
			case v > runnerScore:
				runner, runnerScore = p, v
			}
		}
		s.conf[c], s.runner[c] = 0, runner
		if best < 0 {
			others = others[:scored]
			continue
		}
		// The chosen one's score is not a stranger's: drop it from others.
		if i := slices.Index(others[scored:], bestScore); i >= 0 {
			others = slices.Delete(others, scored+i, scored+i+1)
		}
		s.parent[c] = best
		s.conf[c] = float32(bestScore / sum)
		s.bestScore[c] = bestScore
		if !s.isRemote(best, c) {
			s.insertKid(best, c)
		}
	}
	// The alternative that the parent is not among the spans (bestStranger).
	slices.Sort(others)
	s.nullBuf = others
	for _, c := range order {
		if s.remote[c] || s.parent[c] < 0 || s.conf[c] == 0 {
			continue
		}
		best := s.bestScore[c]
		null := bestStranger(others, int(s.start[c+1]-s.start[c]))
		s.conf[c] = float32(best / (best/float64(s.conf[c]) + null))
	}
}

// sweepOrder is the orphans with candidates, by start and, at one start, the
// longer first, so that a parent is placed before its children.
func (s *spanStitcher) sweepOrder() []int32 {
	if s.order != nil {
		return s.order
	}
	for c := range s.spans {
		if s.start[c] < s.start[c+1] {
			s.order = append(s.order, int32(c))
		}
	}
	slices.SortFunc(s.order, func(a, b int32) int {
		sa, sb := &s.spans[a], &s.spans[b]
		switch {
		case sa.Start != sb.Start:
			return cmp.Compare(sa.Start, sb.Start)
		case sa.End != sb.End:
			return cmp.Compare(sb.End, sa.End)
		}
		return cmp.Compare(a, b)
	})
	return s.order
}

// markOuter marks the local candidates of c that are ancestors, in the
// current assignment, of another candidate that still runs when c ends, and
// those that c outlives while one of their ancestors encloses c. Within
// one request spans nest like a stack and only the innermost is the parent;
// under concurrency the spans of other requests enclose c as well, so
// "innermost" holds only along each chain of parents, not across all spans of
// the process. A candidate p is marked when outer[p] == stamp.
func (s *spanStitcher) markOuter(c int32) {
	// Marks are stamps, so that nothing is cleared between children.
	if s.outer == nil {
		s.outer, s.isCand = make([]uint32, len(s.spans)), make([]uint32, len(s.spans))
		s.outerSure = make([]float32, len(s.spans))
	}
	s.stamp++
	lo, hi := s.start[c], s.start[c+1]
	if s.remote[c] || hi-lo < 2 {
		return
	}
	for k := lo; k < hi; k++ {
		s.isCand[s.cands[k]] = s.stamp
	}
	// mark records how sure the mark is: the product of the confidences of the
	// inferred links of the chain that makes a an ancestor (1 when known).
	mark := func(a int32, sure float32) {
		if s.outer[a] != s.stamp {
			s.outer[a], s.outerSure[a] = s.stamp, sure
		} else {
			s.outerSure[a] = max(s.outerSure[a], sure)
		}
	}
	linkSure := func(x int32) float32 {
		if s.known[x] {
			return 1
		}
		return s.conf[x]
	}
	end := s.spans[c].End - s.tolEnd[c]
	for k := lo; k < hi; k++ {
		q := s.cands[k]
		if s.spans[q].End < end-s.tolEnd[q] {
			// c outlives q: q is its parent only if c is asynchronous work, not
			// when an ancestor of q, also a candidate, still runs when c ends
			// (then c is q's sibling, started while q ran).
			sure := linkSure(q)
			for a, steps := s.parent[q], 0; a >= 0 && steps < 64; a, steps = s.parent[a], steps+1 {
				if s.isCand[a] == s.stamp && s.spans[a].End >= end-s.tolEnd[a] {
					mark(q, sure)
					break
				}
				sure *= linkSure(a)
			}
			continue
		}
		// An asynchronous span (one that outlives its parent) runs on a thread
		// of its own: enclosing c says nothing about c's chain.
		if pq := s.parent[q]; pq >= 0 && s.spans[q].End > s.spans[pq].End+s.tolEnd[q] {
			continue
		}
		a, sure := s.parent[q], linkSure(q)
		for steps := 0; a >= 0 && steps < 64; steps++ {
			if s.isCand[a] == s.stamp {
				mark(a, sure)
			}
			sure *= linkSure(a)
			a = s.parent[a]
		}
	}
}

// assignOneToOne matches the orphans bids selects (SERVER spans, or one
// service's CONSUMER spans) to their callers one to one, with the largest
// product of link likelihoods (an auction over log scores), and gives each a
// confidence that counts as alternatives a swap with the span holding a
// candidate, and that span moving to a caller no one holds.
func (s *spanStitcher) assignOneToOne(round int, bids func(c int32) bool) {
	// The buffers live from round to round.
	a := &s.arcs
	if a.objOf == nil {
		a.objOf = make([]int32, len(s.spans))
		for i := range a.objOf {
			a.objOf[i] = -1
		}
	}
	for _, p := range a.objs {
		a.objOf[p] = -1
	}
	bidders, objs := a.bidders[:0], a.objs[:0]
	arcStart, arcObj := append(a.start[:0], 0), a.obj[:0]
	arcScore, arcBen := a.score[:0], a.ben[:0]
	defer func() {
		a.bidders, a.objs, a.start, a.obj, a.score, a.ben = bidders, objs, arcStart, arcObj, arcScore, arcBen
	}()
	ordered := false
	for c := range s.spans {
		ci := int32(c)
		if !s.remote[c] || s.start[c] == s.start[c+1] || !bids(ci) {
			continue
		}
		s.parent[c] = -1
		bidders = append(bidders, ci)
		// Callers that started after it only when none started before.
		anyInTime := false
		for k := s.start[c]; k < s.start[c+1]; k++ {
			if s.inTime(s.cands[k], ci) {
				anyInTime = true
				break
			}
		}
		for k := s.start[c]; k < s.start[c+1]; k++ {
			p := s.cands[k]
			if anyInTime && !s.inTime(p, ci) {
				continue
			}
			o := a.objOf[p]
			if o < 0 {
				o = int32(len(objs))
				a.objOf[p] = o
				objs = append(objs, p)
			}
			arcObj = append(arcObj, o)
			arcScore = append(arcScore, s.score(p, ci, round))
		}
		arcStart = append(arcStart, int32(len(arcObj)))
		from := arcStart[len(arcStart)-2]
		f := s.remoteFactors(ci, arcObj[from:], objs)
		for k := range arcScore[from:] {
			v := arcScore[from+int32(k)]
			if f != nil {
				v *= f[k]
				// Queue order ranks a consumer's producers; its confidence
				// is taken with and without it (orderedConfidence).
				if s.spans[ci].Kind != span.KindConsumer {
					arcScore[from+int32(k)] = v
				} else {
					ordered = true
				}
			}
			arcBen = append(arcBen, math.Log(v))
		}
	}
	if len(bidders) == 0 {
		return
	}
	got := auction(arcStart, arcObj, arcBen, len(objs))
	owner := make([]int32, len(objs))
	for j := range owner {
		owner[j] = -1
	}
	for i, o := range got {
		if o >= 0 {
			owner[o] = int32(i)
		}
	}
	s.oneToOneConfidence(oneToOne{bidders: bidders, objs: objs, arcStart: arcStart, arcObj: arcObj, arcScore: arcScore, got: got, owner: owner})
	if ordered {
		s.orderedConfidence(oneToOne{bidders: bidders, objs: objs, arcStart: arcStart, arcObj: arcObj, arcScore: arcScore, got: got, owner: owner}, arcBen)
	}
}

// orderedConfidence lowers the confidence of consumers to what the queue
// order leaves too: a link is as sure as the less sure of the delays alone and
// of the delays with the order, so that an order learned too strict (from the
// assignment) never raises a confidence.
func (s *spanStitcher) orderedConfidence(a oneToOne, arcBen []float64) {
	timing := make([]float32, len(a.bidders))
	for i, c := range a.bidders {
		timing[i] = s.conf[c]
	}
	withOrder := make([]float64, len(arcBen))
	for k, b := range arcBen {
		withOrder[k] = math.Exp(b)
	}
	a.arcScore = withOrder
	s.oneToOneConfidence(a)
	for i, c := range a.bidders {
		s.conf[c] = min(s.conf[c], timing[i])
		if p := s.parent[c]; p >= 0 {
			s.conf[c] = min(s.conf[c], float32(s.queueOffsetShare(p, c)))
		}
	}
}

// oneToOne is an assignment of bidders (orphans) to objects (callers) over
// scored arcs, as the auction left it.
type oneToOne struct {
	bidders, objs    []int32
	arcStart, arcObj []int32
	arcScore         []float64
	got, owner       []int32 // each bidder's object, each object's bidder (-1: none)
}

func (a *oneToOne) scoreOf(i, o int32) float64 {
	if k := indexOf(a.arcStart, a.arcObj, i, o); k >= 0 {
		return a.arcScore[k]
	}
	return 0
}

// oneToOneConfidence sets each bidder's parent, runner-up and confidence: its
// arc's score against every alternative, where taking an object another
// bidder holds means that bidder takes ours instead, or a caller no one
// holds, and against the best of its strangers (bestStranger).
func (s *spanStitcher) oneToOneConfidence(a oneToOne) {
	strangers := nullScores(a.arcStart, a.arcObj, a.arcScore, a.got, &s.nullBuf)
	for i, c := range a.bidders {
		s.conf[c], s.runner[c] = 0, -1
		o := a.got[i]
		var mine float64
		if o >= 0 {
			mine = a.scoreOf(int32(i), o)
		}
		den, runner, runnerScore := mine, int32(-1), 0.0
		for k := a.arcStart[i]; k < a.arcStart[i+1]; k++ {
			q := a.arcObj[k]
			if q == o {
				continue
			}
			alt := a.arcScore[k]
			if h := a.owner[q]; h >= 0 {
				var moved float64
				if o >= 0 {
					moved = a.scoreOf(h, o)
				}
				for kh := a.arcStart[h]; kh < a.arcStart[h+1]; kh++ {
					if a.owner[a.arcObj[kh]] < 0 {
						moved = max(moved, a.arcScore[kh])
					}
				}
				alt *= moved / a.arcScore[indexOf(a.arcStart, a.arcObj, h, q)]
			}
			den += alt
			if a.arcScore[k] > runnerScore {
				runner, runnerScore = a.objs[q], a.arcScore[k]
			}
		}
		s.runner[c] = runner
		if o < 0 {
			continue
		}
		s.parent[c] = a.objs[o]
		s.conf[c] = float32(mine / (den + bestStranger(strangers, int(a.arcStart[i+1]-a.arcStart[i]))))
	}
}

// nullScores are the scores of candidates not chosen, sorted: callers that are
// not the callee's. They give the alternative "the true parent is not among the
// spans" (dropped by an exporter or a sampler, or never instrumented) in every
// confidence (bestStranger).
func nullScores(arcStart, arcObj []int32, arcScore []float64, got []int32, buf *[]float64) []float64 {
	v := (*buf)[:0]
	for i := range got {
		for k := arcStart[i]; k < arcStart[i+1]; k++ {
			if arcObj[k] != got[i] {
				v = append(v, arcScore[k])
			}
		}
	}
	*buf = v
	slices.Sort(v)
	return v
}

// bestStranger is the score the best of n strangers gets: the n/(n+1)
// quantile of the sorted scores of candidates not chosen. Had the true parent
// been lost, the chosen one would be that stranger; a parent that explains its
// child no better is not written. With fewer than minStrangers scores (nearly
// sequential requests: the few candidates not chosen are near misses, not
// strangers) there is no stranger to speak of, and it is 0.
func bestStranger(sorted []float64, n int) float64 {
	if len(sorted) < minStrangers {
		return 0
	}
	return sorted[min(len(sorted)*n/(n+1), len(sorted)-1)]
}

// minStrangers is how many scores of candidates not chosen bestStranger needs.
const minStrangers = 32

func indexOf(arcStart, arcObj []int32, i, o int32) int32 {
	for k := arcStart[i]; k < arcStart[i+1]; k++ {
		if arcObj[k] == o {
			return k
		}
	}
	return -1
}

// auction solves the sparse assignment problem: bidder i may take object
// arcObj[k] for k in [arcStart[i], arcStart[i+1]) with benefit arcBen[k], each
// object goes to at most one bidder, and the total benefit is maximal within
// n·ε (Bertsekas' forward auction, Gauss–Seidel, ε = 0.01 in log-likelihood).
// A bidder left without an object that is worth its price gets -1. It returns
// each bidder's object. ε-scaling is left out: the bidders' private abstention
// would need prices of its own to survive a phase.
func auction(arcStart []int32, arcObj []int32, arcBen []float64, objects int) []int32 {
	nb := len(arcStart) - 1
	price := make([]float64, objects)
	owner := make([]int32, objects)
	got := make([]int32, nb)
	// Abstaining is worth less than any object, so a bidder abstains only when
	// every object it could take is held by a bidder that values it more.
	abstain := make([]float64, nb)
	for i := 0; i < nb; i++ {
		lo := math.Inf(1)
		for k := arcStart[i]; k < arcStart[i+1]; k++ {
			lo = min(lo, arcBen[k])
		}
		abstain[i] = lo - 30
	}
	queue := make([]int32, 0, nb)
	for _, eps := range []float64{0.01} {
		for j := range owner {
			owner[j] = -1
		}
		queue = queue[:0]
		for i := nb - 1; i >= 0; i-- {
			got[i] = -1
			queue = append(queue, int32(i))
		}
		// Each bid scans one bidder's arcs; wars past this are settled greedily.
		budget := 10*len(arcObj) + 1000
		for len(queue) > 0 && budget > 0 {
			budget--
			i := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			best, bestV, secondV := int32(-1), abstain[i], math.Inf(-1)
			for k := arcStart[i]; k < arcStart[i+1]; k++ {
				v := arcBen[k] - price[arcObj[k]]
				switch {
				case v > bestV:
					secondV, bestV, best = bestV, v, arcObj[k]
				case v > secondV:
					secondV = v
				}
			}
			if best < 0 {
				continue // abstains
			}
			price[best] += bestV - secondV + eps
			if o := owner[best]; o >= 0 {
				got[o] = -1
				queue = append(queue, o)
			}
			owner[best], got[i] = i, best
		}
		// Out of budget (a price war on a huge component): the rest take their
		// best free object.
		for _, i := range queue {
			best, bestV := int32(-1), math.Inf(-1)
			for k := arcStart[i]; k < arcStart[i+1]; k++ {
				if o := arcObj[k]; owner[o] < 0 && arcBen[k] > bestV {
					best, bestV = o, arcBen[k]
				}
			}
			if best >= 0 {
				owner[best], got[i] = i, best
			}
		}
	}
	return got
}

// arcBuffers hold the auction's arcs between rounds.
type arcBuffers struct {
	objOf                     []int32 // span → object, -1 when none
	bidders, objs, start, obj []int32
	score, ben                []float64
}
