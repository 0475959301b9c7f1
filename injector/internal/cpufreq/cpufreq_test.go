package cpufreq

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type fakeCPU struct {
	governor string
	govs     string // scaling_available_governors
	freqs    string // scaling_available_frequencies; "" means absent
	cur      string
	setspeed string
}

// fakeSysfs builds a cpufreq tree like /sys/devices/system/cpu.
func fakeSysfs(t *testing.T, cpus ...fakeCPU) string {
	t.Helper()
	root := t.TempDir()
	for i, c := range cpus {
		dir := filepath.Join(root, fmt.Sprintf("cpu%d", i), "cpufreq")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{
			"scaling_governor":            c.governor,
			"scaling_available_governors": c.govs,
			"cpuinfo_min_freq":            "800000",
			"cpuinfo_max_freq":            "2400000",
			"scaling_cur_freq":            c.cur,
			"scaling_setspeed":            c.setspeed,
		}
		if c.freqs != "" {
			files["scaling_available_frequencies"] = c.freqs
		}
		for name, v := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func defaultCPU() fakeCPU {
	return fakeCPU{
		governor: "ondemand",
		govs:     "performance powersave ondemand userspace",
		freqs:    "2400000 2000000 1600000 1200000 800000",
		cur:      "2000000",
		setspeed: "<unsupported>",
	}
}

func readFile(t *testing.T, root string, cpu int, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("cpu%d", cpu), "cpufreq", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestRoundTrip(t *testing.T) {
	root := fakeSysfs(t, defaultCPU(), defaultCPU())
	c, err := Open(root, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	for cpu := 0; cpu < 2; cpu++ {
		if g := readFile(t, root, cpu, "scaling_governor"); g != "userspace" {
			t.Fatalf("cpu%d governor %q after Open", cpu, g)
		}
	}
	if b := c.Base(); b[0] != 2000000 || b[1] != 2000000 {
		t.Fatalf("Base() = %v", b)
	}
	if err := c.Set(1600000); err != nil {
		t.Fatal(err)
	}
	for cpu := 0; cpu < 2; cpu++ {
		if s := readFile(t, root, cpu, "scaling_setspeed"); s != "1600000" {
			t.Fatalf("cpu%d setspeed %q", cpu, s)
		}
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	for cpu := 0; cpu < 2; cpu++ {
		if g := readFile(t, root, cpu, "scaling_governor"); g != "ondemand" {
			t.Fatalf("cpu%d governor %q after Restore", cpu, g)
		}
	}
	if err := c.Restore(); err != nil {
		t.Fatalf("second Restore: %v", err)
	}
	if err := c.Set(1600000); err == nil {
		t.Fatal("Set after Restore succeeded")
	}
}

func TestUserspaceSpeedRestored(t *testing.T) {
	cpu := defaultCPU()
	cpu.governor, cpu.setspeed = "userspace", "1200000"
	root := fakeSysfs(t, cpu)
	c, err := Open(root, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(800000); err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, root, 0, "scaling_setspeed"); s != "1200000" {
		t.Fatalf("setspeed %q after Restore, want 1200000", s)
	}
	if g := readFile(t, root, 0, "scaling_governor"); g != "userspace" {
		t.Fatalf("governor %q after Restore", g)
	}
}

func TestStepCapAndUnknownFrequency(t *testing.T) {
	root := fakeSysfs(t, defaultCPU())
	c, err := Open(root, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Restore()
	c.MaxStepKHz = 400000
	if err := c.Set(1600000); err != nil {
		t.Fatalf("step of 400 MHz rejected: %v", err)
	}
	err = c.Set(1200000)
	if err == nil || !strings.Contains(err.Error(), "MaxStepKHz") {
		t.Fatalf("step of 800 MHz: got %v, want MaxStepKHz error", err)
	}
	err = c.Set(1900000)
	if err == nil || !strings.Contains(err.Error(), "scaling_available_frequencies") {
		t.Fatalf("unknown frequency: got %v", err)
	}
	if s := readFile(t, root, 0, "scaling_setspeed"); s != "1600000" {
		t.Fatalf("rejected Set wrote %q", s)
	}
}

func TestMinMaxWithoutTable(t *testing.T) {
	cpu := defaultCPU()
	cpu.freqs = ""
	root := fakeSysfs(t, cpu)
	c, err := Open(root, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Restore()
	if err := c.Set(1900000); err != nil {
		t.Fatalf("in-range frequency rejected: %v", err)
	}
	err = c.Set(3000000)
	if err == nil || !strings.Contains(err.Error(), "cpuinfo_max_freq") {
		t.Fatalf("above max: got %v", err)
	}
}

func TestNoUserspaceGovernor(t *testing.T) {
	cpu := defaultCPU()
	cpu.govs = "performance powersave"
	root := fakeSysfs(t, defaultCPU(), cpu)
	_, err := Open(root, []int{0, 1})
	if err == nil || !strings.Contains(err.Error(), "scaling_available_governors") {
		t.Fatalf("got %v, want error naming scaling_available_governors", err)
	}
	// cpu0 was switched before cpu1 failed; Open must have put it back.
	if g := readFile(t, root, 0, "scaling_governor"); g != "ondemand" {
		t.Fatalf("cpu0 governor %q after failed Open", g)
	}
}

func TestMissingCPU(t *testing.T) {
	root := fakeSysfs(t, defaultCPU())
	_, err := Open(root, []int{3})
	if err == nil || !strings.Contains(err.Error(), "cpu3") {
		t.Fatalf("got %v, want error naming cpu3's file", err)
	}
}

func TestRestoreAfterPartialFailure(t *testing.T) {
	root := fakeSysfs(t, defaultCPU(), defaultCPU())
	c, err := Open(root, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	// Make cpu0's governor file unwritable by replacing it with a directory.
	gov0 := filepath.Join(root, "cpu0", "cpufreq", "scaling_governor")
	if err := os.Remove(gov0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(gov0, 0o755); err != nil {
		t.Fatal(err)
	}
	err = c.Restore()
	if err == nil || !strings.Contains(err.Error(), gov0) {
		t.Fatalf("got %v, want error naming %s", err, gov0)
	}
	// cpu1 was restored despite cpu0 failing.
	if g := readFile(t, root, 1, "scaling_governor"); g != "ondemand" {
		t.Fatalf("cpu1 governor %q", g)
	}
	// Fix cpu0 and retry: only cpu0 is rewritten.
	if err := os.Remove(gov0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gov0, []byte("userspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if g := readFile(t, root, 0, "scaling_governor"); g != "ondemand" {
		t.Fatalf("cpu0 governor %q after retry", g)
	}
}

// Nearest rounds a wave's frequency to a P-state the CPU accepts within the
// step cap, or clamps it to min/max without a table.
func TestNearest(t *testing.T) {
	noTable := defaultCPU()
	noTable.freqs = ""
	for _, tc := range []struct {
		name    string
		cpu     fakeCPU
		stepKHz int64
		want    map[int64]int64 // requested → set
	}{
		{"table", defaultCPU(), 0, map[int64]int64{1900000: 1600000, 2100000: 2400000, 1700000: 1600000, 100000: 800000, 2000000: 2000000}},
		{"table within the step cap", defaultCPU(), 400000, map[int64]int64{1900000: 1600000, 1000000: 1600000, 2600000: 2400000}},
		{"no table", noTable, 0, map[int64]int64{1900000: 1900000, 100000: 800000, 9000000: 2400000}},
		{"no table within the step cap", noTable, 300000, map[int64]int64{1900000: 1900000, 1000000: 1700000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Open(fakeSysfs(t, tc.cpu, tc.cpu), []int{0, 1})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Restore()
			c.MaxStepKHz = tc.stepKHz
			for req, want := range tc.want {
				got := c.Nearest(req)
				if got != want {
					t.Errorf("Nearest(%d) = %d, want %d", req, got, want)
				}
				if err := c.Set(got); err != nil {
					t.Errorf("Set(Nearest(%d) = %d): %v", req, got, err)
				}
			}
		})
	}
}

// Two CPUs, one with a table and one without: the value both accept.
func TestNearestAcrossCPUs(t *testing.T) {
	noTable := defaultCPU()
	noTable.freqs = ""
	c, err := Open(fakeSysfs(t, noTable, defaultCPU()), []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Restore()
	if got := c.Nearest(1900000); got != 1600000 {
		t.Errorf("Nearest(1900000) = %d, want cpu1's P-state 1600000", got)
	}
	if err := c.Set(c.Nearest(1900000)); err != nil {
		t.Error(err)
	}
}
