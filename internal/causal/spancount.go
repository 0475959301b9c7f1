package causal

// Child counts. Code paths are mostly deterministic: a handler of one
// operation makes the same calls each time, so the number of children of one
// key (service and name) that a parent of one operation has is nearly
// constant. Under concurrency a sweep can hand two such children to one parent
// and none to another running the same operation; the count model makes a
// second child of a key as unlikely as the assignment shows it to be. It is
// learned, like the delay models, from the assignment (rounds after the
// first), as the hazard of one more child:
//
//	h(m) = (N(≥ m+1) + ½) / (N(≥ m) + 1),
//
// N(≥ m) the parents of the operation with at least m children of the key,
// for m ≥ 1 (the first child's rate is the delay models' own).

// maxCount caps the counts the model tells apart.
const maxCount = 8

type countKey struct{ parentService, parentName, childService, childName int32 }

type countModels struct {
	// atLeast[k][m-1] counts parents with at least m children of key k.
	atLeast map[countKey]*[maxCount]float64
	tally   map[countKey]int
}

func newCountModels() *countModels {
	return &countModels{atLeast: make(map[countKey]*[maxCount]float64), tally: make(map[countKey]int)}
}

// fitCounts rebuilds the count models from the parents' current children.
func (s *spanStitcher) fitCounts() {
	m := s.counts
	clear(m.atLeast)
	for p, kids := range s.kids {
		if len(kids) == 0 {
			continue
		}
		clear(m.tally)
		ps := &s.spans[p]
		for _, k := range kids {
			ks := &s.spans[k]
			m.tally[countKey{ps.Service, ps.Name, ks.Service, ks.Name}]++
		}
		for k, n := range m.tally {
			h := m.atLeast[k]
			if h == nil {
				h = new([maxCount]float64)
				m.atLeast[k] = h
			}
			for i := 1; i <= min(n, maxCount); i++ {
				h[i-1]++
			}
		}
	}
}

// countFactor is the hazard of c being one more child of its key under p,
// given the children p holds: 1 for a first child.
func (s *spanStitcher) countFactor(p, c int32) float64 {
	ps, cs := &s.spans[p], &s.spans[c]
	have := 0
	for _, k := range s.kids[p] {
		if k != c && s.spans[k].Service == cs.Service && s.spans[k].Name == cs.Name {
			have++
		}
	}
	if have == 0 {
		return 1
	}
	h := s.counts.atLeast[countKey{ps.Service, ps.Name, cs.Service, cs.Name}]
	if h == nil {
		return 0.5
	}
	if have >= maxCount {
		return (h[maxCount-1] + 0.5) / (h[maxCount-1] + 1)
	}
	return (h[have] + 0.5) / (h[have-1] + 1)
}
