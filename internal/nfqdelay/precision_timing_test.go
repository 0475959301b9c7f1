//go:build timing

package nfqdelay_test

// The precision and throughput requirements of the delay backend. They measure
// time, so `make test` runs them in a step of their own (`make test-timing`)
// after everything else, never beside other test packages. A measurement that
// a transient neighbour disturbed is retaken after a pause, up to
// timingAttempts times, and every attempt is logged: on this 2-CPU VM with
// nothing else running, stalls of several ms came in spells of ~10 s that
// failed three back-to-back attempts at 5 ms in 2 of 4 runs (the previous
// code did the same). On a VM whose vCPUs are descheduled for long spells
// (steal time) every attempt can be disturbed, so each attempt also measures
// the host's own wake-up error beside the delayer (hostWake) and the bounds
// are on what the delayer adds to it: no backend wakes more precisely than
// its host lets a thread wake.

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tierscope/tierscope/internal/nfqdelay"
)

const (
	timingAttempts = 5
	timingPause    = 3 * time.Second
)

func TestPrecision(t *testing.T) {
	tb := newTestbed(t)
	_, base := tb.run(t, 1000, 300*time.Millisecond)
	b := medianOWD(base)
	t.Logf("baseline one-way (no delay): median %v over %d packets", b.Round(time.Microsecond), len(base))
	for _, amp := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		var problems []string
		for attempt := 1; attempt <= timingAttempts; attempt++ {
			d := tb.start(t, nfqdelay.Options{Delay: nfqdelay.Constant(amp)})
			host := startHostWake()
			sent, rs := tb.run(t, 1000, 2*time.Second)
			hostMean, hostP99 := host.stop()
			st, err := d.Stop()
			if err != nil {
				t.Fatal(err)
			}
			m := medianOWD(rs)
			meanBound, p99Bound := 200*time.Microsecond+hostMean, time.Millisecond+hostP99
			t.Logf("delay %v attempt %d: sent %d received %d; delayer %v", amp, attempt, sent, len(rs), st)
			t.Logf("delay %v attempt %d: mean error %v (bound 200µs + the host's %v), p99 error %v (bound 1ms + the host's %v); receiver one-way median %v − baseline %v = %v",
				amp, attempt, st.ErrMean.Round(time.Microsecond), hostMean.Round(time.Microsecond), st.ErrP99.Round(time.Microsecond), hostP99.Round(time.Microsecond),
				m.Round(time.Microsecond), b.Round(time.Microsecond), (m - b).Round(time.Microsecond))
			// Loss and errors are failures of the backend, never of the
			// machine: no retry.
			if len(rs) != sent {
				t.Fatalf("delay %v: sent %d, received %d", amp, sent, len(rs))
			}
			if st.Count < sent*9/10 {
				t.Fatalf("delay %v: measured %d packets of %d", amp, st.Count, sent)
			}
			if st.Errors != 0 {
				t.Fatalf("delay %v: %d errors, last %v", amp, st.Errors, st.LastError)
			}
			// The receiver is an ordinary goroutine: it wakes as late as the
			// host makes any thread wake. Too little delay is the backend's
			// failure; too much, on a host whose stalls outlast the wake-up
			// probe's sample (a receiver median of 29 ms for a 1 ms delay was
			// seen once in CI, the delayer's own median 2.2 ms), is retried.
			dm := m - b - amp
			if dm < -time.Millisecond {
				t.Fatalf("delay %v: receiver sees %v added (the host's wake-up p99 %v)", amp, m-b, hostP99)
			}
			problems = problems[:0]
			if dm > 2*time.Millisecond+hostP99 {
				problems = append(problems, fmt.Sprintf("receiver sees %v added (the host's wake-up p99 %v)", m-b, hostP99))
			}
			if st.ErrMean > meanBound {
				problems = append(problems, fmt.Sprintf("mean error %v > %v", st.ErrMean, meanBound))
			}
			if st.ErrP99 > p99Bound {
				problems = append(problems, fmt.Sprintf("p99 error %v > %v", st.ErrP99, p99Bound))
			}
			if len(problems) == 0 {
				break
			}
			if attempt < timingAttempts {
				time.Sleep(timingPause)
			}
		}
		if len(problems) > 0 {
			t.Errorf("delay %v: after %d attempts: %v", amp, timingAttempts, problems)
		}
	}
}

func TestThroughput(t *testing.T) {
	tb := newTestbed(t)
	d := tb.start(t, nfqdelay.Options{Delay: nfqdelay.Constant(time.Millisecond)})
	var ru0, ru1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	t0 := time.Now()
	sent, rs := tb.run(t, 20000, time.Second)
	wall := time.Since(t0)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	st, err := d.Stop()
	if err != nil {
		t.Fatal(err)
	}
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	t.Logf("throughput: sent %d received %d at 20,000 packets/s; delayer %v", sent, len(rs), st)
	t.Logf("CPU: scheduler thread %v (%.0f%% of one core over 1 s of traffic); whole test process (sender + receiver + delayer) %v over %v wall",
		st.SchedulerCPU.Round(time.Millisecond), 100*st.SchedulerCPU.Seconds(), cpu.Round(time.Millisecond), wall.Round(time.Millisecond))
	if len(rs) != sent {
		t.Errorf("loss: sent %d, received %d", sent, len(rs))
	}
	if st.Count+st.Flushed < sent*99/100 {
		t.Errorf("the delayer saw %d+%d packets of %d (fail-open bypass?)", st.Count, st.Flushed, sent)
	}
	if st.Errors != 0 {
		t.Errorf("%d errors, last %v", st.Errors, st.LastError)
	}
}

// hostWakeProbe measures what the host lets a thread like the delayer's
// scheduler do: the overshoot of 1 ms nanosleeps on a locked thread with
// 1 ns timer slack at the scheduler's real-time priority.
type hostWakeProbe struct {
	done   chan struct{}
	result chan [2]time.Duration
}

func startHostWake() *hostWakeProbe {
	p := &hostWakeProbe{done: make(chan struct{}), result: make(chan [2]time.Duration, 1)}
	go func() {
		// The raised thread is never handed back to the Go scheduler: it
		// exits with this goroutine.
		runtime.LockOSThread()
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		nfqdelay.RaiseThreadPriority(nfqdelay.DefaultRealtimePriority)
		ts := unix.NsecToTimespec(int64(time.Millisecond))
		over := make([]time.Duration, 0, 4096)
		for {
			select {
			case <-p.done:
				p.result <- overshootStats(over)
				return
			default:
			}
			t0 := time.Now()
			_ = unix.Nanosleep(&ts, nil)
			over = append(over, time.Since(t0)-time.Millisecond)
		}
	}()
	return p
}

// stop ends the probe and returns the mean and p99 overshoot.
func (p *hostWakeProbe) stop() (mean, p99 time.Duration) {
	close(p.done)
	r := <-p.result
	return r[0], r[1]
}

func overshootStats(over []time.Duration) [2]time.Duration {
	if len(over) == 0 {
		return [2]time.Duration{}
	}
	var sum time.Duration
	for _, o := range over {
		sum += max(o, 0)
	}
	slices.Sort(over)
	return [2]time.Duration{sum / time.Duration(len(over)), max(over[len(over)*99/100], 0)}
}
