//go:build long

package gradient_test

// The headline checks of experiment_e2e_test.go over ten seeds each, for
// the benchmark report (scripts/bench-gradient.sh collects the "|" lines).

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tierscope/tierscope/internal/gradient"
	sim "github.com/tierscope/tierscope/internal/sim/gradientsim"
	"github.com/tierscope/tierscope/internal/spectral"
)

const seeds = 10

type stat struct{ xs []float64 }

func (s *stat) add(x float64) { s.xs = append(s.xs, x) }
func (s stat) mean() float64 {
	m := 0.0
	for _, x := range s.xs {
		m += x
	}
	return m / float64(len(s.xs))
}
func (s stat) std() float64 {
	m, v := s.mean(), 0.0
	for _, x := range s.xs {
		v += (x - m) * (x - m)
	}
	return math.Sqrt(v / float64(len(s.xs)-1))
}
func (s stat) within(want, tol float64) int {
	n := 0
	for _, x := range s.xs {
		if math.Abs(x-want) <= tol {
			n++
		}
	}
	return n
}

func TestLongPatterns(t *testing.T) {
	t.Log("| pattern | true gradient | mean | std | min | max | seeds within ±10% (±0.1 for 0) | CI95 covers truth | mean perturbation / σ | mean on/off |")
	t.Log("|---|---|---|---|---|---|---|---|---|---|")
	type acc struct {
		g, pert, td    stat
		cover, min, mx float64
	}
	rows := map[string]*acc{}
	order := []string{"Sync", "Serial3", "Async", "LB front->back1", "LB front->back2", "LB front->back1, A⁰ = A_d", "LB front->back2, A⁰ = A_d"}
	truth := map[string]float64{"Sync": 1, "Serial3": 3, "Async": 0}
	for _, k := range order[3:] {
		truth[k] = 0.5
	}
	for _, k := range order {
		rows[k] = &acc{min: math.Inf(1), mx: math.Inf(-1)}
	}
	record := func(k string, e spectral.Estimate, td spectral.TimeDomain) {
		a := rows[k]
		a.g.add(e.Gradient)
		a.pert.add(e.PerturbationOverStd)
		a.td.add(td.Gradient)
		a.min, a.mx = math.Min(a.min, e.Gradient), math.Max(a.mx, e.Gradient)
		if e.CI95[0] <= truth[k] && truth[k] <= e.CI95[1] {
			a.cover++
		}
	}
	var dur stat
	for seed := uint64(1); seed <= seeds; seed++ {
		s, _ := sim.New(sim.Patterns(100+seed, 0.1, 0.03))
		x, _ := gradient.NewExperiment(gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: precise()}, Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), MaxAmplitude: 100}}})
		t0 := s.Now()
		if !(&sim.Driver{Sim: s, X: x}).Run(t0 + 30000) {
			t.Fatal("did not finish")
		}
		dur.add(s.Now() - t0)
		el := x.Result().Elements[0]
		for _, tx := range []string{"Sync", "Serial3", "Async"} {
			record(tx, el.Transactions[tx], el.TimeDomain[tx])
		}
		for _, frac := range []float64{0.5, 1} {
			s, _ = sim.New(sim.Balanced(200+seed, 0.1, 0.03))
			x, _ = gradient.NewExperiment(gradient.Config{Target: "LB", Settings: gradient.Settings{Train: precise()}, AdaptiveFraction: frac, Elements: []gradient.Element{
				{ID: "front->back1", Basis: gradient.Link(), MaxAmplitude: 100}, {ID: "front->back2", Basis: gradient.Link(), MaxAmplitude: 100}}})
			if !(&sim.Driver{Sim: s, X: x}).Run(s.Now() + 40000) {
				t.Fatal("did not finish")
			}
			for _, el := range x.Result().Elements {
				k := "LB " + el.Element
				if frac == 1 {
					k += ", A⁰ = A_d"
				}
				record(k, el.Transactions["LB"], el.TimeDomain["LB"])
			}
		}
	}
	for _, k := range order {
		a := rows[k]
		tol := math.Max(0.1, 0.1*truth[k])
		if truth[k] == 0.5 {
			tol = 0.05
		}
		t.Logf("| %s | %.1f | %.3f | %.3f | %.3f | %.3f | %d/%d | %.0f/%d | %.2f | %.3f |", k, truth[k], a.g.mean(), a.g.std(), a.min, a.mx,
			a.g.within(truth[k], tol), seeds, a.cover, seeds, a.pert.mean(), a.td.mean())
	}
	t.Logf("| experiment length (simulated s, training + adaptive + active) | | %.0f | %.0f | | | | | | |", dur.mean(), dur.std())
}

