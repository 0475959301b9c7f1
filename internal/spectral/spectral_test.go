package spectral

import (
	"errors"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"strings"
	"testing"
)

// square returns n bins of a square wave of amplitude a and k cycles, on for
// the first half of each period, shifted by offset bins, as bin averages.
func square(n, k int, a, offset float64) []float64 {
	x := make([]float64, n)
	period := float64(n) / float64(k)
	const sub = 200
	for i := range x {
		on := 0
		for j := 0; j < sub; j++ {
			t := float64(i) + (float64(j)+0.5)/sub - offset
			if math.Mod(math.Mod(t, period)+period, period) < period/2 {
				on++
			}
		}
		x[i] = a * float64(on) / sub
	}
	return x
}

func TestSpectrumMatchesDFT(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, 64)
	for i := range x {
		x[i] = r.NormFloat64()*10 + 100
	}
	s, err := Spectrum(x)
	if err != nil {
		t.Fatal(err)
	}
	for k := range s {
		if d := cmplx.Abs(s[k] - DFT(x, float64(k))); d > 1e-9 {
			t.Fatalf("k=%d: FFT %v, DFT %v", k, s[k], DFT(x, float64(k)))
		}
	}
	if _, err := Spectrum(make([]float64, 48)); err == nil {
		t.Fatal("a length that is not a power of two must be refused")
	}
}

// Equation 3: an aligned square wave of amplitude A puts exactly
// k_d·A/sin(π/2n) into the unnormalized coefficient at k_d, so equation 5
// returns the gradient exactly.
func TestEquation3Exact(t *testing.T) {
	for _, c := range []struct{ n, kd int }{{128, 1}, {128, 8}, {128, 16}, {64, 4}, {256, 2}} {
		x := square(c.n, c.kd, 30, 0)
		s, _ := Spectrum(x)
		want := SquareWaveGain(c.n, c.kd) * 30
		if got := cmplx.Abs(s[c.kd]); math.Abs(got-want) > 1e-9*want {
			t.Errorf("n=%d k_d=%d: |X| %.9f, equation 3 says %.9f", c.n, c.kd, got, want)
		}
		for i := range x {
			x[i] = 100 + 2*x[i] // gradient 2 on a 30 ms delay, over a 100 ms mean
		}
		e, err := EstimateGradient(EstimateInput{Values: x, Kd: c.kd, BaselineSigma: 1e-9, Delta: 30, Aligned: true})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(e.Gradient-2) > 1e-9 || math.Abs(e.Equation5-2) > 1e-9 || math.Abs(e.PerturbationMs-60) > 1e-6 {
			t.Errorf("n=%d k_d=%d: gradient %v, equation 5 %v, perturbation %v", c.n, c.kd, e.Gradient, e.Equation5, e.PerturbationMs)
		}
	}
}

// Averaged over where the edges fall in the bins, the coefficient is the
// fundamental's: PhaseAveragedGain.
func TestPhaseAveragedGain(t *testing.T) {
	for _, kd := range []int{8, 16, 32} {
		const n, steps = 128, 40
		sum := 0.0
		for i := 0; i < steps; i++ {
			s, _ := Spectrum(square(n, kd, 1, (float64(i)+0.5)/steps))
			sum += cmplx.Abs(s[kd])
		}
		got, want := sum/steps, PhaseAveragedGain(n, kd)
		if math.Abs(got-want) > 0.01*want {
			t.Errorf("k_d=%d (%.0f samples per period): mean gain %.5f, want %.5f (equation 3: %.5f)", kd, 128/float64(kd), got, want, SquareWaveGain(n, kd))
		}
	}
}

