package stitcheval

import (
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/stitch"
)

// Clocks 10 ms apart, twice the skew window: the true callers lie outside the
// window, and without the offsets measured up to MaxSkew another request's
// call is written in their place.
func TestSkewBeyondTheWindow(t *testing.T) {
	score := func(maxSkew time.Duration) Scores {
		p := DefaultParams()
		p.Skew = 10 * time.Millisecond
		opt := stitch.DefaultOptions()
		opt.Config.MaxSkew = maxSkew
		runs, err := RunOne(SyntheticScenario("skew", "s", 4, p, StripCrossProcess), []Algorithm{{"stitch", Stitcher(opt)}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return runs[0].Scores
	}
	within, measured := score(0), score(stitch.DefaultOptions().Config.MaxSkew)
	t.Logf("10 ms of skew, hops broken: window only %.3f / %.4f; offsets measured %.3f / %.4f (accuracy / precision)",
		within.Accuracy, within.Precision, measured.Accuracy, measured.Precision)
	if measured.Accuracy < within.Accuracy+0.2 || measured.Precision < 0.98 {
		t.Errorf("offsets measured: %.3f right, %.4f precise; want ≥ %.3f (20 points above the window alone) and ≥ 0.98",
			measured.Accuracy, measured.Precision, within.Accuracy+0.2)
	}
}
