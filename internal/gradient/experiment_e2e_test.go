package gradient_test

// The experiment state machine end to end against the simulator: training,
// adaptive and active phases, the communication patterns of paper 000 §2.1
// and §5.4, the SLO guard, failures, clock skew, prediction, and the
// capacity basis of paper 003 §III-C.

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/tierscope/tierscope/internal/gradient"
	sim "github.com/tierscope/tierscope/internal/sim/gradientsim"
	"github.com/tierscope/tierscope/internal/spectral"
)

// precise is the training for the pattern checks: k=16 and N=256 keep the
// perturbation under the response time's σ while d=60 doubles the spike
// over the noise (the relative error of one gradient is about π/(d·√2)).
func precise() spectral.TrainConfig {
	tc := spectral.DefaultTrainConfig()
	tc.K, tc.N, tc.Scale = 16, 256, 60
	return tc
}

type observed struct {
	phases  []gradient.Phase
	etaErrs []float64 // |predicted end − actual end| sampled during the active phase
	maxPct  float64
	badPct  bool
}

// run drives an experiment to its end (or limit seconds) and records the
// phases it went through and how good its ETA was.
func run(t *testing.T, d *sim.Driver, limit float64) observed {
	t.Helper()
	var o observed
	var activeETA []struct{ at, end float64 }
	d.OnStep = func(d *sim.Driver, now float64) bool {
		p := d.X.Progress(time.Unix(0, int64(now*1e9)))
		if len(o.phases) == 0 || o.phases[len(o.phases)-1] != p.Phase {
			o.phases = append(o.phases, p.Phase)
		}
		if p.Percent < 0 || p.Percent > 100 || math.IsNaN(p.Percent) {
			o.badPct = true
		}
		o.maxPct = math.Max(o.maxPct, p.Percent)
		if p.Phase == gradient.PhaseActive && p.ETA > 0 {
			activeETA = append(activeETA, struct{ at, end float64 }{now, now + p.ETA.Seconds()})
		}
		return true
	}
	if !d.Run(d.Sim.Now() + limit) {
		t.Fatalf("experiment did not finish in %.0f s: %+v", limit, d.X.Progress(time.Unix(0, int64(d.Sim.Now()*1e9))))
	}
	// The ETA during an element's last active phase should point at the end.
	end := d.Sim.Now()
	for _, e := range activeETA {
		if e.at > end-600 {
			o.etaErrs = append(o.etaErrs, math.Abs(e.end-end))
		}
	}
	return o
}

func newExperiment(t *testing.T, cfg gradient.Config) *gradient.Experiment {
	t.Helper()
	x, err := gradient.NewExperiment(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s: %.3f, want %.3f ± %.3f", what, got, want, tol)
	}
}

// One link experiment measures every transaction at once: a sync call has
// gradient 1, three serial calls 3, an asynchronous message 0.
func TestExperimentPatterns(t *testing.T) {
	s, err := sim.New(sim.Patterns(1, 0.1, 0.03))
	if err != nil {
		t.Fatal(err)
	}
	x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: precise()},
		Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), MaxAmplitude: 100}}})
	d := &sim.Driver{Sim: s, X: x}
	o := run(t, d, 20000)
	res := x.Result()
	if res.Phase != gradient.PhaseDone || res.Plan == nil {
		t.Fatalf("result %+v", res)
	}
	want := []gradient.Phase{gradient.PhaseTraining, gradient.PhaseAdaptive, gradient.PhaseActive, gradient.PhaseDone}
	if !reflect.DeepEqual(o.phases, want) || o.badPct || o.maxPct != 100 {
		t.Fatalf("phases %v (want %v), percent ok %v, max %v", o.phases, want, !o.badPct, o.maxPct)
	}
	for _, e := range o.etaErrs {
		if e > 15 { // the lateness and the tick
			t.Fatalf("ETA off by %.1f s during the active phase", e)
		}
	}
	// The leases: one cycle of A⁰ (stopped after its window, the floor
	// kept through it), then k_d+1 cycles of A_d/g′.
	if len(d.Log) != 4 || d.Log[0].Cycles != 1 || d.Log[1].Kind != gradient.ActionStopLease || d.Log[2].Cycles != res.Plan.Kd+1 ||
		d.Log[3].Kind != gradient.ActionStopLease || d.Log[3].Lease != d.Log[2].Lease {
		t.Fatalf("actions %+v", d.Log)
	}
	el := res.Elements[0]
	if el.Status != "done" || el.Rough == nil || math.Abs(el.AdaptiveAmplitude-0.5*res.Plan.AmplitudeMs) > 1e-9 {
		t.Fatalf("element %+v", el)
	}
	wantA := math.Min(100, res.Plan.AmplitudeMs/math.Max(el.Rough.Gradient, 0.1))
	if !el.Rough.Significant {
		wantA = math.Max(wantA, el.AdaptiveAmplitude)
	}
	if math.Abs(el.Amplitude-wantA) > 1e-9 {
		t.Fatalf("active amplitude %v, want A_d/g′ = %v/%v", el.Amplitude, res.Plan.AmplitudeMs, el.Rough.Gradient)
	}
	for tx, want := range map[string]float64{"Sync": 1, "Serial3": 3, "Async": 0} {
		g := el.Transactions[tx]
		within(t, tx+" gradient", g.Gradient, want, math.Max(0.1, 0.1*want))
		t.Logf("%s: gradient %.3f [%.3f, %.3f], SNR %.1f, perturbation %.1f ms = %.2f σ; on/off %.3f", tx, g.Gradient, g.CI95[0], g.CI95[1], g.SNR,
			g.PerturbationMs, g.PerturbationOverStd, el.TimeDomain[tx].Gradient)
	}
}

// Load balancing over two replicas halves each link's gradient (table 6).
func TestExperimentLoadBalanced(t *testing.T) {
	s, err := sim.New(sim.Balanced(1, 0.1, 0.03))
	if err != nil {
		t.Fatal(err)
	}
	x := newExperiment(t, gradient.Config{Target: "LB", Settings: gradient.Settings{Train: precise()}, Elements: []gradient.Element{
		{ID: "front->back1", Basis: gradient.Link(), MaxAmplitude: 100},
		{ID: "front->back2", Basis: gradient.Link(), MaxAmplitude: 100}}})
	d := &sim.Driver{Sim: s, X: x}
	run(t, d, 30000)
	// One seed within ±20%, its interval covering 0.5; TestLongPatterns has
	// ten seeds against ±10%.
	for _, el := range x.Result().Elements {
		g := el.Transactions["LB"]
		within(t, el.Element, g.Gradient, 0.5, 0.1)
		if g.CI95[0] > 0.5 || g.CI95[1] < 0.5 {
			t.Errorf("%s: interval %v misses 0.5", el.Element, g.CI95)
		}
		t.Logf("%s: %.3f [%.3f, %.3f], amplitude %.1f ms (rough %.2f)", el.Element, g.Gradient, g.CI95[0], g.CI95[1], el.Amplitude, el.Rough.Gradient)
	}
}

