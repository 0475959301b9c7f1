package causal

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/tierscope/tierscope/internal/span"
)

// Clocks further apart than the skew window. A SERVER span's callers are
// searched within SkewWindow of it, and the offsets fitted from them
// (fitOffsets) cannot see a skew the window excludes: the true caller is never
// a candidate, and another request's call is written instead. Widening the
// window for every pair costs the pairs whose clocks agree, so the window is
// moved only for the pairs measured apart.
//
// learnSkew measures, before any candidate is searched, the offset of each
// caller → callee process pair up to MaxSkew, from a sample of the orphan
// SERVER spans: a true caller lasts as long as its callee plus the network's
// round trip, whatever the clocks say, so the callers of matching duration
// (d_callee ≤ d_caller ≤ d_callee + max(w, d_callee)) are kept, and the
// difference of midpoints, θ = mid(callee) − mid(caller), clusters at the
// offset for them and scatters for the others. A pair's offset is the densest
// window of width b = min(w/2, the median span) over those differences, taken
// when it holds at least minSkewPeak and skewContrast times the count a
// uniform scatter over ±MaxSkew would put there, and nearContrast times what
// the densest window within ±w/2 holds (nearPeak), and when it lies beyond
// w/2 (nearer, the window already holds it). The width follows the data's
// scale: a window of milliseconds let the callers of microsecond calls drown
// the true offset.
//
// Pairs measured one by one disagree where a pair with few calls took another
// request's peak, and a pair no sample measured kept the default window, its
// true callers outside it. Clocks belong to processes, not to pairs: the
// offsets are made to agree with one clock per process (consistentOffsets),
// and a pair the samples missed takes the difference of its two clocks.
func (s *spanStitcher) learnSkew() {
	w, wide := int64(s.cfg.SkewWindow), int64(s.cfg.MaxSkew)
	if wide <= w || w <= 0 {
		return
	}
	var clients []int32
	for _, i := range s.byStart() {
		if s.spans[i].Kind == span.KindClient {
			clients = append(clients, i)
		}
	}
	if len(clients) == 0 {
		return
	}
	// A true caller's difference strays from the offset by the asymmetry of
	// its delays, far less than the median span in most services, and the
	// skew window's milliseconds far more than that in microsecond ones.
	b := s.offsetScale()
	// A systematic sample of each callee process's orphan SERVER spans.
	perProc := make(map[int32]int)
	samples := make(map[[2]int32][]int64)
	services := make(map[[2]int32][2]int32) // each sampled pair's caller and callee services
	for c := range s.spans {
		cs := &s.spans[c]
		if cs.Kind != span.KindServer || !cs.Orphan || s.known[c] {
			continue
		}
		if perProc[s.proc[c]] >= skewSample {
			continue
		}
		perProc[s.proc[c]]++
		dc := cs.End - cs.Start
		from, _ := slices.BinarySearchFunc(clients, cs.Start-wide-dc-max(w, dc), func(p int32, t int64) int {
			return cmpInt64(s.spans[p].Start, t)
		})
		for _, p := range clients[from:] {
			ps := &s.spans[p]
			if ps.Start > cs.Start+wide {
				break
			}
			dp := ps.End - ps.Start
			if s.proc[p] == s.proc[c] || dp < dc || dp > dc+max(w, dc) || (ps.Peer >= 0 && ps.Peer != cs.Service) || !opsAgree(ps, cs) {
				continue
			}
			theta := ((cs.Start - ps.Start) - (ps.End - cs.End)) / 2
			if theta < -wide || theta > wide {
				continue
			}
			k := [2]int32{s.procIndex[p], s.procIndex[c]}
			if _, ok := samples[k]; !ok {
				services[k] = [2]int32{ps.Service, cs.Service}
			}
			samples[k] = append(samples[k], theta)
		}
	}
	var measured []pairOffset
	for _, k := range slices.SortedFunc(maps.Keys(samples), comparePairs) {
		v := samples[k]
		slices.Sort(v)
		theta, n := densestWindow(v, b)
		background := float64(len(v)) * float64(b) / float64(2*wide)
		if !standsOut(n, background) {
			continue
		}
		near := theta > -w/2 && theta < w/2
		if !near && float64(n) < nearContrast*float64(nearPeak(v, w/2, b)) {
			continue
		}
		tied := !near && float64(n) < tieContrast*float64(secondPeak(v, theta, b))
		weight := float64(n)
		if !near {
			// Synchronised clocks are the prior: a far peak counts as the
			// near one it had to beat.
			weight /= nearContrast
		}
		measured = append(measured, pairOffset{pair: k, theta: theta, weight: weight, tied: tied})
	}
	clock, reached := consistentOffsets(measured, b, w/2)
	for _, m := range measured {
		if m.theta > -w/2 && m.theta < w/2 {
			continue
		}
		if s.preSkew == nil {
			s.preSkew = make(map[[2]int32]int64)
		}
		if m.tied {
			if s.skewTied == nil {
				s.skewTied = make(map[[2]int32]bool)
			}
			s.skewTied[m.pair] = true
		}
		s.preSkew[m.pair] = m.theta
		// A far offset counts as a clock's only where the fitted clocks
		// confirm it: the delays' own asymmetry, on calls of hundreds of
		// milliseconds, measures pairs far too.
		if ra, ok := reached[m.pair[0]]; ok && reached[m.pair[1]] == ra {
			if s.skewedSide == nil {
				s.skewedSide = make(map[[3]int32]bool)
			}
			sv := services[m.pair]
			s.skewedSide[skewSide(0, sv[0], m.pair[1])] = true
			s.skewedSide[skewSide(1, m.pair[0], sv[1])] = true
		}
		s.skewAhead, s.skewBehind = max(s.skewAhead, m.theta), max(s.skewBehind, -m.theta)
	}
	// The clocks give the pairs no sample measured an offset too, where some
	// pair is measured apart: without one, every clock agrees.
	if s.preSkew != nil {
		lo, hi := map[int32]int64{}, map[int32]int64{}
		for v, set := range reached {
			if _, ok := lo[set]; !ok {
				lo[set], hi[set] = clock[v], clock[v]
			}
			lo[set], hi[set] = min(lo[set], clock[v]), max(hi[set], clock[v])
		}
		for set := range lo {
			s.skewAhead, s.skewBehind = max(s.skewAhead, hi[set]-lo[set]), max(s.skewBehind, hi[set]-lo[set])
		}
		s.clock, s.clockSet = clock, reached
	}
}

