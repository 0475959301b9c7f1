package workfactor_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/workfactor"
)

// synth produces noise-free (or noisy) periods of a known model: alpha per flow,
// flows spread over machines, rates varying at random around 5–15 req/s.
type synth struct {
	alpha    map[string]float64
	machines map[string][]string // machine → flows it serves
	bg       map[string]float64  // background power per machine (MHz)
	noise    float64             // sd of the power, MHz
	capacity float64
	rng      *rand.Rand
	scale    map[string]float64 // per-flow alpha multiplier (for shifts)
}

func newSynth(seed uint64) *synth {
	return &synth{
		alpha: map[string]float64{"a": 10, "b": 3, "c": 25},
		machines: map[string][]string{
			"m1": {"a", "b"},
			"m2": {"b", "c"},
			"m3": {"a", "c"},
		},
		capacity: 4000,
		rng:      rand.New(rand.NewPCG(seed, 7)),
		scale:    map[string]float64{},
	}
}

func (s *synth) period() []workfactor.Observation {
	var obs []workfactor.Observation
	for _, m := range []string{"m1", "m2", "m3"} {
		rates := map[string]float64{}
		y := s.bg[m]
		for _, f := range s.machines[m] {
			x := 5 + 10*s.rng.Float64()
			rates[f] = x
			a := s.alpha[f]
			if k, ok := s.scale[f]; ok {
				a *= k
			}
			y += a * x
		}
		y += s.noise * s.rng.NormFloat64()
		obs = append(obs, workfactor.Observation{Machine: m, CapacityMHz: s.capacity, Utilization: y / s.capacity, Rates: rates})
	}
	return obs
}

func run(t *testing.T, e *workfactor.Estimator, s *synth, from, to int64) *workfactor.Estimate {
	t.Helper()
	var est *workfactor.Estimate
	for p := from; p <= to; p++ {
		var err error
		if est, err = e.AddPeriod(p, s.period()); err != nil {
			t.Fatal(err)
		}
	}
	return est
}

func mustNew(t *testing.T, cfg workfactor.Config) *workfactor.Estimator {
	t.Helper()
	e, err := workfactor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func raw(t *testing.T, est *workfactor.Estimate, flow string) float64 {
	t.Helper()
	f, ok := est.Flow(flow)
	if !ok || f.AlphaRaw == nil {
		t.Fatalf("flow %s has no raw estimate: %+v", flow, f)
	}
	return *f.AlphaRaw
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %v, want %v ± %v", what, got, want, tol)
	}
}

func TestExactRecovery(t *testing.T) {
	for _, m := range []workfactor.Method{workfactor.Plain, workfactor.NNLS, workfactor.Ridge} {
		cfg := workfactor.DefaultConfig()
		cfg.Method = m
		cfg.RidgeLambda = 1e-6
		est := run(t, mustNew(t, cfg), newSynth(1), 1, 60)
		for f, a := range newSynth(1).alpha {
			near(t, m.String()+" α̂_"+f, raw(t, est, f), a, 1e-4)
			if wf, ok := est.WorkFactorOf(f); !ok || math.Abs(wf-a) > 0.05*a {
				t.Errorf("%s α̃_%s = %v, want about %v", m, f, wf, a)
			}
		}
		if est.R2 == nil || *est.R2 < 0.999999 {
			t.Errorf("%s: R² = %v, want 1", m, est.R2)
		}
	}
}

// The sufficient statistics must be exactly the paper's weighted sums (§3.4,
// §4.2): C = Σ v²xxᵀ with v = 2^((1−i)/h)·f(ρ), N_h = Σ 2^((1−i)/h).
func TestAgingMatchesWeightedSums(t *testing.T) {
	cfg := workfactor.PaperConfig()
	cfg.HalfLife = 7
	e := mustNew(t, cfg)
	s := newSynth(2)
	var hist [][]workfactor.Observation
	for p := int64(1); p <= 25; p++ {
		obs := s.period()
		hist = append(hist, obs)
		if _, err := e.AddPeriod(p, obs); err != nil {
			t.Fatal(err)
		}
	}
	st := e.State()
	idx := map[string]int{}
	for i, f := range st.Flows {
		idx[f] = i
	}
	k := len(st.Flows)
	c := make([]float64, k*k)
	d := make([]float64, k)
	n := 0.0
	for i, obs := range hist {
		age := float64(len(hist) - 1 - i) // newest has age 0
		w := math.Exp2(-age / cfg.HalfLife)
		for _, o := range obs {
			v := w * workfactor.Discount(o.Utilization)
			y := o.Utilization * o.CapacityMHz
			n += w
			for f, x := range o.Rates {
				d[idx[f]] += v * v * x * y
				for g, z := range o.Rates {
					c[idx[f]*k+idx[g]] += v * v * x * z
				}
			}
		}
	}
	for i := range c {
		near(t, "C", st.C[i], c[i], 1e-9)
	}
	for i := range d {
		near(t, "D", st.D[i], d[i], 1e-9)
	}
	nh := 0.0
	for _, src := range st.Sources {
		nh += src.N
	}
	near(t, "N_h", nh, n, 1e-12)
	// And the closed form of §3.4 for one equation per period.
	want := 3 * (1 - math.Exp2(-25/cfg.HalfLife)) / (1 - math.Exp2(-1/cfg.HalfLife))
	near(t, "N_h closed form", nh, want, 1e-12)
}

