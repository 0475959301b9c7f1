package gradient

import (
	"fmt"
	"math"
	"math/cmplx"

	"github.com/tierscope/tierscope/internal/spectral"
)

// The adaptive cycle inside the active window (Config.AdaptiveInWindow).
//
// Paper 000 §3 runs the adaptive single cycle at A⁰ before the active
// phase, so an element costs one period, a lead time and a lateness more
// than its N bins. Here the cycle is the window's first j periods instead:
//
//	lease 0: j periods at A⁰, from the wave start
//	lease 1: k_d + 1 − j periods at A_d′, from j periods later
//	window:  N bins = k_d periods, from SkewGuard after the wave start
//
// A_d′ must be known one lead time before lease 1 starts, and the first
// on-phase's samples take up to Lateness to arrive: j is the fewest periods
// that allow both (1 when the half period is longer than Lateness and the
// lead time), and the window must hold a period more. The rough gradient
// cannot wait for a whole cycle either: it is the step of the response
// time over lease 0's on-phases against the level of its off-phases and of
// the quiet seconds just before the wave (the previous window's lateness,
// or the end of training), over the samples that have arrived,
//
//	g′ = (mean_on − mean_off) / Δ(A⁰),
//
// with the noise of a half-period mean from training (HalfPeriodStdMs),
// scaled to each side's share of a half period's samples. A step against
// the level just before is immune to a drift since training, as the
// one-cycle DFT is.
//
// Equation 5 still holds over the window: the injected series is a square
// wave whose first period has another amplitude, so its coefficient at k_d
// is Σ_j Δ_j·C_j over the on-phases j, C_j = ∫ e^{−2πi·k_d·τ/W} dτ over
// on-phase j within the window. Dividing the spike by the effective change
// Δ_eff = |Σ Δ_j·C_j| / |Σ C_j| keeps equation 5 in the form of a uniform
// wave (the binning's loss is common to all on-phases).

// levelAcc accumulates one transaction's response times over an interval.
type levelAcc struct {
	n          int
	sum, sumSq float64
}

func (a *levelAcc) add(v float64) { a.n++; a.sum += v; a.sumSq += v * v }

func (a *levelAcc) mean() float64 { return a.sum / float64(a.n) }

// variance is the samples' variance (0 with fewer than two).
func (a *levelAcc) variance() float64 {
	if a.n < 2 {
		return 0
	}
	m := a.mean()
	return math.Max(0, (a.sumSq-float64(a.n)*m*m)/float64(a.n-1))
}

// quietLevel holds each transaction's requests issued while no lease was
// out: from SkewGuard after a window's lease stopped (or the end of
// training) until SkewGuard before the next wave. Samples arrive late, so
// it keeps accepting them by request time until the next rough gradient.
type quietLevel struct {
	from, until float64
	acc         map[string]*levelAcc
}

func (q *quietLevel) reset(from float64) {
	q.from, q.until = from, math.Inf(1)
	clear(q.acc)
}

func (q *quietLevel) add(s spectral.Sample, maxTx int) {
	if s.Time < q.from || s.Time >= q.until {
		return
	}
	if q.acc == nil {
		q.acc = map[string]*levelAcc{}
	}
	a := q.acc[s.Transaction]
	if a == nil {
		if len(q.acc) >= maxTx {
			return
		}
		a = &levelAcc{}
		q.acc[s.Transaction] = a
	}
	a.add(s.Ms)
}

// fold is the state of a window whose first periods are the adaptive cycle.
type fold struct {
	lease0   string
	a0       float64
	cycles0  int // j, the periods of lease 0
	injected float64
	injSE    float64
	injKnown bool
	// nextStart is lease 1's first on-phase, j periods after lease 0's;
	// decideAt is when A_d′ is chosen, LeadTime before it.
	nextStart, decideAt float64
	// waveStart, period and guard place lease 0's on-phases: requests
	// from guard after an on-phase begins to guard before it ends count.
	waveStart, period, guard float64
	// on and off hold the samples of lease 0's on- and off-phases.
	on, off map[string]*levelAcc
	decided bool
}

// folds reports whether element e's adaptive cycle goes inside its window.
func (x *Experiment) folds(e Element) bool {
	return x.plan != nil && x.foldCycles(e, x.plan.Kd, x.plan.PeriodSeconds) > 0
}

// foldCycles is j for a plan of k_d periods of the given length, or 0 when
// the adaptive cycle cannot go inside the window: the first on-phase must
// have ended a lateness and a lead time before lease 1, and lease 1 must
// have a period of the window.
func (x *Experiment) foldCycles(e Element, kd int, period float64) int {
	if !x.cfg.AdaptiveInWindow || e.SeparateAdaptive || e.FixedAmplitude > 0 || !(period > 0) {
		return 0
	}
	skew := math.Min(x.cfg.SkewGuard.Seconds(), period/4)
	need := period/2 - skew + x.cfg.Lateness.Seconds() + x.cfg.LeadTime.Seconds()
	j := max(1, int(math.Ceil(need/period-1e-9)))
	if j >= kd {
		return 0
	}
	return j
}

