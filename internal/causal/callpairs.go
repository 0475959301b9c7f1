package causal

import "time"

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
// in the order in which they were completed.
//
// The skew window applies here too: when the callee's clock runs ahead of the
// caller's by more than the call lasted, the return is stamped before its call. A
// return with no open call therefore waits up to skewWindow for a call of its key;
// such a pair has Return < Call. With a zero window a return must follow its call,
// as in the paper.
func FindCallPairs(msgs []Message, skewWindow time.Duration) ([]CallPair, Discards) {
	var (
		disc  Discards
		pairs = make([]CallPair, 0, len(msgs)/2)
		open  = newFIFOs() // calls waiting for their return
		early = newFIFOs() // returns waiting, within the skew window, for their call
		w     = int64(skewWindow)
	)
	for _, m := range msgs {
		switch m.Op {
		case OpCall:
			k := callKey{m.Sender, m.Receiver, m.CallID}
			if w > 0 {
				for {
					r, ok := early.peek(k)
					if !ok || m.Time-r.time <= w {
						break
					}
					early.pop(k)
					disc.ReturnWithoutCall++
				}
				if r, ok := early.pop(k); ok {
					pairs = append(pairs, CallPair{Caller: k.caller, Callee: k.callee, Call: m.Time, Return: r.time, PathID: m.PathID})
					continue
				}
			}
			open.push(k, m.Time, m.PathID)
		case OpReturn:
			k := callKey{m.Receiver, m.Sender, m.CallID}
			c, ok := open.pop(k)
			switch {
			case ok:
				pairs = append(pairs, CallPair{Caller: k.caller, Callee: k.callee, Call: c.time, Return: m.Time, PathID: c.path})
			case w > 0:
				early.push(k, m.Time, m.PathID)
			default:
				disc.ReturnWithoutCall++
			}
		default:
			disc.OneWay++
		}
	}
	disc.CallWithoutReturn += open.len()
	disc.ReturnWithoutCall += early.len()
	return pairs, disc
}

// fifos is a set of FIFO queues of timestamped entries, one per callKey, sharing one
// slab whose freed slots are reused, so that matching allocates only as the number
// of simultaneously open calls grows.
type fifos struct {
	queues map[callKey]fifo
	slab   []openCall
	free   int32
}

func newFIFOs() *fifos { return &fifos{queues: make(map[callKey]fifo), free: -1} }

func (f *fifos) push(k callKey, t int64, path uint32) {
	var slot int32
	if f.free >= 0 {
		slot, f.free = f.free, f.slab[f.free].next
		f.slab[slot] = openCall{time: t, path: path, next: -1}
	} else {
		slot = int32(len(f.slab))
		f.slab = append(f.slab, openCall{time: t, path: path, next: -1})
	}
	if q, ok := f.queues[k]; ok {
		f.slab[q.tail].next = slot
		f.queues[k] = fifo{q.head, slot}
	} else {
		f.queues[k] = fifo{slot, slot}
	}
}

func (f *fifos) peek(k callKey) (openCall, bool) {
	q, ok := f.queues[k]
	if !ok {
		return openCall{}, false
	}
	return f.slab[q.head], true
}

func (f *fifos) pop(k callKey) (openCall, bool) {
	q, ok := f.queues[k]
	if !ok {
		return openCall{}, false
	}
	c := f.slab[q.head]
	if c.next < 0 {
		delete(f.queues, k)
	} else {
		f.queues[k] = fifo{c.next, q.tail}
	}
	f.slab[q.head].next, f.free = f.free, q.head
	return c, true
}

// len counts the entries still queued.
func (f *fifos) len() int {
	n := 0
	for _, q := range f.queues {
		for i := q.head; i >= 0; i = f.slab[i].next {
			n++
		}
	}
	return n
}