// pairOffset is one caller → callee process pair's measured clock offset
// (callee clock minus caller clock), the weight of the differences behind it,
// and whether another peak ties with it.
type pairOffset struct {
	pair   [2]int32
	theta  int64
	weight float64
	tied   bool
}

func comparePairs(a, b [2]int32) int {
	if c := cmp.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return cmp.Compare(a[1], b[1])
}

// consistentOffsets makes the pairs' offsets agree with one clock per
// process. An offset is a difference of two clocks, θ(a→b) = c_b − c_a, so
// around any cycle of pairs the offsets sum to 0; a pair whose peak was
// another request's calls breaks that sum. The clocks are fitted by weighted
// least squares over the untied pairs (a far offset weighs as the near peak it
// had to beat: synchronised clocks are the prior), the pair with the largest
// residual beyond tol dropped and the fit repeated until every residual is
// within tol. The pairs on no cycle (bridges) are then left out, since nothing
// checks them, but for those within ±near, which say what the prior says
// (their two clocks agree). Each dropped pair whose processes the remaining
// pairs still connect takes the offset their clocks give. A tied pair keeps
// what it measured, and stays tied: its two peaks may both lie within tol of
// the fit. The clocks, and the anchor of each process's connected set, are
// returned for the pairs no sample measured.
func consistentOffsets(ms []pairOffset, tol, near int64) (clock map[int32]int64, reached map[int32]int32) {
	if len(ms) < 3 {
		return nil, nil
	}
	use := make([]bool, len(ms))
	for i, m := range ms {
		use[i] = !m.tied
	}
	for {
		clock, _ = fitClocks(ms, use)
		worst, worstAt := tol, -1
		for i, m := range ms {
			if !use[i] {
				continue
			}
			r := m.theta - (clock[m.pair[1]] - clock[m.pair[0]])
			if r = max(r, -r); r > worst {
				worst, worstAt = r, i
			}
		}
		if worstAt < 0 {
			// A pair that no cycle checks (a bridge) vouches for nothing
			// beyond itself, unless it says what the prior says: that its
			// two clocks agree.
			for _, i := range bridges(ms, use) {
				if ms[i].theta <= -near || ms[i].theta >= near {
					use[i] = false
				}
			}
			clock, reached = fitClocks(ms, use)
			for i := range ms {
				m := &ms[i]
				if use[i] || m.tied {
					continue
				}
				ra, oka := reached[m.pair[0]]
				rb, okb := reached[m.pair[1]]
				if !oka || !okb || ra != rb {
					continue
				}
				m.theta = clock[m.pair[1]] - clock[m.pair[0]]
			}
			return clock, reached
		}
		use[worstAt] = false
	}
}

