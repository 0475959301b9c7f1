package causal

import "github.com/tierscope/tierscope/internal/span"

import "testing"

// The site counts read back what was added, whether the ids pack into 64 bits
// or not.
func TestSiteCountsPackedAndUnpacked(t *testing.T) {
	for _, base := range []int32{0, 5000} { // 5000 > 2^11: the struct-keyed path
		m := newSiteModels()
		var cs callerSite
		cs.keys[0] = siteKey{level: 0, service: base + 1, name: base + 2, parent: base + 3, ord: 4, calleeService: -1, calleeName: -1}
		cs.keys[1] = siteKey{level: 1, service: base + 1, name: base + 2, parent: base + 3, ord: -1, calleeService: -1, calleeName: -1}
		cs.keys[2] = siteKey{level: 2, service: base + 1, name: -1, parent: -1, ord: -1, calleeService: -1, calleeName: -1}
		cs.packed = true
		for l, k := range cs.keys {
			b, ok := k.pack()
			cs.base[l], cs.packed = b, cs.packed && ok
		}
		if cs.packed != (base == 0) {
			t.Fatalf("base %d: packed %v", base, cs.packed)
		}
		a, b := &span.Span{Service: base + 7, Name: base + 8}, &span.Span{Service: base + 7, Name: base + 9}
		m.addPair(&cs, 0, a, 2)
		m.addPair(&cs, 0, b, 1)
		m.addPair(&cs, 2, a, 0.5)
		if got := m.total(&cs, 0); got != 3 {
			t.Errorf("base %d: total %v, want 3", base, got)
		}
		if got := m.pair(&cs, 0, a); got != 2 {
			t.Errorf("base %d: pair a %v, want 2", base, got)
		}
		if got := m.pair(&cs, 0, b); got != 1 {
			t.Errorf("base %d: pair b %v, want 1", base, got)
		}
		if got := m.pair(&cs, 1, a); got != 0 {
			t.Errorf("base %d: level 1 pair %v, want 0", base, got)
		}
		if got := m.total(&cs, 2); got != 0.5 {
			t.Errorf("base %d: level 2 total %v, want 0.5", base, got)
		}
		// A callee whose ids do not pack, at a site whose do.
		far := &span.Span{Service: 9000, Name: 9001}
		m.addPair(&cs, 1, far, 4)
		if got, tot := m.pair(&cs, 1, far), m.total(&cs, 1); got != 4 || tot != 4 {
			t.Errorf("base %d: unpackable callee: pair %v total %v, want 4 4", base, got, tot)
		}
	}
}
