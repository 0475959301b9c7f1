//go:build timing

package nfqdelay

import (
	"testing"
	"time"
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
		d := tb.start(t, Options{Delay: Constant(s.delay), SpinMargin: s.spin})
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
