package injector

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/internal/nfqdelay"
	"github.com/tierscope/tierscope/internal/wave"
)

// TestWatchdogFailsOpenOnSilence: no heartbeat for the last bound given
// sweeps once; beats resume the watch; the pipe's end sweeps and exits.
func TestWatchdogFailsOpenOnSilence(t *testing.T) {
	pr, pw := io.Pipe()
	var mu sync.Mutex
	var sweeps []time.Time
	sweep := func(id string) (int, error) {
		require.Equal(t, "p1s2", id)
		mu.Lock()
		sweeps = append(sweeps, time.Now())
		mu.Unlock()
		return 1, nil
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(sweeps) }
	var log bytes.Buffer
	exited := make(chan int)
	go func() { exited <- runWatchdog("p1s2", pr, &log, sweep) }()

	beat := func(d time.Duration) {
		_, err := io.WriteString(pw, strconv.FormatInt(d.Nanoseconds(), 10)+"\n")
		require.NoError(t, err)
	}
	// Beats every 20 ms under a 100 ms bound: no sweep.
	var last time.Time
	for range 15 {
		beat(100 * time.Millisecond)
		last = time.Now()
		time.Sleep(20 * time.Millisecond)
	}
	require.Zero(t, count())
	// Silence: one sweep about 100 ms after the last beat, and only one.
	require.Eventually(t, func() bool { return count() == 1 }, 2*time.Second, time.Millisecond)
	mu.Lock()
	took := sweeps[0].Sub(last)
	mu.Unlock()
	require.GreaterOrEqual(t, took, 90*time.Millisecond)
	require.Less(t, took, 400*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 1, count())
	// Beats again, then the injector goes: a last sweep and exit.
	beat(100 * time.Millisecond)
	require.NoError(t, pw.Close())
	select {
	case code := <-exited:
		require.Zero(t, code)
	case <-time.After(2 * time.Second):
		t.Fatal("the watchdog did not exit at the pipe's end")
	}
	require.Equal(t, 2, count())
}

// TestWatchdogProcess: the re-executed binary runs as the watchdog and
// exits when the injector closes the pipe.
func TestWatchdogProcess(t *testing.T) {
	w, err := startWatchdog("test")
	require.NoError(t, err)
	require.NoError(t, w.beat(time.Second))
	start := time.Now()
	w.stop()
	require.Less(t, time.Since(start), 20*time.Second)
	require.True(t, w.cmd.ProcessState.Exited(), "the watchdog exited by itself")
	require.Zero(t, w.cmd.ProcessState.ExitCode())
}

// TestWatchdogStarvedSeesPendingBeat: bytes waiting in the pipe count as a
// beat, so a watchdog that was itself starved does not fail open on waking.
func TestWatchdogStarvedSeesPendingBeat(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, pending(r))
	_, err = w.WriteString("1000000\n")
	require.NoError(t, err)
	require.True(t, pending(r))
	require.False(t, pending(strings.NewReader("x")), "only a pipe can be asked")
}

// TestHangBound: the bound is the least of hang_timeout and the delay waves'
// periods, but not under minHangBound unless hang_timeout is.
func TestHangBound(t *testing.T) {
	m := newManager(&Config{MaxLeases: 2}, wave.RealClock{}, nil, func(error, bool) {})
	now := time.Now()
	b, ok := m.delayHealth(time.Second, now)
	require.True(t, ok)
	require.Equal(t, time.Second, b)
	m.leases["a"] = &lease{req: &leaseRequest{w: wave.Wave{Period: 100 * time.Millisecond}}, state: stateActive,
		act: &delayActuator{d: &nfqdelay.Delayer{}}}
	b, ok = m.delayHealth(time.Second, now)
	require.True(t, ok, "an idle scheduler is healthy")
	require.Equal(t, minHangBound, b, "a 100 ms wave bounds it, floored at 250 ms")
	b, _ = m.delayHealth(100*time.Millisecond, now)
	require.Equal(t, 100*time.Millisecond, b, "a hang_timeout under the floor is kept")
	m.leases["a"].state = stateCompleted
	b, _ = m.delayHealth(time.Second, now)
	require.Equal(t, time.Second, b, "ended leases do not bound it")
}
