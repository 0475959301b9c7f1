package causal

import (
	"cmp"
	"slices"
)

// Exchanges. A local orphan's confidence weighs each candidate's score with
// the children the candidate holds at that moment. When concurrent parents of
// one operation each make one call of a key, every other parent already
// holds its child of that key and scores c near zero (the count model), so a
// child whose true parent took another request's child of its key goes to
// that request's parent with confidence 1, whatever the ambiguity that led
// there. The joint alternative is the exchange: c under p and p's child d of
// c's key under c's parent q. Its likelihood relative to the assignment is
//
//	r = s(p, c | p without d) · s(q, d | q without c) / (s(q, c) · s(p, d)),
//
// and it enters the confidence like any other alternative,
//
//	conf′ = 1 / (1/conf + Σ r),
//
// summed over every candidate p of c and every such d that may take q. The
// assignment is unchanged; confidences only fall.
//
// Parallel calls come in batches: two concurrent parents that each start
// several calls of one key at once had their whole batches exchanged, and no
// exchange of one child for one showed it, since each breaks both batches.
// So each candidate p also offers the exchange of the batches (batchRatio):
// every child of c's key under q that p may take, against every one under p
// that q may take. And a batch may simply sit under the wrong parent while the
// right one holds nothing of its key then: the move of c with its nearest
// running siblings to p is a third alternative (cohortRatio).
func (s *spanStitcher) exchangeConfidence(round int) {
	for _, c := range s.sweepOrder() {
		q := s.parent[c]
		if s.remote[c] || s.known[c] || q < 0 || s.conf[c] == 0 || s.isRemote(q, c) {
			continue
		}
		cs := &s.spans[c]
		var alt float64
		for k := s.start[c]; k < s.start[c+1]; k++ {
			p := s.cands[k]
			if p == q || s.isRemote(p, c) || isSpanAncestorOrSelf(s.parent, c, p) {
				continue
			}
			for _, d := range s.kids[p] {
				ds := &s.spans[d]
				if d == c || s.known[d] || ds.Service != cs.Service || ds.Name != cs.Name || !s.isCandidate(q, d) {
					continue
				}
				alt += s.exchangeRatio(round, c, q, d, p)
			}
			alt += s.batchRatio(round, c, q, p)
			alt += s.cohortRatio(round, c, q, p)
		}
		if alt > 0 {
			s.conf[c] = float32(1 / (1/float64(s.conf[c]) + alt))
		}
	}
}

// exchangeRatio is r above.
func (s *spanStitcher) exchangeRatio(round int, c, q, d, p int32) float64 {
	now := s.score(q, c, round) * s.score(p, d, round)
	if now <= 0 {
		return 0
	}
	s.removeKid(q, c)
	s.removeKid(p, d)
	s.insertKid(p, c)
	s.insertKid(q, d)
	swapped := s.score(p, c, round) * s.score(q, d, round)
	s.removeKid(p, c)
	s.removeKid(q, d)
	s.insertKid(q, c)
	s.insertKid(p, d)
	return swapped / now
}

// batchRatio is the likelihood, relative to the assignment, of q's children
// of c's key that p may take (c among them) under p and p's that q may take
// under q; 0 when the batches are one child each or fewer, which the single
// exchanges and c's own candidates already weigh.
func (s *spanStitcher) batchRatio(round int, c, q, p int32) float64 {
	movable := func(from, to int32) []int32 {
		var out []int32
		cs := &s.spans[c]
		for _, x := range s.kids[from] {
			xs := &s.spans[x]
			if s.known[x] || xs.Service != cs.Service || xs.Name != cs.Name || !s.isCandidate(to, x) || isSpanAncestorOrSelf(s.parent, x, to) {
				continue
			}
			out = append(out, x)
		}
		return out
	}
	fromQ, fromP := movable(q, p), movable(p, q)
	if len(fromQ)+len(fromP) <= 2 || !slices.Contains(fromQ, c) {
		return 0
	}
	product := func(p int32, xs []int32) float64 {
		v := 1.0
		for _, x := range xs {
			v *= s.score(p, x, round)
		}
		return v
	}
	move := func(xs []int32, from, to int32) {
		for _, x := range xs {
			s.removeKid(from, x)
		}
		for _, x := range xs {
			s.insertKid(to, x)
		}
	}
	now := product(q, fromQ) * product(p, fromP)
	if now <= 0 {
		return 0
	}
	move(fromQ, q, p)
	move(fromP, p, q)
	swapped := product(p, fromQ) * product(q, fromP)
	move(fromQ, p, q)
	move(fromP, q, p)
	return swapped / now
}

// cohortRatio is the likelihood, relative to the assignment, of c's cohort
// under p: c with the children of its key under q that started nearest it
// while it ran, and that p may take, moved together. A parallel batch placed
// under the wrong one of two concurrent parents is sure of it member by
// member, each following its siblings; neither a one-for-one exchange nor
// the exchange of whole batches (which drags q's other batches along) weighs
// that alternative. How many siblings the batch has is not known, so each
// size from 2 to maxCount is one alternative, and their ratios add up. 0 when
// c runs beside no such sibling.
func (s *spanStitcher) cohortRatio(round int, c, q, p int32) float64 {
	cs := &s.spans[c]
	cohort := append(s.scratchCohort[:0], c)
	for _, x := range s.kids[q] {
		xs := &s.spans[x]
		if x == c || s.known[x] || xs.Service != cs.Service || xs.Name != cs.Name || xs.Start >= cs.End || xs.End <= cs.Start ||
			!s.isCandidate(p, x) || isSpanAncestorOrSelf(s.parent, x, p) {
			continue
		}
		cohort = append(cohort, x)
	}
	s.scratchCohort = cohort
	if len(cohort) < 2 {
		return 0
	}
	distance := func(x int32) int64 {
		d := s.spans[x].Start - cs.Start
		return max(d, -d)
	}
	slices.SortFunc(cohort[1:], func(a, b int32) int { return cmp.Compare(distance(a), distance(b)) })
	cohort = cohort[:min(len(cohort), maxCount)]
	var ratio float64
	under := 1.0 // the scores under q, as assigned, of cohort[:m+1]
	for m := range cohort {
		under *= s.score(q, cohort[m], round)
		if m == 0 {
			continue
		}
		if under <= 0 {
			break
		}
		moving, moved := cohort[:m+1], 1.0
		for _, x := range moving {
			s.removeKid(q, x)
			s.insertKid(p, x)
		}
		for _, x := range moving {
			moved *= s.score(p, x, round)
		}
		for _, x := range moving {
			s.removeKid(p, x)
			s.insertKid(q, x)
		}
		ratio += moved / under
	}
	return ratio
}

// isCandidate says whether p is among c's candidate parents.
func (s *spanStitcher) isCandidate(p, c int32) bool {
	for k := s.start[c]; k < s.start[c+1]; k++ {
		if s.cands[k] == p {
			return true
		}
	}
	return false
}
