package causal

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// The pairer must give exactly the pairs, in the same order, and the discards of
// the map-based matcher it replaced (referenceCallPairs), on traces with repeated
// and missing ids, equal timestamps, one-way messages, and with and without a skew
// window.
func TestCallPairerMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 300 {
		nodes := 2 + rng.IntN(4)
		ids := 1 + rng.IntN(40)
		msgs := make([]Message, 50+rng.IntN(400))
		var now int64
		for i := range msgs {
			now += int64(rng.IntN(3)) * int64(time.Millisecond) // ties included
			m := Message{Time: now, Sender: NodeID(rng.IntN(nodes)), Receiver: NodeID(rng.IntN(nodes)), Op: Op(1 + rng.IntN(3))}
			if rng.IntN(5) > 0 {
				m.CallID = uint32(1 + rng.IntN(ids))
			}
			m.PathID = uint32(rng.IntN(10))
			msgs[i] = m
		}
		for _, w := range []time.Duration{0, 3 * time.Millisecond} {
			gotPairs, gotDisc := FindCallPairs(msgs, w)
			wantPairs, wantDisc := referenceCallPairs(msgs, w)
			if !slices.Equal(gotPairs, wantPairs) || gotDisc != wantDisc {
				t.Fatalf("trial %d, window %v: %d pairs %+v, want %d pairs %+v", trial, w, len(gotPairs), gotDisc, len(wantPairs), wantDisc)
			}
		}
	}
}

// The pairer's call order is the order Nest sorts the pairs into, and
// NestInCallOrder with it is Nest; an order that is wrong is not used.
func TestCallOrderIsNestOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := range 100 {
		var msgs []Message
		var now int64
		for range 300 + rng.IntN(300) {
			now += int64(rng.IntN(3)) * int64(time.Millisecond) // ties included
			m := Message{Time: now, Sender: NodeID(rng.IntN(4)), Receiver: NodeID(rng.IntN(4)), Op: Op(1 + rng.IntN(2))}
			if rng.IntN(4) > 0 {
				m.CallID = uint32(1 + rng.IntN(30))
			}
			msgs = append(msgs, m)
		}
		for _, w := range []time.Duration{0, 2 * time.Millisecond} {
			p := NewCallPairer(w, 0)
			var id [4]byte
			for _, m := range msgs {
				var key []byte
				if m.CallID != NoID {
					id = [4]byte{byte(m.CallID), byte(m.CallID >> 8), byte(m.CallID >> 16), byte(m.CallID >> 24)}
					key = id[:]
				}
				p.Add(m.Time, m.Op, m.Sender, m.Receiver, key, m.PathID)
			}
			pairs, _ := p.Finish()
			order := p.CallOrder()
			got, times := inCallOrder(pairs, order, false)
			if want := orderByCall(pairs); !slices.Equal(got, want) || !reflect.DeepEqual(times, timesInCallOrder(pairs, want, false)) {
				t.Fatalf("trial %d window %v: call order %v, Nest's %v", trial, w, got, want)
			}
			cfg := DefaultNestingConfig()
			cfg.SkewWindow = w
			want, err := Nest(pairs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range [][]int32{order, nil, order[:len(order)/2], slices.Repeat([]int32{0}, len(order)), reversed(order)} {
				got, err := NestInCallOrder(pairs, o, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.Parent, want.Parent) || !slices.Equal(got.Confidence, want.Confidence) {
					t.Fatalf("trial %d window %v: NestInCallOrder differs from Nest", trial, w)
				}
			}
		}
	}
}

