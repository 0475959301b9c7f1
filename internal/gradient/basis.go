package gradient

import (
	"errors"
	"fmt"
	"math"
)

// Kind is the attribute an element's gradient is taken with respect to.
type Kind string

// The kinds of element, with the injector's lease kind for each.
const (
	// KindLink is a one-way link's latency; the knob is milliseconds of delay.
	KindLink Kind = "link"
	// KindCPUFreq is a node's CPU frequency; the knob is kHz below the
	// operating frequency (the injector's cpufreq lease).
	KindCPUFreq Kind = "cpufreq"
	// KindCapacity is a node's CPU capacity; the knob is the fraction of it
	// withheld (the injector's capacity lease, c·(1−a)).
	KindCapacity Kind = "capacity"
)

// LeaseKind is the injector's name for the lease that perturbs this kind.
func (k Kind) LeaseKind() string {
	if k == KindLink {
		return "delay"
	}
	return string(k)
}

// Basis is the function of an element's attribute in which the response time
// is (nearly) linear, with the constants it needs (paper 003 §II-A, §III):
//
//   - link: the identity b(l) = l, l in ms (§III-A);
//   - cpufreq: b(f) = 1/(f − α·w), f in MHz (§III-B), from the M/G/1/PS
//     response time s/(1−U) with s ∝ 1/f and U = α·w/f;
//   - capacity: b(c) = 1/(c·f − α·w), c the fraction of the CPU allotted
//     (§III-C), the same queue at the effective speed c·f.
//
// α·w is the CPU demand in MHz: α is the work per request in megacycles (the
// work factor of paper 002, or a utilization gradient, AlphaFromUtilization)
// and w the request rate per second. Gradients with respect to these bases
// are in ms per basis unit (ms·MHz).
type Basis struct {
	Kind Kind `json:"kind"`
	// Operating is the attribute now: link latency (ms; only changes matter),
	// CPU frequency (MHz) or capacity (a fraction, or cores).
	Operating float64 `json:"operating,omitempty"`
	// FrequencyMHz is f for the capacity basis.
	FrequencyMHz float64 `json:"frequency_mhz,omitempty"`
	// Alpha is α in megacycles per request, Workload is w in requests per second.
	Alpha    float64 `json:"alpha,omitempty"`
	Workload float64 `json:"workload,omitempty"`
	// Centered, for a capacity, swings the wave both ways around the
	// operating point: its on-phases withhold a/2 and its off-phases grant
	// a/2, c·(1 ∓ a/2). The wave then measures the secant across c, a
	// central difference, rather than the one below c; where the response
	// is not one line in b (paper 000 §6, figure 14), the one-sided secant
	// misjudges every change above the operating point.
	Centered bool `json:"centered,omitempty"`
	// Above, for a capacity, puts the wave above the operating point: its
	// on-phases hold c and its off-phases grant a, c·(1 + a). With a wave
	// below c on the same element it makes paper 000 §6's set of gradients,
	// one for each side of the operating point (Predict, Side).
	Above bool `json:"above,omitempty"`
}

// The sides of the operating point a capacity wave can sweep.
const (
	SideBelow    = "below"
	SideCentered = "centered"
	SideAbove    = "above"
)

// Side is which side of the operating point a capacity wave sweeps: below
// (the default, withholding), centered or above (granting); "" for the
// other kinds, whose waves have one side only.
func (b Basis) Side() string {
	switch {
	case b.Kind != KindCapacity:
		return ""
	case b.Centered:
		return SideCentered
	case b.Above:
		return SideAbove
	}
	return SideBelow
}

// WithSide is the basis with its capacity wave on side (SideBelow,
// SideCentered or SideAbove; anything else is below), as the exporter's
// configuration and records name it.
func (b Basis) WithSide(side string) Basis {
	b.Centered, b.Above = side == SideCentered, side == SideAbove
	return b
}

// Link returns the identity basis of a link.
func Link() Basis { return Basis{Kind: KindLink} }

