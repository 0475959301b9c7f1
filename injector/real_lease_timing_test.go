//go:build timing

package injector

// A delay lease through the whole extension: the HTTP API, the real clock, the
// square-wave engine and the NFQUEUE backend delaying real UDP packets on a
// test-owned loopback port. It measures time, so it runs in `make test-timing`.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/tierscope/tierscope/injector/internal/metadata"
	"github.com/tierscope/tierscope/internal/nfqdelay"
)

func TestRealDelayLeaseOnLoopback(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root; this test needs root for iptables and NFQUEUE")
		}
		t.Skip("needs root (iptables, NFQUEUE)")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("iptables: %v", err)
	}
	echo, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer echo.Close()
	port := uint16(echo.LocalAddr().(*net.UDPAddr).Port)
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteTo(buf[:n], from)
		}
	}()

	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Insecure = true
	cfg.StateDir = t.TempDir()
	cfg.Allowlist = Allowlist{Links: []string{"127.0.0.1/32"}, Ports: []uint16{port}}
	cfg.QueueBase = 3170
	cfg.DelayProbeInterval = 5 * time.Millisecond // enough probes in this 1.2 s lease
	require.NoError(t, cfg.Validate())
	inj := newInjector(extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, inj.Start(context.Background(), testHost{}))
	stopped := false
	defer func() {
		if !stopped {
			_ = inj.Shutdown(context.Background())
		}
	}()
	inj.mu.Lock()
	e := &env{t: t, url: "http://" + inj.addr, inj: inj}
	inj.mu.Unlock()

	// Requests to the echo server are delayed; replies are not. A 10 ms square
	// wave of 400 ms period for 3 cycles, under a 1.2 s lease.
	body := fmt.Sprintf(`{"kind":"delay","target":{"link":{"proto":"udp","dst":"127.0.0.1","dst_port":%d,"direction":"out"}},`+
		`"wave":{"amplitude":10,"period":"400ms","cycles":3},"duration":"1200ms"}`, port)
	code, lease := e.do("POST", "/v1/leases", body)
	require.Equal(t, 201, code, lease)
	id := lease["id"].(string)
	rules, err := nfqdelay.Rules(nfqdelay.TagPrefix)
	require.NoError(t, err)
	require.Len(t, rules, 2, "the link's rule and its probe's while the lease runs")

	conn, err := net.Dial("udp4", echo.LocalAddr().String())
	require.NoError(t, err)
	defer conn.Close()
	type probe struct {
		sent time.Time
		rtt  time.Duration
	}
	var probes []probe
	buf := make([]byte, 8)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for seq := uint64(0); time.Now().Before(deadline); seq++ {
		binary.BigEndian.PutUint64(buf, seq)
		t0 := time.Now()
		_, err := conn.Write(buf)
		require.NoError(t, err)
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(buf)
		require.NoError(t, err, "probe %d lost", seq)
		probes = append(probes, probe{t0, time.Since(t0)})
		time.Sleep(2 * time.Millisecond)
	}

	// The on-phase RTTs sit near 10 ms, the off-phase ones near 0, and the
	// lease's own measurement of the applied delay agrees.
	var on, off []time.Duration
	for _, p := range probes {
		if p.rtt > 5*time.Millisecond {
			on = append(on, p.rtt)
		} else {
			off = append(off, p.rtt)
		}
	}
	slices.Sort(on)
	slices.Sort(off)
	t.Logf("%d probes: %d delayed (median RTT %v), %d not (median RTT %v)", len(probes), len(on), on[len(on)/2], len(off), off[len(off)/2])
	require.Greater(t, len(on), 20)
	require.Greater(t, len(off), 20)
	// The off-phase median is this host's own round trip at the time (a
	// stalled CI host once added 1.5 ms to both): the delay is the difference.
	require.InDelta(t, 10, float64(on[len(on)/2]-off[len(off)/2])/1e6, 1.5, "median on-phase RTT over the off-phase's")

	code, st := e.do("GET", "/v1/leases/"+id, "")
	require.Equal(t, 200, code)
	t.Logf("lease after the wave: %v", st)
	// The wave's three cycles and the lease both end at 1.2 s: whichever
	// comes first names the end.
	require.Contains(t, []any{stateExpired, stateCompleted}, st["state"], "a 1.2 s lease has ended by 1.5 s")
	stats := st["stats"].(map[string]any)
	require.Greater(t, stats["count"].(float64), 100.0)
	probeStats := stats["probe"].(map[string]any)
	require.Greater(t, probeStats["received"].(float64), 100.0, "the probe stream ran through the lease's queue")
	require.Greater(t, probeStats["on"].(map[string]any)["count"].(float64), 20.0)

	rules, err = nfqdelay.Rules(nfqdelay.TagPrefix)
	require.NoError(t, err)
	require.Empty(t, rules, "no tagged rule once the lease expired")
	require.NoError(t, inj.Shutdown(context.Background()))
	stopped = true
}
