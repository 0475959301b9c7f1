package afpacket

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/bpffilter"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/packet"
	"github.com/tierscope/tierscope/testbed/netns"
)

// TestCaptureLoopback captures a TCP exchange on the loopback interface of a
// fresh network namespace, through the ring and through recvmsg: every
// segment once (loopback shows each packet leaving and arriving), in order,
// with plausible kernel timestamps; the filter keeps other ports out.
func TestCaptureLoopback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (a network namespace, AF_PACKET); CI runs as root")
	}
	lab, err := netns.New(t)
	if err != nil {
		t.Fatal(err)
	}
	h, err := lab.Host("cap")
	if err != nil {
		t.Fatal(err)
	}
	for _, noRing := range []bool{false, true} {
		filter, err := bpffilter.Compile([]uint16{7777}, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var hd *Handle
		if err := h.Run(func() (err error) {
			hd, err = Open(Config{Interface: "any", Filter: filter, NoRing: noRing, BufferSize: 4 << 20, Timeout: 20 * time.Millisecond})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ln, err := h.Listen("tcp4", "127.0.0.1:7777")
		if err != nil {
			t.Fatal(err)
		}
		other, err := h.Listen("tcp4", "127.0.0.1:7778")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err == nil {
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}
		}()
		go func() {
			if c, err := other.Accept(); err == nil {
				_ = c.Close()
			}
		}()
		before := time.Now().UnixNano()
		if c, err := h.DialContext(t.Context(), "tcp4", "127.0.0.1:7778"); err == nil {
			_ = c.Close()
		}
		c, err := h.DialContext(t.Context(), "tcp4", "127.0.0.1:7777")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("ping"))
		buf := make([]byte, 4)
		_, _ = io.ReadFull(c, buf)
		_ = c.Close()
		var payload []byte
		var seen int
		var seg packet.TCP
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) && seen < 8 {
			pkt, ts, _, err := hd.Read()
			if errors.Is(err, ErrTimeout) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := packet.DecodeIP(pkt, &seg); err != nil {
				t.Fatal(err)
			}
			if seg.Src.Port() != 7777 && seg.Dst.Port() != 7777 {
				t.Fatalf("the filter let port %d -> %d through", seg.Src.Port(), seg.Dst.Port())
			}
			// Kernel packet stamps and Go's clock read the same realtime
			// clock at different moments (TCP may stamp a segment before it
			// is sent), so allow a second either way: the point is a real
			// wall-clock time, not a zero or a monotonic value.
			if ts < before-int64(time.Second) || ts > time.Now().UnixNano()+int64(time.Second) {
				t.Errorf("timestamp %d outside the run", ts)
			}
			payload = append(payload, seg.Payload...)
			seen++
		}
		// ping and its echo, each once: SYN, SYN-ACK, ACK, ping, ACK, echo, ...
		if string(payload) != "pingping" {
			t.Errorf("ring %v: payload %q from %d packets, want each segment once", !noRing, payload, seen)
		}
		if _, drops, err := hd.Stats(); err != nil || drops != 0 {
			t.Errorf("drops %d, %v", drops, err)
		}
		_ = hd.Close()
		_ = ln.Close()
		_ = other.Close()
	}
}
