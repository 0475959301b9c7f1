package stitcheval

import (
	"testing"

	"github.com/tierscope/tierscope/internal/stitch"
)

// Services whose spans are all INTERNAL (a manual tracer's default) still have
// callers in other processes: their HTTP and legacy RPC spans say which side
// of a call they are, and the parents written must stay right.
func TestUnkindedServices(t *testing.T) {
	score := func(unkinded float64) Scores {
		p := DefaultParams()
		p.Unkinded = unkinded
		runs, err := RunOne(SyntheticScenario("kinds", "s", 4, p, StripCrossProcess), []Algorithm{{"stitch", Stitcher(stitch.DefaultOptions())}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return runs[0].Scores
	}
	kinded, unkinded := score(0), score(0.5)
	t.Logf("hops broken, overlap 4: every span kinded %.3f / %.4f; half of the services unkinded %.3f / %.4f (accuracy / precision)",
		kinded.Accuracy, kinded.Precision, unkinded.Accuracy, unkinded.Precision)
	if unkinded.Precision < 0.98 || unkinded.Accuracy < kinded.Accuracy-0.15 {
		t.Errorf("half unkinded: %.3f right, %.4f precise; want ≥ %.3f and ≥ 0.98", unkinded.Accuracy, unkinded.Precision, kinded.Accuracy-0.15)
	}
}
