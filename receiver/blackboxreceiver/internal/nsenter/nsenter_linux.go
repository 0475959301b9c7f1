// Package nsenter runs a function with the calling goroutine's thread inside
// another network namespace (setns(2)), so that sockets it opens and the
// /proc/thread-self/net tables it reads are that namespace's.
package nsenter

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn inside the network namespace at path (e.g. /run/netns/NAME or
// /proc/PID/ns/net) on a thread of its own; an empty path runs fn directly.
// Sockets created by fn stay in that namespace. If the thread cannot be moved
// back it stays locked, and the runtime discards it.
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("nsenter: open %s: %w", path, err)
	}
	defer unix.Close(target)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("nsenter: this thread's namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("nsenter: setns %s: %w", path, err)
			return
		}
		var ferr error
		defer func() {
			if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			done <- ferr
		}()
		ferr = fn()
	}()
	return <-done
}
