package injector

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/tierscope/tierscope/injector/internal/cgroupcpu"
	"github.com/tierscope/tierscope/injector/internal/cpufreq"
	"github.com/tierscope/tierscope/internal/leaseapi"
	"github.com/tierscope/tierscope/internal/nfqdelay"
)

// actuator is one lease's hold on a backend. Apply sets the wave's current
// value (0 is unperturbed); Restore undoes everything and is idempotent.
type actuator interface {
	Apply(v float64) error
	Restore() error
	// Stats is what the backend measured, for the lease status; nil if none.
	Stats() any
}

// opener opens the backend of a validated request. slot is the lease's
// index in [0, max_leases), from which a delay lease takes its queue.
type opener func(req *leaseRequest, slot int) (actuator, error)

func (i *injector) defaultOpeners() map[string]opener {
	return map[string]opener{
		kindDelay:    i.openDelay,
		kindCPUFreq:  i.openCPUFreq,
		kindCapacity: i.openCapacity,
	}
}

// delayActuator follows the wave with an atomic the packet hook reads.
type delayActuator struct {
	cur atomic.Int64 // ns
	d   *nfqdelay.Delayer
}

func (i *injector) openDelay(req *leaseRequest, slot int) (actuator, error) {
	a := &delayActuator{}
	d, err := nfqdelay.Start(nfqdelay.Options{
		// The instance groups this injector's rules for its watchdog.
		ID:       i.instance + "-" + req.id,
		Match:    req.match,
		Queue:    i.cfg.QueueBase + uint16(slot),
		Delay:    func(time.Time) time.Duration { return time.Duration(a.cur.Load()) },
		MaxDelay: i.cfg.MaxDelay,
		Floor:    time.Duration(req.Wave.Floor * float64(time.Millisecond)),
		Probe:    i.cfg.DelayProbeInterval,
		// A backstop should this process hang: our own expiry comes first.
		Lease:     nfqdelay.MaxLease,
		RuleCheck: i.cfg.RuleCheckInterval,
	})
	if err != nil {
		return nil, err
	}
	a.d = d
	return a, nil
}

func (a *delayActuator) Apply(v float64) error {
	a.cur.Store(int64(v * float64(time.Millisecond)))
	return nil
}

func (a *delayActuator) Restore() error {
	a.cur.Store(0)
	_, err := a.d.Stop()
	return err
}

// Done is closed when the Delayer stops, including by its backstop lease.
func (a *delayActuator) Done() <-chan struct{} { return a.d.Done() }

// Cause is why the Delayer stopped by itself (nfqdelay.ErrRuleGone when
// another process deleted its rule).
func (a *delayActuator) Cause() error { return a.d.Cause() }

