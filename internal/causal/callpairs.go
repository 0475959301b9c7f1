package causal

import (
	"encoding/binary"
	"time"
)

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
	p := NewCallPairer(skewWindow, len(msgs)/2)
	var id [4]byte
	for _, m := range msgs {
		var key []byte
		if m.CallID != NoID {
			binary.LittleEndian.PutUint32(id[:], m.CallID)
			key = id[:]
		}
		p.Add(m.Time, m.Op, m.Sender, m.Receiver, key, m.PathID)
	}
	return p.Finish()
}

// CallPairer is FindCallPairs one message at a time, for a reader that matches
// calls while it parses and so never holds the messages. It only keeps the calls
// that are still open, keyed by the bytes of their ids, so ids need not be interned.
type CallPairer struct {
	w     int64
	pairs []CallPair
	disc  Discards
	open  openCalls // calls waiting for their return
	early openCalls // returns waiting, within the skew window, for their call
	// bySeq[s] is the pair of the s-th call message, −1 while it has none: the
	// pairs in order of their calls, which Nest would otherwise sort for.
	bySeq []int32
}

// NewCallPairer returns a pairer with the given skew window and room for about
// pairs pairs.
func NewCallPairer(skewWindow time.Duration, pairs int) *CallPairer {
	return &CallPairer{w: int64(skewWindow), pairs: make([]CallPair, 0, max(pairs, 0)), bySeq: make([]int32, 0, max(pairs, 0))}
}

// Add takes the next message in time order. id holds its call id's bytes, nil or
// empty for none; two messages have the same id exactly when these bytes are equal.
// Add does not keep id.
func (p *CallPairer) Add(t int64, op Op, sender, receiver NodeID, id []byte, path uint32) {
	p.AddHashed(t, op, sender, receiver, id, IDHash(id), path)
}

// AddHashed is Add for a caller that has IDHash(id) already: a reader that
// parses on several goroutines hashes there, and the matching, which is
// sequential, does not.
func (p *CallPairer) AddHashed(t int64, op Op, sender, receiver NodeID, id []byte, idHash uint64, path uint32) {
	switch op {
	case OpCall:
		h := hashKey(sender, receiver, idHash)
		seq := int32(len(p.bySeq))
		p.bySeq = append(p.bySeq, -1)
		if p.w > 0 {
			e := p.early.find(h, sender, receiver, id)
			for e >= 0 && t-p.early.head(e).time > p.w {
				p.early.pop(e)
				p.disc.ReturnWithoutCall++
				e = p.early.find(h, sender, receiver, id)
			}
			if e >= 0 {
				r := p.early.pop(e)
				p.bySeq[seq] = int32(len(p.pairs))
				p.pairs = append(p.pairs, CallPair{Caller: sender, Callee: receiver, Call: t, Return: r.time, PathID: path})
				return
			}
		}
		p.open.push(h, sender, receiver, id, t, path, seq)
	case OpReturn:
		h := hashKey(receiver, sender, idHash)
		if e := p.open.find(h, receiver, sender, id); e >= 0 {
			c := p.open.pop(e)
			p.bySeq[c.seq] = int32(len(p.pairs))
			p.pairs = append(p.pairs, CallPair{Caller: receiver, Callee: sender, Call: c.time, Return: t, PathID: c.path})
		} else if p.w > 0 {
			p.early.push(h, receiver, sender, id, t, path, -1)
		} else {
			p.disc.ReturnWithoutCall++
		}
	default:
		p.disc.OneWay++
	}
}

// Finish counts what is still waiting as discarded and returns the pairs, in the
// order in which they were completed, and the discards.
func (p *CallPairer) Finish() ([]CallPair, Discards) {
	d := p.disc
	d.CallWithoutReturn += p.open.queued
	d.ReturnWithoutCall += p.early.queued
	return p.pairs, d
}

// CallOrder returns the indices of the pairs Finish returns in the order of their
// call messages: by call time, as the messages came in time order, and equal
// times in the order they came. NestInCallOrder takes it instead of sorting.
func (p *CallPairer) CallOrder() []int32 {
	order := make([]int32, 0, len(p.pairs))
	for _, i := range p.bySeq {
		if i >= 0 {
			order = append(order, i)
		}
	}
	return order
}

// openCall is an unanswered call (or an early return) in a FIFO per key, linked
// through next.
type openCall struct {
	time int64
	path uint32
	next int32
	seq  int32 // the call's message sequence number (CallPairer.bySeq)
}

// openKey is one (caller, callee, id) with calls waiting, and its FIFO: the first
// inline, the rest, when ids repeat, linked in openCalls.calls.
type openKey struct {
	hash           uint64
	caller, callee NodeID
	id             []byte // owned; its capacity is reused by the next key in this slot
	first          openCall
	head, tail     int32 // the rest, into openCalls.calls; −1 when none
}

// openCalls is a set of FIFO queues of timestamped entries, one per (caller,
// callee, id), in an open-addressed table that drops a key when its queue empties.
// It holds only what is waiting, a few hundred entries at a time on a trace of
// millions of calls, so it stays in cache; keys, their id bytes and queue slots
// are reused, so matching allocates only as the number waiting at once grows.
type openCalls struct {
	slots    []int32 // index into keys + 1; 0 is empty. Linear probing.
	keys     []openKey
	freeKeys []int32
	calls    []openCall
	freeCall int32 // head of the free list of calls + 1, linked through next; 0 none
	queued   int
	used     int
}

