package services

import (
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ThreadCPU is the calling OS thread's CPU time. It only means something while the
// goroutine is locked to its thread (runtime.LockOSThread).
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

var burnSink atomic.Uint64

// Burn busy-loops until the thread has consumed d of CPU time. It counts the
// thread's CPU clock rather than wall time, so that when the machine is contended
// the work stays the same and the wait shows up as queueing, as on a real server.
func Burn(d time.Duration) {
	if d <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := ThreadCPU()
	x := uint64(1)
	for ThreadCPU()-start < d {
		// A few microseconds of arithmetic between clock reads keeps the
		// syscall's share small while overshooting d by little.
		for i := 0; i < 2000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	burnSink.Add(x) // keeps the loop from being optimised away
}
