package stitcheval

import (
	"testing"

	"github.com/tierscope/tierscope/internal/stitch"
)

// Half of the operations fire work they do not wait for, through a broker or
// on a thread of their own, every id stripped. Whether that work makes calls
// of its own or not, the parents written stay right: a publish is never given
// the span that ended just before it, nor the handler's next call the async
// span that encloses it.
func TestAsyncWorkStaysPrecise(t *testing.T) {
	for _, work := range []float64{0, 1} {
		p := DefaultParams()
		p.Async, p.AsyncWork, p.QueueWorkers = 0.5, work, 4
		runs, err := RunOne(SyntheticScenario("async", "s", 4, p, StripAll), []Algorithm{{"stitch", Stitcher(stitch.DefaultOptions())}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		sc := runs[0].Scores
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
		runs, err := RunOne(SyntheticScenario("broker", "s", 4, p, StripCrossProcess), []Algorithm{{"stitch", Stitcher(stitch.DefaultOptions())}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		c := runs[0].Scores.ByKind["consumer"]
		t.Logf("message ids on %.0f%% of the topics: consumers %.3f / %.4f (accuracy / precision), %d links", 100*ids, c.Accuracy, c.Precision, c.Links)
		if ids == 1 && (c.Accuracy < 0.99 || c.Precision < 1) {
			t.Errorf("with message ids: consumers %.3f right, %.4f precise; want ≥ 0.99 and 1", c.Accuracy, c.Precision)
		}
	}
}
