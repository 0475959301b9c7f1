package signature

import (
	"math"
	"testing"
)

func TestWeightedQuantile(t *testing.T) {
	one := []float64{1, 1, 1, 1, 1}
	if m := weightedQuantile([]float64{5, 1, 3, 2, 4}, one, 0.5); m != 3 {
		t.Fatalf("odd median %v", m)
	}
	if m := weightedQuantile([]float64{4, 1, 3, 2}, one[:4], 0.5); m != 2.5 {
		t.Fatalf("even median %v", m)
	}
	// A heavy bucket pulls the weighted median; a light outlier does not.
	if m := weightedQuantile([]float64{10, 10.2, 30}, []float64{1000, 900, 5}, 0.5); m < 10 || m > 10.2 {
		t.Fatalf("weighted median %v", m)
	}
	if m := weightedQuantile([]float64{1, 2}, []float64{0, 0}, 0.5); !math.IsNaN(m) {
		t.Fatalf("no weight: %v", m)
	}
	if q := weightedQuantile([]float64{1, 2, 3}, one[:3], 0); q != 1 {
		t.Fatalf("q0 %v", q)
	}
	if q := weightedQuantile([]float64{1, 2, 3}, one[:3], 1); q != 3 {
		t.Fatalf("q1 %v", q)
	}
}

func TestMannWhitneyExact(t *testing.T) {
	// Complete separation of 5 and 5: U = 25, p = 2/C(10,5) = 2/252.
	x := []float64{1, 2, 3, 4, 5}
	y := []float64{6, 7, 8, 9, 10}
	r := mannWhitney(x, y)
	if !r.Exact || r.U != 25 || math.Abs(r.P-2.0/252) > 1e-12 {
		t.Fatalf("%+v", r)
	}
	// Symmetric in direction.
	if r2 := mannWhitney(y, x); r2.U != 0 || math.Abs(r2.P-r.P) > 1e-12 {
		t.Fatalf("%+v", r2)
	}
	// Interleaved samples: no evidence.
	if r := mannWhitney([]float64{1, 3, 5, 7}, []float64{2, 4, 6, 8}); r.P < 0.5 {
		t.Fatalf("interleaved p = %v", r.P)
	}
	// The distribution sums to C(m+n, n).
	var s float64
	for _, c := range uDistribution(6, 4) {
		s += c
	}
	if s != 210 {
		t.Fatalf("C(10,4) = %v", s)
	}
}

func TestMannWhitneyNormalAgreesWithExact(t *testing.T) {
	// 21 against 21 is beyond the exact limit; a tiny tie forces the normal
	// path at 10 against 10 too. Both should be close to the exact answer.
	x := make([]float64, 10)
	y := make([]float64, 10)
	for i := range x {
		x[i] = float64(2 * i)
		y[i] = float64(2*i) + 5.5
	}
	exact := mannWhitney(x, y)
	y[9] = x[9] // one tie
	approx := mannWhitney(x, y)
	if !exact.Exact || approx.Exact {
		t.Fatal("paths")
	}
	if math.Abs(math.Log(exact.P/approx.P)) > 0.5 {
		t.Fatalf("exact p %v, normal p %v", exact.P, approx.P)
	}
}

func TestHodgesLehmann(t *testing.T) {
	x := []float64{10, 11, 12, 13, 14, 15, 16, 17}
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] + 3
	}
	est, lo, hi := hodgesLehmann(x, y, 0.05)
	if est != 3 || lo > 3 || hi < 3 || lo < -5 || hi > 11 {
		t.Fatalf("est %v ci [%v, %v]", est, lo, hi)
	}
}

func TestNormalQuantile(t *testing.T) {
	for _, c := range []struct{ p, z float64 }{{0.5, 0}, {0.975, 1.959963984540054}, {0.995, 2.5758293035489}, {0.01, -2.3263478740408408}} {
		if got := normalQuantile(c.p); math.Abs(got-c.z) > 1e-9 {
			t.Errorf("normalQuantile(%v) = %v, want %v", c.p, got, c.z)
		}
	}
}
