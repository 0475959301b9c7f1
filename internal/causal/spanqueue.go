package causal

import (
	"cmp"
	"slices"

	"github.com/tierscope/tierscope/internal/span"
)

// Queues. A queue hands out messages in about the order they were enqueued,
// whatever the delay they waited: under load the wait spreads over more than
// the gap between messages, and the request-delay model alone swaps them.
// Producers of one destination are ranked by their end (the enqueue is
// acknowledged before the span ends), and each service's consumers of it by
// their start. For a FIFO queue that hands each consuming service one copy of
// every message, the k-th consumer takes the k-th producer: the rank offset
//
//	d = rank(p) − rank(c)
//
// is constant (non-zero when messages were consumed before the spans began,
// or lost), and spreads over a few ranks with competing consumers and
// retries. Its distribution per destination is learned from the known links
// and the assignment, and a producer's score for c is multiplied by its
// probability relative to the likeliest offset when consumers choose their
// producers. Learned from the assignment, the offsets of a queue that
// reorders look stricter than they are, so they rank a consumer's producers
// but take no part in its confidence, which rests on the delays.

type queueModels struct {
	n    map[[2]int32]float64 // (destination, offset) → weight
	most map[int32]float64    // destination → largest weight of an offset (cached)
	// rank is each PRODUCER span's rank among its destination's producers by
	// end, and each CONSUMER span's among its service's consumers of its
	// destination by start (-1: no destination).
	rank []int32
}

// indexQueues ranks producers and consumers.
func (s *spanStitcher) indexQueues() {
	n := len(s.spans)
	q := &queueModels{n: make(map[[2]int32]float64), most: make(map[int32]float64), rank: make([]int32, n)}
	s.queues = q
	producers, consumers := map[int32][]int32{}, map[[2]int32][]int32{}
	for i := range s.spans {
		q.rank[i] = -1
		sp := &s.spans[i]
		switch {
		case sp.Op < 0:
		case sp.Kind == span.KindProducer:
			producers[sp.Op] = append(producers[sp.Op], int32(i))
		case sp.Kind == span.KindConsumer:
			k := [2]int32{sp.Service, sp.Op}
			consumers[k] = append(consumers[k], int32(i))
		}
	}
	for _, l := range producers {
		slices.SortFunc(l, func(a, b int32) int {
			return cmp.Or(cmp.Compare(s.spans[a].End, s.spans[b].End), cmp.Compare(a, b))
		})
		for r, p := range l {
			q.rank[p] = int32(r)
		}
	}
	for _, l := range consumers {
		s.sortByStart(l)
		for r, c := range l {
			q.rank[c] = int32(r)
		}
	}
}

func (q *queueModels) reset() {
	clear(q.n)
	clear(q.most)
}

// fitQueues learns the offsets from the known links and the last assignment,
// each link weighted by its confidence.
func (s *spanStitcher) fitQueues() {
	q := s.queues
	q.reset()
	for c := range s.spans {
		p := s.parent[c]
		if p < 0 || s.spans[c].Kind != span.KindConsumer || q.rank[p] < 0 || q.rank[c] < 0 {
			continue
		}
		w := float64(s.conf[c])
		if s.known[c] {
			w = 1
		}
		q.n[[2]int32{s.spans[c].Op, q.rank[p] - q.rank[c]}] += w
	}
}

// weight is the weight at offset d, not smoothed over its neighbours: the
// neighbouring offsets are exactly the wrong candidates.
func (q *queueModels) weight(op, d int32) float64 {
	return q.n[[2]int32{op, d}]
}

// queueFactor is the offset model's probability of producer p for consumer
// c, relative to the likeliest offset; 1 when nothing is known.
func (s *spanStitcher) queueFactor(p, c int32) float64 {
	q := s.queues
	cs := &s.spans[c]
	if cs.Kind != span.KindConsumer || q.rank[p] < 0 || q.rank[c] < 0 {
		return 1
	}
	most := q.mostOf(cs.Op)
	if most == 0 {
		return 1
	}
	const prior = 0.01
	return (q.weight(cs.Op, q.rank[p]-q.rank[c]) + prior) / (most + prior)
}

// queueOffsetShare bounds the confidence of consumer c taking producer p when
// its offset is not the destination's likeliest: n(d)/(n(d) + n(mode)). A
// chain of consumers shifted by one message is sure of every link given its
// neighbours, and only the offset it shares with no right chain tells.
func (s *spanStitcher) queueOffsetShare(p, c int32) float64 {
	q := s.queues
	cs := &s.spans[c]
	if cs.Kind != span.KindConsumer || q.rank[p] < 0 || q.rank[c] < 0 {
		return 1
	}
	most := q.mostOf(cs.Op)
	n := q.weight(cs.Op, q.rank[p]-q.rank[c])
	if most <= 0 || n >= most {
		return 1
	}
	return n / (n + most)
}

// mostOf is the largest weight of destination op's offsets, cached until the
// next fit.
func (q *queueModels) mostOf(op int32) float64 {
	most, ok := q.most[op]
	if !ok {
		for k := range q.n {
			if k[0] == op {
				most = max(most, q.weight(op, k[1]))
			}
		}
		q.most[op] = most
	}
	return most
}
