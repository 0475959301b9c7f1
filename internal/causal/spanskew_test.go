package causal

import "testing"

// Four processes measured pair by pair, one pair at another request's peak:
// the cycles through the others find it and give it, and the pairs no sample
// measured, the difference of the fitted clocks. A far pair no cycle checks
// keeps its measure and vouches for no clock, a near one places its process on
// the other's clock, and a tied one keeps its measure.
func TestConsistentOffsets(t *testing.T) {
	const ms = int64(1e6)
	clock := map[int32]int64{0: 0, 1: 3 * ms, 2: -4 * ms, 3: 7 * ms}
	truth := func(a, b int32) int64 { return clock[b] - clock[a] }
	var pairs []pairOffset
	for _, p := range [][2]int32{{0, 1}, {0, 2}, {1, 2}, {1, 3}, {2, 3}} {
		pairs = append(pairs, pairOffset{pair: p, theta: truth(p[0], p[1]) + 40_000, weight: 50})
	}
	pairs[2].theta += 5 * ms // 1 → 2 measured at a spurious peak
	pairs = append(pairs,
		pairOffset{pair: [2]int32{3, 4}, theta: 9 * ms, weight: 20},                         // only link to 4
		pairOffset{pair: [2]int32{3, 5}, theta: ms, weight: 20},                             // only link to 5, near
		pairOffset{pair: [2]int32{0, 3}, theta: truth(0, 3) + 3*ms, weight: 80, tied: true}) // tied: left alone
	got, reached := consistentOffsets(pairs, ms, 2*ms)

	for _, p := range pairs[:5] {
		if d := p.theta - truth(p.pair[0], p.pair[1]); d < -100_000 || d > 100_000 {
			t.Errorf("pair %v: %d ns off the truth", p.pair, d)
		}
	}
	if pairs[5].theta != 9*ms {
		t.Errorf("the pair no cycle checks moved to %d", pairs[5].theta)
	}
	if !pairs[7].tied || pairs[7].theta != truth(0, 3)+3*ms {
		t.Errorf("the tied pair changed: %+v", pairs[7])
	}
	// A near pair on no cycle says what the prior says: 5 is on 3's clock.
	if reached[5] != reached[3] || got[5]-got[3] != ms {
		t.Errorf("process 5 at %d ns from 3, want %d", got[5]-got[3], ms)
	}
	if _, ok := reached[4]; ok || reached[0] != reached[3] {
		t.Fatalf("one set of clocks without process 4 expected, got %v", reached)
	}
	// 0 → 3 only tied: its offset is what the clocks give.
	if d := (got[3] - got[0]) - truth(0, 3); d < -100_000 || d > 100_000 {
		t.Errorf("derived 0 → 3: %d ns off the truth", d)
	}
}

// A pair no sample measured is doubted only beside a measured skew on one of
// its sides (another instance of the caller's service far from the callee's
// process, or the caller's process far from another instance of the callee's
// service), and not when the pair was measured or the clocks connect it.
func TestUnmeasuredBesideSkew(t *testing.T) {
	s := &spanStitcher{
		skewedSide: map[[3]int32]bool{skewSide(0, 7, 2): true}, // service 7's other instance, far from process 2
		preSkew:    map[[2]int32]int64{{0, 2}: 5e6},
		clockSet:   map[int32]int32{3: 3, 2: 3},
	}
	for _, c := range []struct {
		pair           [2]int32
		caller, callee int32
		want           bool
		why            string
	}{
		{[2]int32{1, 2}, 7, 9, true, "unmeasured, beside a sibling measured far from the callee"},
		{[2]int32{0, 2}, 7, 9, false, "measured itself"},
		{[2]int32{3, 2}, 7, 9, false, "its clocks connect it"},
		{[2]int32{1, 4}, 7, 9, false, "no skew measured on either side"},
		{[2]int32{1, 2}, 8, 9, false, "another caller service"},
	} {
		if got := s.unmeasuredBesideSkew(c.pair, c.caller, c.callee); got != c.want {
			t.Errorf("%v (%s): %v, want %v", c.pair, c.why, got, c.want)
		}
	}
}
