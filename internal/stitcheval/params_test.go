package stitcheval

import "testing"

// Every random draw is an application the generator accepts, and a draw is
// the same for its index.
func TestRandomParamsValid(t *testing.T) {
	for i := range 200 {
		d := RandomParams(i)
		if err := d.Params.Validate(); err != nil {
			t.Fatalf("draw %d: %v", i, err)
		}
		if d.Params.Concurrency != d.Concurrency || d.String() != RandomParams(i).String() {
			t.Fatalf("draw %d is not deterministic: %s", i, d)
		}
	}
}

// Draw 20 has two concurrent parents that each start a batch of parallel
// calls of one key at once (eight requests overlapping, up to six calls per
// operation). Whole batches were exchanged between the parents at confidence
// 0.99, which no exchange of one child for one reveals: 95.5% precision at
// first, 96.7% with the exchange of whole batches (batchRatio), 98.7% with a
// batch's move to the other parent as an alternative of its own
// (cohortRatio).
func TestBatchesExchanged(t *testing.T) {
	d := RandomParams(20)
	sc := stitchScores(t, SyntheticScenario("draw", "s", d.Concurrency, d.Params, StripAll), 1)
	t.Logf("draw 20, every id stripped: %.3f right, %.4f precise", sc.Accuracy, sc.Precision)
	if sc.Precision < 0.98 {
		t.Errorf("precision %.4f, want ≥ 0.98", sc.Precision)
	}
}

// Draw 4 has clocks up to ±10 ms apart, hops of 500 µs, and caller → callee
// pairs with few calls. Pairs measured one by one took spurious peaks, and the
// pairs whose offset no sample showed kept their true callers out of the skew
// window, so other requests' calls were written instead (95.4% precision,
// 71.8% right, hops broken). One clock per process, fitted to the pairs
// (consistentOffsets), corrects the first and gives the second.
func TestClocksOnePerProcess(t *testing.T) {
	d := RandomParams(4)
	sc := stitchScores(t, SyntheticScenario("draw", "s", d.Concurrency, d.Params, StripCrossProcess), 1)
	t.Logf("draw 4, hops broken: %.3f right, %.4f precise", sc.Accuracy, sc.Precision)
	if sc.Precision < 0.98 || sc.Accuracy < 0.8 {
		t.Errorf("%.3f right at %.4f precision, want ≥ 0.8 at ≥ 0.98", sc.Accuracy, sc.Precision)
	}
}
