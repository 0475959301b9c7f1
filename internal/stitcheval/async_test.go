package stitcheval

import "testing"

// Half of the operations fire work they do not wait for, through a broker or
// on a thread of their own, every id stripped. Whether that work makes calls
// of its own or not, the parents written stay right: a publish is never given
// the span that ended just before it, nor the handler's next call the async
// span that encloses it.
func TestAsyncWorkStaysPrecise(t *testing.T) {
	for _, work := range []float64{0, 1} {
		p := DefaultParams()
		p.Async, p.AsyncWork, p.QueueWorkers = 0.5, work, 4
		sc := stitchScores(t, SyntheticScenario("async", "s", 4, p, StripAll), 1)
		pub := sc.ByKind["producer"]
		t.Logf("async work making calls %.0f%%: %.3f / %.4f; publish %.3f / %.4f (accuracy / precision)", 100*work, sc.Accuracy, sc.Precision, pub.Accuracy, pub.Precision)
		if sc.Precision < 0.985 || pub.Precision < 0.95 {
			t.Errorf("async work making calls %.0f%%: precision %.4f, publish %.4f; want ≥ 0.985 and ≥ 0.95", 100*work, sc.Precision, pub.Precision)
		}
	}
}

// Behind a broker, queue waits spread a consumer's delays and few consumers
// are sure; a consumer that names its message (Kafka's partition and offset)
// takes the producer that names the same one.
func TestMessageIdentityLinksConsumers(t *testing.T) {
	for _, ids := range []float64{0, 1} {
		p := DefaultParams()
		p.Async, p.QueueWorkers, p.MessageIDs = 0.5, 4, ids
		c := stitchScores(t, SyntheticScenario("broker", "s", 4, p, StripCrossProcess), 1).ByKind["consumer"]
		t.Logf("message ids on %.0f%% of the topics: consumers %.3f / %.4f (accuracy / precision), %d links", 100*ids, c.Accuracy, c.Precision, c.Links)
		if ids == 1 && (c.Accuracy < 0.99 || c.Precision < 1) {
			t.Errorf("with message ids: consumers %.3f right, %.4f precise; want ≥ 0.99 and 1", c.Accuracy, c.Precision)
		}
	}
}

// A REST call's path names its resource on both ends (url.full on the
// client, url.path on the server): with the cross-process hops broken at
// eight overlapping requests, a server takes the caller that named the same
// target, and the links are written, right.
func TestRequestTargetsNarrowCallers(t *testing.T) {
	var without Scores
	for _, share := range []float64{0, 1} {
		p := DefaultParams()
		p.Concurrency, p.TargetIDs = 8, share
		sc := stitchScores(t, SyntheticScenario("targets", "s", 8, p, StripCrossProcess), 1)
		t.Logf("identifiers in %.0f%% of the routes: %.4f right, %.4f precise, %d links", 100*share, sc.Accuracy, sc.Precision, sc.Links)
		if share == 0 {
			without = sc
			continue
		}
		if sc.Accuracy < 0.95 || sc.Precision < 0.995 || sc.Accuracy < without.Accuracy+0.04 {
			t.Errorf("with identifiers: %.4f right (%.4f without), %.4f precise; want ≥ 0.95, 4 points more, and ≥ 0.995", sc.Accuracy, without.Accuracy, sc.Precision)
		}
	}
}