// A link whose delay the injector overshoots by 1 ms (paper 000 figure 7)
// and whose clock is 0.8 s behind: the reported delay corrects the first,
// the skew guard absorbs the second.
func TestExperimentInjectorErrorAndSkew(t *testing.T) {
	cfg := sim.FrontBack(2, 0.1, 0.03)
	cfg.InjectorOffsetMs, cfg.InjectorJitterMs = 1, 0.3
	s, _ := sim.New(cfg)
	x := newExperiment(t, gradient.Config{Target: "T", Settings: gradient.Settings{Train: precise()}, Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), MaxAmplitude: 100}}})
	d := &sim.Driver{Sim: s, X: x, InjectorSkew: 0.8}
	run(t, d, 20000)
	el := x.Result().Elements[0]
	if math.Abs(el.Injected-(el.Amplitude+1)) > 0.1 || el.InjectedAssumed {
		t.Fatalf("injected %v for a requested %v", el.Injected, el.Amplitude)
	}
	within(t, "gradient", el.Transactions["T"].Gradient, 1, 0.1)
}

// The SLO guard: once the p99 passes the bound while a lease is out, the
// experiment stops the lease in the same call and aborts; nothing is
// injected afterwards.
func TestExperimentSLOAbort(t *testing.T) {
	s, _ := sim.New(sim.Patterns(3, 0.1, 0.03))
	x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: spectral.DefaultTrainConfig()},
		Guard:    gradient.Guard{P99Ms: 200, Transactions: []string{"Sync"}},
		Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), FixedAmplitude: 80}}})
	d := &sim.Driver{Sim: s, X: x}
	var abortedAt float64
	d.OnStep = func(d *sim.Driver, now float64) bool {
		if x.Phase() == gradient.PhaseAborted && abortedAt == 0 {
			abortedAt = now
			if a := d.Sim.Active(now); len(a) != 0 {
				t.Errorf("leases still active after the abort: %v", a)
			}
		}
		return true
	}
	if !d.Run(s.Now() + 20000) {
		t.Fatal("did not finish")
	}
	res := x.Result()
	if res.Phase != gradient.PhaseAborted || !strings.Contains(res.Reason, "SLO guard") || res.Elements[0].Status != "aborted" {
		t.Fatalf("result %+v", res)
	}
	if len(d.Log) != 2 || d.Log[0].Kind != gradient.ActionStartLease || d.Log[1].Kind != gradient.ActionStopLease || d.Log[1].Lease != d.Log[0].Lease {
		t.Fatalf("actions %+v", d.Log)
	}
	start := float64(d.Log[0].Start.UnixNano()) / 1e9
	if abortedAt-start > 10 {
		t.Fatalf("aborted %.1f s after the wave started", abortedAt-start)
	}
	p := x.Progress(time.Unix(0, int64(abortedAt*1e9)))
	if p.Phase != gradient.PhaseAborted || p.Reason == "" || x.Tick(time.Unix(0, int64((abortedAt+100)*1e9))) != nil {
		t.Fatalf("progress %+v", p)
	}
	t.Logf("aborted %.1f s after the wave started: %s", abortedAt-start, res.Reason)
}

// The guard also refuses to start a lease while the p99 is already over.
func TestExperimentGuardBlocksStart(t *testing.T) {
	s, _ := sim.New(sim.FrontBack(4, 0.1, 0.03))
	x := newExperiment(t, gradient.Config{Target: "T", Settings: gradient.Settings{Train: spectral.DefaultTrainConfig()}, Guard: gradient.Guard{P99Ms: 120},
		Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link()}}})
	d := &sim.Driver{Sim: s, X: x}
	d.Run(s.Now() + 20000)
	if x.Phase() != gradient.PhaseAborted || len(d.Log) != 0 || !strings.Contains(x.Result().Reason, "before injecting") {
		t.Fatalf("phase %s, actions %+v, reason %q", x.Phase(), d.Log, x.Result().Reason)
	}
}

// An element whose lease the injector refuses fails alone; a lost status
// makes the experiment assume the requested amplitude, and say so.
func TestExperimentLeaseFailureAndLostStatus(t *testing.T) {
	s, _ := sim.New(sim.FrontBack(5, 0.1, 0.03))
	x := newExperiment(t, gradient.Config{Target: "T", Settings: gradient.Settings{Train: spectral.DefaultTrainConfig()}, InjectedTimeout: 5 * time.Second, Elements: []gradient.Element{
		{ID: "front", Basis: gradient.Link()}, // not a link: refused
		{ID: "front->back", Basis: gradient.Link(), FixedAmplitude: 30}}})
	d := &sim.Driver{Sim: s, X: x, DropInjected: true}
	run(t, d, 20000)
	res := x.Result()
	if res.Elements[0].Status != "failed" || !strings.Contains(res.Elements[0].Error, "lease failed") {
		t.Fatalf("first element %+v", res.Elements[0])
	}
	el := res.Elements[1]
	if el.Status != "done" || !el.InjectedAssumed || el.Injected != 30 {
		t.Fatalf("second element %+v", el)
	}
	within(t, "gradient", el.Transactions["T"].Gradient, 1, 0.15)
}

// When the caller says no report will come, the phase does not wait
// InjectedTimeout: the element finishes at the pace of its windows.
func TestExperimentNoInjectedReportEndsTheWait(t *testing.T) {
	s, _ := sim.New(sim.FrontBack(5, 0.1, 0.03))
	x := newExperiment(t, gradient.Config{Target: "T", Settings: gradient.Settings{Train: spectral.DefaultTrainConfig()}, InjectedTimeout: time.Hour, Elements: []gradient.Element{
		{ID: "front->back", Basis: gradient.Link()}}})
	d := &sim.Driver{Sim: s, X: x, DropInjected: true, SayNoReport: true}
	run(t, d, 3000) // far less than the hour InjectedTimeout would take
	el := x.Result().Elements[0]
	if el.Status != "done" || !el.InjectedAssumed || el.Injected != el.Amplitude {
		t.Fatalf("element %+v", el)
	}
}

// The same inputs give the same actions and the same result.
func TestExperimentDeterministic(t *testing.T) {
	once := func() ([]byte, []gradient.Action) {
		s, _ := sim.New(sim.FrontBack(6, 0.1, 0.03))
		x := newExperiment(t, gradient.Config{Target: "T", Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link()}}})
		d := &sim.Driver{Sim: s, X: x}
		d.Run(s.Now() + 20000)
		b, err := json.Marshal(x.Result())
		if err != nil {
			t.Fatal(err)
		}
		return b, d.Log
	}
	r1, l1 := once()
	r2, l2 := once()
	if string(r1) != string(r2) || !reflect.DeepEqual(l1, l2) {
		t.Fatal("two identical runs differ")
	}
}

