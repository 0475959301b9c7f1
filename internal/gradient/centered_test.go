package gradient_test

import (
	"math"
	"testing"

	"github.com/tierscope/tierscope/internal/gradient"
	sim "github.com/tierscope/tierscope/internal/sim/gradientsim"
)

// Where the response is not one line in the basis, a one-sided capacity
// wave measures the secant below the operating point and mispredicts every
// capacity above it; a centered wave, c·(1 ∓ a/2), measures the secant
// across it (paper 000 §6, figure 14). The curvature here comes from an α
// read 30% low, as a utilization reading that misses some of the tier's
// CPU (paper 003 §III-C's hypervisor share) would give: in that basis the
// processor-sharing queue's response time is convex.
func TestCenteredCapacityStraddlesTheOperatingPoint(t *testing.T) {
	const rate, work, c0, f = 40.0, 10.0, 0.8, 1000.0
	basis := gradient.Basis{Kind: gradient.KindCapacity, Operating: c0, FrequencyMHz: f, Alpha: 0.7 * work, Workload: rate}
	centered := basis
	centered.Centered = true
	measure := func(b gradient.Basis, seed uint64) gradient.Gradient {
		return measureCapacity(t, b, sim.PS(seed, rate, work, c0, f))
	}
	truth := map[float64]float64{}
	for _, c := range []float64{0.65, 0.95, 1.0} {
		truth[c] = meanRT(t, sim.PS(90, rate, work, c, f), 2000)["Cap"]
	}
	base := meanRT(t, sim.PS(91, rate, work, c0, f), 2000)["Cap"]
	worst := map[bool]float64{}
	for _, b := range []gradient.Basis{basis, centered} {
		var sum float64
		const seeds = 4
		var g gradient.Gradient
		for seed := uint64(0); seed < seeds; seed++ {
			g = measure(b, 100+seed)
			sum += g.Gradient
		}
		g.Gradient, g.StdErr = sum/seeds, 0
		for _, c := range []float64{0.65, 0.95, 1.0} {
			p, err := gradient.Predict("Cap", base, 0, []gradient.Gradient{g}, []gradient.Change{{Element: "cpu", Absolute: true, Value: c}})
			if err != nil {
				t.Fatal(err)
			}
			e := p.PredictedMs/truth[c] - 1
			worst[b.Centered] = math.Max(worst[b.Centered], math.Abs(e))
			t.Logf("centered %v: gradient %.0f; capacity %.2f predicted %.2f ms, simulated %.2f ms (%+.1f%%)", b.Centered, g.Gradient, c, p.PredictedMs, truth[c], 100*e)
		}
	}
	if worst[true] > 0.10 || worst[true] >= worst[false] {
		t.Fatalf("worst prediction error: centered %.1f%%, one-sided %.1f%%; want the centered within 10%% and better", 100*worst[true], 100*worst[false])
	}
}

// Paper 000 §6's second remedy for a curved response: a set of gradients,
// one on each side of the operating point, each change predicted from the
// one on its side. Here the two one-sided waves, below and above, are
// measured in the same convex basis as TestCenteredCapacityStraddles; the
// set must predict every capacity within 10%, and better than the one
// centered gradient does at its worst.
func TestCapacityGradientsOnBothSides(t *testing.T) {
	const rate, work, c0, f = 40.0, 10.0, 0.8, 1000.0
	below := gradient.Basis{Kind: gradient.KindCapacity, Operating: c0, FrequencyMHz: f, Alpha: 0.7 * work, Workload: rate}
	above, centered := below, below
	above.Above = true
	centered.Centered = true
	measure := func(b gradient.Basis, seed uint64) gradient.Gradient {
		return measureCapacity(t, b, sim.PS(seed, rate, work, c0, f))
	}
	// Mean gradients over 4 seeds, each side's interval from its last seed.
	mean := func(b gradient.Basis) gradient.Gradient {
		const seeds = 4
		var sum float64
		var g gradient.Gradient
		for seed := uint64(0); seed < seeds; seed++ {
			g = measure(b, 100+seed)
			sum += g.Gradient
		}
		g.Gradient, g.StdErr = sum/seeds, 0
		if g.Interval == nil {
			t.Fatalf("%s: a capacity gradient carries the interval it spans", b.Side())
		}
		t.Logf("%s: gradient %.0f over [%.3f, %.3f] cores", b.Side(), g.Gradient, g.Interval[0], g.Interval[1])
		return g
	}
	set := []gradient.Gradient{mean(below), mean(above)}
	one := []gradient.Gradient{mean(centered)}
	base := meanRT(t, sim.PS(91, rate, work, c0, f), 2000)["Cap"]
	worst := map[string]float64{}
	for _, c := range []float64{0.65, 0.7, 0.95, 1.0} {
		truth := meanRT(t, sim.PS(90, rate, work, c, f), 2000)["Cap"]
		for name, grads := range map[string][]gradient.Gradient{"both sides": set, "centered": one} {
			p, err := gradient.Predict("Cap", base, 0, grads, []gradient.Change{{Element: "cpu", Absolute: true, Value: c}})
			if err != nil {
				t.Fatal(err)
			}
			e := p.PredictedMs/truth - 1
			worst[name] = math.Max(worst[name], math.Abs(e))
			t.Logf("%s: capacity %.2f from the %s gradient, predicted %.2f ms, simulated %.2f ms (%+.1f%%)", name, c, p.Terms[0].Side, p.PredictedMs, truth, 100*e)
		}
	}
	if worst["both sides"] > 0.10 || worst["both sides"] >= worst["centered"] {
		t.Fatalf("worst prediction error: both sides %.1f%%, centered %.1f%%; want both sides within 10%% and better", 100*worst["both sides"], 100*worst["centered"])
	}
}

