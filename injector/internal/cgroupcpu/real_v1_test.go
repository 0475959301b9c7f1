package cgroupcpu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// v1Root is where the v1 cpu controller is mounted on our hosts and in CI.
const v1Root = "/sys/fs/cgroup/cpu"

// schedRuntime is the process's CPU time so far, from /proc/<pid>/schedstat
// (nanosecond resolution, unlike the clock ticks in /proc/<pid>/stat).
func schedRuntime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		t.Fatalf("empty schedstat for %d", pid)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ns)
}

// TestRealV1Throttling limits a busy-looping child to 10% of a CPU in a
// real v1 cgroup and checks that the kernel throttles it.
func TestRealV1Throttling(t *testing.T) {
	if _, err := os.Stat(filepath.Join(v1Root, "cpu.cfs_quota_us")); err != nil {
		t.Fatalf("the cgroup v1 cpu controller must be mounted at %s (as root) for this test: %v", v1Root, err)
	}
	dir := filepath.Join(v1Root, fmt.Sprintf("tierscope-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("creating cgroup: %v", err)
	}
	// Cleanups run last-registered first: restore, kill the burner, then
	// remove the (by then empty) cgroup.
	t.Cleanup(func() {
		var err error
		for i := 0; i < 50; i++ { // a just-reaped task can keep it busy briefly
			if err = syscall.Rmdir(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("removing %s: %v", dir, err)
	})

	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version() != V1 {
		t.Fatalf("version %v, want v1", c.Version())
	}
	t.Cleanup(func() {
		if err := c.Restore(); err != nil {
			t.Error(err)
		}
	})
	// Limit before the burner joins so it never runs unthrottled inside.
	if err := c.SetFraction(0.10); err != nil {
		t.Fatal(err)
	}

	burner := exec.Command("sh", "-c", "while :; do :; done")
	if err := burner.Start(); err != nil {
		t.Fatal(err)
	}
	pid := burner.Process.Pid
	t.Cleanup(func() {
		burner.Process.Kill()
		burner.Wait()
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("moving burner into cgroup: %v", err)
	}

	nr0, thr0, err := c.Throttled()
	if err != nil {
		t.Fatal(err)
	}
	cpu0, wall0 := schedRuntime(t, pid), time.Now()
	time.Sleep(time.Second)
	cpu1, wall := schedRuntime(t, pid), time.Since(wall0)
	nr1, thr1, err := c.Throttled()
	if err != nil {
		t.Fatal(err)
	}

	used := cpu1 - cpu0
	share := float64(used) / float64(wall)
	t.Logf("burner used %v of CPU over %v (%.1f%%); nr_throttled +%d, throttled_time +%v",
		used, wall, 100*share, nr1-nr0, thr1-thr0)
	if nr1 <= nr0 {
		t.Errorf("nr_throttled did not increase (%d -> %d)", nr0, nr1)
	}
	// Expected ~10%; 50% leaves room for a loaded host and period edges.
	if share >= 0.5 {
		t.Errorf("burner used %.1f%% of a CPU under a 10%% quota, want well below 50%%", 100*share)
	}

	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.cfs_quota_us"); got != "-1" {
		t.Errorf("quota after Restore = %q, want -1", got)
	}
}
