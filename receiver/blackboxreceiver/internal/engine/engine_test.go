package engine

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/framing"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/pkttest"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/tcpreasm"
)

var (
	cli = netip.MustParseAddrPort("10.0.0.1:40000")
	srv = netip.MustParseAddrPort("10.0.0.2:8080")
	db  = netip.MustParseAddrPort("[fd00::3]:5432")
)

const ms = int64(1e6)

func run(t *testing.T, cfg Config, script func(out func(int64, []byte))) ([]Call, *Engine) {
	t.Helper()
	var calls []Call
	e := New(cfg, func(c Call) { calls = append(calls, c) })
	script(e.Packet)
	e.CloseAll(1 << 62)
	return calls, e
}

func req(method, path, body string) []byte {
	if body == "" {
		return []byte(method + " " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	return []byte(fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", method, path, len(body), body))
}

func resp(status int, body string) []byte {
	return []byte(fmt.Sprintf("HTTP/1.1 %d OK\r\nContent-Length: %d\r\n\r\n%s", status, len(body), body))
}

func TestHTTPKeepAlive(t *testing.T) {
	calls, e := run(t, Config{}, func(out func(int64, []byte)) {
		c := pkttest.NewConn(cli, srv, out)
		c.Handshake(0)
		c.Send(1*ms, true, req("POST", "/op/catalog", strings.Repeat("x", 3000)))
		c.Send(5*ms, false, resp(200, strings.Repeat("y", 5000)))
		c.Ack(6*ms, true)
		c.Send(10*ms, true, req("GET", "/txn/Home?x=1", ""))
		c.Send(12*ms, false, resp(404, ""))
		c.Close(20 * ms)
	})
	if len(calls) != 2 {
		t.Fatalf("calls %d, want 2: %+v (stats %+v)", len(calls), calls, e.Stats())
	}
	c := calls[0]
	if c.Method != "POST" || c.Target != "/op/catalog" || c.Status != 200 || c.ReqStart != 1*ms || c.RespEnd != 5*ms || c.Client != cli || c.Server != srv || c.Gap {
		t.Errorf("first call %+v", c)
	}
	if c.ReqBytes != int64(len(req("POST", "/op/catalog", strings.Repeat("x", 3000)))) {
		t.Errorf("request bytes %d", c.ReqBytes)
	}
	if c := calls[1]; c.Method != "GET" || c.Status != 404 || c.ReqStart != 10*ms || c.RespEnd != 12*ms {
		t.Errorf("second call %+v", c)
	}
	if st := e.Stats(); st.Flows.FlowsClosed != 1 || st.Flows.Gaps != 0 || st.Framing.Calls != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestHTTPChunkedAndLossInBody(t *testing.T) {
	chunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n"
	calls, e := run(t, Config{}, func(out func(int64, []byte)) {
		c := pkttest.NewConn(cli, srv, out)
		c.MSS = 7
		c.Handshake(0)
		c.Send(1*ms, true, req("GET", "/a", ""))
		c.Send(2*ms, false, []byte(chunked))
		c.MSS = 1000
		// The capture loses the middle segment of a 3000-byte body; the server's
		// ACK reveals the hole, and the framing holds (the length is known).
		c.Send(3*ms, true, req("PUT", "/b", strings.Repeat("z", 2500)), 1)
		c.Ack(3*ms, false)
		c.Send(4*ms, false, resp(201, ""))
		c.Send(5*ms, true, req("GET", "/c", ""))
		c.Send(6*ms, false, resp(200, "ok"))
		c.Close(7 * ms)
	})
	if len(calls) != 3 {
		t.Fatalf("calls %+v, stats %+v", calls, e.Stats())
	}
	if calls[0].Status != 200 || calls[0].RespStart != 2*ms || calls[0].Gap {
		t.Errorf("chunked call %+v", calls[0])
	}
	if calls[1].Method != "PUT" || calls[1].Status != 201 || !calls[1].Gap {
		t.Errorf("gapped call %+v", calls[1])
	}
	if calls[2].Target != "/c" || calls[2].Gap {
		t.Errorf("call after the gap %+v", calls[2])
	}
	if st := e.Stats(); st.Flows.Gaps != 1 || st.Flows.GapBytes != 1000 {
		t.Errorf("gaps %d (%d bytes), want 1 (1000)", st.Flows.Gaps, st.Flows.GapBytes)
	}
}

func TestGeneric(t *testing.T) {
	calls, e := run(t, Config{Protocol: func(netip.AddrPort) framing.Protocol { return framing.Generic }}, func(out func(int64, []byte)) {
		c := pkttest.NewConn(netip.MustParseAddrPort("[fd00::9]:50000"), db, out)
		c.Handshake(0)
		c.Send(1*ms, false, []byte("greeting")) // server first: not a call
		c.Send(2*ms, true, []byte("Q1"))
		c.Send(3*ms, false, []byte("R1a"))
		c.Send(4*ms, false, []byte("R1b"))
		c.MSS = 2
		c.Send(5*ms, true, []byte("Q2Q2"))
		c.Send(6*ms, false, []byte("R2"))
	})
	if len(calls) != 2 {
		t.Fatalf("calls %+v stats %+v", calls, e.Stats())
	}
	if c := calls[0]; c.ReqStart != 2*ms || c.RespStart != 3*ms || c.RespEnd != 4*ms || c.RespBytes != 6 || c.Protocol != framing.Generic {
		t.Errorf("generic call %+v", c)
	}
	if e.Stats().Framing.Unsolicited != 1 {
		t.Errorf("unsolicited %d", e.Stats().Framing.Unsolicited)
	}
}

func TestReorderedSegments(t *testing.T) {
	var pkts []struct {
		t int64
		b []byte
	}
	c := pkttest.NewConn(cli, srv, func(t int64, b []byte) {
		pkts = append(pkts, struct {
			t int64
			b []byte
		}{t, b})
	})
	c.Handshake(0)
	c.MSS = 10
	c.Send(1*ms, true, req("GET", "/reordered/path", ""))
	c.Send(2*ms, false, resp(200, "fine"))
	// swap the 2nd and 3rd request segments (indices 3 and 4 after the handshake)
	pkts[3], pkts[4] = pkts[4], pkts[3]
	var calls []Call
	e := New(Config{}, func(c Call) { calls = append(calls, c) })
	for _, p := range pkts {
		e.Packet(p.t, p.b)
	}
	e.CloseAll(1e12)
	if len(calls) != 1 || calls[0].Target != "/reordered/path" || calls[0].Gap {
		t.Fatalf("calls %+v stats %+v", calls, e.Stats())
	}
	if e.Stats().Flows.OutOfOrder != 1 {
		t.Errorf("out of order %d", e.Stats().Flows.OutOfOrder)
	}
}

func TestMidstreamPickup(t *testing.T) {
	calls, e := run(t, Config{}, func(out func(int64, []byte)) {
		c := pkttest.NewConn(cli, srv, out)
		// no handshake; the capture starts inside a response body
		c.Send(1*ms, false, []byte("tail of an earlier body"))
		c.Send(2*ms, true, req("GET", "/x", ""))
		c.Send(3*ms, false, resp(200, "ok"))
	})
	if len(calls) != 1 || calls[0].Target != "/x" || calls[0].Client != cli {
		t.Fatalf("calls %+v stats %+v", calls, e.Stats())
	}
}

func TestMalformedPackets(t *testing.T) {
	e := New(Config{}, func(Call) {})
	for _, b := range [][]byte{nil, {0x45}, {0x45, 0, 0, 10, 0, 0, 0, 0, 64, 6}, make([]byte, 60), {0x60, 1, 2}} {
		e.Packet(0, b)
	}
	if st := e.Stats(); st.Malformed != 5 || st.Packets != 5 {
		t.Errorf("stats %+v", st)
	}
}

// FuzzEngine feeds arbitrary packets (headers included) to the engine, and
// well-formed packets carrying arbitrary payloads: no panic, bounded state.
func FuzzEngine(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"), uint16(3), uint8(0))
	f.Add([]byte{0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}, []byte{0x60}, uint16(0), uint8(1))
	f.Fuzz(func(t *testing.T, a, b []byte, seqJump uint16, mode uint8) {
		e := New(Config{Flows: tcpreasmConfig()}, func(c Call) {
			if c.RespEnd < c.ReqStart && c.RespEnd != 0 {
				t.Fatalf("call ends before it starts: %+v", c)
			}
		})
		if mode%2 == 1 {
			e.Packet(1, a) // raw bytes as a packet
			e.Packet(2, b)
		}
		c := pkttest.NewConn(cli, srv, e.Packet)
		c.MSS = int(seqJump%64) + 1
		c.Handshake(0)
		c.Send(1, true, a, int(seqJump%5))
		c.Send(2, false, b)
		e.Tick(1e9)
		c.Send(3, true, b)
		c.Close(4)
		e.Tick(1e12)
		if e.Held() < 0 || e.Held() > 1<<20 {
			t.Fatalf("held %d", e.Held())
		}
	})
}

func tcpreasmConfig() tcpreasm.Config {
	return tcpreasm.Config{MaxFlows: 4, MaxFlowBuffer: 4096, GapTimeout: 100}
}
