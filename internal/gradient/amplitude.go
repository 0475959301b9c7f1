package gradient

import (
	"fmt"
	"math"

	"github.com/tierscope/tierscope/internal/spectral"
)

// The amplitudes of an element's waves. Paper 000 §3 sizes the active wave
// as A_d′ = A_d/g′ from the adaptive cycle's rough gradient g′; Table 3 asks
// that the perturbation stay within 1σ of the response time's natural noise.
// Every amplitude here is therefore the smaller of the paper's choice and
// the cap that keeps each transaction's change, g·A through the element's
// basis, at aim()·σ_tx, with g at its upper bound: its prior before any
// wave, and after one the estimate's upper standard error
// (boundingGradient).

// clampAmplitude keeps a under the element's MaxAmplitude and growthCap,
// and over its MinAmplitude (the injector's least useful step wins).
func (x *Experiment) clampAmplitude(e Element, a, growthCap float64) float64 {
	if e.MaxAmplitude > 0 {
		a = math.Min(a, e.MaxAmplitude)
	}
	a = math.Min(a, growthCap)
	return math.Max(a, e.MinAmplitude)
}

// adaptivePerturbation is each transaction's change while A⁰ was on, in σ,
// by its one-cycle gradient: the target's, and the others' that stood out
// of the noise.
func (x *Experiment) adaptivePerturbation(roughs map[string]spectral.Estimate) map[string]float64 {
	out := map[string]float64{}
	for tx, g := range roughs {
		sd := x.plan.Transactions[tx].StdMs
		if x.counts(tx, g) && sd > 0 && g.PerturbationMs > 0 {
			out[tx] = g.PerturbationMs / sd
		}
	}
	return out
}

// chooseAmplitude is A_d′ from the target's rough gradient, kept within
// the perturbation bound by every transaction's.
func (x *Experiment) chooseAmplitude(e Element, res *ElementResult, rough spectral.Estimate, roughs map[string]spectral.Estimate, a0 float64) float64 {
	a := x.activeAmplitude(e, rough, a0)
	if capped, tx := x.amplitudeCap(e, x.roughUpperGradients(e, roughs)); capped < a {
		if bounded := x.clampAmplitude(e, capped, a); bounded < a {
			res.Notes = append(res.Notes, fmt.Sprintf("adaptive phase: A_d′ %.4g kept to %.4g, a peak change of %.3gσ in %s's response time", a, bounded, x.aim(), tx))
			a = bounded
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("adaptive phase: a peak change of %.3gσ in %s's response time needs %.4g, under the least amplitude %.4g", x.aim(), tx, capped, a))
		}
	}
	return a
}

// boundsPerturbation says whether MaxPerturbation holds e's waves back. A
// wave above the operating point only grants: its on-phase is the operating
// point and its off-phase is faster, so no request is slower than it would
// have been, and Table 3's intrusiveness (the increase in response time)
// stays 0 however large the grant. Only the injector's caps bound it.
func (x *Experiment) boundsPerturbation(e Element) bool {
	return x.cfg.MaxPerturbation > 0 && e.Basis.Side() != SideAbove
}

// aim is the perturbation, in σ of the peak change g·A, the amplitudes are
// chosen for: under the mean measure the wave is on half the window, so the
// peak may be twice the bound.
func (x *Experiment) aim() float64 {
	return x.cfg.PerturbationAim * x.cfg.MaxPerturbation / PerturbationShare(x.cfg.PerturbationMeasure)
}

// counts says whether a transaction's gradient takes part in the
// perturbation bound: the target's always, another's once its spike stands
// out of the noise.
func (x *Experiment) counts(tx string, g spectral.Estimate) bool {
	return g.Significant || tx == x.cfg.Target
}

// roughUpperGradients are the bounding gradients of the adaptive cycle's
// rough gradients, as they are rough.
func (x *Experiment) roughUpperGradients(e Element, roughs map[string]spectral.Estimate) map[string]float64 {
	out := make(map[string]float64, len(roughs))
	for tx, g := range roughs {
		if up, ok := x.boundingGradient(e, tx, g); ok {
			out[tx] = up
		}
	}
	return out
}