// startFolded starts the window with lease 0: j periods at A⁰.
func (x *Experiment) startFolded(t, a0 float64) []Action {
	if acts, over := x.guardBlocks(); over {
		return acts
	}
	e := x.cfg.Elements[x.idx]
	g := x.skew()
	r := x.beginRun(t, PhaseAdaptive, a0, g, x.plan.N)
	r.stopAt = r.winEnd + g
	x.windows++ // the folded cycle is the first window's start
	waveStart, p := r.waveStart, r.period
	j := x.foldCycles(e, x.plan.Kd, p)
	next := waveStart + float64(j)*p
	f := &fold{lease0: r.lease, a0: a0, cycles0: j, nextStart: next, decideAt: next - x.cfg.LeadTime.Seconds(),
		waveStart: waveStart, period: p, guard: g, on: map[string]*levelAcc{}, off: map[string]*levelAcc{}}
	for tx := range r.bins {
		f.on[tx], f.off[tx] = &levelAcc{}, &levelAcc{}
	}
	r.fold = f
	x.quiet.until = waveStart - g
	res := &x.results[x.idx]
	res.AdaptiveInWindow = true
	res.FrequencyHz, res.Kd = x.plan.FrequencyHz, x.plan.Kd
	res.WindowStart, res.WindowEnd = timeAt(r.winStart), timeAt(r.winEnd)
	// Whole periods, not a single on-phase: the delay floor then holds
	// through the off-phase until lease 1 takes over, and a coordinator
	// that dies leaves it to end by itself j periods on.
	return []Action{x.leaseAction(r, t, waveStart, j)}
}

// observe counts a sample of one of lease 0's phases, leaving out the
// skew guard around each edge.
func (f *fold) observe(s spectral.Sample) {
	tau := s.Time - f.waveStart
	if f.decided || tau < 0 || s.Time >= f.nextStart {
		return
	}
	var acc map[string]*levelAcc
	switch in := tau - math.Floor(tau/f.period)*f.period; {
	case in >= f.guard && in < f.period/2-f.guard:
		acc = f.on
	case in >= f.period/2+f.guard && in < f.period-f.guard:
		acc = f.off
	default:
		return
	}
	if a := acc[s.Transaction]; a != nil {
		a.add(s.Ms)
	}
}

// levelStep is the rough gradient of a step of diff ms with standard error
// se for a change delta of the basis, in the form of spectral.Rough: the
// gradient is at least 0, and when the step is not significant its
// standard error is at least the gradient.
func levelStep(diff, se, delta float64) spectral.Estimate {
	e := spectral.Estimate{Delta: delta, PeakMs: math.Abs(diff), NoiseMs: se, BaselineNoiseMs: se}
	up := math.Max(0, diff)
	e.Gradient, e.PerturbationMs = up/delta, up // a step, not equation 5: Equation5 stays 0
	e.StdErr = se / delta
	e.SNR = math.Inf(1)
	if se > 0 {
		e.SNR = up / se
	}
	e.Significant = e.SNR >= spectral.SignificantSNR
	if !e.Significant {
		e.StdErr = math.Max(e.StdErr, e.Gradient)
	}
	e.CI95 = [2]float64{math.Max(0, e.Gradient-z95*e.StdErr), e.Gradient + z95*e.StdErr}
	return e
}

// foldRoughs is every transaction's rough gradient from lease 0's
// on-phases against its off-phases and the quiet level before it, for a
// change delta of the basis.
func (x *Experiment) foldRoughs(f *fold, delta float64) map[string]spectral.Estimate {
	out := map[string]spectral.Estimate{}
	preSec := x.quiet.until - x.quiet.from
	half := float64(max(1, x.plan.AdaptiveBins/2)) * x.plan.BinSeconds
	for tx, on := range f.on {
		pre := x.quiet.acc[tx]
		base := x.plan.Transactions[tx]
		if on.n < 2 || pre == nil || pre.n < 2 || base.Error != "" {
			continue
		}
		// The reference level: the quiet seconds before the wave and the
		// off-phases of lease 0 that have arrived.
		off := *pre
		if o := f.off[tx]; o != nil {
			off.n, off.sum, off.sumSq = off.n+o.n, off.sum+o.sum, off.sumSq+o.sumSq
		}
		var se float64
		if hs := base.HalfPeriodStdMs; hs > 0 && preSec > 0 && !math.IsInf(preSec, 0) {
			// The variance of a mean shrinks with its samples; a half
			// period holds about half·rate of them.
			perHalf := half * float64(pre.n) / preSec
			se = hs * math.Sqrt(perHalf/float64(on.n)+perHalf/float64(off.n))
		} else {
			se = math.Sqrt(on.variance()/float64(on.n) + off.variance()/float64(off.n))
		}
		est := levelStep(on.mean()-off.mean(), se, delta)
		est.Samples = on.n
		out[tx] = est
	}
	return out
}

