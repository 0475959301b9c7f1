package injector

import (
	"bytes"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
