// Package engine turns captured IP packets into calls: it decodes them
// (package packet), reassembles their TCP streams (package tcpreasm) and frames
// each connection (package framing). It is pure, so that it can be tested,
// fuzzed and benchmarked without a socket; the capture source feeds it.
package engine

import (
	"errors"
	"net/netip"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/framing"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/packet"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/tcpreasm"
)

// Call is one framed call between two endpoints.
type Call struct {
	framing.Call
	Client, Server netip.AddrPort
}

// Config configures an Engine.
type Config struct {
	Flows  tcpreasm.Config
	Limits framing.Limits
	// Protocol chooses the framing of a connection by its server endpoint; nil
	// means Auto.
	Protocol func(server netip.AddrPort) framing.Protocol
}

// Stats counts what the engine saw.
type Stats struct {
	Packets   uint64
	Malformed uint64 // packets whose headers could not be decoded
	NotTCP    uint64 // packets that were not TCP (or later IP fragments)
	Flows     tcpreasm.Stats
	Framing   framing.Stats
}

// Engine is not safe for concurrent use.
type Engine struct {
	cfg   Config
	emit  func(Call)
	asm   *tcpreasm.Assembler
	fst   framing.Stats
	seg   packet.TCP
	stats Stats
}

// New returns an engine that passes every call to emit.
func New(cfg Config, emit func(Call)) *Engine {
	e := &Engine{cfg: cfg, emit: emit}
	e.asm = tcpreasm.New(cfg.Flows, handler{e})
	return e
}

// Packet processes one packet, starting at its IP header, captured at t (ns).
func (e *Engine) Packet(t int64, b []byte) {
	e.stats.Packets++
	if err := packet.DecodeIP(b, &e.seg); err != nil {
		if errors.Is(err, packet.ErrNotTCP) {
			e.stats.NotTCP++
		} else {
			e.stats.Malformed++
		}
		return
	}
	e.asm.Segment(t, &e.seg)
}

// Tick ends what only time ends (holes, idle flows, quiet generic responses).
func (e *Engine) Tick(now int64) {
	e.asm.Tick(now)
	// Framers see time only through Tick.
	e.asm.ForEach(func(f *tcpreasm.Flow) {
		if fr, ok := f.State.(framing.Framer); ok {
			fr.Tick(now)
		}
	})
}

// CloseAll ends every flow.
func (e *Engine) CloseAll(now int64) { e.asm.CloseAll(now) }

// Stats returns the counters.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.Flows = e.asm.Stats()
	s.Framing = e.fst
	return s
}

// Flows is the number of connections tracked.
func (e *Engine) Flows() int { return e.asm.Flows() }

// Held is the number of out-of-order bytes held.
func (e *Engine) Held() int { return e.asm.Held() }

type handler struct{ e *Engine }

func (h handler) Open(f *tcpreasm.Flow) any {
	p := framing.Auto
	if h.e.cfg.Protocol != nil {
		p = h.e.cfg.Protocol(f.Server)
	}
	client, server := f.Client, f.Server
	return framing.New(p, h.e.cfg.Limits, &h.e.fst, func(c framing.Call) {
		h.e.emit(Call{Call: c, Client: client, Server: server})
	})
}

func (h handler) Data(f *tcpreasm.Flow, dir tcpreasm.Dir, t int64, data []byte) {
	f.State.(framing.Framer).Data(framing.Dir(dir), t, data)
}

func (h handler) Gap(f *tcpreasm.Flow, dir tcpreasm.Dir, n int64) {
	f.State.(framing.Framer).Gap(framing.Dir(dir), n)
}

func (h handler) Close(f *tcpreasm.Flow, t int64, _ tcpreasm.CloseReason) {
	f.State.(framing.Framer).Close(t)
}
