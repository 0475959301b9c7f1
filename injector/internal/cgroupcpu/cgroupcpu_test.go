package cgroupcpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func content(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestV2RoundTrip(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"cpu.max":  "max 100000\n",
		"cpu.stat": "usage_usec 5000\nuser_usec 3000\nsystem_usec 2000\nnr_periods 40\nnr_throttled 7\nthrottled_usec 123456\n",
	})
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version() != V2 {
		t.Fatalf("version %v", c.Version())
	}
	if err := c.SetFraction(0.25); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.max"); got != "25000 100000" {
		t.Fatalf("cpu.max = %q", got)
	}
	c.CPUs = 2
	if err := c.SetFraction(0.25); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.max"); got != "50000 100000" {
		t.Fatalf("cpu.max with 2 CPUs = %q", got)
	}
	// Below MinQuota the quota is capped at 1 ms.
	if err := c.SetFraction(0.001); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.max"); got != "1000 100000" {
		t.Fatalf("cpu.max at tiny fraction = %q", got)
	}
	nr, d, err := c.Throttled()
	if err != nil || nr != 7 || d != 123456*time.Microsecond {
		t.Fatalf("Throttled() = %d, %v, %v", nr, d, err)
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.max"); got != "max 100000" {
		t.Fatalf("cpu.max after Restore = %q", got)
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
}

func TestV2SavedQuota(t *testing.T) {
	dir := writeFiles(t, map[string]string{"cpu.max": "50000 200000\n", "cpu.stat": ""})
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if q, p := c.Saved(); q != 50000 || p != 200000 {
		t.Fatalf("Saved() = %d, %d", q, p)
	}
	if err := c.SetFraction(0.1); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.max"); got != "20000 200000" {
		t.Fatalf("cpu.max = %q", got)
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.max"); got != "50000 200000" {
		t.Fatalf("cpu.max after Restore = %q", got)
	}
	if _, _, err := c.Throttled(); err == nil || !strings.Contains(err.Error(), "cpu.stat") {
		t.Fatalf("empty cpu.stat: got %v", err)
	}
}

func TestV1RoundTrip(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"cpu.cfs_quota_us":  "-1\n",
		"cpu.cfs_period_us": "100000\n",
		"cpu.stat":          "nr_periods 10\nnr_throttled 3\nthrottled_time 4000000\n",
	})
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version() != V1 {
		t.Fatalf("version %v", c.Version())
	}
	c.MinQuota = 5 * time.Millisecond
	if err := c.SetFraction(0.5); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.cfs_quota_us"); got != "50000" {
		t.Fatalf("quota = %q", got)
	}
	if err := c.SetFraction(0.01); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.cfs_quota_us"); got != "5000" {
		t.Fatalf("capped quota = %q", got)
	}
	nr, d, err := c.Throttled()
	if err != nil || nr != 3 || d != 4*time.Millisecond {
		t.Fatalf("Throttled() = %d, %v, %v", nr, d, err)
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, dir, "cpu.cfs_quota_us"); got != "-1" {
		t.Fatalf("quota after Restore = %q", got)
	}
	if got := content(t, dir, "cpu.cfs_period_us"); got != "100000" {
		t.Fatalf("period changed: %q", got)
	}
}

func TestErrors(t *testing.T) {
	if _, err := Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), "cpu.max") {
		t.Fatalf("empty dir: got %v", err)
	}
	dir := writeFiles(t, map[string]string{"cpu.max": "garbage\n"})
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "cpu.max") {
		t.Fatalf("bad cpu.max: got %v", err)
	}
	dir = writeFiles(t, map[string]string{"cpu.cfs_quota_us": "-1\n"})
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "cpu.cfs_period_us") {
		t.Fatalf("missing period: got %v", err)
	}
	dir = writeFiles(t, map[string]string{"cpu.max": "max 100000\n"})
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []float64{0, -0.5} {
		if err := c.SetFraction(f); err == nil {
			t.Errorf("SetFraction(%v) accepted", f)
		}
	}
}