// MSE with N_h − K − 1 degrees of freedom, R², and g_k = α̂_k/S_k against a
// direct computation on the weighted X and Y (§3.1, §3.2).
func TestMSEAndGoodness(t *testing.T) {
	cfg := workfactor.PaperConfig()
	cfg.NoDiscount = true
	cfg.HalfLife = 1e15 // no aging: plain least squares
	e := mustNew(t, cfg)
	s := newSynth(3)
	s.noise = 20
	var X [][]float64
	var Y []float64
	flows := []string{"a", "b", "c"}
	var est *workfactor.Estimate
	for p := int64(1); p <= 40; p++ {
		obs := s.period()
		for _, o := range obs {
			row := make([]float64, 3)
			for j, f := range flows {
				row[j] = o.Rates[f]
			}
			X = append(X, row)
			Y = append(Y, o.Utilization*o.CapacityMHz)
		}
		var err error
		if est, err = e.AddPeriod(p, obs); err != nil {
			t.Fatal(err)
		}
	}
	// Normal equations by hand.
	var c [3][3]float64
	var d [3]float64
	for i := range X {
		for a := 0; a < 3; a++ {
			d[a] += X[i][a] * Y[i]
			for b := 0; b < 3; b++ {
				c[a][b] += X[i][a] * X[i][b]
			}
		}
	}
	inv := invert3(c)
	var alpha [3]float64
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			alpha[a] += inv[a][b] * d[b]
		}
	}
	sse, mean := 0.0, 0.0
	for i := range X {
		r := Y[i]
		for a := 0; a < 3; a++ {
			r -= X[i][a] * alpha[a]
		}
		sse += r * r
		mean += Y[i]
	}
	mean /= float64(len(Y))
	sst := 0.0
	for _, y := range Y {
		sst += (y - mean) * (y - mean)
	}
	mse := sse / float64(len(Y)-3-1)
	near(t, "MSE", *est.MSE, mse, 1e-6)
	near(t, "R²", *est.R2, 1-sse/sst, 1e-9)
	for a, f := range flows {
		near(t, "α̂_"+f, raw(t, est, f), alpha[a], 1e-9)
		fe, _ := est.Flow(f)
		near(t, "g_"+f, *fe.Goodness, alpha[a]/math.Sqrt(mse*inv[a][a]), 1e-6)
	}
}

func invert3(m [3][3]float64) [3][3]float64 {
	det := m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) - m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) + m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
	var r [3][3]float64
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			a, b := (j+1)%3, (j+2)%3
			c, d := (i+1)%3, (i+2)%3
			r[i][j] = (m[a][c]*m[b][d] - m[a][d]*m[b][c]) / det
		}
	}
	return r
}

func TestDiscountAndSmoothingWeight(t *testing.T) {
	for _, c := range []struct{ rho, f float64 }{{0, 0}, {0.1, 1.0 / 3}, {0.2, 2.0 / 3}, {0.6, 5.0 / 6}, {1, 1}, {1.5, 1}, {-1, 0}, {math.NaN(), 0}} {
		near(t, "f", workfactor.Discount(c.rho), c.f, 1e-12)
	}
	for _, c := range []struct{ g, s float64 }{{-3, 0}, {0, 0}, {10, 10}, {20, 20}, {60, 22}, {100, 24}, {1e6, 24}, {math.NaN(), 0}} {
		near(t, "s", workfactor.SmoothingWeight(c.g), c.s, 1e-12)
	}
}

func TestFlowRejection(t *testing.T) {
	s := newSynth(4)
	e := mustNew(t, workfactor.DefaultConfig())
	var est *workfactor.Estimate
	for p := int64(1); p <= 30; p++ {
		obs := s.period()
		obs[0].Rates["tiny"] = 1e-6 // share far below δ = 1e-5
		var err error
		if est, err = e.AddPeriod(p, obs); err != nil {
			t.Fatal(err)
		}
	}
	f, ok := est.Flow("tiny")
	if !ok || !f.Rejected || f.AlphaRaw != nil || f.WorkFactor != nil {
		t.Errorf("tiny flow not rejected: %+v", f)
	}
	near(t, "α̂_a", raw(t, est, "a"), 10, 1e-3)
}

