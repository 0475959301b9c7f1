// Package wave is the square-wave engine behind every perturbation the
// injector runs.
//
// The spectral gradient method (paper 000, "Link Gradients", §2.2–§2.3, and
// the delay daemon of §3) injects a perturbation shaped as a square wave: a
// constant amplitude during the on-half of each period and nothing during the
// off-half, so its effect shows up as a spike at the wave's frequency in the
// response-time spectrum. The measurement algorithm of §3 first runs a single
// small on-phase (the adaptive phase) and then a full train of cycles (the
// active phase). Paper 003 (§III.B–C) reuses the same waves for CPU frequency
// and CPU capacity. The amplitude is in whatever unit the caller's actuator
// uses (milliseconds of delay, kHz, a CPU fraction).
//
// Wave is pure: Value, Done and NextEdge are functions of time only, so the
// phase never drifts with scheduling jitter. Run drives an actuator from it
// and always leaves the actuator at 0 when it returns, because perturbation
// must be safe by construction (docs/design.md).
package wave

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// MinPeriod is the shortest accepted period. Each half must be at least 1 ms,
// the timer granularity the delay daemon of paper 000 §4 could honour.
const MinPeriod = 2 * time.Millisecond

// Wave is a square wave with a 50% duty cycle: on for the first half of each
// period, off for the second.
type Wave struct {
	// Amplitude is the value during on-phases, in the caller's unit.
	Amplitude float64
	// Period is the length of one on+off cycle.
	Period time.Duration
	// Cycles is the number of full periods to run; 0 runs until stopped.
	Cycles int
	// Start is when the first on-phase begins.
	Start time.Time
	// Single runs one on-phase only (the adaptive phase of paper 000 §3) and
	// is done when it ends; Cycles is ignored.
	Single bool
}

// Validate reports the first invalid field.
func (w Wave) Validate() error {
	if w.Period < MinPeriod {
		return fmt.Errorf("wave: Period %v must be at least %v", w.Period, MinPeriod)
	}
	if math.IsNaN(w.Amplitude) || math.IsInf(w.Amplitude, 0) || w.Amplitude < 0 {
		return fmt.Errorf("wave: Amplitude %v must be finite and >= 0", w.Amplitude)
	}
	if w.Cycles < 0 {
		return fmt.Errorf("wave: Cycles %d must be >= 0", w.Cycles)
	}
	// The end time must be representable, or Done would wrap around.
	if w.Cycles > 0 && int64(w.Cycles) > math.MaxInt64/int64(w.Period) {
		return fmt.Errorf("wave: Cycles %d times Period %v overflows", w.Cycles, w.Period)
	}
	return nil
}

func (w Wave) half() time.Duration { return w.Period / 2 }

// End returns when the wave finishes, and false if it runs until stopped.
func (w Wave) End() (time.Time, bool) {
	switch {
	case w.Single:
		return w.Start.Add(w.half()), true
	case w.Cycles > 0:
		return w.Start.Add(time.Duration(w.Cycles) * w.Period), true
	}
	return time.Time{}, false
}

// Done reports whether the wave has finished at t.
func (w Wave) Done(t time.Time) bool {
	end, ok := w.End()
	return ok && !t.Before(end)
}

// Value is the amplitude during on-phases and 0 otherwise, including before
// Start and after the wave is done.
func (w Wave) Value(t time.Time) float64 {
	if w.Period <= 0 || t.Before(w.Start) || w.Done(t) {
		return 0
	}
	if t.Sub(w.Start)%w.Period < w.half() {
		return w.Amplitude
	}
	return 0
}

// NextEdge returns the first edge strictly after t, or the zero time if the
// wave is done at t. The end of the wave counts as an edge. Edges are
// computed from Start, never accumulated, so they cannot drift.
func (w Wave) NextEdge(t time.Time) time.Time {
	if w.Period <= 0 || w.Done(t) {
		return time.Time{}
	}
	if t.Before(w.Start) {
		return w.Start
	}
	d := t.Sub(w.Start)
	n := d / w.Period
	base := w.Start.Add(n * w.Period)
	if d%w.Period < w.half() {
		return base.Add(w.half())
	}
	return base.Add(w.Period)
}

// Clock abstracts time so tests can drive Run with a fake clock.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that Run needs.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Run drives apply with w until the wave is done, ctx is cancelled, or apply
// fails. apply is called once at each edge with the new value (Amplitude when
// an on-phase starts, 0 when it ends), and immediately on entry if Run starts
// inside an on-phase. Whatever happens, apply(0) is called before Run returns
// so the actuator is left unperturbed. Run returns ctx's error on
// cancellation, apply's errors joined, or nil when the wave completes.
func Run(ctx context.Context, w Wave, clock Clock, apply func(value float64) error) (err error) {
	if err := w.Validate(); err != nil {
		return err
	}
	if clock == nil {
		clock = RealClock{}
	}
	defer func() {
		if rerr := apply(0); rerr != nil {
			err = errors.Join(err, fmt.Errorf("wave: restoring 0: %w", rerr))
		}
	}()
	now := clock.Now()
	if !now.Before(w.Start) && !w.Done(now) {
		if v := w.Value(now); v != 0 {
			if err := apply(v); err != nil {
				return err
			}
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		next := w.NextEdge(now)
		if next.IsZero() {
			return nil
		}
		timer := clock.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C():
		}
		// Use the clock rather than next: if the timer fired late, the value
		// and the following edge are those of the actual time.
		now = clock.Now()
		if now.Before(next) {
			now = next
		}
		if w.Done(now) {
			return nil // the deferred apply(0) is the final off edge
		}
		if err := apply(w.Value(now)); err != nil {
			return err
		}
	}
}