// A +20 ms change on the link, predicted from the measured gradients, lands
// within the prediction's 95% interval of the simulated outcome.
func TestPredictTwentyMs(t *testing.T) {
	// A 95% interval misses 5% of the time by design: three independent
	// experiments, and each transaction's outcome must fall in at least two
	// of their predicted intervals.
	covered := map[string]int{}
	for seed := uint64(7); seed <= 9; seed++ {
		s, _ := sim.New(sim.Patterns(seed, 0.1, 0.03))
		x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: precise()}, Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), MaxAmplitude: 100}}})
		run(t, &sim.Driver{Sim: s, X: x}, 20000)
		res := x.Result()
		grads := res.Elements[0].Gradients()
		// The outcome: the same system with 20 ms more on the link, long
		// enough that its own mean is sharp.
		changed := sim.Patterns(seed+100, 0.1, 0.03)
		changed.Links["front->back"] += 0.020
		measured := meanRT(t, changed, 3000)
		for _, tx := range []string{"Sync", "Serial3", "Async"} {
			b := res.Plan.Transactions[tx]
			p, err := gradient.Predict(tx, b.MeanMs, b.StdMs/math.Sqrt(float64(b.Samples)), grads, []gradient.Change{{Element: "front->back", Delta: 20}})
			if err != nil {
				t.Fatal(err)
			}
			m := measured[tx]
			if m >= p.CI95[0] && m <= p.CI95[1] {
				covered[tx]++
			}
			t.Logf("seed %d %s: baseline %.2f, predicted %.2f [%.2f, %.2f], measured %.2f", seed, tx, b.MeanMs, p.PredictedMs, p.CI95[0], p.CI95[1], m)
		}
	}
	for _, tx := range []string{"Sync", "Serial3", "Async"} {
		if covered[tx] < 2 {
			t.Errorf("%s: measured within the predicted interval in %d of 3 experiments, want ≥ 2", tx, covered[tx])
		}
	}
}

// meanRT simulates cfg for span seconds and returns each transaction's mean
// response time.
func meanRT(t *testing.T, cfg sim.Config, span float64) map[string]float64 {
	t.Helper()
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.RunUntil(s.Now() + 60)
	s.Drain()
	s.RunUntil(s.Now() + span)
	sum, n := map[string]float64{}, map[string]float64{}
	for _, x := range s.Drain() {
		sum[x.Transaction] += x.Ms
		n[x.Transaction]++
	}
	for tx := range sum {
		sum[tx] /= n[tx]
	}
	return sum
}

// capacityTraining is the training for a queue: its response time is
// strongly autocorrelated, so the noise at low frequencies is high; longer
// bins (k=32) and N=256 make the active phase about five minutes long, and
// d=60 doubles the spike (the perturbation stays near one σ).
func capacityTraining() spectral.TrainConfig {
	tc := spectral.DefaultTrainConfig()
	tc.K, tc.N, tc.Scale, tc.MinSamplesPerPeriod = 32, 256, 60, 32
	return tc
}

// Paper 003 §III-C: a processor-sharing CPU's response time is linear in
// b(c) = 1/(c·f − α·w) over a wide range of capacities (R² ≥ 0.95), and a
// capacity gradient measured by a small square wave of capacity at c = 0.8
// predicts three capacities never run within 10%.
func TestCapacityBasis(t *testing.T) {
	const rate, work, c0, f = 40.0, 10.0, 0.8, 1000.0
	// α from a utilization measurement (the utilization gradient U·speed/w).
	s, _ := sim.New(sim.PS(11, rate, work, c0, f))
	s.RunUntil(s.Now() + 600)
	busy, _ := s.Busy("cpu")
	alpha, err := gradient.AlphaFromUtilization(busy/600, c0*f, rate)
	if err != nil {
		t.Fatal(err)
	}
	basis := gradient.Basis{Kind: gradient.KindCapacity, Operating: c0, FrequencyMHz: f, Alpha: alpha, Workload: rate}
	// Linearity over a sweep.
	var bs, rts []float64
	for _, c := range []float64{0.55, 0.6, 0.7, 0.9, 1.0} {
		b, err := basis.Value(c)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
		rts = append(rts, meanRT(t, sim.PS(12, rate, work, c, f), 2000)["Cap"])
	}
	fit, err := gradient.FitLine(bs, rts)
	if err != nil || fit.R2 < 0.95 {
		t.Fatalf("rt against 1/(c·f − α·w): %+v %v", fit, err)
	}
	// The gradient, measured by the experiment at c0.
	s2, _ := sim.New(sim.PS(13, rate, work, c0, f))
	x := newExperiment(t, gradient.Config{Target: "Cap", Settings: gradient.Settings{Train: capacityTraining()}, Elements: []gradient.Element{
		{ID: "cpu", Basis: basis, InitialAmplitude: 0.15, MaxAmplitude: 0.3}}})
	run(t, &sim.Driver{Sim: s2, X: x}, 20000)
	res := x.Result()
	el := res.Elements[0]
	g := el.Gradients()[0]
	base := res.Plan.Transactions["Cap"]
	for _, c := range []float64{0.65, 0.7, 1.0} {
		p, err := gradient.Predict("Cap", base.MeanMs, 0, []gradient.Gradient{g}, []gradient.Change{{Element: "cpu", Absolute: true, Value: c}})
		if err != nil {
			t.Fatal(err)
		}
		m := meanRT(t, sim.PS(14, rate, work, c, f), 2000)["Cap"]
		if math.Abs(p.PredictedMs-m) > 0.1*m {
			t.Errorf("capacity %.2f: predicted %.2f ms, simulated %.2f ms", c, p.PredictedMs, m)
		}
		t.Logf("capacity %.2f: predicted %.2f ms [%.2f, %.2f], simulated %.2f ms", c, p.PredictedMs, p.CI95[0], p.CI95[1], m)
	}
	t.Logf("α %.3f Mc (true %v), fit slope %.1f ms·MHz, R² %.4f; measured gradient %.1f ± %.1f (amplitude %.3f, Δb %.3g, SNR %.1f)",
		alpha, work, fit.Slope, fit.R2, g.Gradient, g.StdErr, el.Amplitude, el.BasisDelta, el.Transactions["Cap"].SNR)
}