func TestSizeBins(t *testing.T) {
	// Requests every 0.1 s, every tenth 0.05 s late: windows of k=2 requests span 0.2 s ± a little.
	var times []float64
	for i := 0; i < 100; i++ {
		times = append(times, float64(i)*0.1)
	}
	s, err := SizeBins(times, 2)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.IntervalMeanSeconds-0.2) > 1e-9 || s.IntervalStdSeconds > 1e-9 || math.Abs(s.BinSeconds-0.2) > 1e-9 || s.Intervals != 98 {
		t.Fatalf("%+v", s)
	}
	times[50] += 0.05
	s, _ = SizeBins(times, 2)
	if !(s.IntervalStdSeconds > 0) || math.Abs(s.BinSeconds-(s.IntervalMeanSeconds+3*s.IntervalStdSeconds)) > 1e-12 {
		t.Fatalf("ΔTs must be mean + 3σ: %+v", s)
	}
	if _, err := SizeBins(times[:3], 2); err == nil {
		t.Fatal("k+1 requests cannot size bins")
	}
}

func TestFillEmptyPolicy(t *testing.T) {
	sum := []float64{0, 10, 0, 0, 40, 0}
	count := []int{0, 1, 0, 0, 1, 0}
	got, empty, err := FillEmpty(sum, count)
	if err != nil || empty != 4 {
		t.Fatal(empty, err)
	}
	want := []float64{10, 10, 20, 30, 40, 40}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("filled %v, want %v", got, want)
		}
	}
	if _, _, err := FillEmpty([]float64{0, 0}, []int{0, 0}); err == nil {
		t.Fatal("all-empty series must fail")
	}
	b := NewBins(0, 1, 4)
	b.Add(0.5, 5)
	if _, err := b.Series(); !errors.Is(err, ErrTooSparse) {
		t.Fatalf("3 of 4 bins empty: %v", err)
	}
}

func TestBinsMergeAndEdges(t *testing.T) {
	a, b := NewBins(10, 2, 3), NewBins(10, 2, 3)
	a.Add(10, 1)
	a.Add(11.999, 3)
	b.Add(12, 5)
	b.Add(16, 7) // the end is outside
	b.Add(9.9, 7)
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if a.Count[0] != 2 || a.Count[1] != 1 || a.Count[2] != 0 || a.Outside != 2 || a.Sum[0] != 4 || a.SumSq[0] != 10 {
		t.Fatalf("%+v", a)
	}
	if err := a.Merge(NewBins(10, 1, 3)); err == nil {
		t.Fatal("different grids must not merge")
	}
}

func TestReadSamples(t *testing.T) {
	in := "timestamp,transaction,response_time_ms\n# comment\n2.5,B,10\n\n1.25,A,229.4\n"
	s, err := ReadSamples(strings.NewReader(in), "x.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 || s[0] != (Sample{1.25, "A", 229.4}) || s[1].Transaction != "B" {
		t.Fatalf("%+v", s)
	}
	for _, bad := range []string{"1,A\n", "x,A,1\n", "1,,1\n", "1,A,-3\n", "1,A,NaN\n"} {
		_, err := ReadSamples(strings.NewReader("timestamp,transaction,response_time_ms\n"+bad), "bad.csv")
		if err == nil || !strings.Contains(err.Error(), "bad.csv:2:") {
			t.Errorf("%q: want an error naming bad.csv:2, got %v", bad, err)
		}
	}
}

// noisy returns a baseline of white noise around 100 ms with a strong
// periodic component at k=per cycles per n bins.
func noisy(r *rand.Rand, bins, n, per int, sd float64) []float64 {
	x := make([]float64, bins)
	for i := range x {
		x[i] = 100 + sd*r.NormFloat64() + 20*math.Sin(2*math.Pi*float64(per*i)/float64(n)+1)
	}
	return x
}

