// Package cgroupcpu sets the CPU capacity of a cgroup through the CFS
// bandwidth controller, the actuator for capacity gradients (paper 003,
// "Gradient-based Models of Multitier Systems", §III.C: the VM capacity
// gradient is the derivative of response time with respect to the fraction
// of CPU capacity allocated to a node; the paper used Xen's Dom0 interface,
// cgroup CPU quotas are the container equivalent).
//
// Both hierarchies are supported: v1 (cpu.cfs_quota_us, cpu.cfs_period_us)
// and v2 (cpu.max). A Controller saves the quota on Open and puts it back on
// Restore, because perturbation must be safe by construction (docs/design.md).
// Throttled reads cpu.stat so the injector can report how much capacity was
// actually withheld, as the delay daemon of paper 000 §3 reports the delay
// actually injected.
package cgroupcpu

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Version is the cgroup hierarchy version.
type Version int

// The supported versions.
const (
	V1 Version = 1
	V2 Version = 2
)

// DefaultMinQuota is the kernel's own lower bound on a CFS quota.
const DefaultMinQuota = time.Millisecond

// Controller sets a cgroup's CPU quota.
type Controller struct {
	// CPUs is how many CPUs a fraction of 1 stands for; default 1.
	CPUs float64
	// MinQuota is the smallest quota SetFraction writes, so a tiny fraction
	// throttles instead of failing (the kernel rejects quotas below 1 ms).
	MinQuota time.Duration

	dir         string
	version     Version
	savedQuota  int64 // µs; -1 means unlimited ("max")
	savedPeriod int64 // µs
	mu          sync.Mutex
	pending     bool // changed and not yet restored
}

// Open detects the cgroup version from the files in dir and saves the
// current quota and period.
func Open(dir string) (*Controller, error) {
	c := &Controller{dir: dir, CPUs: 1, MinQuota: DefaultMinQuota}
	switch {
	case exists(filepath.Join(dir, "cpu.max")):
		c.version = V2
		s, err := c.read("cpu.max")
		if err != nil {
			return nil, err
		}
		if c.savedQuota, c.savedPeriod, err = parseMax(s); err != nil {
			return nil, fmt.Errorf("cgroupcpu: parsing %s: %w", filepath.Join(dir, "cpu.max"), err)
		}
	case exists(filepath.Join(dir, "cpu.cfs_quota_us")):
		c.version = V1
		var err error
		if c.savedQuota, err = c.readInt("cpu.cfs_quota_us"); err != nil {
			return nil, err
		}
		if c.savedPeriod, err = c.readInt("cpu.cfs_period_us"); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("cgroupcpu: %s has neither cpu.max (v2) nor cpu.cfs_quota_us (v1); is the cpu controller enabled?", dir)
	}
	if c.savedPeriod <= 0 {
		return nil, fmt.Errorf("cgroupcpu: %s: period %d µs must be positive", dir, c.savedPeriod)
	}
	return c, nil
}

// parseMax parses cpu.max: "max 100000" or "<quota> <period>".
func parseMax(s string) (quota, period int64, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("want \"<quota|max> <period>\", got %q", s)
	}
	if period, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return 0, 0, err
	}
	if f[0] == "max" {
		return -1, period, nil
	}
	quota, err = strconv.ParseInt(f[0], 10, 64)
	return quota, period, err
}

// Saved is what Open found: enough to put the quota back from another
// process (a journal written before the first change).
type Saved struct {
	Dir     string  `json:"dir"`
	Version Version `json:"version"`
	Quota   int64   `json:"quota_us"` // -1: unlimited
	Period  int64   `json:"period_us"`
}

// State is the quota and period Open saved, for a journal.
func (c *Controller) State() Saved {
	return Saved{Dir: c.dir, Version: c.version, Quota: c.savedQuota, Period: c.savedPeriod}
}