// A plan from an earlier training skips the training phase: the first tick
// starts the adaptive lease.
func TestExperimentWithPlan(t *testing.T) {
	s, _ := sim.New(sim.FrontBack(21, 0.1, 0.03))
	x := newExperiment(t, gradient.Config{Target: "T", Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link()}}})
	d := &sim.Driver{Sim: s, X: x}
	run(t, d, 20000)
	plan := x.Result().Plan
	x2 := newExperiment(t, gradient.Config{ID: "second", Plan: plan, Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link()}}})
	d2 := &sim.Driver{Sim: s, X: x2}
	o := run(t, d2, 20000)
	if o.phases[0] != gradient.PhaseAdaptive || len(d2.Log) != 4 || !strings.HasPrefix(d2.Log[0].Lease, "second/") {
		t.Fatalf("phases %v, actions %+v, result %+v", o.phases, d2.Log, x2.Result().Elements)
	}
	if g := x2.Result().Elements[0].Transactions["T"].Gradient; math.Abs(g-1) > 0.2 {
		t.Fatalf("gradient %v", g)
	}
}

func TestExperimentConfigErrors(t *testing.T) {
	link := []gradient.Element{{ID: "a->b", Basis: gradient.Link()}}
	for _, c := range []struct {
		cfg gradient.Config
		msg string
	}{
		{gradient.Config{Elements: link}, "target"},
		{gradient.Config{Target: "T"}, "no elements"},
		{gradient.Config{Target: "T", Elements: append(link, link...)}, "unique"},
		{gradient.Config{Target: "T", Elements: []gradient.Element{{ID: "cpu", Basis: gradient.Basis{Kind: gradient.KindCapacity, Operating: 0.5, FrequencyMHz: 1000}}}}, "InitialAmplitude"},
		{gradient.Config{Target: "T", Elements: []gradient.Element{{ID: "cpu", Basis: gradient.Basis{Kind: gradient.KindCapacity, Operating: 0.5, FrequencyMHz: 1000, Alpha: 10, Workload: 60}, InitialAmplitude: 0.1}}}, "saturates"},
		{gradient.Config{Target: "T", Settings: gradient.Settings{AdaptiveInWindow: true}, Elements: []gradient.Element{{ID: "cpu", Basis: gradient.Basis{Kind: gradient.KindCapacity, Operating: 0.5, FrequencyMHz: 1000, Centered: true}, InitialAmplitude: 0.1}}}, "centered"},
		{gradient.Config{Target: "T", Elements: link, Settings: gradient.Settings{Train: spectral.TrainConfig{K: 8, N: 100, Chunks: 9, Scale: 30, MinSamplesPerPeriod: 8}}}, "power of two"},
		{gradient.Config{Target: "T", Elements: link, Guard: gradient.Guard{P99Ms: -1}}, "guard"},
		{gradient.Config{Target: "T", Elements: link, Settings: gradient.Settings{PerturbationMeasure: "p99"}}, "perturbation measure"},
	} {
		if _, err := gradient.NewExperiment(c.cfg); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: error %v, want %q", c.cfg, err, c.msg)
		}
	}
}

// A target spike under MinSNR is measured once more at a larger amplitude,
// and the two windows' estimates are combined by inverse variance. With a
// perturbation bound the amplitude grows only as far as the first window's
// perturbation allows; at the bound the second window keeps the amplitude
// and still combines.
func TestExperimentRemeasuresLowSNR(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxPert float64
	}{{"no bound", 0}, {"at the bound", 1e-3}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sim.New(sim.Patterns(3, 0.1, 0.03))
			if err != nil {
				t.Fatal(err)
			}
			// A tiny fixed amplitude leaves the spike in the noise.
			x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: precise(), MinSNR: 8, MaxPerturbation: tc.maxPert},
				Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), FixedAmplitude: 2, MaxAmplitude: 100}}})
			run(t, &sim.Driver{Sim: s, X: x}, 30000)
			el := x.Result().Elements[0]
			e := el.Transactions["Sync"]
			t.Logf("%v; gradient %.3f, SNR %.1f", el.Notes, e.Gradient, e.SNR)
			if len(el.Notes) != 1 || !strings.Contains(el.Notes[0], "measured again") || e.SNR <= 2 || e.Samples < 2*e.Bins {
				t.Fatalf("notes %v, SNR %.1f, %d samples over %d bins: want one remeasure, both windows combined", el.Notes, e.SNR, e.Samples, e.Bins)
			}
			if tc.maxPert == 0 {
				if el.Amplitude <= 2 || el.Amplitude > 6 {
					t.Errorf("amplitude %v: want up to 3× the first", el.Amplitude)
				}
				within(t, "Sync after remeasuring", e.Gradient, 1, 0.15)
			} else if el.Amplitude != 2 || !strings.Contains(el.Notes[0], "kept to") {
				t.Errorf("amplitude %v, note %q: want the first amplitude, held by the bound", el.Amplitude, el.Notes[0])
			}
		})
	}
}

// With MaxWindows above 2 an element is measured until its combined SNR
// reaches MinSNR or the windows run out; every window joins the estimate,
// whose standard error falls with the square root of the windows.
func TestExperimentMeasuresUpToMaxWindows(t *testing.T) {
	stdErr := map[int]float64{}
	for _, windows := range []int{2, 4} {
		s, err := sim.New(sim.Patterns(3, 0.1, 0.03))
		if err != nil {
			t.Fatal(err)
		}
		// A tiny amplitude that the bound keeps from growing: the SNR stays
		// under MinSNR in every window.
		x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: precise(), MinSNR: 40, MaxPerturbation: 1e-3, MaxWindows: windows},
			Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), FixedAmplitude: 2, MaxAmplitude: 100}}})
		run(t, &sim.Driver{Sim: s, X: x}, 60000)
		el := x.Result().Elements[0]
		e := el.Transactions["Sync"]
		again := 0
		for _, n := range el.Notes {
			if strings.Contains(n, "measured again") {
				again++
			}
		}
		t.Logf("max windows %d: gradient %.3f ± %.3f, SNR %.1f, %d samples over %d bins; notes %v", windows, e.Gradient, e.StdErr, e.SNR, e.Samples, e.Bins, el.Notes)
		if again != windows-1 || e.Samples < windows*e.Bins || el.Amplitude != 2 {
			t.Fatalf("max windows %d: %d remeasures, %d samples over %d bins, amplitude %v: want %d windows at 2 ms, all combined", windows, again, e.Samples, e.Bins, el.Amplitude, windows)
		}
		stdErr[windows] = e.StdErr
		within(t, "Sync", e.Gradient, 1, max(0.15, 3*e.StdErr))
	}
	if r := stdErr[4] / stdErr[2]; r > 0.85 {
		t.Errorf("standard error with 4 windows / with 2 = %.2f, want about 1/√2", r)
	}
}

