package stitcheval

import (
	"testing"
	"time"
)

// Every duration of the application scaled by a thousand (millisecond hops to
// second-long ones) changes nothing a stitcher should see: the links written
// stay within a few points, at the same precision.
func TestTimeScaleInvariance(t *testing.T) {
	score := func(hop time.Duration, mode StripMode) Scores {
		p := DefaultParams()
		p.HopDelay, p.Skew = hop, 0
		return stitchScores(t, SyntheticScenario("timescale", "s", 4, p, mode), 1)
	}
	for _, mode := range []StripMode{StripAll, StripCrossProcess} {
		ms, s := score(time.Millisecond, mode), score(time.Second, mode)
		t.Logf("%v: 1 ms hops %.3f / %.4f, 1 s hops %.3f / %.4f (accuracy / precision)", mode, ms.Accuracy, ms.Precision, s.Accuracy, s.Precision)
		if s.Accuracy < ms.Accuracy-0.04 || s.Precision < 0.98 {
			t.Errorf("%v, 1 s hops: %.3f right, %.4f precise; want ≥ %.3f (1 ms hops less 4 points) and ≥ 0.98", mode, s.Accuracy, s.Precision, ms.Accuracy-0.04)
		}
	}
}
