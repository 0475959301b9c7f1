package workfactor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// rebasePrevious rewrites the previous regime's sums exactly as if its
// equations had been measured with the new work factors: on noise-free data
// the rewritten normal equations solve to the new work factors, each
// source's intercept sums agree with them, and the block's YᵀY is that of
// the rewritten equations.
func TestRebasePreviousIsExact(t *testing.T) {
	e, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]float64{"a": 10, "b": 3, "c": 25}
	next := map[string]float64{"a": 20, "b": 3, "c": 15}
	serves := map[string][]string{"m1": {"a", "b"}, "m2": {"b", "c"}, "m3": {"a", "b", "c"}}
	rng := rand.New(rand.NewPCG(3, 9))
	for p := int64(1); p <= 60; p++ {
		var obs []Observation
		for _, m := range []string{"m1", "m2", "m3"} {
			rates, y := map[string]float64{}, 0.0
			for _, f := range serves[m] {
				rates[f] = 5 + 10*rng.Float64()
				y += old[f] * rates[f]
			}
			obs = append(obs, Observation{Machine: m, CapacityMHz: 4000, Utilization: y / 4000, Rates: rates})
		}
		if _, err := e.AddPeriod(p, obs); err != nil {
			t.Fatal(err)
		}
	}
	bs := e.blocks()
	if len(bs) != 1 {
		t.Fatalf("%d blocks, want 1", len(bs))
	}
	b := bs[0]
	e.keepPrevious(b)
	st := &e.st
	for i, f := range st.Flows {
		st.Smooth[i].Delta, st.Smooth[i].DeltaOK = next[f]-old[f], i > 0
	}
	if e.rebasePrevious(b) {
		t.Fatal("rebased without every flow's increment")
	}
	st.Smooth[0].DeltaOK = true
	if !e.rebasePrevious(b) {
		t.Fatal("not rebased")
	}
	k := len(st.Flows)
	alpha := make([]float64, k)
	for i, f := range st.Flows {
		alpha[i] = next[f]
	}
	// PrevC·α' = PrevD', row by row.
	for i := range st.Flows {
		got := 0.0
		for j := range st.Flows {
			got += st.PrevC[i*k+j] * alpha[j]
		}
		if math.Abs(got-st.PrevD[i]) > 1e-9*math.Abs(st.PrevD[i]) {
			t.Errorf("flow %s: PrevC·α' = %v, PrevD = %v", st.Flows[i], got, st.PrevD[i])
		}
	}
	yy, quad := 0.0, 0.0
	for _, si := range b.sources {
		src := st.Sources[si]
		by := 0.0
		for i, x := range src.PrevBX {
			by += x * alpha[i]
		}
		if math.Abs(by-src.PrevBY) > 1e-9*math.Abs(src.PrevBY) {
			t.Errorf("source %s: Σv²y' = %v, want %v", src.Key, src.PrevBY, by)
		}
		yy += src.PrevYY
	}
	for i := range alpha {
		for j := range alpha {
			quad += alpha[i] * st.PrevC[i*k+j] * alpha[j]
		}
	}
	if math.Abs(yy-quad) > 1e-9*quad {
		t.Errorf("Σv²y'² = %v, want α'ᵀCα' = %v", yy, quad)
	}
}
