package spectral

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkSpectrum128(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, 128)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	for b.Loop() {
		Spectrum(x)
	}
}

// BenchmarkTrainBins is the training phase over M·N = 9·128 bins of one
// transaction.
func BenchmarkTrainBins(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	cfg := DefaultTrainConfig()
	bins := NewBins(0, 1, cfg.Chunks*cfg.N)
	for i := 0; i < cfg.Chunks*cfg.N*10; i++ {
		bins.Add(float64(i)/10, 100+30*r.NormFloat64())
	}
	m := map[string]*Bins{"T": bins}
	for b.Loop() {
		if _, err := TrainBins(m, "T", BinSizing{K: 8, BinSeconds: 1}, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBinsAdd is the per-sample cost of building a series.
func BenchmarkBinsAdd(b *testing.B) {
	bins := NewBins(0, 1, 128)
	t := 0.0
	for b.Loop() {
		bins.Add(t, 100)
		t += 0.001
		if t >= 128 {
			t = 0
		}
	}
}

func BenchmarkEstimateGradient(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	x := square(128, 8, 30, 0.3)
	for i := range x {
		x[i] += 100 + 10*r.NormFloat64()
	}
	in := EstimateInput{Values: x, Kd: 8, BaselineSigma: 1, Chunks: 9, Delta: 30}
	for b.Loop() {
		EstimateGradient(in)
	}
}