// A perturbation bound keeps the first active window's amplitude down where
// A_d/g′ alone would move the response time by several σ. Aiming under the
// bound keeps every window within it, not just the average one.
func TestExperimentActiveAmplitudeKeepsPerturbationBound(t *testing.T) {
	for _, tc := range []struct {
		seed    uint64
		maxPert float64
	}{{3, 0}, {3, 0.5}, {4, 0.5}, {5, 0.5}, {6, 0.5}, {7, 0.5}} {
		s, err := sim.New(sim.Patterns(tc.seed, 0.1, 0.03))
		if err != nil {
			t.Fatal(err)
		}
		tr := precise()
		tr.Scale = 200 // A_d far above the noise: several σ without a bound
		x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: tr, MaxPerturbation: tc.maxPert},
			Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), MaxAmplitude: 500}}})
		run(t, &sim.Driver{Sim: s, X: x}, 30000)
		el := x.Result().Elements[0]
		worst, who := 0.0, ""
		for tx, e := range el.Transactions {
			if e.Significant && e.PerturbationOverStd > worst {
				worst, who = e.PerturbationOverStd, tx
			}
		}
		e := el.Transactions["Sync"]
		t.Logf("seed %d, max perturbation %v: amplitude %.3g, largest perturbation %.2fσ (%s), Sync gradient %.3f (SNR %.1f), notes %v",
			tc.seed, tc.maxPert, el.Amplitude, worst, who, e.Gradient, e.SNR, el.Notes)
		switch {
		case tc.maxPert == 0 && worst <= 1:
			t.Fatalf("without a bound the setup should perturb by more than 1σ, got %.2fσ", worst)
		case tc.maxPert > 0 && (worst > tc.maxPert || len(el.Notes) == 0 || !strings.Contains(el.Notes[0], "kept to")):
			t.Errorf("seed %d, bound %vσ: perturbation %.2fσ, notes %v", tc.seed, tc.maxPert, worst, el.Notes)
		}
		// At 0.4σ one window's SNR is ~5: the estimate is as good as its error.
		within(t, "Sync", e.Gradient, 1, max(0.15, 3*e.StdErr))
	}
}

// Under the mean measure (paper 000 Table 3's increase in response time over
// the measurement) the wave is on half the window, so the same bound lets the
// amplitude, and the SNR with it, double; the mean change stays within it.
func TestExperimentMeanPerturbationMeasure(t *testing.T) {
	const bound = 0.5
	amplitude := map[string]float64{}
	for _, measure := range []string{gradient.PerturbationPeak, gradient.PerturbationMean} {
		s, err := sim.New(sim.Patterns(4, 0.1, 0.03))
		if err != nil {
			t.Fatal(err)
		}
		tr := precise()
		tr.Scale = 200
		x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: tr, MaxPerturbation: bound, PerturbationMeasure: measure},
			Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), MaxAmplitude: 500}}})
		run(t, &sim.Driver{Sim: s, X: x}, 30000)
		el := x.Result().Elements[0]
		worst := 0.0
		for _, e := range el.Transactions {
			if e.Significant {
				worst = max(worst, e.PerturbationOverStd)
			}
		}
		e := el.Transactions["Sync"]
		t.Logf("%s: amplitude %.3g, largest peak perturbation %.2fσ, Sync %.3f ± %.3f (SNR %.1f)", measure, el.Amplitude, worst, e.Gradient, e.StdErr, e.SNR)
		if measure == gradient.PerturbationMean {
			worst /= 2
		}
		if worst > bound {
			t.Errorf("%s: perturbation %.2fσ over the %vσ bound", measure, worst, bound)
		}
		within(t, "Sync", e.Gradient, 1, max(0.1, 3*e.StdErr))
		amplitude[measure] = el.Amplitude
	}
	if r := amplitude[gradient.PerturbationMean] / amplitude[gradient.PerturbationPeak]; math.Abs(r-2) > 1e-6 {
		t.Errorf("amplitude under the mean measure / under the peak = %.4f, want 2", r)
	}
}

// The adaptive cycle's own change of the response times, which no bound can
// hold as no gradient is known yet, is reported per transaction: A⁰ times the
// one-cycle gradient, in σ. Against the truth (Sync 1, Serial3 3 calls) it is
// as good as a one-cycle gradient; the asynchronous call is not reported.
func TestExperimentReportsAdaptivePerturbation(t *testing.T) {
	res := runLargePulse(t, 0.5, nil)
	el := res.Elements[0]
	for tx, calls := range map[string]float64{"Sync": 1, "Serial3": 3} {
		got := el.AdaptivePerturbationOverStd[tx]
		want := calls * el.AdaptiveInjected / res.Plan.Transactions[tx].StdMs
		t.Logf("%s: adaptive cycle %.2fσ (A⁰ %.3g ms injected; %.2fσ by the call count), active window %.2fσ", tx, got, el.AdaptiveInjected, want, el.Transactions[tx].PerturbationOverStd)
		if math.Abs(got-want) > 0.4*want {
			t.Errorf("%s: adaptive perturbation %.2fσ, want about %.2fσ", tx, got, want)
		}
	}
	if p, ok := el.AdaptivePerturbationOverStd["Async"]; ok {
		t.Errorf("Async, whose one-cycle spike is noise, reported at %.2fσ", p)
	}
}

// A link whose gradient is pinned near 0 is not measured again, however low
// the SNR of a spike that is not there.
func TestExperimentNoRemeasureForZeroGradient(t *testing.T) {
	s, err := sim.New(sim.Patterns(5, 0.1, 0.03))
	if err != nil {
		t.Fatal(err)
	}
	x := newExperiment(t, gradient.Config{Target: "Async", Settings: gradient.Settings{Train: precise(), MinSNR: 8},
		Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), FixedAmplitude: 20, MaxAmplitude: 100}}})
	run(t, &sim.Driver{Sim: s, X: x}, 30000)
	el := x.Result().Elements[0]
	if e := el.Transactions["Async"]; len(el.Notes) != 0 || el.Amplitude != 20 || e.CI95[1] >= 0.1 {
		t.Errorf("notes %v, amplitude %v, interval %v: want one window at 20 ms with an interval under 0.1", el.Notes, el.Amplitude, e.CI95)
	}
}

// Once an element has needed a second window under MinSNR, the ETA counts
// one for the elements still to come: at the start of the second element
// it points at the real end, not half-way.
func TestExperimentETACountsRemeasures(t *testing.T) {
	for _, windows := range []int{2, 3} {
		t.Run(fmt.Sprintf("max windows %d", windows), func(t *testing.T) { testETACountsRemeasures(t, windows) })
	}
}