// The two-sided experiments below run a processor-sharing CPU at 0.8 of
// 1000 MHz under 40 requests/s of 10 ms.
const sidesRate, sidesWork, sidesOperating, sidesMHz = 40.0, 10.0, 0.8, 1000.0

// sideElements are that CPU's capacity waves below and above its operating
// point, α read exactly.
func sideElements() (below, above gradient.Element) {
	basis := gradient.Basis{Kind: gradient.KindCapacity, Operating: sidesOperating, FrequencyMHz: sidesMHz, Alpha: sidesWork, Workload: sidesRate}
	below = gradient.Element{ID: "cpu", Basis: basis, InitialAmplitude: 0.15, MaxAmplitude: 0.4}
	above = below
	above.Basis.Above = true
	return below, above
}

// One experiment measures a capacity on both sides after one training: two
// elements of the same id, one per side, each with its own lease floor; two
// waves of one side on one id are refused.
func TestOneExperimentMeasuresBothSides(t *testing.T) {
	below, above := sideElements()
	if _, err := gradient.NewExperiment(gradient.Config{Target: "Cap", Settings: gradient.Settings{Train: capacityTraining()}, Elements: []gradient.Element{below, below}}); err == nil {
		t.Fatal("two below waves of one element must be refused")
	}
	s, _ := sim.New(sim.PS(7, sidesRate, sidesWork, sidesOperating, sidesMHz))
	x := newExperiment(t, gradient.Config{Target: "Cap", Settings: gradient.Settings{Train: capacityTraining()}, Elements: []gradient.Element{below, above}})
	d := &sim.Driver{Sim: s, X: x}
	run(t, d, 40000)
	res := x.Result().Elements
	if len(res) != 2 {
		t.Fatalf("%d results", len(res))
	}
	for i, side := range []string{gradient.SideBelow, gradient.SideAbove} {
		if res[i].Status != "done" || res[i].Basis.Side() != side || res[i].Element != "cpu" {
			t.Fatalf("result %d: %s %s %s %s", i, res[i].Element, res[i].Basis.Side(), res[i].Status, res[i].Error)
		}
		g := res[i].Gradients()[0]
		t.Logf("%s: gradient %.0f ± %.0f over [%.3f, %.3f] cores", side, g.Gradient, g.StdErr, g.Interval[0], g.Interval[1])
	}
	floors := map[float64]bool{}
	for _, a := range d.Log {
		if a.Kind == gradient.ActionStartLease {
			floors[a.Floor/a.Amplitude] = true
		}
	}
	if !floors[0] || !floors[-1] || len(floors) != 2 {
		t.Fatalf("lease floors over amplitude %v: want 0 (below) and −1 (above)", floors)
	}
}

// measureCapacity runs one experiment on a capacity element of basis b in
// the simulated system and returns its gradient, checking that every lease
// carried the floor the wave's side asks for (Basis.OffKnob).
func measureCapacity(t *testing.T, b gradient.Basis, cfg sim.Config) gradient.Gradient {
	t.Helper()
	s, _ := sim.New(cfg)
	x := newExperiment(t, gradient.Config{Target: "Cap", Settings: gradient.Settings{Train: capacityTraining()}, Elements: []gradient.Element{
		{ID: "cpu", Basis: b, InitialAmplitude: 0.15, MaxAmplitude: 0.4}}})
	d := &sim.Driver{Sim: s, X: x}
	run(t, d, 20000)
	el := x.Result().Elements[0]
	if el.Status != "done" {
		t.Fatalf("%s, seed %d: %s", b.Side(), cfg.Seed, el.Error)
	}
	for _, a := range d.Log {
		if a.Kind == gradient.ActionStartLease && a.Floor != b.OffKnob(a.Amplitude) {
			t.Fatalf("%s: lease floor %v, want %v", b.Side(), a.Floor, b.OffKnob(a.Amplitude))
		}
	}
	return el.Gradients()[0]
}

// The perturbation bound (paper 000 Table 3) holds back a wave that slows
// requests, not one that only grants: above the operating point no request
// is slower than it would have been, so that wave goes to its own cap.
func TestPerturbationBoundLeavesAGrantToItsCap(t *testing.T) {
	below, above := sideElements()
	s, _ := sim.New(sim.PS(7, sidesRate, sidesWork, sidesOperating, sidesMHz))
	x := newExperiment(t, gradient.Config{Target: "Cap", Settings: gradient.Settings{Train: capacityTraining(), MaxPerturbation: 0.3},
		Elements: []gradient.Element{below, above}})
	run(t, &sim.Driver{Sim: s, X: x}, 40000)
	res := x.Result().Elements
	if len(res) != 2 || res[0].Status != "done" || res[1].Status != "done" {
		t.Fatalf("results %+v", res)
	}
	cut, grant := res[0], res[1]
	peak := func(r gradient.ElementResult) float64 { return r.Transactions["Cap"].PerturbationOverStd }
	t.Logf("below: amplitude %.3f, peak perturbation %.2fσ; above: amplitude %.3f, peak perturbation %.2fσ",
		cut.Amplitude, peak(cut), grant.Amplitude, peak(grant))
	if !(cut.Amplitude < 0.4) || peak(cut) > 0.3 {
		t.Errorf("below: amplitude %.3f, perturbation %.2fσ; want it kept under 0.3σ, short of its cap 0.4", cut.Amplitude, peak(cut))
	}
	if grant.Amplitude != 0.4 {
		t.Errorf("above: amplitude %.3f, want its cap 0.4", grant.Amplitude)
	}
}