// fitClocks solves the weighted least squares of c_b − c_a = θ over the used
// pairs by Gauss–Seidel sweeps, anchoring the smallest process of each
// connected set at 0; reached maps each process to its set's anchor.
func fitClocks(ms []pairOffset, use []bool) (clock map[int32]int64, reached map[int32]int32) {
	adj, nodes := pairGraph(ms, use)
	reached = make(map[int32]int32, len(nodes))
	for _, root := range nodes {
		if _, ok := reached[root]; ok {
			continue
		}
		reached[root] = root
		queue := []int32{root}
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			for _, i := range adj[v] {
				for _, u := range ms[i].pair {
					if _, ok := reached[u]; !ok {
						reached[u] = root
						queue = append(queue, u)
					}
				}
			}
		}
	}
	c := make(map[int32]float64, len(nodes))
	for sweep := 0; sweep < 200; sweep++ {
		var moved float64
		for _, v := range nodes {
			if reached[v] == v {
				continue
			}
			var num, den float64
			for _, i := range adj[v] {
				m := &ms[i]
				if m.pair[1] == v {
					num += m.weight * (c[m.pair[0]] + float64(m.theta))
				} else {
					num += m.weight * (c[m.pair[1]] - float64(m.theta))
				}
				den += m.weight
			}
			next := num / den
			moved = max(moved, math.Abs(next-c[v]))
			c[v] = next
		}
		if moved < 100 { // 100 ns
			break
		}
	}
	clock = make(map[int32]int64, len(nodes))
	for v, x := range c {
		clock[v] = int64(math.Round(x))
	}
	return clock, reached
}

// skewSample is how many orphan SERVER spans per process learnSkew reads.
const skewSample = 256

// minSkewPeak and skewContrast are how many differences an offset's window
// must hold, in all and against a uniform scatter.
const (
	minSkewPeak  = 8
	skewContrast = 2
	skewZ        = 6
	// nearContrast is how many times the densest window within ±w/2
	// (nearPeak) a far offset's window must hold.
	nearContrast = 1.5
	// tieContrast is how many times the second peak away from it (secondPeak)
	// an offset's window must hold not to be tied with it.
	tieContrast = 1.2
)

// standsOut reports whether a window holding n differences stands out of the
// background a uniform scatter would put in it: at least minSkewPeak, skewZ
// standard deviations above it and skewContrast times it.
func standsOut(n int, background float64) bool {
	return n >= minSkewPeak && float64(n)-background >= skewZ*math.Sqrt(max(background, 1)) && float64(n) >= skewContrast*background
}

// nearPeak is how many of the sorted values the densest window of width b
// within ±half holds: the offset the window already covers. A pair's window
// moves only for a peak that dwarfs it; bursts of calls pile up far
// differences too, and a pair whose clocks agreed was moved to one of them.
func nearPeak(v []int64, half, b int64) int {
	i, _ := slices.BinarySearch(v, -half)
	j, _ := slices.BinarySearch(v, half+1)
	_, n := densestWindow(v[i:j], b)
	return n
}

// secondPeak is how many of the sorted values the densest window of width b
// holds away from theta (beyond 2b): a caller that calls one service twice in
// a row, with calls of one duration, puts a second peak as high as the true
// offset's at the calls' spacing.
func secondPeak(v []int64, theta, b int64) int {
	lo, _ := slices.BinarySearch(v, theta-2*b)
	hi, _ := slices.BinarySearch(v, theta+2*b+1)
	_, below := densestWindow(v[:lo], b)
	_, above := densestWindow(v[hi:], b)
	return max(below, above)
}

