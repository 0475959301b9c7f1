package causal

import "github.com/tierscope/tierscope/internal/span"

// Call sites. A caller span rarely says whom it calls when context is lost
// (an HTTP client span is often just "HTTP GET"), but the code that issues
// the call does: the k-th call a handler makes goes to the same endpoint every
// time. The site model learns, from the current assignment as the delay models
// do, which callee (service and operation) each call site reaches, and scores
// a caller for a callee by that probability. A site is the caller's service
// and name, its local parent's name and its ordinal among the parent's calls;
// the estimate backs off from the full site to the site without the ordinal
// and to the caller's service (hierarchical additive smoothing), so that a
// site whose calls vary (parallel fan-out reorders them) still scores by what
// its coarser site does.

// siteLevels are the back-off levels, finest first.
const siteLevels = 3

// maxOrdinal caps the ordinal of a call among its parent's calls.
const maxOrdinal = 15

// siteKey is one level of a call site; callee is (service, name) of the
// callee or -1, -1 for the site's total.
type siteKey struct {
	level                      int8
	service, name, parent, ord int32
	calleeService, calleeName  int32
}

type siteModels struct {
	// packed holds the keys whose ids fit in 11 bits each (nearly all: a
	// 64-bit key hashes several times faster than the struct), counts the rest.
	packed map[uint64]float64
	counts map[siteKey]float64
}

func newSiteModels() *siteModels {
	return &siteModels{packed: make(map[uint64]float64), counts: make(map[siteKey]float64)}
}

func (m *siteModels) reset() {
	clear(m.packed)
	clear(m.counts)
}

// pack folds a key into 64 bits when every id fits in 11 bits: the level in 2
// bits, the ordinal plus one in 5, then the five ids plus one, the callee's
// last, so that a site's key with a callee is its total's key | calleeBits.
func (k siteKey) pack() (uint64, bool) {
	const limit = 1<<11 - 1
	ids := [5]int32{k.service, k.name, k.parent, k.calleeService, k.calleeName}
	v := uint64(k.level)<<5 | uint64(k.ord+1)
	for _, id := range ids {
		if uint32(id+1) > limit {
			return 0, false
		}
		v = v<<11 | uint64(id+1)
	}
	return v, true
}

// calleeBits are the low bits of a packed key for callee c.
func calleeBits(c *span.Span) (uint64, bool) {
	const limit = 1<<11 - 1
	if uint32(c.Service+1) > limit || uint32(c.Name+1) > limit {
		return 0, false
	}
	return uint64(c.Service+1)<<11 | uint64(c.Name+1), true
}

// callerSite is a caller's site at every level, with its packed totals' keys,
// computed once per round.
type callerSite struct {
	round  uint32 // roundStamp when computed; 0 never
	packed bool
	keys   [siteLevels]siteKey
	base   [siteLevels]uint64
}

// callerSiteOf returns caller p's site for this round.
func (s *spanStitcher) callerSiteOf(p int32) *callerSite {
	if s.siteSlot == nil {
		s.siteSlot = make([]int32, len(s.spans))
		callers := 0
		for i := range s.spans {
			if s.spans[i].Kind.RemoteCaller() {
				callers++
			}
		}
		s.siteCache = make([]callerSite, 0, callers)
	}
	// Only callers have sites: a slot per span, a site per caller.
	if s.siteSlot[p] == 0 {
		s.siteCache = append(s.siteCache, callerSite{})
		s.siteSlot[p] = int32(len(s.siteCache))
	}
	cs := &s.siteCache[s.siteSlot[p]-1]
	if cs.round == s.roundStamp {
		return cs
	}
	cs.round = s.roundStamp
	s.sites(p, &cs.keys)
	cs.packed = true
	for l, k := range cs.keys {
		b, ok := k.pack()
		cs.base[l], cs.packed = b, cs.packed && ok
	}
	return cs
}

// total and pair are the counts of a site level and of it reaching c.
func (m *siteModels) total(cs *callerSite, l int) float64 {
	if cs.packed {
		return m.packed[cs.base[l]]
	}
	return m.counts[cs.keys[l]]
}

func (m *siteModels) addPair(cs *callerSite, l int, c *span.Span, w float64) {
	if cs.packed {
		m.packed[cs.base[l]] += w
	} else {
		m.counts[cs.keys[l]] += w
	}
	if bits, ok := calleeBits(c); ok && cs.packed {
		m.packed[cs.base[l]|bits] += w
		return
	}
	k := cs.keys[l]
	k.calleeService, k.calleeName = c.Service, c.Name
	m.counts[k] += w
}

func (m *siteModels) pair(cs *callerSite, l int, c *span.Span) float64 {
	if bits, ok := calleeBits(c); ok && cs.packed {
		return m.packed[cs.base[l]|bits]
	}
	k := cs.keys[l]
	k.calleeService, k.calleeName = c.Service, c.Name
	return m.counts[k]
}

// sites fills keys with the levels of caller p's site.
func (s *spanStitcher) sites(p int32, keys *[siteLevels]siteKey) {
	ps := &s.spans[p]
	parentName, ord := int32(-1), int32(-1)
	if q := s.parent[p]; q >= 0 && !s.isRemote(q, p) {
		parentName = s.spans[q].Name
		ord = 0
		for _, k := range s.kids[q] {
			if k == p {
				break
			}
			if s.spans[k].Kind.RemoteCaller() {
				ord++
			}
		}
		ord = min(ord, maxOrdinal)
	}
	keys[0] = siteKey{level: 0, service: ps.Service, name: ps.Name, parent: parentName, ord: ord, calleeService: -1, calleeName: -1}
	keys[1] = siteKey{level: 1, service: ps.Service, name: ps.Name, parent: parentName, ord: -1, calleeService: -1, calleeName: -1}
	keys[2] = siteKey{level: 2, service: ps.Service, name: -1, parent: -1, ord: -1, calleeService: -1, calleeName: -1}
}

// addSite counts the call p → c with weight w at every level of p's site.
func (s *spanStitcher) addSite(p, c int32, w float64) {
	site := s.callerSiteOf(p)
	for l := range siteLevels {
		s.site.addPair(site, l, &s.spans[c], w)
	}
}

// siteFactor is the probability that caller p's site reaches c's service and
// operation: at each level (n(site, callee) + P_coarser)/(n(site) + 1), the
// coarsest level backing off to 1/64.
func (s *spanStitcher) siteFactor(p, c int32) float64 {
	site := s.callerSiteOf(p)
	prob := 1.0 / 64
	for l := siteLevels - 1; l >= 0; l-- {
		prob = (s.site.pair(site, l, &s.spans[c]) + prob) / (s.site.total(site, l) + 1)
	}
	return prob
}