func reversed(s []int32) []int32 {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// Ids are compared as bytes: a long id, ids that differ only after 8 bytes, and the
// empty id (none) are told apart, and the table does not keep the caller's slice.
func TestCallPairerByteIDs(t *testing.T) {
	p := NewCallPairer(0, 0)
	long := []byte("a-rather-long-call-identifier-0001")
	other := []byte("a-rather-long-call-identifier-0002")
	buf := slices.Clone(long)
	p.Add(1, OpCall, 0, 1, buf, 7)
	copy(buf, "xxxxxxxx") // the caller reuses its buffer
	p.Add(2, OpCall, 0, 1, other, 8)
	p.Add(3, OpCall, 0, 1, nil, 9)
	p.Add(4, OpReturn, 1, 0, other, 0)
	p.Add(5, OpReturn, 1, 0, long, 0)
	p.Add(6, OpReturn, 1, 0, []byte{}, 0)
	p.Add(7, OpReturn, 1, 0, long, 0)
	pairs, disc := p.Finish()
	want := []CallPair{{0, 1, 2, 4, 8}, {0, 1, 1, 5, 7}, {0, 1, 3, 6, 9}}
	if !slices.Equal(pairs, want) || disc != (Discards{ReturnWithoutCall: 1}) {
		t.Fatalf("pairs %v discards %+v, want %v and one return without call", pairs, disc, want)
	}
}

// Many keys that come and go must not grow the table: deletion leaves no
// tombstones, and slots and keys are reused.
func TestCallPairerTableStaysSmall(t *testing.T) {
	p := NewCallPairer(0, 0)
	var id [8]byte
	for i := range 100_000 {
		for k := range id {
			id[k] = byte(i >> (8 * (k % 4)))
		}
		p.Add(int64(2*i), OpCall, 0, 1, id[:], 0)
		p.Add(int64(2*i+1), OpReturn, 1, 0, id[:], 0)
	}
	if pairs, _ := p.Finish(); len(pairs) != 100_000 {
		t.Fatalf("%d pairs, want 100000", len(pairs))
	}
	if len(p.open.slots) > 64 || len(p.open.keys) > 1 || len(p.open.calls) > 1 {
		t.Fatalf("table grew to %d slots, %d keys, %d calls for one open call at a time", len(p.open.slots), len(p.open.keys), len(p.open.calls))
	}
}

var refBench = false

func BenchmarkFindCallPairs(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var msgs []Message
	var now int64
	type open struct {
		at   int64
		from NodeID
		id   uint32
	}
	var pending []open
	for i := range 200_000 {
		now += int64(rng.IntN(1000))
		if len(pending) > 0 && (len(pending) > 300 || rng.IntN(2) == 0) {
			k := rng.IntN(len(pending))
			c := pending[k]
			pending[k] = pending[len(pending)-1]
			pending = pending[:len(pending)-1]
			msgs = append(msgs, Message{Time: now, Op: OpReturn, Sender: c.from + 1, Receiver: c.from, CallID: c.id})
			continue
		}
		c := open{now, NodeID(rng.IntN(6)), uint32(i + 1)}
		pending = append(pending, c)
		msgs = append(msgs, Message{Time: now, Op: OpCall, Sender: c.from, Receiver: c.from + 1, CallID: c.id})
	}
	b.ReportAllocs()
	f := FindCallPairs
	if refBench {
		f = referenceCallPairs
	}
	for b.Loop() {
		f(msgs, 0)
	}
	b.ReportMetric(float64(len(msgs))*float64(b.N)/b.Elapsed().Seconds(), "messages/s")
}

// referenceCallPairs is FindCallPairs as it was before the streaming pairer: a Go
// map of FIFOs keyed by (caller, callee, interned id).
func referenceCallPairs(msgs []Message, skewWindow time.Duration) ([]CallPair, Discards) {
	var (
		disc  Discards
		pairs = make([]CallPair, 0, len(msgs)/2)
		open  = newFIFOs()
		early = newFIFOs()
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

// callKey identifies the calls that a return may answer: same caller, callee and id.
type callKey struct {
	caller, callee NodeID
	id             uint32
}

// openCall is an unanswered call in a FIFO per callKey, linked through next.
type refOpenCall struct {
	time int64
	path uint32
	next int32
}

type fifo struct{ head, tail int32 }

// fifos is a set of FIFO queues of timestamped entries, one per callKey, sharing one
// slab whose freed slots are reused, so that matching allocates only as the number
// of simultaneously open calls grows.
type fifos struct {
	queues map[callKey]fifo
	slab   []refOpenCall
	free   int32
}

func newFIFOs() *fifos { return &fifos{queues: make(map[callKey]fifo), free: -1} }

func (f *fifos) push(k callKey, t int64, path uint32) {
	var slot int32
	if f.free >= 0 {
		slot, f.free = f.free, f.slab[f.free].next
		f.slab[slot] = refOpenCall{time: t, path: path, next: -1}
	} else {
		slot = int32(len(f.slab))
		f.slab = append(f.slab, refOpenCall{time: t, path: path, next: -1})
	}
	if q, ok := f.queues[k]; ok {
		f.slab[q.tail].next = slot
		f.queues[k] = fifo{q.head, slot}
	} else {
		f.queues[k] = fifo{slot, slot}
	}
}

func (f *fifos) peek(k callKey) (refOpenCall, bool) {
	q, ok := f.queues[k]
	if !ok {
		return refOpenCall{}, false
	}
	return f.slab[q.head], true
}

func (f *fifos) pop(k callKey) (refOpenCall, bool) {
	q, ok := f.queues[k]
	if !ok {
		return refOpenCall{}, false
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

// IDHash reads every byte of ids of any length, so ids that differ anywhere
// usually hash apart (it only spreads keys, but a blind spot would slow a table).
func TestIDHashSeesEveryByte(t *testing.T) {
	for n := 1; n <= 40; n++ {
		id := make([]byte, n)
		base := IDHash(id)
		for i := range n {
			id[i] = 1
			if IDHash(id) == base {
				t.Errorf("length %d: a change at byte %d left the hash as it was", n, i)
			}
			id[i] = 0
		}
	}
}
