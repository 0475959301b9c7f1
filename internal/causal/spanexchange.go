package causal

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

// isCandidate says whether p is among c's candidate parents.
func (s *spanStitcher) isCandidate(p, c int32) bool {
	for k := s.start[c]; k < s.start[c+1]; k++ {
		if s.cands[k] == p {
			return true
		}
	}
	return false
}
