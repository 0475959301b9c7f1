// Package tcpreasm reassembles the two byte streams of TCP connections from
// captured segments, in bounded memory, and reports what it could not see.
//
// Every connection is a Flow with a client side (Dir ClientToServer) and a
// server side. The client is the sender of the SYN when the handshake was
// captured; for a connection picked up in the middle, the endpoint whose port
// the caller names as a server port (IsServer), else the higher port.
//
// In-order data is handed to the Handler at once and never buffered here.
// Segments that arrive ahead of a hole are copied and held, at most
// MaxFlowBuffer bytes per flow and MaxTotalBuffer bytes in all; when a bound
// is reached, when the hole is older than GapTimeout, or when the peer
// acknowledges bytes that the capture never saw (the capture dropped them:
// the receiver got them), the hole is skipped and reported as a Gap of its
// length. Retransmitted and overlapping bytes are trimmed. At most MaxFlows
// connections are tracked; beyond that the least recently active one is
// closed and counted as evicted. Idle flows are closed after IdleTimeout.
package tcpreasm

import (
	"container/list"
	"net/netip"
	"sort"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/packet"
)

// Dir is the direction of a byte stream within a flow.
type Dir uint8

const (
	// ClientToServer carries the requests.
	ClientToServer Dir = 0
	// ServerToClient carries the responses.
	ServerToClient Dir = 1
)

// Handler receives the reassembled streams. Calls are made from Assembler's
// methods, on the caller's goroutine. data is only valid during the call.
type Handler interface {
	// Open is called when a flow is created; the returned value is kept in
	// Flow.State.
	Open(f *Flow) any
	// Data delivers contiguous bytes of one direction, captured at time t
	// (nanoseconds).
	Data(f *Flow, dir Dir, t int64, data []byte)
	// Gap reports n bytes of one direction that were lost before the next Data.
	Gap(f *Flow, dir Dir, n int64)
	// Close is called once when the flow ends (FIN both ways, RST, idle,
	// eviction, or Assembler.CloseAll), at time t.
	Close(f *Flow, t int64, reason CloseReason)
}

// CloseReason says why a flow ended.
type CloseReason uint8

const (
	CloseFIN CloseReason = iota
	CloseRST
	CloseIdle
	CloseEvicted
	CloseShutdown
)

// Config bounds an Assembler.
type Config struct {
	MaxFlows       int
	MaxFlowBuffer  int   // out-of-order bytes held per flow
	MaxTotalBuffer int   // out-of-order bytes held in all
	GapTimeout     int64 // ns a hole may stay open while data waits behind it
	IdleTimeout    int64 // ns without a packet after which a flow is closed
	// IsServer reports whether an endpoint is a known server (a filtered port or
	// address), to orient flows whose handshake was not captured.
	IsServer func(netip.AddrPort) bool
}

// Stats counts what the assembler did; it only grows.
type Stats struct {
	Segments       uint64 // TCP segments processed
	Bytes          uint64 // payload bytes delivered in order
	Retransmitted  uint64 // payload bytes dropped as already seen
	OutOfOrder     uint64 // segments held for a hole
	Gaps           uint64 // holes skipped
	GapBytes       uint64 // bytes in them
	FlowsOpened    uint64
	FlowsClosed    uint64
	FlowsEvicted   uint64 // closed because MaxFlows was reached
	BufferOverflow uint64 // holes skipped because a buffer bound was reached
	Midstream      uint64 // flows picked up without their handshake
}

type flowKey struct {
	a, b netip.AddrPort // a < b
}

func keyOf(src, dst netip.AddrPort) flowKey {
	if src.Compare(dst) < 0 {
		return flowKey{src, dst}
	}
	return flowKey{dst, src}
}

type segment struct {
	seq  uint32
	data []byte
	t    int64
}

type half struct {
	started bool
	next    uint32 // next expected sequence number
	ooo     []segment
	oooSize int
	holeAt  int64 // time the oldest held segment arrived
	fin     bool
	finSeq  uint32
	closed  bool
}

// Flow is one TCP connection.
type Flow struct {
	Client, Server netip.AddrPort
	// Midstream is set when the handshake was not seen.
	Midstream bool
	// State is what Handler.Open returned.
	State any

	key   flowKey
	half  [2]half
	last  int64
	elem  *list.Element
	ended bool
}

// Assembler tracks flows. It is not safe for concurrent use.
type Assembler struct {
	cfg     Config
	h       Handler
	flows   map[flowKey]*Flow
	lru     *list.List // front = least recently active
	held    int        // out-of-order bytes held in all
	stats   Stats
	scratch []*Flow
}

// New returns an assembler; zero bounds take defaults (10,000 flows, 256 KiB per
// flow, 64 MiB in all, 500 ms gap timeout, 120 s idle timeout).
func New(cfg Config, h Handler) *Assembler {
	if cfg.MaxFlows <= 0 {
		cfg.MaxFlows = 10000
	}
	if cfg.MaxFlowBuffer <= 0 {
		cfg.MaxFlowBuffer = 256 << 10
	}
	if cfg.MaxTotalBuffer <= 0 {
		cfg.MaxTotalBuffer = 64 << 20
	}
	if cfg.GapTimeout <= 0 {
		cfg.GapTimeout = 500e6
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 120e9
	}
	return &Assembler{cfg: cfg, h: h, flows: make(map[flowKey]*Flow), lru: list.New()}
}