func testETACountsRemeasures(t *testing.T, windows int) {
	s, err := sim.New(sim.Patterns(3, 0.1, 0.03))
	if err != nil {
		t.Fatal(err)
	}
	// Tiny fixed amplitudes, which the bound keeps from growing, leave both
	// spikes in the noise in every window.
	bound := 0.0
	if windows > 2 {
		bound = 1e-3
	}
	x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: precise(), MinSNR: 8, MaxWindows: windows, MaxPerturbation: bound}, Elements: []gradient.Element{
		{ID: "front->back", Basis: gradient.Link(), FixedAmplitude: 2, MaxAmplitude: 100},
		{ID: "back->front", Basis: gradient.Link(), FixedAmplitude: 2, MaxAmplitude: 100}}})
	d := &sim.Driver{Sim: s, X: x}
	at, eta := math.NaN(), 0.0
	d.OnStep = func(d *sim.Driver, now float64) bool {
		if p := x.Progress(time.Unix(0, int64(now*1e9))); math.IsNaN(at) && p.ElementIndex == 1 && p.ETA > 0 {
			at, eta = now, p.ETA.Seconds()
		}
		return true
	}
	if !d.Run(d.Sim.Now() + 30000) {
		t.Fatal("experiment did not finish")
	}
	for i, el := range x.Result().Elements {
		if len(el.Notes) != windows-1 || !strings.Contains(el.Notes[0], "measured again") {
			t.Fatalf("element %d notes %v: want %d remeasures each", i, el.Notes, windows-1)
		}
	}
	left := d.Sim.Now() - at
	t.Logf("second element: ETA %.0f s, took %.0f s", eta, left)
	if math.IsNaN(at) || math.Abs(eta-left) > 0.1*left {
		t.Errorf("ETA at the second element's start %.0f s, it took %.0f s", eta, left)
	}
}

// stealRun is the §4 system whose back end a host's steal slows (up to
// 6 × the steal share), with one element, the steal fed to the experiment
// as a covariate when withCov.
func stealRun(t *testing.T, seed uint64, withCov bool, el gradient.Element) (*gradient.Experiment, *sim.Driver) {
	t.Helper()
	cfg := sim.FrontBack(seed, 0.1, 0.03)
	steal := sim.NewSteal(seed, cfg.Start, 0.1, 0.06)
	back := cfg.Servers["back"]
	back.Modulation = steal.Slowdown(6)
	cfg.Servers["back"] = back
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := newExperiment(t, gradient.Config{Target: "T", Settings: gradient.Settings{Train: spectral.DefaultTrainConfig()}, Elements: []gradient.Element{el}})
	d := &sim.Driver{Sim: s, X: x}
	if withCov {
		d.Covariates = map[string]func(float64) float64{"steal host=back": steal.At}
	}
	return x, d
}

// Host steal that slows the back end for everyone at once, as on the
// testbed's VM: with the steal fraction fed in as a covariate, the same
// waves (a fixed 30 ms) read the gradient with a fraction of the spread,
// and still around 1.
func TestExperimentCovariateAdjustment(t *testing.T) {
	var raw, adjusted []float64
	const seeds = 20
	covered := 0
	for seed := uint64(1); seed <= seeds; seed++ {
		for _, withCov := range []bool{false, true} {
			x, d := stealRun(t, seed, withCov, gradient.Element{ID: "front->back", Basis: gradient.Link(), FixedAmplitude: 30})
			run(t, d, 40000)
			res := x.Result()
			g := res.Elements[0].Transactions["T"]
			t.Logf("seed %d covariate %v: %.3f [%.3f, %.3f] SNR %.1f, amplitude %.1f ms, noise ratio %.2f (training %.2f) %v", seed, withCov,
				g.Gradient, g.CI95[0], g.CI95[1], g.SNR, res.Elements[0].Amplitude, g.CovariateNoiseRatio, res.Plan.Transactions[res.Plan.Transaction].CovariateNoiseRatio, res.Elements[0].Notes)
			if withCov {
				if len(res.Covariates) != 1 || len(res.Elements[0].Covariates) != 1 || !(g.CovariateNoiseRatio > 0 && g.CovariateNoiseRatio < 1) {
					t.Fatalf("seed %d: covariates %v / %v, noise ratio %.2f", seed, res.Covariates, res.Elements[0].Covariates, g.CovariateNoiseRatio)
				}
				adjusted = append(adjusted, g.Gradient)
				if g.CI95[0] <= 1 && g.CI95[1] >= 1 {
					covered++
				}
			} else {
				raw = append(raw, g.Gradient)
			}
		}
	}
	rms := func(v []float64) float64 {
		var s float64
		for _, g := range v {
			s += (g - 1) * (g - 1)
		}
		return math.Sqrt(s / float64(len(v)))
	}
	// The one-cycle estimate of the adaptive phase, at a fixed A⁰, is
	// adjusted with the training's β: its relative error falls too.
	var roughRaw, roughAdj []float64
	for seed := uint64(1); seed <= 10; seed++ {
		for _, withCov := range []bool{false, true} {
			x, d := stealRun(t, seed, withCov, gradient.Element{ID: "front->back", Basis: gradient.Link(), InitialAmplitude: 20, MaxAmplitude: 100})
			run(t, d, 40000)
			r := x.Result().Elements[0].Rough
			if r == nil {
				t.Fatalf("seed %d: no one-cycle estimate", seed)
			}
			if withCov {
				roughAdj = append(roughAdj, r.StdErr/r.Gradient)
			} else {
				roughRaw = append(roughRaw, r.StdErr/r.Gradient)
			}
		}
	}
	t.Logf("one-cycle relative error at A⁰ 20 ms: raw %.3f, adjusted %.3f (means over 10 seeds)", stat.Mean(roughRaw, nil), stat.Mean(roughAdj, nil))
	if stat.Mean(roughAdj, nil) > 0.85*stat.Mean(roughRaw, nil) {
		t.Errorf("the adjusted one-cycle estimate should be tighter")
	}

	mean := stat.Mean(adjusted, nil)
	t.Logf("RMS error: raw %.3f, adjusted %.3f; adjusted mean %.3f, intervals covering 1: %d of %d", rms(raw), rms(adjusted), mean, covered, seeds)
	within(t, "adjusted mean", mean, 1, 0.05)
	if rms(adjusted) > 0.8*rms(raw) || covered < seeds*8/10 {
		t.Errorf("RMS error adjusted %.3f, raw %.3f (want ≤ 0.8×); %d of %d intervals cover 1", rms(adjusted), rms(raw), covered, seeds)
	}
}

