package tcpreasm

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/packet"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/pkttest"
)

type recorder struct {
	data   [2]bytes.Buffer
	gaps   [2]int64
	closed []CloseReason
	opened int
}

func (r *recorder) Open(*Flow) any { r.opened++; return nil }
func (r *recorder) Data(_ *Flow, d Dir, _ int64, b []byte) {
	r.data[d].Write(b)
}
func (r *recorder) Gap(_ *Flow, d Dir, n int64)             { r.gaps[d] += n }
func (r *recorder) Close(_ *Flow, _ int64, why CloseReason) { r.closed = append(r.closed, why) }

var (
	cli = netip.MustParseAddrPort("10.0.0.1:40000")
	srv = netip.MustParseAddrPort("10.0.0.2:80")
)

func seg(src, dst netip.AddrPort, seq, ack uint32, flags uint8, payload string) *packet.TCP {
	var s packet.TCP
	if err := packet.DecodeIP(pkttest.Packet(src, dst, seq, ack, flags, []byte(payload)), &s); err != nil {
		panic(err)
	}
	return &s
}

func TestOutOfOrderRetransmitAndFIN(t *testing.T) {
	r := &recorder{}
	a := New(Config{}, r)
	a.Segment(0, seg(cli, srv, 99, 0, packet.FlagSYN, ""))
	a.Segment(1, seg(srv, cli, 499, 100, packet.FlagSYN|packet.FlagACK, ""))
	a.Segment(2, seg(cli, srv, 106, 500, packet.FlagACK, "world")) // ahead of a hole
	a.Segment(3, seg(cli, srv, 100, 500, packet.FlagACK, "hello "))
	a.Segment(4, seg(cli, srv, 100, 500, packet.FlagACK, "hello wo")) // retransmission, overlapping
	a.Segment(5, seg(cli, srv, 111, 500, packet.FlagACK|packet.FlagFIN, "!"))
	a.Segment(6, seg(srv, cli, 500, 113, packet.FlagACK|packet.FlagFIN, "bye"))
	if got := r.data[ClientToServer].String(); got != "hello world!" {
		t.Errorf("client stream %q", got)
	}
	if got := r.data[ServerToClient].String(); got != "bye" {
		t.Errorf("server stream %q", got)
	}
	if len(r.closed) != 1 || r.closed[0] != CloseFIN || a.Flows() != 0 {
		t.Errorf("closed %v, flows %d", r.closed, a.Flows())
	}
	st := a.Stats()
	if st.OutOfOrder != 1 || st.Retransmitted != 8 || st.Gaps != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestGapTimeoutAndAckRevealsLoss(t *testing.T) {
	r := &recorder{}
	a := New(Config{GapTimeout: 100}, r)
	a.Segment(0, seg(cli, srv, 0, 0, packet.FlagSYN, ""))
	a.Segment(0, seg(cli, srv, 1, 0, packet.FlagACK, "aaaa"))
	a.Segment(1, seg(cli, srv, 9, 0, packet.FlagACK, "cccc")) // bytes 5-8 lost
	a.Tick(50)
	if r.gaps[0] != 0 {
		t.Fatal("gap skipped before its timeout")
	}
	a.Tick(200)
	if r.gaps[0] != 4 || r.data[0].String() != "aaaacccc" {
		t.Fatalf("gaps %d, data %q", r.gaps[0], r.data[0].String())
	}
	// The server acknowledges 10 bytes the capture never saw.
	a.Segment(300, seg(srv, cli, 0, 23, packet.FlagACK, ""))
	if r.gaps[0] != 14 {
		t.Errorf("ack-revealed gap: %d bytes lost in all, want 14", r.gaps[0])
	}
	a.Segment(301, seg(cli, srv, 23, 0, packet.FlagACK, "dd"))
	if r.data[0].String() != "aaaaccccdd" {
		t.Errorf("data after the loss %q", r.data[0].String())
	}
}

func TestBoundsAndEviction(t *testing.T) {
	r := &recorder{}
	a := New(Config{MaxFlows: 3, MaxFlowBuffer: 100, IdleTimeout: 1000}, r)
	for i := range 5 {
		c := netip.AddrPortFrom(cli.Addr(), uint16(40000+i))
		a.Segment(int64(i), seg(c, srv, 0, 0, packet.FlagSYN, ""))
	}
	if a.Flows() != 3 || a.Stats().FlowsEvicted != 2 {
		t.Fatalf("flows %d evicted %d", a.Flows(), a.Stats().FlowsEvicted)
	}
	// Out-of-order data beyond the per-flow bound is not held.
	c := netip.AddrPortFrom(cli.Addr(), 40004)
	for i := range 10 {
		a.Segment(10, seg(c, srv, uint32(100+i*50), 0, packet.FlagACK, fmt.Sprintf("%050d", i)))
	}
	if a.Held() > 100 || a.Stats().BufferOverflow == 0 {
		t.Errorf("held %d, overflows %d", a.Held(), a.Stats().BufferOverflow)
	}
	a.Tick(5000)
	if a.Flows() != 0 || a.Held() != 0 {
		t.Errorf("idle flows left: %d, held %d", a.Flows(), a.Held())
	}
}

func TestTruncatedCapture(t *testing.T) {
	r := &recorder{}
	a := New(Config{}, r)
	a.Segment(0, seg(cli, srv, 0, 0, packet.FlagSYN, ""))
	s := seg(cli, srv, 1, 0, packet.FlagACK, "0123456789")
	s.Payload, s.Truncated = s.Payload[:4], 6 // the snap length kept 4 bytes
	a.Segment(1, s)
	a.Segment(2, seg(cli, srv, 11, 0, packet.FlagACK, "next"))
	if r.data[0].String() != "0123next" || r.gaps[0] != 6 {
		t.Errorf("data %q gaps %d", r.data[0].String(), r.gaps[0])
	}
}

func TestMidstreamOrientation(t *testing.T) {
	r := &recorder{}
	a := New(Config{IsServer: func(ap netip.AddrPort) bool { return ap.Port() == 50000 }}, r)
	a.Segment(0, seg(netip.MustParseAddrPort("10.0.0.2:50000"), netip.MustParseAddrPort("10.0.0.1:60000"), 7, 0, packet.FlagACK, "resp"))
	var f *Flow
	a.ForEach(func(x *Flow) { f = x })
	if f == nil || f.Server.Port() != 50000 || !f.Midstream {
		t.Fatalf("flow %+v", f)
	}
}