// Stats returns the counters.
func (a *Assembler) Stats() Stats { return a.stats }

// Flows is the number of flows tracked.
func (a *Assembler) Flows() int { return len(a.flows) }

// Held is the number of out-of-order bytes held.
func (a *Assembler) Held() int { return a.held }

// Segment processes one captured segment at time t (nanoseconds).
func (a *Assembler) Segment(t int64, s *packet.TCP) {
	a.stats.Segments++
	k := keyOf(s.Src, s.Dst)
	f := a.flows[k]
	if f == nil {
		if s.Flags&packet.FlagRST != 0 || (len(s.Payload) == 0 && s.Flags&packet.FlagSYN == 0) {
			return // nothing to follow: a stray ACK, FIN or RST
		}
		f = a.open(k, t, s)
	}
	f.last = t
	a.lru.MoveToBack(f.elem)
	dir := ClientToServer
	if s.Src != f.Client {
		dir = ServerToClient
	}
	if s.Flags&packet.FlagRST != 0 {
		a.close(f, t, CloseRST)
		return
	}
	h := &f.half[dir]
	seq := s.Seq
	if s.Flags&packet.FlagSYN != 0 {
		if !h.started {
			h.started, h.next = true, seq+1
		}
		seq++
	}
	if !h.started {
		h.started, h.next = true, seq
	}
	if len(s.Payload) > 0 {
		a.data(f, dir, t, seq, s.Payload)
	}
	if s.Flags&packet.FlagFIN != 0 && !h.fin {
		h.fin, h.finSeq = true, seq+uint32(len(s.Payload))+uint32(s.Truncated)
	}
	if s.Truncated > 0 && !f.ended {
		// The capture kept only part of the segment: the rest is a hole that no
		// retransmission will fill.
		end := seq + uint32(len(s.Payload)) + uint32(s.Truncated)
		if h.started && int32(seq+uint32(len(s.Payload))-h.next) >= 0 {
			a.lose(f, dir, end)
		}
	}
	// The peer acknowledges bytes of the other direction: anything below the ack
	// that the capture has not delivered was lost by the capture.
	if s.Flags&packet.FlagACK != 0 && !f.ended {
		o := &f.half[1-dir]
		if o.started && int32(s.Ack-o.next) > 0 && !(o.fin && s.Ack == o.finSeq+1 && o.next == o.finSeq) {
			limit := s.Ack
			if o.fin && int32(limit-o.finSeq) > 0 {
				limit = o.finSeq
			}
			a.lose(f, 1-dir, limit)
		}
	}
	a.checkFIN(f, t)
}

func (a *Assembler) open(k flowKey, t int64, s *packet.TCP) *Flow {
	if len(a.flows) >= a.cfg.MaxFlows {
		if e := a.lru.Front(); e != nil {
			a.stats.FlowsEvicted++
			a.close(e.Value.(*Flow), t, CloseEvicted)
		}
	}
	f := &Flow{key: k, last: t}
	switch {
	case s.Flags&(packet.FlagSYN|packet.FlagACK) == packet.FlagSYN:
		f.Client, f.Server = s.Src, s.Dst
	case s.Flags&(packet.FlagSYN|packet.FlagACK) == packet.FlagSYN|packet.FlagACK:
		f.Client, f.Server = s.Dst, s.Src
	default:
		f.Midstream = true
		a.stats.Midstream++
		srvSrc, srvDst := false, false
		if a.cfg.IsServer != nil {
			srvSrc, srvDst = a.cfg.IsServer(s.Src), a.cfg.IsServer(s.Dst)
		}
		switch {
		case srvDst && !srvSrc:
			f.Client, f.Server = s.Src, s.Dst
		case srvSrc && !srvDst:
			f.Client, f.Server = s.Dst, s.Src
		case s.Src.Port() > s.Dst.Port():
			f.Client, f.Server = s.Src, s.Dst
		default:
			f.Client, f.Server = s.Dst, s.Src
		}
	}
	f.elem = a.lru.PushBack(f)
	a.flows[k] = f
	a.stats.FlowsOpened++
	f.State = a.h.Open(f)
	return f
}

