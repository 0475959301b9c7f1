//go:build long

package blackboxreceiver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"golang.org/x/sys/unix"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadatatest"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/packet"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/pkttest"
	"github.com/tierscope/tierscope/testbed/netns"
)

// TestCaptureThroughput measures the packets per second the live capture
// handles without a drop (scripts/bench-capture.sh). A sender in one
// namespace writes HTTP calls (request and response segments of 200-400 bytes
// over 1,000 connections) onto a veth with an AF_PACKET socket, at a paced
// rate; the receiver captures them in the other namespace with the full path:
// BPF filter, socket, reassembly, HTTP framing, spans to a sink. The rate is
// raised step by step; a step passes when every packet sent was captured,
// the kernel dropped none, and every call became its two spans.
func TestCaptureThroughput(t *testing.T) {
	requireRoot(t)
	lab, err := netns.New(t)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := lab.Host("sender")
	if err != nil {
		t.Fatal(err)
	}
	cap_, err := lab.Host("capture")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lab.Link(snd, cap_)
	if err != nil {
		t.Fatal(err)
	}
	// The injecting socket, in the sender's namespace, on its veth.
	var fd, ifindex int
	if err := snd.Run(func() error {
		ifi, err := net.InterfaceByName(lk.AIface)
		if err != nil {
			return err
		}
		ifindex = ifi.Index
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// A unicast MAC that is nobody's: the capture still sees the frames, the
	// peer's IP stack ignores them (no RSTs competing for the CPU).
	dst := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifindex, Halen: 6, Addr: [8]byte{0x02, 0, 0, 0, 0, 0x99}}

	// Pre-built packets: 1,000 connections, each a handshake then calls.
	const conns = 1000
	srv := netip.AddrPortFrom(lk.BAddr, 8080)
	var pkts [][]byte
	var calls int
	var cs []*pkttest.Conn
	for i := range conns {
		cl := netip.AddrPortFrom(lk.AAddr, uint16(20000+i))
		c := pkttest.NewConn(cl, srv, func(_ int64, p []byte) { pkts = append(pkts, p) })
		c.Handshake(0)
		cs = append(cs, c)
	}
	handshakes := len(pkts)
	body := make([]byte, 200)
	for round := 0; len(pkts) < 400_000; round++ {
		for _, c := range cs {
			c.Send(0, true, []byte("GET /txn/Home?r="+strconv.Itoa(round)+" HTTP/1.1\r\nHost: shop\r\nUser-Agent: bench\r\n\r\n"))
			c.Send(0, false, append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 200\r\n\r\n"), body...))
			calls++
		}
	}
	perCall := float64(len(pkts)-handshakes) / float64(calls)
	t.Logf("%d packets prepared (%d connections, %d calls, %.0f packets per call), GOMAXPROCS %d",
		len(pkts), conns, calls, perCall, runtime.GOMAXPROCS(0))

	services := map[string]string{lk.AAddr.String(): "client/*", lk.BAddr.String(): "shop"}
	best := 0
	for _, rate := range []int{5_000, 25_000, 50_000, 100_000, 150_000, 200_000, 300_000, 400_000, 600_000} {
		n := min(len(pkts), rate*2) // two seconds per step
		n -= (n - handshakes) % 2   // whole calls
		tel := componenttest.NewTelemetry()
		sink := new(consumertest.TracesSink)
		cfg := createDefaultConfig().(*Config)
		cfg.Services = services
		c := defaultCapture()
		c.NetworkNamespace = "/run/netns/" + cap_.Namespace()
		c.Interface = lk.BIface
		c.Ports = []uint16{8080}
		c.SocketBuffer = 32 << 20
		cfg.Capture = configoptional.Some(c)
		cfg.MaxQueuedBatches = 1024
		r, err := newTracesReceiver(metadatatest.NewSettings(tel), cfg, sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		sent, sendErrs := 0, 0
		const burst = 64
		for sent < n {
			for k := 0; k < burst && sent < n; k++ {
				if err := unix.Sendto(fd, pkts[sent], 0, dst); err != nil {
					sendErrs++
					if sendErrs == 1 {
						t.Logf("send: %v", err)
					}
					continue
				}
				sent++
			}
			if ahead := time.Duration(float64(sent)/float64(rate)*1e9) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		elapsed := time.Since(start)
		// Wait until the capture has read its socket dry (its counter stands
		// still), so that what is still queued is not taken for loss.
		last, still := int64(-1), 0
		for deadline := time.Now().Add(20 * time.Second); still < 4 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			if n := counter(t, tel, "receiver_blackbox_packets"); n == last {
				still++
			} else {
				last, still = n, 0
			}
		}
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		captured := counter(t, tel, "receiver_blackbox_packets")
		dropped := counter(t, tel, "receiver_blackbox_packets_dropped")
		gaps := counter(t, tel, "receiver_blackbox_gaps")
		spans := sink.SpanCount()
		achieved := float64(sent) / elapsed.Seconds()
		if drained := time.Since(start); drained > elapsed+time.Second {
			t.Logf("the capture took %v to read what was sent in %v", drained.Round(time.Millisecond), elapsed.Round(time.Millisecond))
			achieved = float64(sent) / (drained - 400*time.Millisecond).Seconds()
		}
		wantSpans := 2 * ((sent - handshakes) / 2)
		ok := int64(sent) == captured && dropped == 0 && spans == wantSpans && sendErrs == 0
		t.Logf("target %7d pkt/s: sent %7d in %v (%.0f pkt/s), captured %7d, kernel drops %d, gaps %d, spans %d of %d: %s",
			rate, sent, elapsed.Round(time.Millisecond), achieved, captured, dropped, gaps, spans, wantSpans, map[bool]string{true: "ok", false: "LOSS"}[ok])
		_ = tel.Shutdown(context.Background())
		if !ok {
			break
		}
		best = int(achieved)
		if achieved < 0.9*float64(rate) {
			t.Logf("the sender cannot go faster on this machine")
			break
		}
	}
	t.Logf("capture throughput without drops: %d packets/s", best)
	if out := os.Getenv("BENCH_CAPTURE_OUT"); out != "" {
		_ = os.WriteFile(out, []byte(fmt.Sprintf("%d\n", best)), 0o644)
	}
	if best == 0 {
		t.Error("even the lowest rate lost packets")
	}
	_ = packet.FlagACK
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