func toPhaseStats(s nfqdelay.PhaseStats) *leaseapi.PhaseStats {
	return &leaseapi.PhaseStats{Count: s.Count, MeanMs: ms(s.Mean), StdMs: ms(s.Std), RequestedMeanMs: ms(s.RequestedMean)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (a *delayActuator) Stats() any { return toDelayStats(a.d.Stats()) }

func toDelayStats(s nfqdelay.Stats) leaseapi.DelayStats {
	out := leaseapi.DelayStats{
		Count: s.Count, MeanMs: ms(s.Mean), StdMs: ms(s.Std), MinMs: ms(s.Min), MaxMs: ms(s.Max),
		P50Ms: ms(s.P50), P90Ms: ms(s.P90), P99Ms: ms(s.P99), RequestedMeanMs: ms(s.RequestedMean),
		ErrMeanMs: ms(s.ErrMean), ErrP99Ms: ms(s.ErrP99), HeldForOrder: s.HeldForOrder,
		Flushed: s.Flushed, Errors: s.Errors, On: toPhaseStats(s.On), Off: toPhaseStats(s.Off),
	}
	if s.LastError != nil {
		out.LastError = s.LastError.Error()
	}
	if p := s.Probe; p != nil {
		out.Probe = &leaseapi.ProbeStats{Sent: p.Sent, Received: p.Received, On: toPhaseStats(p.On), Off: toPhaseStats(p.Off)}
	}
	return out
}

// freqActuator lowers the CPUs' frequency by the wave's value (kHz).
type freqActuator struct {
	c    *cpufreq.Controller
	base int64
	step atomic.Int64 // kHz below base of the last on-phase, as set
}

func (i *injector) openCPUFreq(req *leaseRequest, _ int) (actuator, error) {
	c, err := cpufreq.OpenJournaled(i.cfg.SysfsRoot, req.Target.CPUs, func(saved []cpufreq.Saved) error {
		return i.journal.record(journalEntry{Lease: req.id, CPUs: saved})
	})
	if err != nil {
		return nil, err
	}
	restore := func() error {
		if err := c.Restore(); err != nil {
			return err
		}
		return i.journal.clear(req.id)
	}
	c.MaxStepKHz = i.cfg.MaxFreqStepKHz
	var base int64 = -1
	for cpu, b := range c.Base() {
		if base >= 0 && b != base {
			return nil, errors.Join(apiErrorf(http.StatusUnprocessableEntity,
				"target.cpus: cpu%d's base %d kHz differs from another's %d kHz; one lease drives CPUs of one base", cpu, b, base),
				restore())
		}
		base = b
	}
	a := &freqActuator{c: c, base: base}
	// Under userspace the speed is whatever was set last: pin it to base.
	if err := c.Set(base); err != nil {
		return nil, errors.Join(err, restore())
	}
	return journaled{actuator: a, j: i.journal, lease: req.id}, nil
}

// Apply sets the speed nearest base − v the CPUs accept (see Nearest).
func (a *freqActuator) Apply(v float64) error {
	khz := a.c.Nearest(a.base - int64(math.Round(v)))
	if err := a.c.Set(khz); err != nil {
		return err
	}
	if v > 0 {
		a.step.Store(a.base - khz)
	}
	return nil
}

func (a *freqActuator) Restore() error { return a.c.Restore() }

// Stats gives the step the on-phases actually took (step_khz), which may
// differ from the wave's amplitude by the rounding to a P-state.
func (a *freqActuator) Stats() any {
	return leaseapi.FreqStats{BaseKHz: a.base, StepKHz: a.step.Load()}
}

// capActuator withholds the wave's value (a fraction) of a cgroup's
// capacity, over the lease's floor; a negative floor grants.
type capActuator struct {
	c        *cgroupcpu.Controller
	baseCPUs float64
	floor    float64
}

func (i *injector) openCapacity(req *leaseRequest, _ int) (actuator, error) {
	c, err := cgroupcpu.Open(filepath.Join(i.cfg.CgroupRoot, filepath.FromSlash(req.cgroup)))
	if err != nil {
		return nil, err
	}
	quota, period := c.Saved()
	base := float64(runtime.NumCPU())
	if quota > 0 {
		base = float64(quota) / float64(period)
	}
	c.CPUs = base
	c.MinQuota = i.cfg.MinQuota
	floor := req.Wave.Floor
	on := time.Duration((1-req.Wave.Amplitude-floor)*float64(period)*base) * time.Microsecond
	if on < i.cfg.MinQuota {
		return nil, apiErrorf(http.StatusUnprocessableEntity,
			"wave.amplitude: %v over a floor of %v would leave a quota of %v, below min_quota %v", req.Wave.Amplitude, floor, on, i.cfg.MinQuota)
	}
	if floor < 0 {
		// A grant needs a quota to grant above, and CPUs to grant.
		if quota <= 0 {
			return nil, apiErrorf(http.StatusUnprocessableEntity,
				"wave.floor: %v grants capacity, but cgroup %q has no quota (it may use every CPU already)", floor, req.cgroup)
		}
		if most := (1 - floor) * base; most > float64(runtime.NumCPU()) {
			return nil, apiErrorf(http.StatusUnprocessableEntity,
				"wave.floor: %v would grant cgroup %q %.3g CPUs, more than the host's %d", floor, req.cgroup, most, runtime.NumCPU())
		}
	}
	st := c.State()
	if err := i.journal.record(journalEntry{Lease: req.id, Cgroup: &st}); err != nil {
		return nil, err
	}
	return journaled{actuator: &capActuator{c: c, baseCPUs: base, floor: floor}, j: i.journal, lease: req.id}, nil
}

// Apply withholds floor + v: the off-phases (v = 0) hold the floor, and only
// a wave without one puts the saved quota back between on-phases.
func (a *capActuator) Apply(v float64) error {
	if w := a.floor + v; w != 0 {
		return a.c.SetFraction(1 - w)
	}
	return a.c.Restore()
}

func (a *capActuator) Restore() error { return a.c.Restore() }

func (a *capActuator) Stats() any {
	st := map[string]any{"base_cpus": a.baseCPUs, "floor": a.floor}
	if n, d, err := a.c.Throttled(); err == nil {
		st["nr_throttled"] = n
		st["throttled_ms"] = ms(d)
	} else {
		st["throttled_error"] = fmt.Sprint(err)
	}
	return st
}
