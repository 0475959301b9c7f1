package gradient

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

const z95 = 1.959963984540054

// Gradient is one measured gradient: how transaction Transaction's mean
// response time (ms) moves per unit of Element's basis.
type Gradient struct {
	Element     string  `json:"element"`
	Transaction string  `json:"transaction"`
	Basis       Basis   `json:"basis"`
	Gradient    float64 `json:"gradient"`
	StdErr      float64 `json:"std_err"`
	// Interval is the range of the attribute the wave swept, low to high:
	// the secant the gradient is. Predict uses it to combine several
	// gradients of one element (Secant); nil for a link.
	Interval *[2]float64 `json:"interval,omitempty"`
}

// StdErrFromCI95 recovers a gradient's standard error from its 95% interval,
// for records that carry only the interval. It takes the upper half-width:
// the estimators clip the lower bound at 0 (a gradient is not negative), so
// the full width understates the error of a weak gradient.
func StdErrFromCI95(gradient float64, ci [2]float64) float64 {
	return math.Max(0, ci[1]-gradient) / z95
}

// Change is a planned change of one element's attribute: a link's latency
// (ms), a CPU's frequency (MHz) or a capacity (fraction).
type Change struct {
	Element string `json:"element"`
	// Delta is the change of the attribute, unless Absolute, in which case
	// Value is its new value.
	Delta    float64 `json:"delta,omitempty"`
	Absolute bool    `json:"absolute,omitempty"`
	Value    float64 `json:"value,omitempty"`
	// StdErr is the standard error of the change (of the new value when
	// Absolute): the error of the latency measurement in paper 000 §5.3.
	StdErr float64 `json:"std_err,omitempty"`
}

// BasisChange is Δb for this change, and its standard error propagated
// through the basis (|b′|·σ).
func (b Basis) BasisChange(c Change) (float64, float64, error) {
	if b.Kind == KindLink {
		if c.Absolute {
			return c.Value - b.Operating, c.StdErr, nil
		}
		return c.Delta, c.StdErr, nil
	}
	x := b.Operating + c.Delta
	if c.Absolute {
		x = c.Value
	}
	v1, err := b.Value(x)
	if err != nil {
		return 0, 0, err
	}
	v0, err := b.Value(b.Operating)
	if err != nil {
		return 0, 0, err
	}
	// b = 1/(s(x) − D): |db/dx| = s′·b², s′ = 1 (frequency) or f (capacity).
	ds := 1.0
	if b.Kind == KindCapacity {
		ds = b.FrequencyMHz
	}
	return v1 - v0, ds * v1 * v1 * c.StdErr, nil
}

// Term is one element's contribution to a prediction.
type Term struct {
	Element        string  `json:"element"`
	BasisChange    float64 `json:"basis_change"`
	Gradient       float64 `json:"gradient"`
	ContributionMs float64 `json:"contribution_ms"`
	// Side is the side of the operating point the gradient used was
	// measured on (Basis.Side), when the element is a capacity; two sides
	// joined by "+" when it was interpolated between them (Secant).
	Side string `json:"side,omitempty"`
}

// Prediction is a transaction's predicted mean response time.
type Prediction struct {
	Transaction string     `json:"transaction"`
	BaselineMs  float64    `json:"baseline_ms"`
	PredictedMs float64    `json:"predicted_ms"`
	StdErr      float64    `json:"std_err"`
	CI95        [2]float64 `json:"ci95"`
	Terms       []Term     `json:"terms"`
}

// Predict is the first-order Taylor prediction of paper 000 §5.3 and paper
// 003 equation 1 in the basis: rt² = rt¹ + Σ ∇rt_i·Δb_i. Its variance is
// the paper's ρ(rt²) = ρ(rt¹) + Σ ρ(Δb_i)·∇rt_i², plus Σ Δb_i²·ρ(∇rt_i) for
// the error of the gradients themselves, which the paper leaves out; the
// interval is ±1.96 standard errors. baselineSE is the standard error of
// rt¹. Every change needs a gradient of this transaction on its element.
//
// An element may have several gradients, measured over different intervals
// of its attribute (a capacity's waves below and above the operating
// point). Each is a secant, and where the response is curved in the basis
// no one secant serves every change: paper 000 §6 measures with
// perturbations of several magnitudes and keeps a set of gradients, so
// that each change is predicted from the secant that covers it (Secant).
func Predict(tx string, baselineMs, baselineSE float64, grads []Gradient, changes []Change) (Prediction, error) {
	p := Prediction{Transaction: tx, BaselineMs: baselineMs, PredictedMs: baselineMs}
	variance := baselineSE * baselineSE
	for _, c := range changes {
		g, side, ok := Secant(tx, grads, c)
		if !ok {
			return p, fmt.Errorf("no gradient of transaction %q on element %q", tx, c.Element)
		}
		db, dbSE, err := g.Basis.BasisChange(c)
		if err != nil {
			return p, fmt.Errorf("element %q: %w", c.Element, err)
		}
		t := Term{Element: c.Element, BasisChange: db, Gradient: g.Gradient, ContributionMs: g.Gradient * db, Side: side}
		p.Terms = append(p.Terms, t)
		p.PredictedMs += t.ContributionMs
		variance += dbSE*dbSE*g.Gradient*g.Gradient + db*db*g.StdErr*g.StdErr
	}
	p.StdErr = math.Sqrt(variance)
	p.CI95 = [2]float64{p.PredictedMs - z95*p.StdErr, p.PredictedMs + z95*p.StdErr}
	return p, nil
}

