// Package cpufreq sets CPU frequency through the Linux cpufreq `userspace`
// governor, the actuator for frequency gradients (paper 003, "Gradient-based
// Models of Multitier Systems", §III.B: perturbations are injected with DVFS
// through the CPUfreq interface and the userspace governor).
//
// A Controller saves each CPU's governor and speed on Open and puts them back
// on Restore, because perturbation must be safe by construction (docs/design.md):
// a square wave of frequency must never leave a host slowed down. Frequencies
// are in kHz, the unit of the sysfs files.
package cpufreq

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// DefaultRoot is where Linux exposes per-CPU cpufreq policies.
const DefaultRoot = "/sys/devices/system/cpu"

const userspace = "userspace"

type cpuState struct {
	cpu      int
	dir      string
	governor string  // governor found at Open
	base     int64   // speed found at Open, kHz
	avail    []int64 // scaling_available_frequencies, sorted; nil if absent
	min, max int64   // cpuinfo_min_freq / cpuinfo_max_freq
	pending  bool    // not yet restored
}

// Controller drives a set of CPUs with the userspace governor.
type Controller struct {
	// MaxStepKHz caps how far Set may move from each CPU's saved base
	// frequency; 0 means no cap. It keeps perturbations minute (paper 003 §II).
	MaxStepKHz int64

	mu   sync.Mutex
	cpus []*cpuState
}

// Open reads and saves each CPU's governor and speed under root (DefaultRoot
// if empty) and switches them to the userspace governor. If any CPU fails,
// the CPUs already switched are restored and the error is returned.
func Open(root string, cpus []int) (*Controller, error) { return OpenJournaled(root, cpus, nil) }

// Saved is one CPU's state as Open found it: enough to put it back from
// another process (a journal written before the first change).
type Saved struct {
	CPU      int    `json:"cpu"`
	Dir      string `json:"dir"`
	Governor string `json:"governor"`
	Base     int64  `json:"base_khz"`
}

// OpenJournaled is Open that first hands every CPU's saved state to
// journal, before writing anything; if journal fails nothing is changed.
func OpenJournaled(root string, cpus []int, journal func([]Saved) error) (*Controller, error) {
	if root == "" {
		root = DefaultRoot
	}
	if len(cpus) == 0 {
		return nil, errors.New("cpufreq: no CPUs given")
	}
	c := &Controller{}
	var saved []Saved
	for _, cpu := range cpus {
		st, err := probe(root, cpu)
		if err != nil {
			return nil, err
		}
		c.cpus = append(c.cpus, st)
		saved = append(saved, Saved{CPU: cpu, Dir: st.dir, Governor: st.governor, Base: st.base})
	}
	if journal != nil {
		if err := journal(saved); err != nil {
			return nil, err
		}
	}
	for _, st := range c.cpus {
		// Marked before switching so a failed write is still restored.
		st.pending = true
		if st.governor != userspace {
			if err := write(st.dir, "scaling_governor", userspace); err != nil {
				return nil, errors.Join(err, c.Restore())
			}
		}
	}
	return c, nil
}

// RestoreSaved puts one CPU back as Restore would have, for a process that
// died before it could.
func RestoreSaved(s Saved) error {
	if s.Governor == "" {
		return fmt.Errorf("cpufreq: saved state of cpu%d has no governor", s.CPU)
	}
	return restoreCPU(&cpuState{cpu: s.CPU, dir: s.Dir, governor: s.Governor, base: s.Base})
}

func restoreCPU(st *cpuState) error {
	if st.governor == userspace {
		// We never changed the governor; put the saved speed back.
		return write(st.dir, "scaling_setspeed", strconv.FormatInt(st.base, 10))
	}
	// The previous governor picks its own speed again.
	return write(st.dir, "scaling_governor", st.governor)
}

func probe(root string, cpu int) (*cpuState, error) {
	st := &cpuState{cpu: cpu, dir: filepath.Join(root, fmt.Sprintf("cpu%d", cpu), "cpufreq")}
	govs, err := read(st.dir, "scaling_available_governors")
	if err != nil {
		return nil, err
	}
	if !slices.Contains(strings.Fields(govs), userspace) {
		return nil, fmt.Errorf("cpufreq: %s does not offer the userspace governor (has %q)",
			filepath.Join(st.dir, "scaling_available_governors"), govs)
	}
	if st.governor, err = read(st.dir, "scaling_governor"); err != nil {
		return nil, err
	}
	if st.min, err = readInt(st.dir, "cpuinfo_min_freq"); err != nil {
		return nil, err
	}
	if st.max, err = readInt(st.dir, "cpuinfo_max_freq"); err != nil {
		return nil, err
	}
	// Many drivers (intel_pstate, CPPC) have no frequency table; then any
	// value within [min, max] is accepted.
	if s, err := read(st.dir, "scaling_available_frequencies"); err == nil {
		for _, f := range strings.Fields(s) {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cpufreq: parsing %s: %w",
					filepath.Join(st.dir, "scaling_available_frequencies"), err)
			}
			st.avail = append(st.avail, v)
		}
		slices.Sort(st.avail)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// scaling_setspeed reads "<unsupported>" unless userspace is active, so
	// the base is the set speed under userspace and the current speed
	// otherwise.
	if st.governor == userspace {
		st.base, err = readInt(st.dir, "scaling_setspeed")
	} else {
		st.base, err = readInt(st.dir, "scaling_cur_freq")
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Base returns the saved base frequency of each CPU, in kHz.
func (c *Controller) Base() map[int]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[int]int64, len(c.cpus))
	for _, st := range c.cpus {
		m[st.cpu] = st.base
	}
	return m
}