// RestoreSaved writes s's quota (and, on v2, period) back to its cgroup:
// what Restore would have done, for a process that died before it could.
func RestoreSaved(s Saved) error {
	if s.Version != V1 && s.Version != V2 || s.Period <= 0 {
		return fmt.Errorf("cgroupcpu: saved state of %s is malformed: %+v", s.Dir, s)
	}
	c := &Controller{dir: s.Dir, version: s.Version, savedQuota: s.Quota, savedPeriod: s.Period}
	return c.writeQuota(s.Quota)
}

// Version reports the detected hierarchy version.
func (c *Controller) Version() Version { return c.version }

// Saved returns the quota and period found at Open, in µs; quota -1 means
// unlimited.
func (c *Controller) Saved() (quota, period int64) { return c.savedQuota, c.savedPeriod }

// SetFraction limits the cgroup to fraction f of CPUs CPUs: quota =
// f·period·CPUs, but no less than MinQuota. The period is left unchanged.
func (c *Controller) SetFraction(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return fmt.Errorf("cgroupcpu: fraction %v must be positive and finite", f)
	}
	cpus := c.CPUs
	if cpus <= 0 || math.IsNaN(cpus) || math.IsInf(cpus, 0) {
		return fmt.Errorf("cgroupcpu: CPUs %v must be positive and finite", c.CPUs)
	}
	quota := int64(math.Round(f * float64(c.savedPeriod) * cpus))
	if min := c.MinQuota.Microseconds(); quota < min {
		quota = min
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = true
	return c.writeQuota(quota)
}

func (c *Controller) writeQuota(quota int64) error {
	if c.version == V2 {
		q := "max"
		if quota >= 0 {
			q = strconv.FormatInt(quota, 10)
		}
		return c.write("cpu.max", fmt.Sprintf("%s %d", q, c.savedPeriod))
	}
	return c.write("cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
}

// Restore writes the saved quota back. It does nothing if nothing was
// changed since Open or the last successful Restore, so it is safe to call
// repeatedly; a failed Restore is retried by the next call.
func (c *Controller) Restore() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pending {
		return nil
	}
	if err := c.writeQuota(c.savedQuota); err != nil {
		return err
	}
	c.pending = false
	return nil
}

// Throttled reads cpu.stat: how many periods the cgroup was throttled in and
// for how long in total.
func (c *Controller) Throttled() (nrThrottled uint64, throttled time.Duration, err error) {
	s, err := c.read("cpu.stat")
	if err != nil {
		return 0, 0, err
	}
	timeKey, unit := "throttled_time", time.Nanosecond
	if c.version == V2 {
		timeKey, unit = "throttled_usec", time.Microsecond
	}
	var haveNr, haveTime bool
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, perr := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "nr_throttled":
			nrThrottled, haveNr, err = v, true, perr
		case timeKey:
			throttled, haveTime, err = time.Duration(v)*unit, true, perr
		default:
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("cgroupcpu: parsing %s: %w", filepath.Join(c.dir, "cpu.stat"), err)
		}
	}
	if !haveNr || !haveTime {
		return 0, 0, fmt.Errorf("cgroupcpu: %s lacks nr_throttled or %s", filepath.Join(c.dir, "cpu.stat"), timeKey)
	}
	return nrThrottled, throttled, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (c *Controller) read(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, name))
	if err != nil {
		return "", fmt.Errorf("cgroupcpu: reading %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (c *Controller) readInt(name string) (int64, error) {
	s, err := c.read(name)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroupcpu: parsing %s: %w", filepath.Join(c.dir, name), err)
	}
	return v, nil
}

// write opens without O_CREATE: a missing cgroup file is an error, not a new
// file.
func (c *Controller) write(name, value string) error {
	p := filepath.Join(c.dir, name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("cgroupcpu: writing %w", err)
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return fmt.Errorf("cgroupcpu: writing %q to %s: %w", value, p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cgroupcpu: writing %q to %s: %w", value, p, err)
	}
	return nil
}
