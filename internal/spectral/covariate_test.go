package spectral

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat"
)

// stealLike is a slowly wandering fraction in [0, 0.3]: an AR(1) process
// with a correlation time of about 20 bins, like the hypervisor steal
// measured on the testbed host.
func stealLike(r *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	v := 0.1
	for i := range x {
		v = 0.1 + 0.95*(v-0.1) + 0.02*r.NormFloat64()
		x[i] = math.Min(0.3, math.Max(0, v))
	}
	return x
}

// A square wave in response times that also follow a host covariate: the
// adjusted estimate stays unbiased and its spread falls by the share of the
// noise the covariate explains.
func TestAdjustRemovesSharedNoise(t *testing.T) {
	const (
		n, kd  = 128, 12
		wave   = 1.0  // ms the wave moves the response time
		beta   = 30.0 // ms per unit of steal
		whiteS = 0.6  // ms of per-bin noise the covariate does not explain
	)
	var raw, adjusted, oracle []float64
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		c := stealLike(r, n)
		w := square(n, kd, wave, r.Float64()*float64(n)/kd)
		y := make([]float64, n)
		for i := range y {
			y[i] = 10 + w[i] + beta*c[i] + whiteS*r.NormFloat64()
		}
		in := EstimateInput{Values: y, Kd: kd, Delta: 1}
		e, err := EstimateGradient(in)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, e.Gradient)
		ya, adj, err := Adjust(y, [][]float64{c}, kd)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(adj.Betas[0]-beta) > 0.25*beta {
			t.Fatalf("seed %d: β %.1f, true %.0f", seed, adj.Betas[0], beta)
		}
		if !(adj.NoiseAfterMs < adj.NoiseBeforeMs) {
			t.Fatalf("seed %d: noise %.3f → %.3f", seed, adj.NoiseBeforeMs, adj.NoiseAfterMs)
		}
		in.Values = ya
		e, err = EstimateGradient(in)
		if err != nil {
			t.Fatal(err)
		}
		adjusted = append(adjusted, e.Gradient)
		for i := range y { // the true β: the best any adjustment can do
			y[i] -= beta * c[i]
		}
		in.Values = y
		e, _ = EstimateGradient(in)
		oracle = append(oracle, e.Gradient)
	}
	mr, sr := stat.MeanStdDev(raw, nil)
	ma, sa := stat.MeanStdDev(adjusted, nil)
	mo, so := stat.MeanStdDev(oracle, nil)
	t.Logf("raw %.3f ± %.3f, adjusted %.3f ± %.3f, with the true β %.3f ± %.3f (true 1)", mr, sr, ma, sa, mo, so)
	if math.Abs(ma-1) > 0.03 {
		t.Errorf("adjusted mean %.3f, want 1 ± 0.03", ma)
	}
	if sa > 0.6*sr || sa > 1.1*so {
		t.Errorf("adjusted spread %.3f, want ≤ 0.6 × the raw %.3f and ≤ 1.1 × the true β's %.3f", sa, sr, so)
	}
}

// A covariate that only the wave moves has no power where the fit looks,
// so the adjustment cannot take the wave away.
func TestAdjustCannotRemoveTheWave(t *testing.T) {
	const n, kd = 128, 8
	w := square(n, kd, 2, 0)
	y := make([]float64, n)
	for i := range y {
		y[i] = 20 + w[i]
	}
	out, _, err := Adjust(y, [][]float64{square(n, kd, 1, 0)}, kd)
	if !errors.Is(err, ErrNoCovariateVariation) {
		t.Fatalf("err %v, want ErrNoCovariateVariation", err)
	}
	for i := range y {
		if out[i] != y[i] {
			t.Fatalf("bin %d changed: %v → %v", i, y[i], out[i])
		}
	}
	if _, _, err := Adjust(y, [][]float64{make([]float64, 64)}, kd); err == nil {
		t.Error("a covariate of the wrong length must be refused")
	}
}

func TestCovariateBins(t *testing.T) {
	c := NewCovariateBins(100, 2, 4) // [100,102) … [106,108)
	c.Add(99, 101, 0.5)              // half of bin 0
	c.Add(101, 105, 0.1)             // rest of 0, all of 1, half of 2
	c.Add(107.8, 110, 1)             // a tenth of bin 3: too little, filled
	c.Add(103, 103, 9)               // empty interval, ignored
	c.Add(103, 104, math.NaN())      // ignored
	v, err := c.Series()
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.3, 0.1, 0.1, 0.1}
	for i := range want {
		if math.Abs(v[i]-want[i]) > 1e-12 {
			t.Fatalf("series %v, want %v", v, want)
		}
	}
	if _, err := NewCovariateBins(0, 1, 4).Series(); err == nil {
		t.Error("an uncovered series must be refused")
	}
}

func TestAdjustChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 64
	c := stealLike(r, 3*n+5)
	x := make([]float64, len(c))
	for i := range x {
		x[i] = 5 + 20*c[i] + 0.1*r.NormFloat64()
	}
	out, adjs, err := AdjustChunks(x, [][]float64{c}, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(adjs) != 3 {
		t.Fatalf("%d chunks adjusted, want 3", len(adjs))
	}
	for i, a := range adjs {
		if a.NoiseAfterMs > a.NoiseBeforeMs/3 {
			t.Errorf("chunk %d: noise %.3f → %.3f", i, a.NoiseBeforeMs, a.NoiseAfterMs)
		}
	}
	for i := 3 * n; i < len(x); i++ {
		if out[i] != x[i] {
			t.Fatal("the partial tail must be left alone")
		}
	}
}