// Low-contribution flows are combined (§4.3, the paper's combining by rate):
// with many small flows, only the large ones are solved alone and the combined
// ones share one estimate.
func TestCombining(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	alpha := map[string]float64{"big1": 10, "big2": 12, "s1": 3, "s2": 4, "s3": 5, "s4": 6, "s5": 7}
	rate := map[string]float64{"big1": 40, "big2": 30, "s1": 0.5, "s2": 0.5, "s3": 0.5, "s4": 0.5, "s5": 0.5}
	names := slices.Sorted(maps.Keys(rate))
	cfg := workfactor.DefaultConfig()
	cfg.Combining = workfactor.CombineRate
	e := mustNew(t, cfg)
	var est *workfactor.Estimate
	for p := int64(1); p <= 60; p++ {
		var obs []workfactor.Observation
		for _, m := range []string{"m1", "m2", "m3", "m4"} {
			rates := map[string]float64{}
			y := 0.0
			for _, f := range names {
				r := rate[f]
				x := r * (0.7 + 0.6*rng.Float64())
				rates[f] = x
				y += x * alpha[f]
			}
			y += 5 * rng.NormFloat64()
			obs = append(obs, workfactor.Observation{Machine: m, CapacityMHz: 4000, Utilization: y / 4000, Rates: rates})
		}
		var err error
		if est, err = e.AddPeriod(p, obs); err != nil {
			t.Fatal(err)
		}
	}
	// j is the first small flow; q = 2 keeps two small flows alone at first
	// (they stay alone only while they pass the failing criterion).
	combined := 0
	for f := range alpha {
		fe, _ := est.Flow(f)
		if f == "big1" || f == "big2" {
			if fe.Combined {
				t.Errorf("flow %s combined", f)
			}
		} else if fe.Combined {
			combined++
		}
	}
	if combined < 3 {
		t.Errorf("%d of the 5 small flows combined, want ≥ 3", combined)
	}
	near(t, "α̃ big1", *mustFlow(t, est, "big1").WorkFactor, 10, 0.05)
	near(t, "α̃ big2", *mustFlow(t, est, "big2").WorkFactor, 12, 0.05)
}

func mustFlow(t *testing.T, est *workfactor.Estimate, f string) workfactor.FlowEstimate {
	t.Helper()
	fe, ok := est.Flow(f)
	if !ok || fe.WorkFactor == nil {
		t.Fatalf("flow %s has no work factor", f)
	}
	return fe
}

// Per-process readings split the problem into independent blocks (§4.6).
func TestPerProcessBlocks(t *testing.T) {
	cfg := workfactor.DefaultConfig()
	cfg.PerProcess = true
	e := mustNew(t, cfg)
	rng := rand.New(rand.NewPCG(6, 6))
	alpha := map[string]float64{"a": 5, "b": 8, "c": 20, "d": 2}
	procs := map[string][]string{"web": {"a", "b"}, "db": {"c"}, "batch": {"d"}}
	var est *workfactor.Estimate
	for p := int64(1); p <= 40; p++ {
		var obs []workfactor.Observation
		for _, m := range []string{"m1", "m2"} {
			for _, pr := range []string{"batch", "db", "web"} {
				rates := map[string]float64{}
				y := 0.0
				for _, f := range procs[pr] {
					x := 2 + 8*rng.Float64()
					rates[f] = x
					y += x * alpha[f]
				}
				obs = append(obs, workfactor.Observation{Machine: m, Process: pr, CapacityMHz: 2000, Utilization: y / 2000, Rates: rates})
			}
		}
		// A machine-level reading is the wrong mode here: skipped and counted.
		obs = append(obs, workfactor.Observation{Machine: "m1", CapacityMHz: 2000, Utilization: 0.5, Rates: map[string]float64{"a": 1}})
		var err error
		if est, err = e.AddPeriod(p, obs); err != nil {
			t.Fatal(err)
		}
	}
	if len(est.Blocks) != 3 {
		t.Fatalf("%d blocks, want 3 (web, db, batch): %+v", len(est.Blocks), est.Blocks)
	}
	for f, a := range alpha {
		near(t, "α̂_"+f, raw(t, est, f), a, 1e-6)
	}
	if est.Mode != "process" || est.Counters.WrongMode != 40 {
		t.Errorf("mode %q, wrong-mode observations %d, want process and 40", est.Mode, est.Counters.WrongMode)
	}
}