// decideFold takes the rough gradient from lease 0's on-phase, chooses
// A_d′, and hands the window over from lease 0 to lease 1.
func (x *Experiment) decideFold(t float64) []Action {
	r := x.cur
	f := r.fold
	f.decided = true
	res := &x.results[x.idx]
	e := x.cfg.Elements[x.idx]
	delta0, err := e.Basis.Delta(f.a0)
	if err != nil || !(delta0 > 0) {
		acts := []Action{x.stop("adaptive cycle failed")}
		x.quiet.reset(t + x.skew())
		return append(acts, x.failElement(t, fmt.Sprintf("adaptive cycle: no usable change for A⁰ %v (%v)", f.a0, err))...)
	}
	roughs := x.foldRoughs(f, delta0)
	a := f.a0
	if rough, ok := roughs[x.cfg.Target]; ok {
		res.Rough = &rough
		a = x.chooseAmplitude(e, res, rough, roughs, f.a0)
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("adaptive cycle: too few samples of %q around the on-phase; the window goes on at A⁰", x.cfg.Target))
	}
	acts := []Action{x.stop("adaptive cycle over")}
	if t > f.nextStart-0.25*x.cfg.LeadTime.Seconds() {
		// Too late to start lease 1 on the wave's phase: the first period
		// was a separate adaptive cycle after all.
		res.AdaptiveInWindow = false
		res.Notes = append(res.Notes, fmt.Sprintf("adaptive cycle: decided %.1f s late; a separate active window follows", t-f.decideAt))
		x.windows-- // the folded start was no window after all
		return append(acts, x.startActive(t, a)...)
	}
	if more, over := x.guardBlocks(); over {
		return append(acts, more...)
	}
	r.leaseOut = true // lease 1, the window's lease from now on
	x.seq++
	r.lease = x.leaseName(e, PhaseActive)
	r.phase, x.phase = PhaseActive, PhaseActive
	r.requested = a
	res.Amplitude = a
	return append(acts, x.leaseAction(r, t, f.nextStart, x.plan.Kd+1-f.cycles0))
}

// foldDelta is the window's effective change of the basis (see the top of
// this file), its standard error, the larger of the two changes (for the
// perturbation) and the on-time weighted change (for the on/off
// comparator).
func (x *Experiment) foldDelta() (delta, deltaSE, largest, onOff float64, err error) {
	r := x.cur
	f := r.fold
	e := x.cfg.Elements[x.idx]
	knob0 := f.a0
	if f.injKnown {
		knob0 = f.injected
	}
	knob1 := r.requested
	if r.injKnown {
		knob1 = r.injected
	}
	d0, err := e.Basis.Delta(knob0)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	d1, err := e.Basis.Delta(knob1)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	se := func(knob, d, knobSE float64, known bool) float64 {
		if !known || !(knobSE > 0) {
			return 0
		}
		d2, err := e.Basis.Delta(knob + knobSE)
		if err != nil {
			return 0
		}
		return math.Abs(d2 - d)
	}
	se0, se1 := se(knob0, d0, f.injSE, f.injKnown), se(knob1, d1, r.injSE, r.injKnown)
	p, w, kd := r.period, r.winEnd-r.winStart, float64(x.plan.Kd)
	// C_j for on-phase [a, b) of window time, clipped to [0, w).
	coef := func(a, b float64) (complex128, float64) {
		a, b = math.Max(a, 0), math.Min(b, w)
		if b <= a {
			return 0, 0
		}
		k := 2 * math.Pi * kd / w
		return (cmplx.Exp(complex(0, -k*a)) - cmplx.Exp(complex(0, -k*b))) / complex(0, k), b - a
	}
	off := r.waveStart - r.winStart // lease 0's start in window time (−SkewGuard)
	var c0, c1 complex128
	var t0, t1 float64
	for i := 0; i <= x.plan.Kd; i++ {
		c, on := coef(off+float64(i)*p, off+float64(i)*p+p/2)
		if i < f.cycles0 {
			c0, t0 = c0+c, t0+on
		} else {
			c1, t1 = c1+c, t1+on
		}
	}
	sum := cmplx.Abs(c0 + c1)
	if !(sum > 0) {
		return 0, 0, 0, 0, fmt.Errorf("no on-phase in the window")
	}
	delta = cmplx.Abs(complex(d0, 0)*c0+complex(d1, 0)*c1) / sum
	deltaSE = math.Hypot(cmplx.Abs(c0)*se0, cmplx.Abs(c1)*se1) / sum
	onOff = (d0*t0 + d1*t1) / (t0 + t1)
	return delta, deltaSE, math.Max(d0, d1), onOff, nil
}