// TestLongTiming breaks one link experiment's length into its phases, with
// the paper's defaults (k=8, N=128, M=9) on the §4 system.
func TestLongTiming(t *testing.T) {
	s, _ := sim.New(sim.FrontBack(9, 0.1, 0.03))
	x, _ := gradient.NewExperiment(gradient.Config{Target: "T", Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link()}}})
	start := s.Now()
	var seen []string
	last := gradient.Phase("")
	d := &sim.Driver{Sim: s, X: x, OnStep: func(d *sim.Driver, now float64) bool {
		if p := x.Phase(); p != last {
			seen = append(seen, fmt.Sprintf("%s at %.0f s", p, now-start))
			last = p
		}
		return true
	}}
	d.Run(start + 20000)
	p := x.Plan()
	t.Logf("| timing | ΔTs %.3f s, N %d, M %d: M·N·ΔTs = %.0f s, one period %.1f s, N·ΔTs = %.0f s | phases began: %v; finished at %.0f s |", p.BinSeconds, p.N, p.Chunks,
		float64(p.Chunks*p.N)*p.BinSeconds, p.PeriodSeconds, float64(p.N)*p.BinSeconds, seen, s.Now()-start)
}

// TestLongCapacity repeats the capacity-basis check over seeds: the
// measured gradient and the prediction error at capacities never run.
func TestLongCapacity(t *testing.T) {
	const rate, work, c0, f = 40.0, 10.0, 0.8, 1000.0
	caps := []float64{0.55, 0.6, 0.65, 0.7, 0.9, 1.0}
	truth := map[float64]float64{}
	var bs, rts []float64
	basis0 := gradient.Basis{Kind: gradient.KindCapacity, Operating: c0, FrequencyMHz: f, Alpha: work, Workload: rate}
	for _, c := range append([]float64{c0}, caps...) {
		truth[c] = meanRT(t, sim.PS(500, rate, work, c, f), 20000)["Cap"]
		b, _ := basis0.Value(c)
		bs = append(bs, b)
		rts = append(rts, truth[c])
	}
	fit, _ := gradient.FitLine(bs, rts)
	t.Logf("| capacity fit | rt against 1/(c·f − α·w), c = 0.55 … 1.0, exact α | slope %.0f ms·MHz (M/M/1-PS: %.0f) | intercept %.2f ms | R² %.5f |", fit.Slope, 1000*work, fit.Intercept, fit.R2)
	t.Log("| seed | α (Mc) | gradient | ± | SNR | amplitude | " + fmt.Sprint(caps) + " error % |")
	t.Log("|---|---|---|---|---|---|---|")
	errs := map[float64]*stat{}
	for _, c := range caps {
		errs[c] = &stat{}
	}
	var grads stat
	const capSeeds = 2 * seeds
	for seed := uint64(1); seed <= capSeeds; seed++ {
		s, _ := sim.New(sim.PS(600+seed, rate, work, c0, f))
		s.RunUntil(s.Now() + 600)
		busy, _ := s.Busy("cpu")
		alpha, _ := gradient.AlphaFromUtilization(busy/600, c0*f, rate)
		basis := basis0
		basis.Alpha = alpha
		s2, _ := sim.New(sim.PS(700+seed, rate, work, c0, f))
		x, _ := gradient.NewExperiment(gradient.Config{Target: "Cap", Settings: gradient.Settings{Train: capacityTraining()}, Elements: []gradient.Element{
			{ID: "cpu", Basis: basis, InitialAmplitude: 0.15, MaxAmplitude: 0.3}}})
		if !(&sim.Driver{Sim: s2, X: x}).Run(s2.Now() + 30000) {
			t.Fatal("did not finish")
		}
		res := x.Result()
		el := res.Elements[0]
		g := el.Gradients()[0]
		grads.add(g.Gradient)
		line := ""
		for _, c := range caps {
			p, err := gradient.Predict("Cap", res.Plan.Transactions["Cap"].MeanMs, 0, []gradient.Gradient{g}, []gradient.Change{{Element: "cpu", Absolute: true, Value: c}})
			if err != nil {
				t.Fatal(err)
			}
			e := 100 * (p.PredictedMs - truth[c]) / truth[c]
			errs[c].add(e)
			line += fmt.Sprintf(" %+.1f", e)
		}
		t.Logf("| %d | %.2f | %.0f | %.0f | %.1f | %.3f |%s |", seed, alpha, g.Gradient, g.StdErr, el.Transactions["Cap"].SNR, el.Amplitude, line)
	}
	line := ""
	for _, c := range caps {
		line += fmt.Sprintf(" %.2f: %d/%d (mean %+.1f%%),", c, errs[c].within(0, 10), capSeeds, errs[c].mean())
	}
	t.Logf("| all | | %.0f | %.0f (std) | | | within 10%%:%s |", grads.mean(), grads.std(), line)
}