// trainSeries trains on a synthetic series as if each bin held one sample.
func trainSeries(t *testing.T, x []float64, cfg TrainConfig) *Plan {
	t.Helper()
	b := NewBins(0, 1, len(x))
	for i, v := range x {
		b.Add(float64(i)+0.5, v)
	}
	p, err := TrainBins(map[string]*Bins{"T": b}, "T", BinSizing{K: cfg.K, BinSeconds: 1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTrainingAvoidsPeriodicNoise(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cfg := DefaultTrainConfig()
	x := noisy(r, cfg.Chunks*cfg.N, cfg.N, 4, 5)
	// The periodic noise has a random phase per chunk, as garbage collection would.
	for c := 0; c < cfg.Chunks; c++ {
		ph := r.Float64() * 2 * math.Pi
		for i := c * cfg.N; i < (c+1)*cfg.N; i++ {
			x[i] += 20 * math.Sin(2*math.Pi*4*float64(i)/float64(cfg.N)+ph)
		}
	}
	p := trainSeries(t, x, cfg)
	if p.Kd == 4 || p.Kd < 1 || p.Kd > cfg.N/8 {
		t.Fatalf("chose k_d=%d (noise at 4, allowed 1..%d)", p.Kd, cfg.N/8)
	}
	if math.Abs(p.AmplitudeMs-cfg.Scale*p.NoiseMs) > 1e-9 || p.Chunks != 9 || len(p.Candidates) != 16 {
		t.Fatalf("A_d %v, σ %v, chunks %d, candidates %d", p.AmplitudeMs, p.NoiseMs, p.Chunks, len(p.Candidates))
	}
	for _, c := range p.Candidates {
		if c.AmplitudeMs < p.AmplitudeMs {
			t.Fatalf("candidate %+v is below the choice %v", c, p.AmplitudeMs)
		}
	}
	// White noise of σ per bin gives a normalized coefficient of σ/√N.
	if s := p.BaselineFFTStd[p.Kd].Abs(); s < 0.5*5/math.Sqrt(128) || s > 1.5*5/math.Sqrt(128) {
		t.Fatalf("σ(FFT⁰) %v, want about %v", s, 5/math.Sqrt(128))
	}
}

// The interval covers the true gradient about 95% of the time, with and
// without the baseline's mean subtracted, for an unknown phase.
func TestEstimateCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cfg := DefaultTrainConfig()
	const sd, delta, g = 8.0, 10.0, 1.5
	base := make([]float64, cfg.Chunks*cfg.N)
	for i := range base {
		base[i] = 100 + sd*r.NormFloat64()
	}
	p := trainSeries(t, base, cfg)
	covered, trials := 0, 400
	var sum float64
	for i := 0; i < trials; i++ {
		w := square(cfg.N, p.Kd, g*delta, r.Float64()*float64(cfg.N)/float64(p.Kd))
		for j := range w {
			w[j] += 100 + sd*r.NormFloat64()
		}
		e, err := EstimateGradient(EstimateInput{Values: w, Kd: p.Kd, BaselineMean: p.BaselineFFTMean[p.Kd].Value(),
			BaselineSigma: p.BaselineFFTStd[p.Kd].Abs(), Chunks: p.Chunks, Delta: delta})
		if err != nil {
			t.Fatal(err)
		}
		sum += e.Gradient
		if e.CI95[0] <= g && g <= e.CI95[1] {
			covered++
		}
	}
	mean, cov := sum/float64(trials), float64(covered)/float64(trials)
	if math.Abs(mean-g) > 0.03*g || cov < 0.9 || cov > 0.995 {
		t.Fatalf("mean %.4f (want %v), coverage %.3f (want ≈ 0.95)", mean, g, cov)
	}
}

func TestRoughOneCycle(t *testing.T) {
	// One on-phase of 5 ms anywhere in a 16-bin window, gradient 2.
	for _, off := range []float64{0, 3.3, 7} {
		x := square(16, 1, 10, off)
		for i := range x {
			x[i] += 100
		}
		e, err := Rough(x, 0, 0.5, 5)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(e.Gradient-2) > 0.05 {
			t.Errorf("offset %v: rough gradient %v, want 2", off, e.Gradient)
		}
	}
}

func TestOnOff(t *testing.T) {
	var s []Sample
	for i := 0; i < 1000; i++ {
		tm := float64(i) * 0.01 // 10 s, period 2 s
		ms := 50.0
		if math.Mod(tm-0.5, 2) < 1 && tm >= 0.5 {
			ms += 6
		}
		s = append(s, Sample{Time: tm, Transaction: "T", Ms: ms + float64(i%3)})
	}
	td, err := OnOff(s, 0.5, 2, 0.5, 8.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(td.Gradient-2) > 0.01 || td.On != 400 || td.Off != 400 {
		t.Fatalf("%+v", td)
	}
	b := NewBins(0.5, 0.25, 32)
	for _, x := range s {
		b.Add(x.Time, x.Ms)
	}
	tb, err := OnOffBins(b, 0.5, 2, 3)
	if err != nil || math.Abs(tb.Gradient-2) > 0.01 {
		t.Fatalf("bins: %+v %v", tb, err)
	}
}

// Windows combined coherently lose the modulus's upward bias as their
// combined SNR grows; moduli combined by inverse variance keep each
// window's. Four windows at SNR ~1.5 each, the wave at the same offset in
// every window (as the coordinator places it).
func TestCombineCoherentRemovesLowSNRBias(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	// A wave of g·Δ has a coefficient of about g·Δ/π against the noise's
	// sd/√n: SNR 1.5 at Δ = 1.5·π·sd/√n.
	const n, kd, sd, g, windows, trials = 128, 12, 8.0, 1.0, 4, 400
	delta := 1.5 * math.Pi * sd / math.Sqrt(n)
	sigma := sd / math.Sqrt(n) // white noise's normalized coefficient
	var coherent, single, incoherent float64
	covered := 0
	for range trials {
		offset := r.Float64() * float64(n) / kd
		var comb Estimate
		var wsum, gsum float64
		for w := range windows {
			x := square(n, kd, g*delta, offset)
			for i := range x {
				x[i] += 100 + sd*r.NormFloat64()
			}
			e, err := EstimateGradient(EstimateInput{Values: x, Kd: kd, BaselineMean: complex(0, 0), BaselineSigma: sigma, Delta: delta})
			if err != nil {
				t.Fatal(err)
			}
			if w == 0 {
				comb = e
				single += e.Gradient
			} else {
				comb = CombineCoherent(comb, e)
			}
			wt := 1 / (e.NoiseStdErr * e.NoiseStdErr)
			wsum, gsum = wsum+wt, gsum+wt*e.Gradient
		}
		coherent += comb.Gradient
		incoherent += gsum / wsum
		if comb.CI95[0] <= g && g <= comb.CI95[1] {
			covered++
		}
		// Each window's σ is the larger of the baseline's and the one it
		// measures, so at least the baseline's; combined, /√windows.
		want := sigma / math.Sqrt2 / PhaseAveragedGain(n, kd) / delta / math.Sqrt(windows)
		if r := comb.NoiseStdErr / want; r < 0.99 || r > 1.4 {
			t.Fatalf("combined noise error %v over %d windows, want about %v", comb.NoiseStdErr, windows, want)
		}
	}
	coherent, single, incoherent = coherent/trials, single/trials, incoherent/trials
	t.Logf("mean gradient (true %v): one window %.3f, %d windows coherent %.3f, moduli by inverse variance %.3f; coverage %.3f",
		g, single, windows, coherent, incoherent, float64(covered)/trials)
	if single < 1.1*g || incoherent < 1.1*g {
		t.Fatalf("the setup should show the modulus bias: one window %.3f, incoherent %.3f", single, incoherent)
	}
	if math.Abs(coherent-g) > 0.05*g || float64(covered)/trials < 0.9 {
		t.Fatalf("coherent mean %.3f, coverage %.3f: want %v ± 5%%, ≥ 0.9", coherent, float64(covered)/trials, g)
	}
}