// IDHash hashes a call id's bytes for CallPairer.AddHashed. The hash only spreads
// keys over a table's slots, so a fixed function keeps the table's behaviour
// reproducible at no cost to correctness.
func IDHash(id []byte) uint64 {
	n := len(id)
	h := uint64(n) * 0x9e3779b97f4a7c15
	switch {
	case n >= 8:
		for k := 0; k+8 < n; k += 8 {
			h = (h ^ binary.LittleEndian.Uint64(id[k:])) * 0x94d049bb133111eb
			h ^= h >> 29
		}
		// The last eight bytes, overlapping what came before when n is not a
		// multiple of eight: with n in the hash, still a function of the bytes.
		h ^= binary.LittleEndian.Uint64(id[n-8:])
	case n >= 4:
		h ^= uint64(binary.LittleEndian.Uint32(id)) | uint64(binary.LittleEndian.Uint32(id[n-4:]))<<32
	case n > 0:
		h ^= uint64(id[0]) | uint64(id[n/2])<<8 | uint64(id[n-1])<<16
	}
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// hashKey mixes a key's nodes into its id's hash.
func hashKey(caller, callee NodeID, idHash uint64) uint64 {
	h := (idHash ^ (uint64(uint32(caller))<<32 | uint64(uint32(callee)))) * 0xbf58476d1ce4e5b9
	return h ^ h>>31
}

// find returns the index in keys of the key whose hashKey is h, or -1.
func (o *openCalls) find(h uint64, caller, callee NodeID, id []byte) int32 {
	if o.used == 0 {
		return -1
	}
	mask := uint64(len(o.slots) - 1)
	for i := h >> 32 & mask; ; i = (i + 1) & mask {
		s := o.slots[i]
		if s == 0 {
			return -1
		}
		k := &o.keys[s-1]
		if k.hash == h && k.caller == caller && k.callee == callee && string(k.id) == string(id) {
			return s - 1
		}
	}
}

func (o *openCalls) head(k int32) openCall { return o.keys[k].first }

// push appends an entry to the queue of the key whose hashKey is h, adding the
// key when new.
func (o *openCalls) push(h uint64, caller, callee NodeID, id []byte, t int64, path uint32, seq int32) {
	c := openCall{time: t, path: path, next: -1, seq: seq}
	o.queued++
	if k := o.find(h, caller, callee, id); k >= 0 {
		var slot int32
		if o.freeCall > 0 {
			slot = o.freeCall - 1
			o.freeCall = o.calls[slot].next + 1
			o.calls[slot] = c
		} else {
			slot = int32(len(o.calls))
			o.calls = append(o.calls, c)
		}
		key := &o.keys[k]
		if key.tail >= 0 {
			o.calls[key.tail].next = slot
		} else {
			key.head = slot
		}
		key.tail = slot
		return
	}
	if 2*(o.used+1) > len(o.slots) { // at most half full: short probes
		o.grow()
	}
	var k int32
	if n := len(o.freeKeys); n > 0 {
		k, o.freeKeys = o.freeKeys[n-1], o.freeKeys[:n-1]
	} else {
		k = int32(len(o.keys))
		o.keys = append(o.keys, openKey{})
	}
	key := &o.keys[k]
	key.hash, key.caller, key.callee = h, caller, callee
	key.id = append(key.id[:0], id...)
	key.first, key.head, key.tail = c, -1, -1
	o.insert(k)
}

// pop removes and returns the head of key k's queue, dropping the key when empty.
func (o *openCalls) pop(k int32) openCall {
	key := &o.keys[k]
	c := key.first
	o.queued--
	if slot := key.head; slot >= 0 {
		key.first = o.calls[slot]
		key.head = key.first.next
		if key.head < 0 {
			key.tail = -1
		}
		o.calls[slot].next, o.freeCall = o.freeCall-1, slot+1
		return c
	}
	o.remove(k)
	o.freeKeys = append(o.freeKeys, k)
	return c
}

func (o *openCalls) insert(k int32) {
	mask := uint64(len(o.slots) - 1)
	i := o.keys[k].hash >> 32 & mask
	for o.slots[i] != 0 {
		i = (i + 1) & mask
	}
	o.slots[i] = k + 1
	o.used++
}

// remove deletes key k's slot by backward shifting, which keeps probe runs intact
// without tombstones, so a table that sees millions of keys come and go does not
// fill up.
func (o *openCalls) remove(k int32) {
	mask := uint64(len(o.slots) - 1)
	i := o.keys[k].hash >> 32 & mask
	for o.slots[i] != k+1 {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; o.slots[j] != 0; j = (j + 1) & mask {
		home := o.keys[o.slots[j]-1].hash >> 32 & mask
		// The entry at j may move to the hole at i when its home is not in (i, j].
		if (j-home)&mask >= (j-i)&mask {
			o.slots[i] = o.slots[j]
			i = j
		}
	}
	o.slots[i] = 0
	o.used--
}

func (o *openCalls) grow() {
	old := o.slots
	o.slots = make([]int32, max(2*len(old), 64))
	o.used = 0
	for _, s := range old {
		if s != 0 {
			o.insert(s - 1)
		}
	}
}
