package causal

import "math"

// Crossed tails. Two concurrent requests of one operation in one process make
// the same calls at nearly the same times. A child placed under the wrong one
// puts every later child there too, since each is scored against the sibling
// before it, and each of those later links looks certain on its own. Where the
// two children sequences meet, only two things tell which tail is whose: how
// each tail follows the children before it (the junction), and how its last
// child ends before the parent does (the tail gap, p.End − max child End,
// which a handler that returns after its last call keeps short). uncross
// compares the two ways of joining the tails by these terms,
//
//	L = f(c | prev_p) · f(d | prev_q) · g(p.End − end_p) · g(q.End − end_q),
//
// takes the likelier, and caps the confidence of every child in both tails at
// the posterior of that choice, L/(L + L_swapped): a tail that ends as well
// under either parent is not one to write.

// tailGap is how long p runs after the latest end among its children.
func (s *spanStitcher) tailGap(p int32, latest int64) int64 { return s.spans[p].End - latest }

// fitTails adds each parent's tail gap, after its child that ends last, to the
// models, weighted as that child's link.
func (s *spanStitcher) fitTails() {
	for p, kids := range s.kids {
		last := s.lastEnding(kids)
		if last < 0 {
			continue
		}
		w := 1.0
		if !s.known[last] {
			w = float64(s.conf[last])
		}
		s.models.add(s.tailKey(int32(p)), s.tailGap(int32(p), s.spans[last].End), w)
	}
}

// lastEnding is the child that ends last (-1 for none).
func (s *spanStitcher) lastEnding(kids []int32) int32 {
	last := int32(-1)
	for _, k := range kids {
		if last < 0 || s.spans[k].End > s.spans[last].End {
			last = k
		}
	}
	return last
}

// tailFit is the density of p's tail gap when last is its child that ends last.
func (s *spanStitcher) tailFit(p, last int32) float64 {
	if last < 0 {
		return 1
	}
	g := s.models.share(s.tailKey(p), s.tailGap(p, s.spans[last].End), s.tolEnd[p]+s.tolEnd[last])
	// A parent whose other children are missing or still misplaced ends long
	// after its last child here: the model is mixed with a uniform density
	// over the parent's duration, so that one such gap cannot outweigh
	// everything else (a robust likelihood).
	uniform := s.models.unit / float64(max(s.spans[p].End-s.spans[p].Start, 1))
	return (1-tailOutliers)*g + tailOutliers*uniform
}

// tailOutliers is the weight of the uniform part of the tail-gap density.
const tailOutliers = 0.05

// followFit is how well c follows prev among p's children (as the first when
// prev is -1): the delay model's rate and the sequence model.
func (s *spanStitcher) followFit(p, prev, c int32) float64 {
	kind, delay := modelFirst, s.spans[c].Start-s.spans[p].Start
	if prev >= 0 {
		kind, delay = s.siblingDelay(prev, c)
	}
	v := s.models.count(s.localKey(kind, p, c), delay, s.tolStart[c]+s.refTolerance(kind, p, prev))*s.perParent[p] + scoreFloor
	return v * s.seqFactor(p, prev, c)
}

// uncross visits each inferred local child c with a local runner-up q and
// joins the tails of c's parent p and of q, from c's start on, the likelier
// way (see above).
func (s *spanStitcher) uncross(order []int32) {
	for _, c := range order {
		p, q := s.parent[c], s.runner[c]
		if s.remote[c] || s.known[c] || p < 0 || q < 0 || p == q || s.isRemote(p, c) || s.isRemote(q, c) {
			continue
		}
		kp, kq := s.kids[p], s.kids[q]
		i := s.kidsBefore(kp, c, false)
		j := s.kidsBefore(kq, c, false)
		if i >= len(kp) || kp[i] != c || j >= len(kq) {
			continue
		}
		tp, tq := kp[i:], kq[j:]
		if !s.movable(tp, q) || !s.movable(tq, p) {
			continue
		}
		prevP, prevQ := int32(-1), int32(-1)
		if i > 0 {
			prevP = kp[i-1]
		}
		if j > 0 {
			prevQ = kq[j-1]
		}
		d := tq[0]
		endP, endQ := s.lastEnding(kp), s.lastEnding(kq)
		swP, swQ := latestOf(s, s.lastEnding(kp[:i]), s.lastEnding(tq)), latestOf(s, s.lastEnding(kq[:j]), s.lastEnding(tp))
		now := math.Log(s.followFit(p, prevP, c)) + math.Log(s.followFit(q, prevQ, d)) +
			math.Log(s.tailFit(p, endP)) + math.Log(s.tailFit(q, endQ))
		swapped := math.Log(s.followFit(p, prevP, d)) + math.Log(s.followFit(q, prevQ, c)) +
			math.Log(s.tailFit(p, swP)) + math.Log(s.tailFit(q, swQ))
		margin := now - swapped
		if margin < 0 {
			newP := append(append(make([]int32, 0, i+len(tq)), kp[:i]...), tq...)
			newQ := append(append(make([]int32, 0, j+len(tp)), kq[:j]...), tp...)
			for _, k := range tq {
				s.parent[k] = p
			}
			for _, k := range tp {
				s.parent[k] = q
			}
			s.kids[p], s.kids[q] = newP, newQ
			margin = -margin
		}
		sure := float32(1 / (1 + math.Exp(-margin)))
		for _, k := range s.kids[p][i:] {
			s.conf[k] = min(s.conf[k], sure)
		}
		for _, k := range s.kids[q][j:] {
			s.conf[k] = min(s.conf[k], sure)
		}
	}
}

// movable says whether every child in tail is inferred and may have p as its
// parent.
func (s *spanStitcher) movable(tail []int32, p int32) bool {
	for _, k := range tail {
		if s.known[k] || s.remote[k] || isSpanAncestorOrSelf(s.parent, k, p) {
			return false
		}
		found := false
		for x := s.start[k]; x < s.start[k+1]; x++ {
			if s.cands[x] == p {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// latestOf is whichever of a and b ends later (-1 when both are -1).
func latestOf(s *spanStitcher, a, b int32) int32 {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	case s.spans[b].End > s.spans[a].End:
		return b
	}
	return a
}

// tailKey keys the tail-gap model by the parent's service and name.
func (s *spanStitcher) tailKey(p int32) modelKey {
	return modelKey{kind: modelTail, a: s.spans[p].Service, b: s.spans[p].Name, c: -1, d: -1}
}