// With prior gradients (the call counts the causal paths give), A⁰ itself
// keeps within the bound: the pulse that moved Serial3 by 2.2σ above moves
// no transaction by more than the aim, and the gradients still come out.
func TestExperimentPriorGradientsBoundTheAdaptivePulse(t *testing.T) {
	calls := map[string]float64{"Sync": 1, "Serial3": 3, "Async": 0} // the asynchronous call is not on its path
	const bound = 0.5
	res := runLargePulse(t, bound, calls)
	el := res.Elements[0]
	aim := 0.8 * bound // the default PerturbationAim
	if len(el.Notes) == 0 || !strings.Contains(el.Notes[0], "A⁰") || !strings.Contains(el.Notes[0], "Serial3") {
		t.Errorf("notes %q: want the first to say Serial3's prior kept A⁰", el.Notes)
	}
	truth := map[string]float64{"Sync": 1, "Serial3": 3}
	for tx, g := range truth {
		byCalls := g * el.AdaptiveInjected / res.Plan.Transactions[tx].StdMs
		est := el.Transactions[tx]
		t.Logf("%s: A⁰ %.3g ms injected, %.2fσ by the call count (aim %.2fσ); gradient %.3f ± %.3f", tx, el.AdaptiveInjected, byCalls, aim, est.Gradient, est.StdErr)
		if byCalls > aim*1.1 { // the injector's applied delay may exceed the request a little
			t.Errorf("%s: the adaptive pulse moved it %.2fσ, over the aim %.2fσ", tx, byCalls, aim)
		}
		if math.Abs(est.Gradient-g) > 3*est.StdErr+0.05*g {
			t.Errorf("%s: gradient %.3f ± %.3f, want %v", tx, est.Gradient, est.StdErr, g)
		}
	}
}

// A host stall during the single adaptive pulse (here the back end runs
// 30% slower for exactly that half-period) makes one cycle read Sync's
// gradient several times its one call, and the first window would be sized
// by it. With the priors the contradicted cycle is repeated once, and the
// clean repetition sizes the window.
func TestExperimentRepeatsACycleThatContradictsThePriors(t *testing.T) {
	calls := map[string]float64{"Sync": 1, "Serial3": 3, "Async": 0}
	const bound = 0.5
	aim := 0.8 * bound
	var withRepeat []float64
	for seed := uint64(1); seed <= 5; seed++ {
		var reach [2]float64
		for i, priors := range []map[string]float64{nil, calls} {
			cfg := sim.Patterns(seed, 0.1, 0.03)
			var s *sim.Sim
			pulse := 0 // 0 before the first pulse, 1 during it, 2 after
			back := cfg.Servers["back"]
			back.Modulation = func(t float64) float64 {
				on := s != nil && s.WaveOn("front->back", t)
				switch {
				case pulse == 0 && on:
					pulse = 1
				case pulse == 1 && !on:
					pulse = 2
				}
				if pulse == 1 {
					return 1.3
				}
				return 1
			}
			cfg.Servers["back"] = back
			var err error
			if s, err = sim.New(cfg); err != nil {
				t.Fatal(err)
			}
			tr := precise()
			tr.Scale = 200
			x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: tr, MaxPerturbation: bound},
				Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), InitialAmplitude: 3, MaxAmplitude: 500, PriorGradients: priors}}})
			run(t, &sim.Driver{Sim: s, X: x}, 30000)
			res := x.Result()
			el := res.Elements[0]
			if el.Status != "done" || el.Rough == nil {
				t.Fatalf("seed %d priors %v: %s %s", seed, priors != nil, el.Status, el.Error)
			}
			for tx, g := range map[string]float64{"Sync": 1, "Serial3": 3} {
				reach[i] = math.Max(reach[i], g*el.Injected/res.Plan.Transactions[tx].StdMs/aim)
			}
			repeated := slices.ContainsFunc(el.Notes, func(n string) bool { return strings.Contains(n, "repeated once") })
			t.Logf("seed %d priors %v: rough %.3f ± %.3f, repeated %v, A_d′ %.3g ms (%.2f of the aim by the call counts); Sync %.3f ± %.3f; notes %q",
				seed, priors != nil, el.Rough.Gradient, el.Rough.StdErr, repeated, el.Amplitude, reach[i], el.Transactions["Sync"].Gradient, el.Transactions["Sync"].StdErr, el.Notes)
			if priors == nil {
				if repeated {
					t.Errorf("seed %d: a cycle repeated without priors", seed)
				}
				continue
			}
			if !repeated || el.Rough.Gradient-el.Rough.StdErr > 1 {
				t.Errorf("seed %d: repeated %v, the kept rough gradient %.3f ± %.3f: want the clean repetition's", seed, repeated, el.Rough.Gradient, el.Rough.StdErr)
			}
			// The repetition's rough gradients bound it, at their upper
			// standard error.
			if reach[i] > 1.25 {
				t.Errorf("seed %d: the window moved the transactions by %.2f of the aim, over the bound", seed, reach[i])
			}
			withRepeat = append(withRepeat, reach[i])
		}
		if !(reach[1] > 2*reach[0]) {
			t.Errorf("seed %d: the window reached %.2f of the aim with the repeat, %.2f without priors", seed, reach[1], reach[0])
		}
	}
	t.Logf("with the repeat the first windows reach %.2f of the aim on average", meanOf(withRepeat))
}

func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// runLargePulse runs one link experiment on the §4 patterns system at
// d = 200, whose adaptive pulse (A_d/2) is far over a perturbation bound of
// maxPerturbation unless the element's prior gradients hold it.
func runLargePulse(t *testing.T, maxPerturbation float64, priors map[string]float64) gradient.Result {
	t.Helper()
	s, err := sim.New(sim.Patterns(4, 0.1, 0.03))
	if err != nil {
		t.Fatal(err)
	}
	tr := precise()
	tr.Scale = 200
	x := newExperiment(t, gradient.Config{Target: "Sync", Settings: gradient.Settings{Train: tr, MaxPerturbation: maxPerturbation},
		Elements: []gradient.Element{{ID: "front->back", Basis: gradient.Link(), MaxAmplitude: 500, PriorGradients: priors}}})
	run(t, &sim.Driver{Sim: s, X: x}, 30000)
	return x.Result()
}

