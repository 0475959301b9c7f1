package causal

// Child sequences. A handler's code runs its calls in the same order each
// time, so which child follows which under a parent of one operation is
// nearly fixed. The sequence model learns, from the assignment as the delay
// models do, the probability of a child's service and name given the
// parent's operation and the previous sibling's service and name (or none, for
// a first child), backing off to the parent's operation alone:
//
//	P(c | p, prev) = (n(p, prev, c) + P(c | p)) / (n(p, prev) + 1),
//	P(c | p)       = (n(p, c) + 1/64) / (n(p) + 1).
//
// Two concurrent requests of one operation then stop trading children whose
// timing fits both: the child goes where it is next in the sequence.

type seqKey struct {
	parentService, parentName int32
	prevService, prevName     int32 // -2, -2: the parent's operation alone
	childService, childName   int32 // -2, -2: the context's total
}

type seqModels struct{ counts map[seqKey]float64 }

func newSeqModels() *seqModels { return &seqModels{counts: make(map[seqKey]float64)} }

// fitSequences rebuilds the sequence model from the parents' current
// children (by start).
func (s *spanStitcher) fitSequences() {
	m := s.seq.counts
	clear(m)
	for p, kids := range s.kids {
		if len(kids) == 0 {
			continue
		}
		ps := &s.spans[p]
		prevS, prevN := int32(-1), int32(-1)
		for _, k := range kids {
			ks := &s.spans[k]
			m[seqKey{ps.Service, ps.Name, prevS, prevN, ks.Service, ks.Name}]++
			m[seqKey{ps.Service, ps.Name, prevS, prevN, -2, -2}]++
			m[seqKey{ps.Service, ps.Name, -2, -2, ks.Service, ks.Name}]++
			m[seqKey{ps.Service, ps.Name, -2, -2, -2, -2}]++
			prevS, prevN = ks.Service, ks.Name
		}
	}
}

// seqFactor is P(c | p, prev) for c placed after prev (-1: first) under p.
func (s *spanStitcher) seqFactor(p, prev, c int32) float64 {
	m := s.seq.counts
	ps, cs := &s.spans[p], &s.spans[c]
	prevS, prevN := int32(-1), int32(-1)
	if prev >= 0 {
		prevS, prevN = s.spans[prev].Service, s.spans[prev].Name
	}
	base := (m[seqKey{ps.Service, ps.Name, -2, -2, cs.Service, cs.Name}] + 1.0/64) / (m[seqKey{ps.Service, ps.Name, -2, -2, -2, -2}] + 1)
	return (m[seqKey{ps.Service, ps.Name, prevS, prevN, cs.Service, cs.Name}] + base) / (m[seqKey{ps.Service, ps.Name, prevS, prevN, -2, -2}] + 1)
}