// skewConfidence caps at ½ the parents written across a pair of processes
// whose offset learnSkew found tied with another (skewTied): either offset
// matches the callee with a caller of its own, and the one taken decided
// which. It caps too the parents across a pair whose offset nothing measured
// (no sample of its own, its clocks in no measured set together) when
// another instance of the caller's service was measured beyond the window
// from the callee's process, or the caller's process from another instance
// of the callee's service, and the fitted clocks confirm it: the pair's
// window then rests on the prior that its clocks agree, which the sibling
// pair shows false for one of them, and a true caller outside the window
// leaves another request's call to be written.
func (s *spanStitcher) skewConfidence() {
	if s.preSkew == nil {
		return
	}
	for c, p := range s.parent {
		if p < 0 || s.known[c] || !s.isRemote(p, int32(c)) {
			continue
		}
		k := [2]int32{s.procIndex[p], s.procIndex[c]}
		if s.skewTied[k] || s.unmeasuredBesideSkew(k, s.spans[p].Service, s.spans[c].Service) {
			s.conf[c] = min(s.conf[c], 0.5)
		}
	}
}

// skewSide keys skewedSide: side 0 a caller service and a callee process,
// side 1 a caller process and a callee service.
func skewSide(side, a, b int32) [3]int32 { return [3]int32{side, a, b} }

// unmeasuredBesideSkew reports whether pair k's offset was neither measured
// nor given by the fitted clocks while another instance of the caller's
// service was measured beyond the skew window from the callee's process, or
// the caller's process from another instance of the callee's service.
func (s *spanStitcher) unmeasuredBesideSkew(k [2]int32, callerService, calleeService int32) bool {
	if !s.skewedSide[skewSide(0, callerService, k[1])] && !s.skewedSide[skewSide(1, k[0], calleeService)] {
		return false
	}
	if _, ok := s.preSkew[k]; ok {
		return false
	}
	a, oka := s.clockSet[k[0]]
	b, okb := s.clockSet[k[1]]
	return !oka || !okb || a != b
}

// densestWindow is the median of the sorted values in the window of width b
// that holds the most of them, and how many it holds.
func densestWindow(v []int64, b int64) (mid int64, n int) {
	lo := 0
	bestLo, bestHi := 0, 0
	for hi := range v {
		for v[hi]-v[lo] > b {
			lo++
		}
		if hi-lo > bestHi-bestLo {
			bestLo, bestHi = lo, hi
		}
	}
	if len(v) == 0 {
		return 0, 0
	}
	return v[(bestLo+bestHi)/2], bestHi - bestLo + 1
}

// skewOf is the offset learnSkew measured from caller p's process to callee
// c's (callee clock minus caller clock), 0 when none was.
func (s *spanStitcher) skewOf(p, c int32) int64 {
	if s.preSkew == nil {
		return 0
	}
	k := [2]int32{s.procIndex[p], s.procIndex[c]}
	if theta, ok := s.preSkew[k]; ok {
		return theta
	}
	a, oka := s.clockSet[k[0]]
	b, okb := s.clockSet[k[1]]
	if !oka || !okb || a != b {
		return 0
	}
	theta, w := s.clock[k[1]]-s.clock[k[0]], int64(s.cfg.SkewWindow)
	if theta > -w/2 && theta < w/2 {
		return 0
	}
	return theta
}

// bridges are the used pairs on no cycle of used pairs (Tarjan's lowlink).
func bridges(ms []pairOffset, use []bool) []int {
	adj, nodes := pairGraph(ms, use)
	order := make(map[int32]int, len(adj))
	low := make(map[int32]int, len(adj))
	var out []int
	var visit func(v int32, via int)
	visit = func(v int32, via int) {
		order[v] = len(order) + 1
		low[v] = order[v]
		for _, i := range adj[v] {
			if i == via {
				continue
			}
			u := ms[i].pair[0]
			if u == v {
				u = ms[i].pair[1]
			}
			if order[u] == 0 {
				visit(u, i)
				low[v] = min(low[v], low[u])
				if low[u] > order[v] {
					out = append(out, i)
				}
			} else {
				low[v] = min(low[v], order[u])
			}
		}
	}
	for _, v := range nodes {
		if order[v] == 0 {
			visit(v, -1)
		}
	}
	return out
}

// pairGraph is the used pairs as a graph of processes: each process's pairs,
// and the processes in order.
func pairGraph(ms []pairOffset, use []bool) (adj map[int32][]int, nodes []int32) {
	adj = make(map[int32][]int)
	for i, m := range ms {
		if use[i] {
			adj[m.pair[0]] = append(adj[m.pair[0]], i)
			adj[m.pair[1]] = append(adj[m.pair[1]], i)
		}
	}
	return adj, slices.Sorted(maps.Keys(adj))
}
