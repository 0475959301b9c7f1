package stitcheval

import "testing"

// Services whose spans are all INTERNAL (a manual tracer's default) still have
// callers in other processes: their HTTP and legacy RPC spans say which side
// of a call they are, and the parents written must stay right.
func TestUnkindedServices(t *testing.T) {
	score := func(unkinded float64) Scores {
		p := DefaultParams()
		p.Unkinded = unkinded
		return stitchScores(t, SyntheticScenario("kinds", "s", 4, p, StripCrossProcess), 1)
	}
	kinded, unkinded := score(0), score(0.5)
	t.Logf("hops broken, overlap 4: every span kinded %.3f / %.4f; half of the services unkinded %.3f / %.4f (accuracy / precision)",
		kinded.Accuracy, kinded.Precision, unkinded.Accuracy, unkinded.Precision)
	if unkinded.Precision < 0.98 || unkinded.Accuracy < kinded.Accuracy-0.15 {
		t.Errorf("half unkinded: %.3f right, %.4f precise; want ≥ %.3f and ≥ 0.98", unkinded.Accuracy, unkinded.Precision, kinded.Accuracy-0.15)
	}
}

// A span without a kind that records a current-convention RPC names
// server.address on either side, so it may be a server, whose parent is in
// another process: its local parents are not written. Seeds 4 and 5 call
// such services most; another request's span was written under them, surely.
func TestUnsidedSpansStayUnwritten(t *testing.T) {
	for _, seed := range []uint64{4, 5} {
		p := DefaultParams()
		p.Unkinded = 1
		sc := stitchScores(t, SyntheticScenario("kinds", "s", 4, p, StripCrossProcess), seed)
		t.Logf("seed %d, every service unkinded, hops broken: %.3f right, %.4f precise", seed, sc.Accuracy, sc.Precision)
		if sc.Precision < 0.99 {
			t.Errorf("seed %d: precision %.4f, want ≥ 0.99", seed, sc.Precision)
		}
	}
}
