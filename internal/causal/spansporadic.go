package causal

// Sporadic orphans. Context within a process is lost all the time or not at
// all: a thread hop without propagation loses it on every request, a stripped
// trace on every span. A kind of span whose other spans mostly keep their
// local parent has lost its own for another reason, most often that the
// parent itself was dropped; the true parent is then an ancestor, often in
// another process, not any candidate here. Timing alone gave such a child
// another request's span, and was sure of it. (Across processes it is
// otherwise: a proxy may drop the context of some requests and not others,
// with the caller still there to be found, so SERVER and CONSUMER spans are
// left to their one-to-one matching.)

// sporadicOrphans caps at ½ the confidence of every local orphan whose kind
// (service and name) has at least minKnownParents spans with a known parent
// and no more orphans than those.
func (s *spanStitcher) sporadicOrphans() {
	type counts struct{ known, orphans int }
	byKind := make(map[[2]int32]counts)
	for c := range s.spans {
		cs := &s.spans[c]
		if cs.Kind.RemoteEntry() {
			continue
		}
		k := byKind[[2]int32{cs.Service, cs.Name}]
		switch {
		case s.known[c]:
			k.known++
		case cs.Orphan:
			k.orphans++
		default:
			continue
		}
		byKind[[2]int32{cs.Service, cs.Name}] = k
	}
	for c, p := range s.parent {
		if p < 0 || s.known[c] || s.spans[c].Kind.RemoteEntry() {
			continue
		}
		cs := &s.spans[c]
		if k := byKind[[2]int32{cs.Service, cs.Name}]; k.known >= minKnownParents && k.orphans <= k.known {
			s.conf[c] = min(s.conf[c], 0.5)
		}
	}
}

// minKnownParents is how many spans of a kind must keep their parent before
// its orphans count as sporadic.
const minKnownParents = 8