// TestLongAdaptiveInWindow compares the separate adaptive phase with the
// adaptive cycle as the window's first period (Config.AdaptiveInWindow),
// over 20 seeds of the patterns and of the load-balanced pair: accuracy,
// perturbation, and the time an element takes after training.
func TestLongAdaptiveInWindow(t *testing.T) {
	const n = 2 * seeds
	t.Log("| adaptive cycle | pattern | truth | mean | std | within ±10% (±0.05 for 0.5, ±0.1 for 0) | CI95 covers | mean perturbation / σ | element's time after training − N·ΔTs, s: mean, max |")
	t.Log("|---|---|---|---|---|---|---|---|---|---|")
	for _, inWindow := range []bool{false, true} {
		name := "separate phase"
		if inWindow {
			name = "window's first period"
		}
		type row struct {
			g, pert stat
			cover   int
		}
		rows := map[string]*row{}
		order := []string{"Sync", "Serial3", "Async", "LB front->back1", "LB front->back2"}
		truth := map[string]float64{"Sync": 1, "Serial3": 3, "Async": 0, "LB front->back1": 0.5, "LB front->back2": 0.5}
		for _, k := range order {
			rows[k] = &row{}
		}
		var elem, window stat // an element's time after training over N·ΔTs: all, and those folded
		kd1 := 0
		var roughs stat // (g′ − truth) / its standard error, for the target
		measure := func(s *sim.Sim, cfg gradient.Config, limit float64, keys func(el gradient.ElementResult) map[string]spectral.Estimate) {
			cfg.AdaptiveInWindow = inWindow
			x, err := gradient.NewExperiment(cfg)
			if err != nil {
				t.Fatal(err)
			}
			d := &sim.Driver{Sim: s, X: x}
			trained := math.NaN()
			d.OnStep = func(d *sim.Driver, now float64) bool {
				if math.IsNaN(trained) && x.Phase() != gradient.PhaseTraining {
					trained = now
				}
				return true
			}
			if !d.Run(s.Now() + limit) {
				t.Fatal("did not finish")
			}
			res := x.Result()
			over := (s.Now()-trained)/float64(len(res.Elements)) - res.Plan.MeasurementSeconds
			elem.add(over)
			if !inWindow || res.Elements[0].AdaptiveInWindow {
				window.add(over)
			} else {
				kd1++ // k_d = 1: the separate phase ran
			}
			for _, el := range res.Elements {
				if el.Rough != nil {
					tx := cfg.Target
					if tx == "LB" {
						tx = "LB " + el.Element
					}
					roughs.add((el.Rough.Gradient - truth[tx]) / el.Rough.StdErr)
				}
				for k, e := range keys(el) {
					r := rows[k]
					r.g.add(e.Gradient)
					r.pert.add(e.PerturbationOverStd)
					if e.CI95[0] <= truth[k] && truth[k] <= e.CI95[1] {
						r.cover++
					}
				}
			}
		}
		for seed := uint64(1); seed <= n; seed++ {
			s, _ := sim.New(sim.Patterns(100+seed, 0.1, 0.03))
			measure(s, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: precise()}, Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), MaxAmplitude: 100}}}, 30000,
				func(el gradient.ElementResult) map[string]spectral.Estimate {
					return map[string]spectral.Estimate{"Sync": el.Transactions["Sync"], "Serial3": el.Transactions["Serial3"], "Async": el.Transactions["Async"]}
				})
			s, _ = sim.New(sim.Balanced(200+seed, 0.1, 0.03))
			measure(s, gradient.Config{Target: "LB", Settings: gradient.Settings{Train: precise()}, Elements: []gradient.Element{
				{ID: "front->back1", Basis: gradient.Link(), MaxAmplitude: 100}, {ID: "front->back2", Basis: gradient.Link(), MaxAmplitude: 100}}}, 40000,
				func(el gradient.ElementResult) map[string]spectral.Estimate {
					return map[string]spectral.Estimate{"LB " + el.Element: el.Transactions["LB"]}
				})
		}
		for _, k := range order {
			r := rows[k]
			tol := math.Max(0.1, 0.1*truth[k])
			if truth[k] == 0.5 {
				tol = 0.05
			}
			t.Logf("| %s | %s | %.1f | %.3f | %.3f | %d/%d | %d/%d | %.2f | %.1f, %.1f |", name, k, truth[k], r.g.mean(), r.g.std(),
				r.g.within(truth[k], tol), len(r.g.xs), r.cover, len(r.g.xs), r.pert.mean(), window.mean(), slices.Max(window.xs))
		}
		t.Logf("| %s: the target's rough g′ − truth in its standard errors: mean %.2f, std %.2f, %d of %d beyond 2 | | | | | | | | |", name, roughs.mean(), roughs.std(),
			len(roughs.xs)-roughs.within(0, 2), len(roughs.xs))
		if inWindow {
			t.Logf("| %s: %d of %d experiments had k_d = 1 and ran the separate phase; over all, mean %.1f s | | | | | | | | |", name, kd1, len(elem.xs), elem.mean())
		}
	}
}