// Validate reports a basis that cannot be evaluated at its operating point.
func (b Basis) Validate() error {
	switch b.Kind {
	case KindLink:
		if b.Centered || b.Above {
			return errors.New("link basis: only a capacity wave can be centered or above")
		}
		return nil
	case KindCPUFreq, KindCapacity:
		if !(b.Operating > 0) {
			return fmt.Errorf("%s basis: operating point must be > 0, got %v", b.Kind, b.Operating)
		}
		if (b.Centered || b.Above) && b.Kind != KindCapacity {
			return fmt.Errorf("%s basis: only a capacity wave can be centered or above", b.Kind)
		}
		if b.Centered && b.Above {
			return errors.New("capacity basis: a wave is centered or above, not both")
		}
		if b.Kind == KindCapacity && !(b.FrequencyMHz > 0) {
			return fmt.Errorf("capacity basis: frequency_mhz must be > 0, got %v", b.FrequencyMHz)
		}
		if b.Alpha < 0 || b.Workload < 0 {
			return fmt.Errorf("%s basis: alpha and workload must be ≥ 0", b.Kind)
		}
		_, err := b.Value(b.Operating)
		return err
	case "":
		return errors.New("basis kind is missing")
	}
	return fmt.Errorf("unknown basis kind %q (link, cpufreq or capacity)", b.Kind)
}

// demand is α·w in MHz.
func (b Basis) demand() float64 { return b.Alpha * b.Workload }

// speed is the CPU speed in MHz that attribute value x gives.
func (b Basis) speed(x float64) float64 {
	if b.Kind == KindCapacity {
		return x * b.FrequencyMHz
	}
	return x
}

// Value is b(x). The queueing bases are undefined at or past saturation
// (speed ≤ α·w), which is an error.
func (b Basis) Value(x float64) (float64, error) {
	if b.Kind == KindLink {
		return x, nil
	}
	head := b.speed(x) - b.demand()
	if !(head > 0) {
		return 0, fmt.Errorf("%s %v saturates the node: speed %.4g MHz ≤ demand α·w = %.4g MHz", b.Kind, x, b.speed(x), b.demand())
	}
	return 1 / head, nil
}

// Utilization is α·w over the speed at the operating point (0 for links).
func (b Basis) Utilization() float64 {
	if b.Kind == KindLink {
		return 0
	}
	return b.demand() / b.speed(b.Operating)
}

// On is the attribute while a square wave of knob amplitude a is on, in the
// injector's units: a link gains a ms, a CPU runs a kHz slower, a capacity
// loses the fraction a (a/2 when centered; none when above, whose
// off-phases grant a instead).
func (b Basis) On(a float64) float64 {
	switch b.Kind {
	case KindCPUFreq:
		return b.Operating - a/1000
	case KindCapacity:
		return b.Operating * (1 - (a + b.OffKnob(a)))
	}
	return b.Operating + a
}

// Off is the attribute while the wave is off: the operating point, or for a
// capacity c·(1 + a/2) when centered and c·(1 + a) when above.
func (b Basis) Off(a float64) float64 {
	if b.Kind == KindCapacity {
		return b.Operating * (1 - b.OffKnob(a))
	}
	return b.Operating
}

// OffKnob is the knob's value in the wave's off-phases, in the injector's
// units: a grant of a/2 for a centered capacity and of a for one above,
// else 0. The injector takes it as the lease's floor, with a + OffKnob(a)
// in the on-phases.
func (b Basis) OffKnob(a float64) float64 {
	switch {
	case b.Kind != KindCapacity:
		return 0
	case b.Centered:
		return -a / 2
	case b.Above:
		return -a
	}
	return 0
}

// Interval is the range of the attribute a wave of knob amplitude a sweeps,
// low to high: the secant a gradient measured with it spans.
func (b Basis) Interval(a float64) [2]float64 {
	on, off := b.On(a), b.Off(a)
	return [2]float64{math.Min(on, off), math.Max(on, off)}
}

// Delta is the change of the basis between the wave's phases that knob
// amplitude a causes: b(On(a)) − b(Off(a)). It is positive for every kind:
// more delay, less frequency and less capacity all raise the basis.
func (b Basis) Delta(a float64) (float64, error) {
	if b.Kind == KindLink {
		return a, nil
	}
	v1, err := b.Value(b.On(a))
	if err != nil {
		return 0, err
	}
	v0, err := b.Value(b.Off(a))
	if err != nil {
		return 0, err
	}
	return v1 - v0, nil
}