// Two shards that observed different machines merge into the state one
// estimator would have: the same solution (the paper's config, so that the
// shards' outlier detection cannot differ from the single estimator's).
func TestMergeEqualsSingleEstimator(t *testing.T) {
	cfg := workfactor.PaperConfig()
	s := newSynth(8)
	s.noise = 30
	shardA, shardB := mustNew(t, cfg), mustNew(t, cfg)
	for p := int64(1); p <= 50; p++ {
		obs := s.period()
		if _, err := shardA.AddPeriod(p, obs[:1]); err != nil {
			t.Fatal(err)
		}
		// Shard B stops two periods early: merging ages it to the later period.
		if p <= 48 {
			if _, err := shardB.AddPeriod(p, obs[1:]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One estimator that saw exactly what the shards saw together.
	ref := mustNew(t, cfg)
	s2 := newSynth(8)
	s2.noise = 30
	for p := int64(1); p <= 50; p++ {
		obs := s2.period()
		if p > 48 {
			obs = obs[:1]
		}
		if _, err := ref.AddPeriod(p, obs); err != nil {
			t.Fatal(err)
		}
	}
	m, err := workfactor.Merge(shardA.State(), shardB.State())
	if err != nil {
		t.Fatal(err)
	}
	merged, err := workfactor.Restore(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	got, want := merged.Current(), ref.Current()
	for _, f := range []string{"a", "b", "c"} {
		near(t, "merged α̂_"+f, raw(t, got, f), raw(t, want, f), 1e-9)
	}
	near(t, "merged MSE", *got.MSE, *want.MSE, 1e-9)
	// Merge is symmetric.
	m2, err := workfactor.Merge(shardB.State(), shardA.State())
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := workfactor.Restore(cfg, m2)
	near(t, "merge(b,a) α̂_a", raw(t, r2.Current(), "a"), raw(t, want, "a"), 1e-9)
	// Half-lives must match; an empty state merges into the other unchanged.
	other := shardA.State()
	other.HalfLife = 20
	if _, err := workfactor.Merge(shardA.State(), other); err == nil {
		t.Error("merging states with different half-lives succeeded")
	}
	empty := mustNew(t, cfg).State()
	if m, err := workfactor.Merge(empty, shardA.State()); err != nil || !reflect.DeepEqual(normal(m), normal(shardA.State())) {
		t.Errorf("merging with an empty state: %v", err)
	}
}

// The state survives JSON and the binary encoding, and an estimator restored
// from it continues exactly as the original.
func TestStateRoundTripAndRestore(t *testing.T) {
	cfg := workfactor.DefaultConfig()
	s := newSynth(9)
	s.noise = 10
	orig := mustNew(t, cfg)
	run(t, orig, s, 1, 30)
	st := orig.State()
	bin, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var fromBin workfactor.State
	if err := fromBin.UnmarshalBinary(bin); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON workfactor.State
	if err := json.Unmarshal(js, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normal(&fromBin), normal(st)) {
		t.Error("binary round trip changed the state")
	}
	a, err := workfactor.Restore(cfg, &fromBin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := workfactor.Restore(cfg, &fromJSON)
	if err != nil {
		t.Fatal(err)
	}
	for p := int64(31); p <= 40; p++ {
		obs := s.period()
		want, _ := orig.AddPeriod(p, obs)
		gotA, _ := a.AddPeriod(p, obs)
		gotB, _ := b.AddPeriod(p, obs)
		wj, _ := json.Marshal(want)
		aj, _ := json.Marshal(gotA)
		bj, _ := json.Marshal(gotB)
		if string(wj) != string(aj) || string(wj) != string(bj) {
			t.Fatalf("period %d: restored estimators diverge:\n%s\n%s\n%s", p, wj, aj, bj)
		}
	}
	if err := fromBin.UnmarshalBinary(bin[:len(bin)/2]); err == nil {
		t.Error("a truncated state decoded")
	}
	if _, err := workfactor.Restore(func() workfactor.Config { c := cfg; c.HalfLife = 3; return c }(), st); err == nil {
		t.Error("restoring with another half-life succeeded")
	}
}

// normal makes nil and empty slices compare equal.
func normal(s *workfactor.State) *workfactor.State {
	c := s.Clone()
	for i := range c.Sources {
		if len(c.Sources[i].Held) == 0 {
			c.Sources[i].Held = nil
		}
		if len(c.Sources[i].Recent) == 0 {
			c.Sources[i].Recent = nil
		}
	}
	return c
}

// Bad input is skipped and counted, or a clear error; never NaN.
func TestBadInput(t *testing.T) {
	e := mustNew(t, workfactor.DefaultConfig())
	s := newSynth(10)
	run(t, e, s, 1, 20)
	good := s.period()
	bad := []workfactor.Observation{
		{Machine: "m1", CapacityMHz: 4000, Utilization: math.NaN(), Rates: map[string]float64{"a": 1}},
		{Machine: "m2", CapacityMHz: 4000, Utilization: -0.1, Rates: map[string]float64{"a": 1}},
		{Machine: "m3", CapacityMHz: 4000, Utilization: 1.5, Rates: map[string]float64{"a": 1}},
		{Machine: "m4", CapacityMHz: 0, Utilization: 0.1, Rates: map[string]float64{"a": 1}},
		{Machine: "m5", CapacityMHz: math.Inf(1), Utilization: 0.1, Rates: map[string]float64{"a": 1}},
		{Machine: "m6", CapacityMHz: 4000, Utilization: 0.1, Rates: map[string]float64{"a": -1}},
		{Machine: "m7", CapacityMHz: 4000, Utilization: 0.1, Rates: map[string]float64{"a": math.NaN()}},
		{Machine: "m8", CapacityMHz: 4000, Utilization: 0.1, Rates: map[string]float64{"a": 0, "b": 0}},
		{Machine: "m9", CapacityMHz: 4000, Utilization: 0.1},
		{Machine: "", CapacityMHz: 4000, Utilization: 0.1, Rates: map[string]float64{"a": 1}},
		{Machine: "m1", Process: "p", CapacityMHz: 4000, Utilization: 0.1, Rates: map[string]float64{"a": 1}},
		good[0], // the duplicate is the second m1 below
	}
	bad = append(bad, good...)
	est, err := e.AddPeriod(25, bad) // periods 21–24 are missing
	if err != nil {
		t.Fatal(err)
	}
	c := est.Counters
	want := workfactor.Counters{BadUtilization: 3, BadCapacity: 2, BadRate: 2, ZeroRates: 2, WrongMode: 2, Duplicate: 1, MissingPeriods: 4}
	if c.BadUtilization != want.BadUtilization || c.BadCapacity != want.BadCapacity || c.BadRate != want.BadRate ||
		c.ZeroRates != want.ZeroRates || c.WrongMode != want.WrongMode || c.Duplicate != want.Duplicate || c.MissingPeriods != want.MissingPeriods {
		t.Errorf("counters %+v, want %+v", c, want)
	}
	if _, err := json.Marshal(est); err != nil {
		t.Errorf("estimate does not encode (NaN?): %v", err)
	}
	near(t, "α̃_a after bad input", *mustFlow(t, est, "a").WorkFactor, 10, 0.01)
	// A period with nothing usable ages the data and is counted.
	est, err = e.AddPeriod(26, bad[:10])
	if err != nil {
		t.Fatal(err)
	}
	if est.Counters.EmptyPeriods != 1 || len(est.Blocks) != 0 {
		t.Errorf("empty period: counters %+v, %d blocks", est.Counters, len(est.Blocks))
	}
	// Periods must increase.
	if _, err := e.AddPeriod(26, good); !errors.Is(err, workfactor.ErrPeriodOrder) {
		t.Errorf("repeated period: %v, want ErrPeriodOrder", err)
	}
	if _, err := workfactor.New(workfactor.Config{}); err == nil {
		t.Error("a zero configuration was accepted")
	}
}

// One flow is an ordinary univariate problem; all-zero rates give nothing.
func TestSingleFlowAndNoFlows(t *testing.T) {
	e := mustNew(t, workfactor.DefaultConfig())
	rng := rand.New(rand.NewPCG(11, 11))
	var est *workfactor.Estimate
	for p := int64(1); p <= 30; p++ {
		x := 10 + 5*rng.Float64()
		obs := []workfactor.Observation{{Machine: "m", CapacityMHz: 1000, Utilization: 7 * x / 1000, Rates: map[string]float64{"only": x}}}
		var err error
		if est, err = e.AddPeriod(p, obs); err != nil {
			t.Fatal(err)
		}
	}
	near(t, "α̂_only", raw(t, est, "only"), 7, 1e-3)
	near(t, "α̃_only", *mustFlow(t, est, "only").WorkFactor, 7, 1e-3)

	e = mustNew(t, workfactor.DefaultConfig())
	for p := int64(1); p <= 5; p++ {
		est, err := e.AddPeriod(p, []workfactor.Observation{{Machine: "m", CapacityMHz: 1000, Utilization: 0.1, Rates: map[string]float64{"a": 0}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(est.Flows) != 0 || est.Counters.ZeroRates != p {
			t.Fatalf("all-zero rates: %+v", est)
		}
	}
}

// The background column (§4.8) recovers a per-machine background when rates
// vary enough; without it, the background is attributed to the flows.
func TestBackgroundColumn(t *testing.T) {
	for _, bg := range []workfactor.Background{workfactor.BackgroundOff, workfactor.BackgroundPerSource} {
		cfg := workfactor.PaperConfig()
		cfg.Background = bg
		s := newSynth(12)
		s.bg = map[string]float64{"m1": 100, "m2": 150, "m3": 80}
		est := run(t, mustNew(t, cfg), s, 1, 60)
		a := raw(t, est, "a")
		if bg == workfactor.BackgroundOff {
			if math.Abs(a-10) < 1 {
				t.Errorf("without a background column α̂_a = %v; the background should bias it", a)
			}
			continue
		}
		near(t, "α̂_a with background", a, 10, 1e-4)
		for _, b := range est.Background {
			near(t, "background "+b.Source, *b.MHz, s.bg[b.Source], 1e-3)
		}
	}
}

// §5.6: the inverse of a degree-3 distortion fits a degree-3 polynomial, and
// correcting the readings with it restores the estimates.
func TestHyperthreadingCorrection(t *testing.T) {
	distort := []float64{0, 0.55, 0.15, 0.3}
	inv := workfactor.InvertPolynomial(func(u float64) float64 { return workfactor.Polynomial(distort, u) }, 3, 200)
	for u := 0.01; u <= 1; u += 0.01 {
		if got := workfactor.Polynomial(inv, workfactor.Polynomial(distort, u)); math.Abs(got-u) > 0.01*u {
			t.Fatalf("inverse at %.2f = %.4f", u, got)
		}
	}
	for _, correct := range []bool{false, true} {
		cfg := workfactor.DefaultConfig()
		if correct {
			cfg.UtilizationPolynomial = inv
		}
		e := mustNew(t, cfg)
		s := newSynth(13)
		var est *workfactor.Estimate
		for p := int64(1); p <= 40; p++ {
			obs := s.period()
			for i := range obs {
				obs[i].Utilization = workfactor.Polynomial(distort, obs[i].Utilization)
			}
			est, _ = e.AddPeriod(p, obs)
		}
		a := raw(t, est, "a")
		if correct && math.Abs(a-10) > 0.2 {
			t.Errorf("corrected α̂_a = %v, want 10", a)
		}
		if !correct && math.Abs(a-10) < 1 {
			t.Errorf("uncorrected α̂_a = %v: the distortion should show", a)
		}
	}
	if _, err := workfactor.ParsePolynomial("0, 1.8,x"); err == nil {
		t.Error("a bad polynomial parsed")
	}
}

// A shift of work factors is followed within a few periods; the paper's
// aging alone takes much longer. A burst of background on one machine in one
// period is thrown out and does not move the estimates.
func TestShiftsAndOutliers(t *testing.T) {
	follow := func(cfg workfactor.Config) (periods int, outliers int64) {
		e := mustNew(t, cfg)
		s := newSynth(14)
		s.noise = 5
		run(t, e, s, 1, 50)
		// A burst: 2000 MHz more on m1 in period 51.
		obs := s.period()
		obs[0].Utilization += 2000 / obs[0].CapacityMHz
		est, _ := e.AddPeriod(51, obs)
		if wf := *mustFlow(t, est, "a").WorkFactor; cfg.ShiftSigma > 0 && math.Abs(wf-10) > 0.1 {
			t.Errorf("the burst moved α̃_a to %v", wf)
		}
		run(t, e, s, 52, 60)
		s.scale["a"] = 2 // a's work factor doubles
		for p := int64(61); p <= 200; p++ {
			est, _ := e.AddPeriod(p, s.period())
			if wf := *mustFlow(t, est, "a").WorkFactor; math.Abs(wf-20) < 1 {
				return int(p - 60), est.Counters.Outliers
			}
		}
		return 999, 0
	}
	fast, outliers := follow(workfactor.DefaultConfig())
	slow, _ := follow(workfactor.PaperConfig())
	if fast > 3 {
		t.Errorf("with shift detection α̃ followed the shift in %d periods, want ≤ 3", fast)
	}
	if slow < 10 {
		t.Errorf("the paper's aging followed in %d periods; expected it to be slow", slow)
	}
	if outliers < 1 {
		t.Errorf("the burst was not counted as an outlier")
	}
	t.Logf("followed the shift in %d periods (paper's algorithm: %d)", fast, slow)
}

func TestBoundsAndDeterminism(t *testing.T) {
	cfg := workfactor.DefaultConfig()
	cfg.MaxFlows = 3
	e := mustNew(t, cfg)
	var est *workfactor.Estimate
	for p := int64(1); p <= 20; p++ {
		rates := map[string]float64{"a": 10, "b": 5}
		rates[string(rune('c'+p%5))] = 1 // a new flow now and then
		est, _ = e.AddPeriod(p, []workfactor.Observation{{Machine: "m", CapacityMHz: 1000, Utilization: 0.1, Rates: rates}})
	}
	if len(est.Flows) > 3 || est.Counters.EvictedFlows == 0 {
		t.Errorf("%d flows kept, %d evicted; want ≤ 3 and some evicted", len(est.Flows), est.Counters.EvictedFlows)
	}
	a, b := mustNew(t, workfactor.DefaultConfig()), mustNew(t, workfactor.DefaultConfig())
	sa, sb := newSynth(15), newSynth(15)
	sa.noise, sb.noise = 20, 20
	ea, eb := run(t, a, sa, 1, 40), run(t, b, sb, 1, 40)
	ja, _ := json.Marshal(ea)
	jb, _ := json.Marshal(eb)
	if string(ja) != string(jb) {
		t.Error("the same input gave different estimates")
	}
}

func BenchmarkAddPeriod(b *testing.B) {
	e, _ := workfactor.New(workfactor.DefaultConfig())
	s := newSynth(16)
	s.noise = 10
	periods := make([][]workfactor.Observation, 1000)
	for i := range periods {
		periods[i] = s.period()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.AddPeriod(int64(i+1), periods[i%len(periods)]); err != nil {
			b.Fatal(err)
		}
	}
}

// The cross-check with the signature: per service, the rate-weighted work
// factor as milliseconds on one core against the service time S = R·(1−U).
func TestCrossCheck(t *testing.T) {
	items := []workfactor.CrossItem{
		// web: 2 ms and 4 ms at 1000 MHz, rates 3:1 → 2.5 ms; signature 2.4 ms.
		{Service: "web", Flow: "web GET /a", WorkFactor: 2, Rate: 3, ServiceTimeMs: 2.3},
		{Service: "web", Flow: "web GET /b", WorkFactor: 4, Rate: 1, ServiceTimeMs: 2.7},
		// db: 10 ms implied, signature 5 ms: disagrees.
		{Service: "db", Flow: "db query", WorkFactor: 10, Rate: 1, ServiceTimeMs: 5},
		// no signature: left out.
		{Service: "queue", Flow: "queue put", WorkFactor: 1, Rate: 1, ServiceTimeMs: math.NaN()},
	}
	got := workfactor.CrossCheck(items, 1000, workfactor.DefaultCrossTolerance)
	if len(got) != 2 || got[0].Service != "db" || got[1].Service != "web" {
		t.Fatalf("got %+v", got)
	}
	near(t, "web implied", got[1].ImpliedMs, 2.5, 1e-12)
	near(t, "web signature", got[1].ServiceTimeMs, 2.4, 1e-12)
	if got[1].Disagrees || !got[0].Disagrees {
		t.Errorf("disagreement: web %v (want false), db %v (want true)", got[1].Disagrees, got[0].Disagrees)
	}
	if workfactor.CrossCheck(items, 0, 0.25) != nil {
		t.Error("no core speed: want no cross-check")
	}
}

// After a change the state holds the previous regime (State.PrevC) and the
// CUSUM and memory fields: they survive the binary and JSON round trips, a
// restored estimator continues identically, and a version 1 state (before
// them) is still read.
func TestStateAfterShiftRoundTrip(t *testing.T) {
	cfg := workfactor.DefaultConfig()
	s := newSynth(21)
	s.noise = 10
	orig := mustNew(t, cfg)
	run(t, orig, s, 1, 60)
	s.scale["a"] = 2
	est := run(t, orig, s, 61, 70)
	if est.Counters.Shifts == 0 || est.HalfLife > cfg.MemoryGrowth*10 {
		t.Fatalf("no change detected: shifts %d, memory %v", est.Counters.Shifts, est.HalfLife)
	}
	st := orig.State()
	if len(st.PrevC) == 0 {
		t.Fatal("no previous regime kept at the change")
	}
	bin, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var fromBin workfactor.State
	if err := fromBin.UnmarshalBinary(bin); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normal(&fromBin), normal(st)) {
		t.Error("binary round trip changed the state")
	}
	js, _ := json.Marshal(st)
	var fromJSON workfactor.State
	if err := json.Unmarshal(js, &fromJSON); err != nil {
		t.Fatal(err)
	}
	a, err := workfactor.Restore(cfg, &fromBin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := workfactor.Restore(cfg, &fromJSON)
	if err != nil {
		t.Fatal(err)
	}
	for p := int64(71); p <= 80; p++ {
		obs := s.period()
		want, _ := orig.AddPeriod(p, obs)
		gotA, _ := a.AddPeriod(p, obs)
		gotB, _ := b.AddPeriod(p, obs)
		wj, _ := json.Marshal(want)
		aj, _ := json.Marshal(gotA)
		bj, _ := json.Marshal(gotB)
		if string(wj) != string(aj) || string(wj) != string(bj) {
			t.Fatalf("period %d: restored estimators diverge:\n%s\n%s\n%s", p, wj, aj, bj)
		}
	}
	if wf, _ := orig.Current().WorkFactorOf("a"); math.Abs(wf-20) > 2 {
		t.Errorf("α̃_a = %v after the change, want about 20", wf)
	}
	old := *orig.State()
	old.Version = 1
	if _, err := workfactor.Restore(cfg, &old); err != nil {
		t.Errorf("a version 1 state: %v", err)
	}
}

// A change too small for the 5σ tests (about 1σ per equation) is found by the
// CUSUM; without it, the long memory keeps the old work factor.
func TestCUSUMFindsSmallChange(t *testing.T) {
	follow := func(cusum float64) (shifts int64, wf float64) {
		cfg := workfactor.DefaultConfig()
		cfg.CusumThreshold = cusum
		e := mustNew(t, cfg)
		s := newSynth(31)
		s.noise = 20
		run(t, e, s, 1, 200)
		s.scale["b"] = 5.0 / 3 // 3 → 5 Mc: +20 MHz on m1 and m2 at 10 req/s
		est := run(t, e, s, 201, 320)
		wf, _ = est.WorkFactorOf("b")
		return est.Counters.Shifts, wf
	}
	shifts, wf := follow(workfactor.DefaultConfig().CusumThreshold)
	if shifts == 0 || math.Abs(wf-5) > 0.5 {
		t.Errorf("with the CUSUM: %d shifts, α̃_b = %.2f, want a shift and 5 ± 0.5", shifts, wf)
	}
	shifts0, wf0 := follow(0)
	if shifts0 != 0 {
		t.Errorf("without the CUSUM: %d shifts, want none (the change is ~1σ)", shifts0)
	}
	t.Logf("α̃_b 120 periods after 3 → 5: %.2f with the CUSUM (%d shifts), %.2f without", wf, shifts, wf0)
}

// Columns that fail alone are grouped with their most collinear partner, round
// after round; a flow is never in two groups, nor twice in one (a column that
// has moved was once taken again as another's partner, and its rate counted
// twice in the group's column).
func TestGroupsHoldEachFlowOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const n = 9
	e := mustNew(t, workfactor.DefaultConfig())
	var est *workfactor.Estimate
	for p := int64(1); p <= 60; p++ {
		// Three drivers move the flows' rates: the flows of one driver are
		// nearly collinear, and at this noise the small ones fail alone.
		d := [3]float64{1 + 0.8*rng.Float64(), 1 + 0.8*rng.Float64(), 1 + 0.8*rng.Float64()}
		rates := map[string]float64{}
		y := 0.0
		for i := range n {
			x := d[i%3] * float64(1+i%4) * (1 + 0.03*rng.NormFloat64())
			rates[string(rune('a'+i))] = x
			y += x * float64(2+3*i)
		}
		y += 23 * rng.NormFloat64()
		var err error
		if est, err = e.AddPeriod(p, []workfactor.Observation{{Machine: "m", CapacityMHz: 4000, Utilization: y / 4000, Rates: rates}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(est.Groups) < 2 {
		t.Fatalf("groups %v: the test needs collinear flows that fail alone", est.Groups)
	}
	seen := map[string]string{}
	for _, g := range est.Groups {
		for _, f := range g.Flows {
			if other, ok := seen[f]; ok {
				t.Errorf("flow %s in group %s and in group %s", f, other, g.Name)
			}
			seen[f] = g.Name
		}
	}
}

// An equation may still name a flow the state no longer tracks (evicted
// under MaxFlows): both encodings keep its name (version 4 numbers the
// equations' flows), and an index out of range is an error, not a panic.
func TestStateEquationsNameEvictedFlows(t *testing.T) {
	e := mustNew(t, workfactor.DefaultConfig())
	run(t, e, newSynth(3), 1, 30)
	st := e.State()
	src := &st.Sources[0]
	src.Held = append(src.Held, workfactor.HeldRow{Period: 30, Y: 100, V: 1, Flows: []string{"gone", st.Flows[0]}, Rates: []float64{1, 2}})
	src.Trail = append(src.Trail, workfactor.TrailRow{HeldRow: workfactor.HeldRow{Period: 30, Y: 50, V: 1, Flows: []string{"also gone"}, Rates: []float64{3}}, Weight: 0.5})
	bin, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var fromBin, fromJSON workfactor.State
	if err := fromBin.UnmarshalBinary(bin); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normal(&fromBin), normal(st)) || !reflect.DeepEqual(normal(&fromJSON), normal(st)) {
		t.Fatal("an equation's evicted flow did not survive the round trips")
	}
	bad := strings.Replace(string(js), `"row_flows":["gone","also gone"]`, `"row_flows":["gone"]`, 1)
	if bad == string(js) {
		t.Fatalf("no row_flows in %s", js)
	}
	if err := json.Unmarshal([]byte(bad), &fromJSON); err == nil {
		t.Error("an equation flow index out of range was accepted")
	}
}

// Rates that happen to trend together over the few periods since a shift are
// not collinear: the previous regime's periods tell the flows apart, so no
// group is formed and each keeps its own work factor.
func TestNoGroupFromAYoungRegime(t *testing.T) {
	e := mustNew(t, workfactor.DefaultConfig())
	s := newSynth(5)
	s.noise = 5
	s.machines = map[string][]string{"m1": {"a", "b", "c"}, "m2": {"b", "c"}, "m3": {"a", "b", "c"}}
	run(t, e, s, 1, 150)
	s.scale["a"] = 2 // a release doubles a's work factor
	var est *workfactor.Estimate
	for p := int64(151); p <= 156; p++ {
		// b and c ramp up together, in step, after the release.
		ramp := 5 + 5*float64(p-150)
		var obs []workfactor.Observation
		for _, m := range []string{"m1", "m2", "m3"} {
			rates := map[string]float64{}
			y := 0.0
			for _, f := range s.machines[m] {
				x := 5 + 10*s.rng.Float64()
				if f != "a" {
					x = ramp * (1 + 0.001*s.rng.NormFloat64())
				}
				rates[f] = x
				y += s.alpha[f] * x * cmp.Or(s.scale[f], 1)
			}
			y += s.noise * s.rng.NormFloat64()
			obs = append(obs, workfactor.Observation{Machine: m, CapacityMHz: s.capacity, Utilization: y / s.capacity, Rates: rates})
		}
		var err error
		if est, err = e.AddPeriod(p, obs); err != nil {
			t.Fatal(err)
		}
		if len(est.Groups) != 0 {
			t.Errorf("period %d: groups %+v formed from %d periods of a new regime", p, est.Groups, p-150)
		}
	}
	if est.Counters.Shifts == 0 {
		t.Fatal("the release was not detected; the test needs a young regime")
	}
	near(t, "α̃_b", *mustFlow(t, est, "b").WorkFactor, 3, 0.1)
	near(t, "α̃_c", *mustFlow(t, est, "c").WorkFactor, 25, 0.05)
}

// The shared background column takes the form the data fit: the same share
// of machines of different capacities, or the same MHz on each.
func TestBackgroundForm(t *testing.T) {
	capacity := map[string]float64{"m1": 2000, "m2": 3000, "m3": 4000}
	flows := map[string][]string{"m1": {"a", "b"}, "m2": {"b", "c"}, "m3": {"a", "b", "c"}}
	alpha := map[string]float64{"a": 10, "b": 3, "c": 25}
	for _, sameShare := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(9, 9))
		e := mustNew(t, workfactor.DefaultConfig())
		var est *workfactor.Estimate
		for p := int64(1); p <= 300; p++ {
			var obs []workfactor.Observation
			for _, m := range []string{"m1", "m2", "m3"} {
				bg := 150.0 // MHz
				if sameShare {
					bg = 0.05 * capacity[m]
				}
				rates := map[string]float64{}
				y := bg + 5*rng.NormFloat64()
				for _, f := range flows[m] {
					rates[f] = 5 + 20*rng.Float64()
					y += alpha[f] * rates[f]
				}
				obs = append(obs, workfactor.Observation{Machine: m, CapacityMHz: capacity[m], Utilization: y / capacity[m], Rates: rates})
			}
			var err error
			if est, err = e.AddPeriod(p, obs); err != nil {
				t.Fatal(err)
			}
		}
		if len(est.Background) != 1 || est.Background[0].MHz == nil {
			t.Fatalf("same share %v: background %+v", sameShare, est.Background)
		}
		bg := est.Background[0]
		switch {
		case sameShare && bg.ShareOfCapacity == nil:
			t.Errorf("5%% of each machine: fitted as the same MHz (%.1f)", *bg.MHz)
		case sameShare:
			near(t, "background share", *bg.ShareOfCapacity, 0.05, 0.005)
		case bg.ShareOfCapacity != nil:
			t.Errorf("150 MHz on each machine: fitted as a share (%.3f)", *bg.ShareOfCapacity)
		default:
			near(t, "background MHz", *bg.MHz, 150, 0.1)
		}
		for f, a := range alpha {
			near(t, "α̃_"+f, *mustFlow(t, est, f).WorkFactor, a, 0.03)
		}
	}
}
