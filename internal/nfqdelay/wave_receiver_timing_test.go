//go:build timing

package nfqdelay_test

import (
	"context"
	"math"
	"os/exec"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/tierscope/tierscope/internal/nfqdelay"
)

// TestWaveAtReceiver compares the wave a receiver sees with the one the
// Delayer reports: for a small square wave over a floor (an experiment's
// wave), the receiver's on − off one-way delay against Stats' On.Mean −
// Off.Mean, the injected change the coordinator divides by. The Delayer
// measures from its hook to the verdict; a packet's time before the hook
// (the queue reader's wake-up) and after the verdict (the receiver's) is
// invisible to it, and if either differs between the phases, equation 5's
// denominator is off by the difference. It runs with the host idle and with
// two busy processes; a measurement (`make bench-hold-cost`, root), not a
// pass/fail test: the figures depend on the host.
func TestWaveAtReceiver(t *testing.T) {
	tb := newTestbed(t)
	const (
		rate     = 400
		dur      = 6 * time.Second
		half     = 100 * time.Millisecond
		edgeSkip = 10 * time.Millisecond
	)
	for _, busy := range []int{0, 2} {
		for _, fa := range [][2]time.Duration{
			{300 * time.Microsecond, 1500 * time.Microsecond},
			{300 * time.Microsecond, 5 * time.Millisecond},
			{3 * time.Millisecond, 1500 * time.Microsecond},
		} {
			floor, amp := fa[0], fa[1]
			stop := hogs(t, busy)
			start := time.Now().Add(50 * time.Millisecond)
			// on reports whether a packet sent at at is in an on-phase, and
			// whether it is clear of an edge.
			on := func(at time.Time) (isOn, clear bool) {
				if at.Before(start) {
					return false, false
				}
				in := at.Sub(start) % half
				return at.Sub(start)/half%2 == 0, in > edgeSkip && in < half-edgeSkip
			}
			d := tb.start(t, nfqdelay.Options{Floor: floor, Probe: 5 * time.Millisecond, Delay: func(now time.Time) time.Duration {
				if o, _ := on(now); o {
					return amp
				}
				return 0
			}})
			sent, rs := tb.run(t, rate, dur)
			st, err := d.Stop()
			stop()
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != sent {
				t.Fatalf("sent %d, received %d", sent, len(rs))
			}
			var ownOn, ownOff []float64 // ns, packets clear of an edge
			for _, r := range rs {
				switch o, clear := on(r.sent); {
				case !clear:
				case o:
					ownOn = append(ownOn, float64(r.owd))
				default:
					ownOff = append(ownOff, float64(r.owd))
				}
			}
			nOn, nOff := len(ownOn), len(ownOff)
			if nOn < 2 || nOff < 2 {
				t.Fatalf("too few packets clear of the edges: %d on, %d off", nOn, nOff)
			}
			meanOn, sdOn := stat.MeanStdDev(ownOn, nil)
			meanOff, sdOff := stat.MeanStdDev(ownOff, nil)
			recvOn, recvOff := time.Duration(meanOn), time.Duration(meanOff)
			recv, rep := recvOn-recvOff, st.On.Mean-st.Off.Mean
			pr := st.Probe
			if pr == nil || pr.On.Count < 2 || pr.Off.Count < 2 {
				t.Fatalf("probe stream measured too little: %+v", pr)
			}
			probe := pr.On.Mean - pr.Off.Mean
			probeSE := time.Duration(math.Hypot(float64(pr.On.Std)/math.Sqrt(float64(pr.On.Count)), float64(pr.Off.Std)/math.Sqrt(float64(pr.Off.Count))))
			recvSE := time.Duration(math.Hypot(sdOn/math.Sqrt(float64(nOn)), sdOff/math.Sqrt(float64(nOff))))
			t.Logf("%d busy, wave %v over %v: probe on − off %v ± %v (%d sent, %d received), receiver %v ± %v: the receiver saw %.3f× the probe's (%+v)",
				busy, amp, floor, probe.Round(time.Microsecond), probeSE.Round(time.Microsecond), pr.Sent, pr.Received,
				recv.Round(time.Microsecond), recvSE.Round(time.Microsecond), float64(recv)/float64(probe), (recv - probe).Round(time.Microsecond))
			t.Logf("%d busy, wave %v over %v: receiver on − off %v, Delayer on − off %v: the receiver saw %.3f× (%+v); receiver on %v off %v, Delayer on %v off %v",
				busy, amp, floor, recv.Round(time.Microsecond), rep.Round(time.Microsecond), float64(recv)/float64(rep), (recv - rep).Round(time.Microsecond),
				recvOn.Round(time.Microsecond), recvOff.Round(time.Microsecond), st.On.Mean.Round(time.Microsecond), st.Off.Mean.Round(time.Microsecond))
		}
	}
}

// hogs starts n busy processes (an application's load on a shared host) and
// returns what stops them.
func hogs(t *testing.T, n int) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var cmds []*exec.Cmd
	for range n {
		c := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	return func() {
		cancel()
		for _, c := range cmds {
			_ = c.Wait()
		}
	}
}