// Knob is the inverse of Delta: the knob amplitude whose basis change is d.
func (b Basis) Knob(d float64) (float64, error) {
	if b.Kind == KindLink {
		return d, nil
	}
	v0, err := b.Value(b.Operating)
	if err != nil {
		return 0, err
	}
	if b.Centered && b.Kind == KindCapacity {
		// With u = c·f − α·w and h = (a/2)·c·f, Delta is
		// 1/(u − h) − 1/(u + h) = 2h/(u² − h²); its root in h is
		// (√(1 + d²u²) − 1)/d, below u, so the on-phase never saturates.
		if !(d > 0) {
			return 0, fmt.Errorf("no centered capacity wave changes the basis by %v", d)
		}
		u := 1 / v0
		h := (math.Sqrt(1+d*d*u*u) - 1) / d
		return 2 * h / (b.Operating * b.FrequencyMHz), nil
	}
	if b.Above && b.Kind == KindCapacity {
		// Delta is b(c) − b(c·(1+a)) = v0 − 1/(u + a·c·f).
		if !(d > 0) || !(v0-d > 0) {
			return 0, fmt.Errorf("no capacity wave above the operating point changes the basis by %v (at most %v)", d, v0)
		}
		return (1/(v0-d) - 1/v0) / (b.Operating * b.FrequencyMHz), nil
	}
	if !(v0+d > 0) {
		return 0, fmt.Errorf("no %s setting changes the basis by %v", b.Kind, d)
	}
	speed := 1/(v0+d) + b.demand()
	switch b.Kind {
	case KindCPUFreq:
		return (b.Operating - speed) * 1000, nil
	case KindCapacity:
		return 1 - speed/b.FrequencyMHz/b.Operating, nil
	}
	return 0, fmt.Errorf("unknown basis kind %q", b.Kind)
}

// AlphaFromUtilization is α from one measurement: U = α·w/speed, so
// α = U·speed/w (speed in MHz: f, or c·f).
func AlphaFromUtilization(u, speedMHz, workload float64) (float64, error) {
	if !(workload > 0) || !(speedMHz > 0) || u < 0 {
		return 0, fmt.Errorf("alpha needs utilization ≥ 0, speed > 0 and workload > 0 (got %v, %v, %v)", u, speedMHz, workload)
	}
	return u * speedMHz / workload, nil
}

// AlphaRegression is the utilization gradient: the least-squares slope α of
// U = α·(w/speed) through the origin, over measurements at several
// workloads or speeds (paper 003 §III-B).
func AlphaRegression(u, workload, speedMHz []float64) (float64, error) {
	if len(u) != len(workload) || len(u) != len(speedMHz) || len(u) == 0 {
		return 0, errors.New("alpha regression needs equally many utilizations, workloads and speeds")
	}
	var sxx, sxy float64
	for i := range u {
		if !(speedMHz[i] > 0) {
			return 0, fmt.Errorf("speed %d must be > 0", i)
		}
		x := workload[i] / speedMHz[i]
		sxx += x * x
		sxy += x * u[i]
	}
	if sxx == 0 {
		return 0, errors.New("alpha regression: every workload is zero")
	}
	return sxy / sxx, nil
}

// Fit is a least-squares line y = Intercept + Slope·x.
type Fit struct {
	Intercept float64 `json:"intercept"`
	Slope     float64 `json:"slope"`
	R2        float64 `json:"r2"`
	N         int     `json:"n"`
}

// FitLine fits a line and its coefficient of determination: how linear the
// response time is in a basis (paper 003 figure 2(c), 2(d)).
func FitLine(x, y []float64) (Fit, error) {
	n := len(x)
	if n != len(y) || n < 3 {
		return Fit{}, errors.New("a line fit needs at least three (x, y) pairs")
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var sxx, sxy, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return Fit{}, errors.New("a line fit needs at least two distinct x")
	}
	f := Fit{Slope: sxy / sxx, N: n}
	f.Intercept = my - f.Slope*mx
	f.R2 = 1
	if syy > 0 {
		f.R2 = sxy * sxy / (sxx * syy)
	}
	if math.IsNaN(f.R2) {
		f.R2 = 0
	}
	return f, nil
}
