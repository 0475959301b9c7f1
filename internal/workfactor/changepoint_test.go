package workfactor

import (
	"math/rand/v2"
	"testing"
)

// trailOf builds a source's trail of standardized residuals z (unit scale)
// over periods 1…len(z), one flow at rate 1.
func trailOf(z []float64) []TrailRow {
	rows := make([]TrailRow, len(z))
	for i, v := range z {
		rows[i] = TrailRow{HeldRow: HeldRow{Period: int64(i + 1), Y: 1, V: 1, Flows: []string{"a"}, Rates: []float64{1}, Resid: v, Scale: 1}, Weight: 1}
	}
	return rows
}

// The mean-shift change point finds a shift of 0.8σ on one of three sources
// 30 periods before the alarm (as a minor flow's release, found late) within
// 3 periods in at least half of the runs (24 of 40 today).
func TestMeanShiftChangePoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, change = 200, 171
	near := 0
	for run := 0; run < 40; run++ {
		e := &Estimator{cfg: DefaultConfig(), flowIdx: map[string]int{"a": 0}}
		e.st.Flows = []string{"a"}
		b := &block{flows: []int{0}}
		for s := 0; s < 3; s++ {
			z := make([]float64, n)
			for i := range z {
				z[i] = rng.NormFloat64()
				if s == 0 && i+1 >= change {
					z[i] += 0.8
				}
			}
			e.st.Sources = append(e.st.Sources, SourceState{Trail: trailOf(z)})
			b.sources = append(b.sources, s)
		}
		cp := e.meanShiftChangePoint(b)
		if cp == nil {
			continue
		}
		if d := cp.after + 1 - change; d >= -3 && d <= 3 {
			near++
		}
	}
	t.Logf("within 3 periods: %d of 40", near)
	if near < 20 {
		t.Errorf("change point within 3 periods in %d of 40 runs, want ≥ 20", near)
	}
}