func (a *Assembler) data(f *Flow, dir Dir, t int64, seq uint32, p []byte) {
	h := &f.half[dir]
	if h.closed {
		return
	}
	diff := int32(seq - h.next)
	if diff < 0 {
		overlap := int(-diff)
		if overlap >= len(p) {
			a.stats.Retransmitted += uint64(len(p))
			return
		}
		a.stats.Retransmitted += uint64(overlap)
		p, seq = p[overlap:], h.next
		diff = 0
	}
	if diff == 0 {
		a.deliver(f, dir, t, p)
		a.drain(f, dir, t)
		return
	}
	// Ahead of a hole: hold a copy, within bounds.
	a.stats.OutOfOrder++
	if len(h.ooo) == 0 {
		h.holeAt = t
	}
	cp := make([]byte, len(p))
	copy(cp, p)
	i := sort.Search(len(h.ooo), func(i int) bool { return int32(h.ooo[i].seq-seq) >= 0 })
	h.ooo = append(h.ooo, segment{})
	copy(h.ooo[i+1:], h.ooo[i:])
	h.ooo[i] = segment{seq: seq, data: cp, t: t}
	h.oooSize += len(cp)
	a.held += len(cp)
	for (h.oooSize > a.cfg.MaxFlowBuffer || a.held > a.cfg.MaxTotalBuffer) && len(h.ooo) > 0 {
		a.stats.BufferOverflow++
		if !a.skip(f, dir, h.ooo[0].seq) {
			a.drain(f, dir, t)
		}
	}
}

func (a *Assembler) deliver(f *Flow, dir Dir, t int64, p []byte) {
	h := &f.half[dir]
	h.next += uint32(len(p))
	a.stats.Bytes += uint64(len(p))
	a.h.Data(f, dir, t, p)
}

// drain delivers held segments that have become contiguous.
func (a *Assembler) drain(f *Flow, dir Dir, t int64) {
	h := &f.half[dir]
	for len(h.ooo) > 0 && !f.ended {
		s := h.ooo[0]
		diff := int32(s.seq - h.next)
		if diff > 0 {
			return
		}
		h.ooo = h.ooo[1:]
		h.oooSize -= len(s.data)
		a.held -= len(s.data)
		if -diff < int32(len(s.data)) {
			a.deliver(f, dir, t, s.data[-diff:])
		} else {
			a.stats.Retransmitted += uint64(len(s.data))
		}
		if len(h.ooo) > 0 {
			h.holeAt = h.ooo[0].t
		}
	}
	if len(h.ooo) == 0 {
		h.ooo = nil
	}
}

// skip gives up on the bytes before upTo: they are reported as a gap and
// delivery goes on from upTo with whatever is held.
func (a *Assembler) skip(f *Flow, dir Dir, upTo uint32) bool {
	h := &f.half[dir]
	n := int32(upTo - h.next)
	if n <= 0 {
		return false
	}
	a.stats.Gaps++
	a.stats.GapBytes += uint64(n)
	h.next = upTo
	a.h.Gap(f, dir, int64(n))
	a.drain(f, dir, f.last)
	return true
}

// lose reports as gaps the bytes before limit that are neither delivered nor
// held, and delivers the held ones in between.
func (a *Assembler) lose(f *Flow, dir Dir, limit uint32) {
	h := &f.half[dir]
	for !f.ended && int32(limit-h.next) > 0 {
		to := limit
		if len(h.ooo) > 0 && int32(h.ooo[0].seq-limit) < 0 {
			to = h.ooo[0].seq // gap up to the held segment, then drain it
		}
		if !a.skip(f, dir, to) {
			return
		}
	}
}

func (a *Assembler) checkFIN(f *Flow, t int64) {
	if f.ended {
		return
	}
	done := 0
	for d := range f.half {
		h := &f.half[d]
		if h.fin && h.next == h.finSeq {
			done++
		}
	}
	if done == 2 {
		a.close(f, t, CloseFIN)
	}
}

func (a *Assembler) close(f *Flow, t int64, why CloseReason) {
	if f.ended {
		return
	}
	for d := range f.half {
		h := &f.half[d]
		a.held -= h.oooSize
		h.ooo, h.oooSize = nil, 0
	}
	f.ended = true
	delete(a.flows, f.key)
	a.lru.Remove(f.elem)
	a.stats.FlowsClosed++
	a.h.Close(f, t, why)
}

// Tick skips holes older than GapTimeout and closes flows idle for
// IdleTimeout, as of now (ns). Call it periodically.
func (a *Assembler) Tick(now int64) {
	a.scratch = a.scratch[:0]
	for e := a.lru.Front(); e != nil; e = e.Next() {
		f := e.Value.(*Flow)
		if now-f.last < a.cfg.IdleTimeout {
			break // the rest were active later
		}
		a.scratch = append(a.scratch, f)
	}
	for _, f := range a.scratch {
		a.close(f, now, CloseIdle)
	}
	for _, f := range a.flows {
		for d := range f.half {
			h := &f.half[d]
			if len(h.ooo) > 0 && now-h.holeAt >= a.cfg.GapTimeout {
				a.skip(f, Dir(d), h.ooo[0].seq)
			}
		}
		a.checkFIN(f, now)
	}
}

// CloseAll closes every flow (at shutdown).
func (a *Assembler) CloseAll(now int64) {
	a.scratch = a.scratch[:0]
	for _, f := range a.flows {
		a.scratch = append(a.scratch, f)
	}
	for _, f := range a.scratch {
		a.close(f, now, CloseShutdown)
	}
}

// ForEach calls fn for every flow, least recently active first.
func (a *Assembler) ForEach(fn func(*Flow)) {
	for e := a.lru.Front(); e != nil; e = e.Next() {
		fn(e.Value.(*Flow))
	}
}