// boundingGradient is the gradient the perturbation cap takes for tx: the
// estimate at its upper standard error where it counts (the target's, or
// one that stood out of the noise), and otherwise the prior where there is
// one, since a spike lost in one window's noise may still be one the bound
// must hold. The prior does not lower a counted estimate's bound: a
// transaction may respond over its calls (ViewItem 1.68–1.78 for the 1.5
// calls of a load-balanced link), and windows sized by the prior passed
// 1σ there (run AU: 1.07σ and 1.14σ).
func (x *Experiment) boundingGradient(e Element, tx string, g spectral.Estimate) (float64, bool) {
	if x.counts(tx, g) {
		if up := g.Gradient + g.StdErr; up > 0 {
			return up, true
		}
		return 0, false
	}
	if p := e.PriorGradients[tx]; p > 0 {
		return p, true
	}
	return 0, false
}

// contradictingErrors is how many standard errors over its prior a
// one-cycle gradient must stand to contradict it: at one, noise alone
// would contradict a true prior 16% of the time in each transaction.
const contradictingErrors = 2

// priorBound keeps A⁰ within the perturbation bound by the element's
// PriorGradients, noting when it does.
func (x *Experiment) priorBound(e Element, res *ElementResult, a0 float64) float64 {
	capped, tx := x.amplitudeCap(e, e.PriorGradients)
	if !(capped < a0) {
		return a0
	}
	bounded := x.clampAmplitude(e, capped, a0)
	if bounded > capped {
		res.Notes = append(res.Notes, fmt.Sprintf("adaptive phase: a peak change of %.3gσ in %s's response time by its prior gradient %.3g needs A⁰ %.4g, under the least amplitude %.4g", x.aim(), tx, e.PriorGradients[tx], capped, bounded))
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("adaptive phase: A⁰ %.4g kept to %.4g, a peak change of %.3gσ in %s's response time by its prior gradient %.3g", a0, bounded, x.aim(), tx, e.PriorGradients[tx]))
	}
	return bounded
}

// amplitudeCap is the largest amplitude whose change of each transaction's
// response time, by the given upper bounds on its gradient, stays within
// aim() of its natural σ; +Inf without a bound. It names the transaction
// that sets it.
func (x *Experiment) amplitudeCap(e Element, upper map[string]float64) (float64, string) {
	best, who := math.Inf(1), ""
	if !x.boundsPerturbation(e) {
		return best, who
	}
	for _, tx := range sortedKeys(upper) {
		base, ok := x.plan.Transactions[tx]
		if !ok || base.Error != "" || !(base.StdMs > 0) {
			continue
		}
		hi := upper[tx]
		if !(hi > 0) {
			continue
		}
		if k, err := e.Basis.Knob(x.aim() * base.StdMs / hi); err == nil && k > 0 && k < best {
			best, who = k, tx
		}
	}
	return best, who
}

// activeAmplitude is A_d′ = A_d / g′, so that the response time moves by
// about A_d whatever the gradient (paper 000 §3). For a link g′ is taken as
// at least GradientFloor. When the rough spike was not significant, the
// response to A⁰ was lost in the noise and g′ is mostly noise: A_d′ is then
// at least A⁰, which was just injected without a visible effect, rather
// than a scaled-down amplitude the active phase could not see either. For
// any kind it grows at most MaxGrowth-fold over A⁰ and stays within the
// element's bounds.
func (x *Experiment) activeAmplitude(e Element, rough spectral.Estimate, a0 float64) float64 {
	g := rough.Gradient
	if e.Basis.Kind == KindLink {
		g = math.Max(g, x.cfg.GradientFloor)
	}
	a := math.Inf(1)
	if g > 0 {
		if k, err := e.Basis.Knob(x.plan.AmplitudeMs / g); err == nil && k > 0 {
			a = k
		}
	}
	if !rough.Significant {
		a = math.Max(a, a0)
	}
	return x.clampAmplitude(e, a, x.cfg.MaxGrowth*a0)
}
