package gradient_test

import (
	"math"
	"testing"

	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/gradient/sim"
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
		s, _ := sim.New(sim.PS(seed, rate, work, c0, f))
		x := newExperiment(t, gradient.Config{Target: "Cap", Train: capacityTraining(), Elements: []gradient.Element{
			{ID: "cpu", Basis: b, InitialAmplitude: 0.15, MaxAmplitude: 0.4}}})
		d := &sim.Driver{Sim: s, X: x}
		run(t, d, 20000)
		el := x.Result().Elements[0]
		if el.Status != "done" {
			t.Fatalf("seed %d: %s", seed, el.Error)
		}
		if b.Centered {
			for _, a := range d.Log {
				if a.Kind == gradient.ActionStartLease && a.Floor != -a.Amplitude/2 {
					t.Fatalf("a centered lease must grant half its amplitude off: %+v", a)
				}
			}
		}
		return el.Gradients()[0]
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
