package stats

import (
	"math"
	"math/rand/v2"
	"reflect"
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
	for _, bad := range []LogBins{
		{Base: 1, Min: 1, Count: 10}, {Base: 1.05, Min: 0, Count: 10}, {Base: 1.05, Min: 1, Count: 1}, {Base: math.NaN(), Min: 1, Count: 10},
		{Base: 1.05, Min: 1, Count: 10, Below: -1}, {Base: 1.05, Min: 1, Count: 10, Below: 9},
	} {
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

// microBins is DefaultLogBins extended down to 1.05^−142 ms ≈ 0.98 µs, the layout
// of the nesting scoreboard (in ms here).
var microBins = LogBins{Base: 1.05, Min: 1, Count: 482, Below: 142}

// Bins below Min must not move any edge at or above it: every value from Min up
// lands in its old bin shifted by Below, exact edges and rounding included.
func TestLogBinsBelowKeepsEdgesAboveMin(t *testing.T) {
	old := DefaultLogBins
	check := func(v float64) {
		if got, want := microBins.Index(v), old.Index(v)+microBins.Below; got != want {
			t.Fatalf("Index(%v) = %d, want %d (old %d + %d)", v, got, want, old.Index(v), microBins.Below)
		}
	}
	for i := 1; i < old.Count; i++ {
		e := old.Lower(i)
		for _, v := range []float64{e, math.Nextafter(e, 0), math.Nextafter(e, math.Inf(1)), e * (1 - 1e-9), e * (1 + 1e-9)} {
			check(v)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200_000 {
		check(math.Exp(rng.Float64() * 17)) // 1 ms to 6.7 h
	}
	check(math.Inf(1))
	for i := microBins.Below + 1; i < microBins.Count-1; i++ {
		if microBins.Lower(i) != old.Lower(i-microBins.Below) || microBins.Upper(i) != old.Upper(i-microBins.Below) {
			t.Fatalf("bin %d: edges [%v, %v), old [%v, %v)", i, microBins.Lower(i), microBins.Upper(i),
				old.Lower(i-microBins.Below), old.Upper(i-microBins.Below))
		}
	}
}

// Under Min the extra bins are log bins of the same ratio, down to the floor
// Min·Base^−Below; only what is under the floor shares bin 0.
func TestLogBinsBelowMin(t *testing.T) {
	b := microBins
	floor := b.Upper(0)
	if us := floor * 1000; us < 0.97 || us > 1 {
		t.Fatalf("floor %.4f µs, want 0.98 µs", us)
	}
	for _, v := range []float64{0, -1, math.NaN(), floor * 0.999} {
		if got := b.Index(v); got != 0 {
			t.Errorf("Index(%v) = %d, want 0", v, got)
		}
	}
	if got := b.Index(math.Nextafter(1, 0)); got != b.Below {
		t.Errorf("just under Min: bin %d, want %d", got, b.Below)
	}
	if got := b.Index(1); got != b.Below+1 {
		t.Errorf("Min: bin %d, want %d", got, b.Below+1)
	}
	for i := 1; i <= b.Below; i++ {
		lo, hi := b.Lower(i), b.Upper(i)
		if mid := math.Sqrt(lo * hi); b.Index(mid) != i {
			t.Fatalf("Index(mid of bin %d, %v) = %d", i, mid, b.Index(mid))
		}
		if r := hi / lo; math.Abs(r-b.Base) > 1e-9 {
			t.Fatalf("bin %d spans a ratio of %v, want %v", i, r, b.Base)
		}
	}
	last := -1
	for v := floor / 2; v < 2; v *= 1.001 {
		i := b.Index(v)
		if i < last {
			t.Fatalf("Index not monotone at %v: %d after %d", v, i, last)
		}
		last = i
	}
}

// The sub-millisecond case of the issue: delays of 50, 200 and 700 µs, each with a
// few per cent of jitter, are read back within 5% (in ms, as the pattern and span
// histograms keep them). With the paper's floor they would all read 0.5 ms.
func TestSubMillisecondQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var vals []float64
	for _, centre := range []float64{0.05, 0.2, 0.7} {
		for range 1000 {
			vals = append(vals, centre*(1+0.03*rng.NormFloat64()))
		}
	}
	for _, layout := range []LogBins{microBins, {Base: 1.05, Min: 0.001, Count: 500}} {
		h := NewLogHistogram(layout)
		for _, v := range vals {
			h.Add(v)
		}
		sorted := slices.Sorted(slices.Values(vals))
		for _, q := range []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.99} {
			exact := sorted[int(math.Ceil(q*float64(len(sorted))))-1]
			if got := h.Quantile(q); math.Abs(got-exact)/exact > 0.05 {
				t.Errorf("%+v: q%.2f = %.4f ms, exact %.4f ms: more than 5%% off", layout, q, got, exact)
			}
		}
	}
	collapsed := NewLogHistogram(DefaultLogBins)
	for _, v := range vals {
		collapsed.Add(v)
	}
	if got := collapsed.Quantile(0.5); got != 0.5 {
		t.Errorf("the paper's layout reads the median as %v ms; this test expects the collapse to 0.5 ms", got)
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

// LogIndexer must give Index's bin for every value: across each layout's range,
// at every edge and a thousand floats either side of it (where Index's rounding
// decides), at integers near edges (nanosecond delays), and at the extremes.
func TestLogIndexerMatchesIndex(t *testing.T) {
	layouts := []LogBins{
		DefaultLogBins, microBins,
		{Base: 1.05, Min: 0.001, Count: 500},           // the pattern histograms, in ms
		{Base: 1.05, Min: 1e6, Count: 482, Below: 142}, // the nesting scoreboard, in ns
		{Base: 1.01, Min: 1, Count: 1500},
		{Base: 2, Min: 3, Count: 10, Below: 3},
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, l := range layouts {
		x := NewLogIndexer(l)
		check := func(v float64) {
			if got, want := x.Index(v), l.Index(v); got != want {
				t.Fatalf("%+v: Index(%v) = %d, LogIndexer %d", l, v, want, got)
			}
		}
		for _, v := range []float64{0, -1, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64,
			math.SmallestNonzeroFloat64, 1e-300, 1e300} {
			check(v)
		}
		for i := 1; i < l.Count; i++ {
			e := l.Lower(i)
			for _, v := range []float64{e, math.Floor(e), math.Ceil(e), math.Floor(e) - 1, math.Ceil(e) + 1} {
				check(v)
			}
			up, down := e, e
			for range 1000 {
				up, down = math.Nextafter(up, math.Inf(1)), math.Nextafter(down, 0)
				check(up)
				check(down)
			}
			for _, r := range []float64{1e-10, 1e-9, 2e-9, 1e-8, 1e-6} {
				check(e * (1 + r))
				check(e * (1 - r))
			}
		}
		lo, hi := math.Log(l.Lower(1))-2, math.Log(l.Lower(l.Count-1))+2
		for range 300_000 {
			v := math.Exp(lo + rng.Float64()*(hi-lo))
			check(v)
			check(math.Round(v))
		}
	}
}

func TestIndexedHistogramIsTheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	plain, indexed := NewLogHistogram(microBins), NewIndexedLogHistogram(NewLogIndexer(microBins))
	for range 100_000 {
		v := math.Exp(rng.NormFloat64() * 3)
		plain.Add(v)
		indexed.Add(v)
	}
	indexed.idx = nil
	if !reflect.DeepEqual(plain, indexed) {
		t.Fatal("an indexed histogram differs from a plain one")
	}
	if err := plain.Merge(NewIndexedLogHistogram(NewLogIndexer(microBins))); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLogBinsIndex(b *testing.B) {
	x := NewLogIndexer(microBins)
	vals := make([]float64, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range vals {
		vals[i] = math.Exp(rng.NormFloat64() * 3)
	}
	for _, c := range []struct {
		name  string
		index func(float64) int
	}{{"Index", microBins.Index}, {"LogIndexer", x.Index}} {
		b.Run(c.name, func(b *testing.B) {
			s := 0
			for i := 0; b.Loop(); i++ {
				s += c.index(vals[i&4095])
			}
			_ = s
		})
	}
}

// Add's extremes follow math.Min and math.Max, NaN and signed zeros included.
func TestExtremesLikeMathMinMax(t *testing.T) {
	for _, vals := range [][]float64{{0, math.Copysign(0, -1)}, {math.Copysign(0, -1), 0}, {1, math.NaN(), 2}, {math.Inf(-1), 3}} {
		h := NewLogHistogram(DefaultLogBins)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range vals {
			h.Add(v)
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		if math.Float64bits(h.min) != math.Float64bits(lo) && !(math.IsNaN(h.min) && math.IsNaN(lo)) ||
			math.Float64bits(h.max) != math.Float64bits(hi) && !(math.IsNaN(h.max) && math.IsNaN(hi)) {
			t.Errorf("%v: min %v max %v, math says %v %v", vals, h.min, h.max, lo, hi)
		}
	}
}