// Secant is the gradient of transaction tx that serves change c on its
// element, with the side(s) of the operating point it comes from.
//
// Each gradient of an element is a secant of the response over the interval
// its wave swept, reaching Δb_i = b(far end) − b(operating point) in the
// basis: positive below the operating point, negative above it, and 0 for a
// centered wave, whose secant is the tangent to second order. Where the
// response is quadratic in b, the secant to Δb is linear in Δb, so paper
// 000 §6's regression on perturbations of several magnitudes is a line
// through the points (Δb_i, gradient_i): Secant interpolates it at the
// change's own Δb. Beyond the outermost points it keeps that point's
// secant rather than extrapolate the curvature, which would amplify the
// gradients' noise; that is the paper's other remedy, the gradient measured
// nearest the change. With one gradient, or none that knows its interval
// (links), it is the first gradient of the element.
func Secant(tx string, grads []Gradient, c Change) (Gradient, string, bool) {
	type point struct {
		reach float64
		g     Gradient
	}
	var first *Gradient
	var points []point
	for i := range grads {
		g := &grads[i]
		if g.Transaction != tx || g.Element != c.Element {
			continue
		}
		if first == nil {
			first = g
		}
		if g.Interval == nil {
			continue
		}
		far := g.Interval[0]
		switch g.Basis.Side() {
		case SideCentered:
			far = g.Basis.Operating
		case SideAbove:
			far = g.Interval[1]
		}
		reach, err := g.Basis.Value(far)
		v0, err0 := g.Basis.Value(g.Basis.Operating)
		if err != nil || err0 != nil {
			continue
		}
		points = append(points, point{reach - v0, *g})
	}
	switch {
	case first == nil:
		return Gradient{}, "", false
	case len(points) < 2:
		return *first, first.Basis.Side(), true
	}
	slices.SortStableFunc(points, func(a, b point) int { return cmp.Compare(a.reach, b.reach) })
	db, _, err := points[0].g.Basis.BasisChange(c)
	if err != nil || db <= points[0].reach {
		return points[0].g, points[0].g.Basis.Side(), true
	}
	last := points[len(points)-1]
	if db >= last.reach {
		return last.g, last.g.Basis.Side(), true
	}
	i := 1
	for points[i].reach < db {
		i++
	}
	lo, hi := points[i-1], points[i]
	w := (db - lo.reach) / (hi.reach - lo.reach)
	g := lo.g
	g.Gradient = (1-w)*lo.g.Gradient + w*hi.g.Gradient
	// The errors are independent; weighing them linearly, not in
	// quadrature, errs on the wide side.
	g.StdErr = (1-w)*lo.g.StdErr + w*hi.g.StdErr
	g.Interval = nil
	return g, lo.g.Basis.Side() + "+" + hi.g.Basis.Side(), true
}

// Option is one candidate configuration for routing: the changes it makes.
type Option struct {
	Name    string   `json:"name"`
	Changes []Change `json:"changes"`
}

// OptionPrediction is a transaction's prediction under one option.
type OptionPrediction struct {
	Option string `json:"option"`
	Prediction
}

// Advice routes one transaction (paper 000 §5.5).
type Advice struct {
	Transaction string             `json:"transaction"`
	Best        string             `json:"best"`
	Options     []OptionPrediction `json:"options"`
	// MarginMs is how much faster the best option is than the runner-up.
	MarginMs float64 `json:"margin_ms"`
	// Decisive is true when the best option's interval lies wholly below
	// every other option's.
	Decisive bool `json:"decisive"`
}

// Route predicts the transaction under every option and picks the fastest.
// It generalizes the paper's rule: with an application server replica local
// to the web server and one local to the database, both links l apart,
// routing to the local replica predicts rt + ∇(AS–DB)·l and to the remote
// one rt + ∇(WS–AS)·l, so the transaction goes local exactly when its WS–AS
// gradient is the larger.
func Route(tx string, baselineMs, baselineSE float64, grads []Gradient, options []Option) (Advice, error) {
	if len(options) == 0 {
		return Advice{}, fmt.Errorf("routing %q needs at least one option", tx)
	}
	a := Advice{Transaction: tx}
	for _, o := range options {
		p, err := Predict(tx, baselineMs, baselineSE, grads, o.Changes)
		if err != nil {
			return a, fmt.Errorf("option %q: %w", o.Name, err)
		}
		a.Options = append(a.Options, OptionPrediction{Option: o.Name, Prediction: p})
	}
	best := 0
	for i, o := range a.Options {
		if o.PredictedMs < a.Options[best].PredictedMs {
			best = i
		}
	}
	a.Best = a.Options[best].Option
	a.Decisive = true
	a.MarginMs = math.Inf(1)
	for i, o := range a.Options {
		if i == best {
			continue
		}
		a.MarginMs = math.Min(a.MarginMs, o.PredictedMs-a.Options[best].PredictedMs)
		if a.Options[best].CI95[1] >= o.CI95[0] {
			a.Decisive = false
		}
	}
	if math.IsInf(a.MarginMs, 1) {
		a.MarginMs = 0
	}
	return a, nil
}
