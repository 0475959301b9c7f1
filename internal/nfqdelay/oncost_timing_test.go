//go:build timing

package nfqdelay_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tierscope/tierscope/internal/nfqdelay"
)

// TestOnPhaseCost measures what holding packets costs the host beyond passing
// them: the scheduler thread's CPU per packet with no delay (a square wave's
// off-phase) and with a small delay (its on-phase), spinning and not. CPU the
// injector spends only in the on-phase is a perturbation in phase with the
// wave: on a host shared with the application it slows the application's
// requests exactly when the delay is applied, and the gradient reads high.
// It is a measurement (`make bench-hold-cost`, root), not part of test-timing.
func TestOnPhaseCost(t *testing.T) {
	tb := newTestbed(t)
	const rate, dur = 400, 5 * time.Second
	type setup struct {
		name  string
		delay time.Duration
		spin  time.Duration
	}
	for _, s := range []setup{
		{"off-phase (no delay)", 0, 0},
		{"on-phase 1.5 ms, spinning 80 µs", 1500 * time.Microsecond, 0},
		{"on-phase 1.5 ms, no spinning", 1500 * time.Microsecond, -1},
		{"off-phase over a 0.3 ms floor", 300 * time.Microsecond, 0},
		{"on-phase 1.5 ms over a 0.3 ms floor", 1800 * time.Microsecond, 0},
	} {
		d := tb.start(t, nfqdelay.Options{Delay: nfqdelay.Constant(s.delay), SpinMargin: s.spin})
		sent, rs := tb.run(t, rate, dur)
		st, err := d.Stop()
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != sent || st.Errors != 0 {
			t.Fatalf("%s: sent %d, received %d, %d errors", s.name, sent, len(rs), st.Errors)
		}
		perPacket := st.SchedulerCPU / time.Duration(max(st.Count, 1))
		t.Logf("%s: %d packets at %d/s; scheduler CPU %v (%v per packet, %.2f%% of a core); lateness mean %v, p99 %v",
			s.name, st.Count, rate, st.SchedulerCPU.Round(time.Microsecond), perPacket.Round(100*time.Nanosecond),
			100*st.SchedulerCPU.Seconds()/dur.Seconds(), st.ErrMean.Round(time.Microsecond), st.ErrP99.Round(time.Microsecond))
	}
}

// TestProbeCost measures what the probe stream costs: the whole process's
// CPU (sender, receiver, queue reader and scheduler) over an idle link, with
// and without probes every 5 ms over a 0.3 ms floor.
func TestProbeCost(t *testing.T) {
	tb := newTestbed(t)
	const dur = 5 * time.Second
	for _, probe := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		d := tb.start(t, nfqdelay.Options{Floor: 300 * time.Microsecond, Probe: probe})
		cpu0 := processCPU(t)
		time.Sleep(dur)
		used := processCPU(t) - cpu0
		st, err := d.Stop()
		if err != nil {
			t.Fatal(err)
		}
		received := 0
		if st.Probe != nil {
			received = st.Probe.Received
		}
		t.Logf("probe every %v: %d probes received; process CPU %v in %v (%.2f%% of a core), the scheduler thread's %v",
			probe, received, used.Round(time.Microsecond), dur, 100*used.Seconds()/dur.Seconds(), st.SchedulerCPU.Round(time.Microsecond))
	}
}

func processCPU(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