// balancedStealRun is sim.Balanced on a host whose steal slows both
// replicas at once, unobserved: the requests through the other replica
// are the only witness of that noise.
func balancedStealRun(t *testing.T, seed uint64, references bool, el gradient.Element) (*gradient.Experiment, *sim.Driver) {
	t.Helper()
	cfg := sim.Balanced(seed, 0.1, 0.03)
	steal := sim.NewSteal(seed, cfg.Start, 0.1, 0.06)
	for _, name := range []string{"back1", "back2"} {
		b := cfg.Servers[name]
		b.Modulation = steal.Slowdown(6)
		cfg.Servers[name] = b
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := newExperiment(t, gradient.Config{Target: "LB", Settings: gradient.Settings{Train: spectral.DefaultTrainConfig(), References: references}, Elements: []gradient.Element{el}})
	return x, &sim.Driver{Sim: s, X: x, Routed: true}
}

// The requests through the other replica as the reference of a
// load-balanced link: the same waves (a fixed 30 ms on front->back1) read
// 0.5 with a fraction of the spread, and the intervals still cover it.
func TestExperimentReferenceRequests(t *testing.T) {
	var raw, adjusted []float64
	const seeds = 30
	covered, respond := 0, 0
	for seed := uint64(1); seed <= seeds; seed++ {
		for _, references := range []bool{false, true} {
			x, d := balancedStealRun(t, seed, references, gradient.Element{ID: "front->back1", Basis: gradient.Link(), FixedAmplitude: 30})
			run(t, d, 40000)
			el := x.Result().Elements[0]
			g := el.Transactions["LB"]
			t.Logf("seed %d references %v: %.3f [%.3f, %.3f] SNR %.1f, noise ratio %.2f, referenced %v (its own response %.3f) %v", seed, references,
				g.Gradient, g.CI95[0], g.CI95[1], g.SNR, g.CovariateNoiseRatio, el.Referenced, el.ReferenceResponse["LB"].Gradient, el.Errors)
			if !references {
				raw = append(raw, g.Gradient)
				continue
			}
			if len(el.Referenced) != 1 || !(g.CovariateNoiseRatio > 0 && g.CovariateNoiseRatio < 1) {
				t.Fatalf("seed %d: referenced %v, noise ratio %.2f", seed, el.Referenced, g.CovariateNoiseRatio)
			}
			// The other replica's requests do not see the wave: their own
			// response stands out of their noise only by chance.
			if el.ReferenceResponse["LB"].Significant {
				respond++
			}
			// The same waves and requests: the estimate without the
			// reference is the run without references.
			if u := el.Unreferenced["LB"].Gradient; math.Abs(u-raw[len(raw)-1]) > 1e-9 {
				t.Fatalf("seed %d: unreferenced %.6f, the run without references %.6f", seed, u, raw[len(raw)-1])
			}
			adjusted = append(adjusted, g.Gradient)
			if g.CI95[0] <= 0.5 && g.CI95[1] >= 0.5 {
				covered++
			}
		}
	}
	rms := func(v []float64) float64 {
		var s float64
		for _, g := range v {
			s += (g - 0.5) * (g - 0.5)
		}
		return math.Sqrt(s / float64(len(v)))
	}
	mean := stat.Mean(adjusted, nil)
	t.Logf("RMS error: raw %.3f, with references %.3f; mean %.3f, intervals covering 0.5: %d of %d; references responding significantly: %d", rms(raw), rms(adjusted), mean, covered, seeds, respond)
	if respond > seeds/10 {
		t.Errorf("%d of %d references respond to the wave significantly (5%% by chance)", respond, seeds)
	}
	within(t, "mean with references", mean, 0.5, 0.04)
	if rms(adjusted) > 0.6*rms(raw) || covered < seeds*8/10 {
		t.Errorf("RMS error with references %.3f, raw %.3f (want ≤ 0.6×); %d of %d intervals cover 0.5", rms(adjusted), rms(raw), covered, seeds)
	}
}

// A weaker reach (back2 slows by 4% while the wave is on) hides in one
// window's noise, but the reference's responses over several windows are
// combined as the gradients are, and the combination stands out.
func TestExperimentRejectsAWeakReachOverWindows(t *testing.T) {
	const seeds = 10
	var rejected [2]int // one window, three windows
	for seed := uint64(1); seed <= seeds; seed++ {
		for i, windows := range []int{1, 3} {
			// Every window at the same 30 ms.
			el := reachRun(t, seed, 1.04, gradient.Config{Settings: gradient.Settings{MinSNR: 1000, MaxWindows: windows, MaxPerturbation: 100}, RemeasureGrowth: 1}, 80000)
			r := el.ReferenceResponse["LB"]
			t.Logf("seed %d, %d window(s): %.3f (without the reference %.3f); the reference's own response %.3f, SNR %.1f; rejected %v",
				seed, windows, el.Transactions["LB"].Gradient, el.Unreferenced["LB"].Gradient, r.Gradient, r.SNR, el.ReferenceRejected)
			if len(el.ReferenceRejected) == 1 {
				rejected[i]++
			}
		}
	}
	t.Logf("the reference rejected in %d of %d seeds after one window, %d of %d after three", rejected[0], seeds, rejected[1], seeds)
	if rejected[1] < seeds*7/10 || rejected[1] <= rejected[0] {
		t.Errorf("a reference the wave reaches weakly was rejected in %d of %d seeds after three windows (%d after one)", rejected[1], seeds, rejected[0])
	}
}

// reachRun measures front->back1 at a fixed 30 ms on sim.Balanced with
// references, back2 slowed by the factor reach while that wave is on (as
// through a resource both replicas share), under cfg's other settings.
func reachRun(t *testing.T, seed uint64, reach float64, cfg gradient.Config, limit float64) gradient.ElementResult {
	t.Helper()
	sc := sim.Balanced(seed, 0.1, 0.03)
	var s *sim.Sim
	back2 := sc.Servers["back2"]
	back2.Modulation = func(t float64) float64 {
		if s != nil && s.WaveOn("front->back1", t) {
			return reach
		}
		return 1
	}
	sc.Servers["back2"] = back2
	var err error
	if s, err = sim.New(sc); err != nil {
		t.Fatal(err)
	}
	cfg.Target, cfg.Train, cfg.References = "LB", spectral.DefaultTrainConfig(), true
	cfg.Elements = []gradient.Element{{ID: "front->back1", Basis: gradient.Link(), FixedAmplitude: 30}}
	x := newExperiment(t, cfg)
	run(t, &sim.Driver{Sim: s, X: x, Routed: true}, limit)
	return x.Result().Elements[0]
}

// When the wave reaches the other replica's requests too (here back2 slows
// by 15% while front->back1's wave is on, as through a resource both
// share), the reference is not exogenous: its own response stands out,
// and the element falls back to the estimate without it.
func TestExperimentRejectsAReferenceTheWaveMoves(t *testing.T) {
	rejected := 0
	const seeds = 10
	for seed := uint64(1); seed <= seeds; seed++ {
		el := reachRun(t, seed, 1.15, gradient.Config{}, 40000)
		g, u, r := el.Transactions["LB"], el.Unreferenced["LB"], el.ReferenceResponse["LB"]
		t.Logf("seed %d: %.3f (without the reference %.3f); the reference's own response %.3f, SNR %.1f; rejected %v",
			seed, g.Gradient, u.Gradient, r.Gradient, r.SNR, el.ReferenceRejected)
		if len(el.ReferenceRejected) == 1 {
			rejected++
			if g.Gradient != u.Gradient || len(el.Referenced) != 0 {
				t.Errorf("seed %d: rejected, but the estimate %.3f is not the one without the reference %.3f (referenced %v)", seed, g.Gradient, u.Gradient, el.Referenced)
			}
		}
	}
	if rejected < seeds*8/10 {
		t.Errorf("the reference the wave moves was rejected in %d of %d seeds", rejected, seeds)
	}
}
