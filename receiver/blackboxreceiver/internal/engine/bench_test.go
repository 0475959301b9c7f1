package engine

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/pkttest"
)

// BenchmarkEngine measures the decoding, reassembly and HTTP framing of
// captured packets: request and response segments of a few hundred bytes
// over 1,000 keep-alive connections. It reports packets/s.
func BenchmarkEngine(b *testing.B) {
	var pkts [][]byte
	var cs []*pkttest.Conn
	srvAP := netip.MustParseAddrPort("10.1.0.2:8080")
	for i := range 1000 {
		c := pkttest.NewConn(netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), uint16(20000+i)), srvAP, func(_ int64, p []byte) { pkts = append(pkts, p) })
		c.Handshake(0)
		cs = append(cs, c)
	}
	body := make([]byte, 200)
	for round := 0; len(pkts) < 200_000; round++ {
		for _, c := range cs {
			c.Send(0, true, []byte("GET /txn/Home?r="+strconv.Itoa(round)+" HTTP/1.1\r\nHost: shop\r\n\r\n"))
			c.Send(0, false, append([]byte("HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n"), body...))
		}
	}
	calls := 0
	e := New(Config{}, func(Call) { calls++ })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 && i%len(pkts) == 0 {
			// A fresh engine for the next pass, so that the same packets are
			// new connections again rather than retransmissions.
			e = New(Config{}, func(Call) { calls++ })
		}
		e.Packet(int64(i), pkts[i%len(pkts)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "packets/s")
	if calls < b.N/3 {
		b.Fatalf("%d calls from %d packets", calls, b.N)
	}
}
