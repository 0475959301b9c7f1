package causal

// CallPair is one call matched with its return (paper 001 §5.1.1.1): Caller sent a
// CALL_SENT to Callee at Call, and Callee sent the matching RET_SENT at Return.
type CallPair struct {
	Caller, Callee NodeID
	Call, Return   int64  // nanoseconds since the epoch
	PathID         uint32 // ground-truth path of the call message; NoID when absent
}

// Latency is the time between the call and its return, in nanoseconds.
func (p CallPair) Latency() int64 { return p.Return - p.Call }

// Discards counts the messages the nesting algorithm could not use. The paper
// discards unmatched messages so that extraneous and dropped messages do not reach
// the later steps (§5.1.1.1); we keep the reasons apart so that a user can tell a
// lossy capture from a one-way protocol.
type Discards struct {
	ReturnWithoutCall int `json:"return_without_call"`
	CallWithoutReturn int `json:"call_without_return"`
	OneWay            int `json:"one_way"` // MSG_SENT, which only the convolution algorithm uses
}

// Total is the number of discarded messages.
func (d Discards) Total() int { return d.ReturnWithoutCall + d.CallWithoutReturn + d.OneWay }

// callKey identifies the calls that a return may answer: same caller, callee and id.
type callKey struct {
	caller, callee NodeID
	id             uint32
}

// openCall is an unanswered call in a FIFO per callKey, linked through next.
type openCall struct {
	time int64
	path uint32
	next int32
}

type fifo struct{ head, tail int32 }

// FindCallPairs matches every RET_SENT with an earlier open CALL_SENT of the same
// (caller, callee, call id), as procedure FindCallPairs of figure 4. When ids are
// missing ("-") or repeat (retransmissions), the return takes the earliest open call
// of that key, the paper's fallback. msgs must be sorted by time. Pairs are returned
// in the order of their returns.
func FindCallPairs(msgs []Message) ([]CallPair, Discards) {
	var (
		disc  Discards
		pairs = make([]CallPair, 0, len(msgs)/2)
		open  = make(map[callKey]fifo)
		slab  []openCall // nodes of all FIFOs; freed slots are reused through free
		free  = int32(-1)
	)
	for _, m := range msgs {
		switch m.Op {
		case OpCall:
			k := callKey{m.Sender, m.Receiver, m.CallID}
			var slot int32
			if free >= 0 {
				slot, free = free, slab[free].next
				slab[slot] = openCall{time: m.Time, path: m.PathID, next: -1}
			} else {
				slot = int32(len(slab))
				slab = append(slab, openCall{time: m.Time, path: m.PathID, next: -1})
			}
			if q, ok := open[k]; ok {
				slab[q.tail].next = slot
				open[k] = fifo{q.head, slot}
			} else {
				open[k] = fifo{slot, slot}
			}
		case OpReturn:
			k := callKey{m.Receiver, m.Sender, m.CallID}
			q, ok := open[k]
			if !ok {
				disc.ReturnWithoutCall++
				continue
			}
			c := slab[q.head]
			if c.next < 0 {
				delete(open, k)
			} else {
				open[k] = fifo{c.next, q.tail}
			}
			slab[q.head].next, free = free, q.head
			pairs = append(pairs, CallPair{Caller: k.caller, Callee: k.callee, Call: c.time, Return: m.Time, PathID: c.path})
		default:
			disc.OneWay++
		}
	}
	for _, q := range open {
		for i := q.head; i >= 0; i = slab[i].next {
			disc.CallWithoutReturn++
		}
	}
	return pairs, disc
}
