package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLogBinsIndexEdges(t *testing.T) {
	b := DefaultLogBins
	cases := []struct {
		v    float64
		want int
	}{
		{-3, 0}, {0, 0}, {0.999, 0}, {1, 1}, {1.0499, 1}, {1.0501, 2}, {math.NaN(), 0}, {math.Inf(1), 339}, {1e12, 339},
	}
	for _, c := range cases {
		if got := b.Index(c.v); got != c.want {
			t.Errorf("Index(%v) = %d, want %d", c.v, got, c.want)
		}
	}
	for i := 1; i < b.Count-1; i++ {
		mid := math.Sqrt(b.Lower(i) * b.Upper(i))
		if got := b.Index(mid); got != i {
			t.Fatalf("Index(mid of bin %d) = %d", i, got)
		}
	}
	// The paper's claim: 340 bins cover 1 ms to 2 hours.
	if hours := b.Lower(b.Count-1) / 3.6e6; hours < 2 {
		t.Fatalf("last bin starts at %.2f h, want ≥ 2 h", hours)
	}
}

func TestLogBinsValidate(t *testing.T) {
	for _, bad := range []LogBins{{1, 1, 10}, {1.05, 0, 10}, {1.05, 1, 1}, {math.NaN(), 1, 10}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want error", bad)
		}
	}
	if err := DefaultLogBins.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestQuantilesWithinBinError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := NewLogHistogram(DefaultLogBins)
	vals := make([]float64, 100000)
	for i := range vals {
		vals[i] = math.Exp(rng.NormFloat64()*0.8 + 4) // lognormal around 55 ms
		h.Add(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99} {
		exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.Quantile(q)
		if rel := math.Abs(got-exact) / exact; rel > 0.025 {
			t.Errorf("q%.2f = %.3f, exact %.3f, relative error %.4f > 0.025", q, got, exact, rel)
		}
	}
	if h.Quantile(0) != vals[0] || h.Quantile(1) != vals[len(vals)-1] {
		t.Errorf("extreme quantiles not clamped to exact min/max")
	}
}

func TestMergeEqualsSingle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all, a, b := NewLogHistogram(DefaultLogBins), NewLogHistogram(DefaultLogBins), NewLogHistogram(DefaultLogBins)
	for i := 0; i < 5000; i++ {
		v := rng.Float64() * 1000
		all.Add(v)
		if i%3 == 0 {
			a.Add(v)
		} else {
			b.Add(v)
		}
	}
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if a.Count() != all.Count() || math.Abs(a.Sum()-all.Sum()) > 1e-6 || a.Min() != all.Min() || a.Max() != all.Max() {
		t.Fatalf("merged summary differs")
	}
	for _, q := range []float64{0.1, 0.5, 0.99} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Fatalf("merged q%v = %v, single %v", q, a.Quantile(q), all.Quantile(q))
		}
	}
	other := NewLogHistogram(LogBins{Base: 1.1, Min: 1, Count: 10})
	if a.Merge(other) == nil {
		t.Fatal("merging different layouts succeeded")
	}
}

func TestEmptyHistogram(t *testing.T) {
	h := NewLogHistogram(DefaultLogBins)
	if h.Mean() != 0 || h.Quantile(0.5) != 0 || h.Min() != 0 || h.Max() != 0 {
		t.Fatal("empty histogram should report zeros")
	}
}

func BenchmarkLogHistogramAdd(b *testing.B) {
	h := NewLogHistogram(DefaultLogBins)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Add(float64(i%500) + 0.5)
	}
}
