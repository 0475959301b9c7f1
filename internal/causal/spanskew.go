package causal

import (
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
			samples[k] = append(samples[k], theta)
		}
	}
	for k, v := range samples {
		slices.Sort(v)
		theta, n := densestWindow(v, b)
		background := float64(len(v)) * float64(b) / float64(2*wide)
		if !standsOut(n, background) || (theta > -w/2 && theta < w/2) ||
			float64(n) < nearContrast*float64(nearPeak(v, w/2, b)) {
			continue
		}
		if s.preSkew == nil {
			s.preSkew = make(map[[2]int32]int64)
		}
		if float64(n) < tieContrast*float64(secondPeak(v, theta, b)) {
			if s.skewTied == nil {
				s.skewTied = make(map[[2]int32]bool)
			}
			s.skewTied[k] = true
		}
		s.preSkew[k] = theta
		s.skewAhead, s.skewBehind = max(s.skewAhead, theta), max(s.skewBehind, -theta)
	}
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
// which.
func (s *spanStitcher) skewConfidence() {
	if s.skewTied == nil {
		return
	}
	for c, p := range s.parent {
		if p >= 0 && !s.known[c] && s.isRemote(p, int32(c)) && s.skewTied[[2]int32{s.procIndex[p], s.procIndex[c]}] {
			s.conf[c] = min(s.conf[c], 0.5)
		}
	}
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
	return s.preSkew[[2]int32{s.procIndex[p], s.procIndex[c]}]
}