// Nearest is the settable speed nearest to khz that every CPU of the set
// accepts: a value of their scaling_available_frequencies (or, without
// tables, khz clamped to their common min/max), within MaxStepKHz of the
// base. Real CPUs have a few P-states, so a wave's amplitude is rounded to
// one, and the lease reports the step it took. A speed asked away from the
// base is never rounded to the base: a wave must move the speed. With no
// common value it returns khz, which Set then refuses with the reason.
func (c *Controller) Nearest(khz int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cpus) == 0 {
		return khz
	}
	base := c.cpus[0].base
	var table []int64
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	for _, st := range c.cpus {
		lo, hi = max(lo, st.min), min(hi, st.max)
		if table == nil && st.avail != nil {
			table = st.avail
		}
	}
	if c.MaxStepKHz > 0 {
		lo, hi = max(lo, base-c.MaxStepKHz), min(hi, base+c.MaxStepKHz)
	}
	if table == nil {
		if lo > hi {
			return khz
		}
		return min(max(khz, lo), hi)
	}
	best, found := khz, false
	for _, f := range table {
		if f == base && khz != base {
			continue
		}
		if found && abs(f-khz) >= abs(best-khz) {
			continue
		}
		ok := true
		for _, st := range c.cpus {
			if c.check(st, f) != nil {
				ok = false
				break
			}
		}
		if ok {
			best, found = f, true
		}
	}
	return best
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Set writes khz to every CPU's scaling_setspeed after checking it against
// each CPU's available frequencies (or min/max) and MaxStepKHz. Nothing is
// written unless every CPU accepts the value.
func (c *Controller) Set(khz int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.cpus {
		if !st.pending {
			return fmt.Errorf("cpufreq: cpu%d already restored", st.cpu)
		}
		if err := c.check(st, khz); err != nil {
			return err
		}
	}
	var errs []error
	for _, st := range c.cpus {
		errs = append(errs, write(st.dir, "scaling_setspeed", strconv.FormatInt(khz, 10)))
	}
	return errors.Join(errs...)
}

func (c *Controller) check(st *cpuState, khz int64) error {
	if st.avail != nil {
		if !slices.Contains(st.avail, khz) {
			return fmt.Errorf("cpufreq: %d kHz is not in cpu%d's scaling_available_frequencies %v",
				khz, st.cpu, st.avail)
		}
	} else if khz < st.min || khz > st.max {
		return fmt.Errorf("cpufreq: %d kHz is outside cpu%d's cpuinfo_min_freq..cpuinfo_max_freq [%d, %d]",
			khz, st.cpu, st.min, st.max)
	}
	if c.MaxStepKHz > 0 {
		if d := khz - st.base; d > c.MaxStepKHz || -d > c.MaxStepKHz {
			return fmt.Errorf("cpufreq: %d kHz is %d kHz from cpu%d's base %d kHz, more than MaxStepKHz %d",
				khz, d, st.cpu, st.base, c.MaxStepKHz)
		}
	}
	return nil
}

// Restore puts every CPU's governor (and, for CPUs that were already on
// userspace, speed) back. It carries on past failures and returns them
// joined; CPUs that failed are retried by the next call, and CPUs already
// restored are left alone, so calling it again is safe.
func (c *Controller) Restore() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, st := range c.cpus {
		if !st.pending {
			continue
		}
		if err := restoreCPU(st); err != nil {
			errs = append(errs, err)
			continue
		}
		st.pending = false
	}
	return errors.Join(errs...)
}

func read(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("cpufreq: reading %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func readInt(dir, name string) (int64, error) {
	s, err := read(dir, name)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpufreq: parsing %s: %w", filepath.Join(dir, name), err)
	}
	return v, nil
}

// write opens without O_CREATE: a missing sysfs file is an error, not a new
// file.
func write(dir, name, value string) error {
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("cpufreq: writing %w", err)
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return fmt.Errorf("cpufreq: writing %q to %s: %w", value, p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cpufreq: writing %q to %s: %w", value, p, err)
	}
	return nil
}
