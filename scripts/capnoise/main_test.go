package main

import (
	"math"
	"testing"
)

// A response that follows a cut at once, and one that lags it by a time
// constant, fold into profiles that tell them apart.
func TestFoldStepsShowsALag(t *testing.T) {
	const half = 6.0 // seconds at each level
	quota := [][2]float64{{0, 1500}}
	for c := range 20 {
		t0 := float64(c) * 2 * half
		quota = append(quota, [2]float64{t0 + half, 1200}, [2]float64{t0 + 2*half, 1500})
	}
	response := func(lag float64) [][2]float64 {
		var reqs [][2]float64
		for ts := 0.05; ts < 40*half; ts += 0.05 {
			into := math.Mod(ts, 2*half) - half // seconds since the cut, < 0 before it
			ms := 30.0
			switch {
			case into >= 0 && lag == 0:
				ms += 15
			case into >= 0:
				ms += 15 * (1 - math.Exp(-into/lag))
			}
			reqs = append(reqs, [2]float64{ts, ms})
		}
		return reqs
	}
	cut := func(from, to float64) bool { return from == 1500 && to < from }

	prompt := foldSteps(response(0), quota, cut)
	if prompt.changes != 20 || prompt.folded != 20 || prompt.length != half {
		t.Fatalf("changes %d, folded %d, length %v: want 20, 20, 6 s", prompt.changes, prompt.folded, prompt.length)
	}
	for b, want := range map[int]float64{0: 30, 5: 30, 6: 45, 11: 45, 12: 30} {
		if got := prompt.profile[b]; math.Abs(got-want) > 0.01 {
			t.Errorf("prompt response, sixth %d: %.2f ms, want %.0f", b, got, want)
		}
	}
	lagging := foldSteps(response(1.5), quota, cut)
	if first, last := lagging.profile[6], lagging.profile[11]; first > 30+0.6*15 || last < 44 {
		t.Errorf("a 1.5 s lag folds to %.1f ms in the first sixth and %.1f in the last: want the first well short of 45", first, last)
	}
}
