package maketrace

import (
	"math"

	"github.com/tierscope/tierscope/internal/causal"
)

// DefaultQueue is the sniffer queue length used in the paper's loss experiments (§7.5.5).
const DefaultQueue = 64

// sniffer is a single-server FIFO queue with a deterministic service time and room for
// queue messages, counting the one in service.
type sniffer struct {
	service float64   // ns per message
	dep     []float64 // ring of departure times of the messages in the system
	head, n int
	last    float64 // departure time of the last accepted message
}

func newSniffer(rate float64, queue int) *sniffer {
	if !(rate > 0) {
		panic("maketrace: sniffer capture rate must be positive")
	}
	if queue < 1 {
		queue = DefaultQueue
	}
	return &sniffer{service: 1e9 / rate, dep: make([]float64, queue)}
}

// offer reports whether a message arriving at t (ns) is captured.
func (s *sniffer) offer(t float64) bool {
	q := len(s.dep)
	for s.n > 0 && s.dep[s.head] <= t {
		s.head++
		if s.head == q {
			s.head = 0
		}
		s.n--
	}
	if s.n == q {
		return false
	}
	d := math.Max(t, s.last) + s.service
	s.last = d
	i := s.head + s.n
	if i >= q {
		i -= q
	}
	s.dep[i] = d
	s.n++
	return true
}

// ApplySniffer models a capture server (§7.5.5) that sees msgs in order — they must be
// sorted by true time — serves ratePerSec messages per second and holds at most queue
// messages, counting the one in service; a message that arrives to a full system is
// dropped, which gives the bursty losses of real sniffers. queue < 1 means DefaultQueue.
// The kept messages are compacted into msgs' backing array, as slices.DeleteFunc does.
// ratePerSec must be positive; +Inf drops nothing.
func ApplySniffer(msgs []causal.Message, ratePerSec float64, queue int) (kept []causal.Message, dropped int) {
	if len(msgs) == 0 {
		return msgs, 0
	}
	s := newSniffer(ratePerSec, queue)
	t0 := msgs[0].Time // relative times keep float64 exact to the nanosecond
	kept = msgs[:0]
	for _, m := range msgs {
		if s.offer(float64(m.Time - t0)) {
			kept = append(kept, m)
		}
	}
	return kept, len(msgs) - len(kept)
}

// dropFraction is ApplySniffer's drop fraction, without touching msgs.
func dropFraction(msgs []causal.Message, rate float64, queue int) float64 {
	s := newSniffer(rate, queue)
	t0 := msgs[0].Time
	drops := 0
	for i := range msgs {
		if !s.offer(float64(msgs[i].Time - t0)) {
			drops++
		}
	}
	return float64(drops) / float64(len(msgs))
}

// CaptureRateForDropRate returns the sniffer peak rate R (messages/s) at which
// ApplySniffer(msgs, R, queue) drops the fraction of messages closest to target.
//
// The drop fraction f(R) is a non-increasing step function of R, so the search first
// brackets the target — doubling R from the trace's mean message rate until
// f(R) <= target, halving until f(R) > target — then bisects geometrically until the
// bracket is 1e-6 wide in relative terms, and returns whichever end is closer to the
// target (the faster one on a tie). Each step costs one pass over msgs. A target <= 0
// yields (approximately) the slowest rate that drops nothing. msgs must be sorted by
// time; an empty slice yields 0.
func CaptureRateForDropRate(msgs []causal.Message, target float64, queue int) float64 {
	if len(msgs) == 0 {
		return 0
	}
	span := float64(msgs[len(msgs)-1].Time-msgs[0].Time) / 1e9
	hi := float64(len(msgs))
	if span > 0 {
		hi /= span
	}
	const maxRate, minRate = 1e15, 1e-9
	fhi := dropFraction(msgs, hi, queue)
	for fhi > target {
		if hi >= maxRate { // simultaneous messages beyond the queue: no rate avoids drops
			return hi
		}
		hi *= 2
		fhi = dropFraction(msgs, hi, queue)
	}
	lo, flo := hi, fhi
	for flo <= target {
		if lo <= minRate {
			return lo
		}
		lo /= 2
		flo = dropFraction(msgs, lo, queue)
	}
	for hi/lo > 1+1e-6 {
		mid := math.Sqrt(lo * hi)
		if f := dropFraction(msgs, mid, queue); f > target {
			lo, flo = mid, f
		} else {
			hi, fhi = mid, f
		}
	}
	if target-fhi <= flo-target {
		return hi
	}
	return lo
}
