package stitcheval

import "testing"

// Thread ids tell concurrent requests apart in a thread-per-request server,
// and must not mislead in a reactive one, where a child starts on whichever
// event-loop thread is free.
func TestThreadIDsAtOverlap8(t *testing.T) {
	score := func(threads, loop float64) Scores {
		p := DefaultParams()
		p.Concurrency, p.ThreadIDs, p.EventLoop = 8, threads, loop
		return stitchScores(t, SyntheticScenario("threads", "s", 8, p, StripAll), 1)
	}
	none, perRequest, reactive := score(0, 0), score(1, 0), score(1, 1)
	t.Logf("no thread ids %.3f / %.4f; thread per request %.3f / %.4f; reactive %.3f / %.4f (accuracy / precision)",
		none.Accuracy, none.Precision, perRequest.Accuracy, perRequest.Precision, reactive.Accuracy, reactive.Precision)
	if perRequest.Accuracy < max(0.9, none.Accuracy+0.08) || perRequest.Precision < 0.985 {
		t.Errorf("thread per request: %.3f right, %.4f precise; want ≥ %.3f (0.9, and 8 points above no thread ids) and ≥ 0.985",
			perRequest.Accuracy, perRequest.Precision, max(0.9, none.Accuracy+0.08))
	}
	if reactive.Accuracy < none.Accuracy-0.04 || reactive.Precision < 0.98 {
		t.Errorf("reactive: %.3f right, %.4f precise; want ≥ %.3f (no thread ids less 4 points) and ≥ 0.98", reactive.Accuracy, reactive.Precision, none.Accuracy-0.04)
	}
}

// Reactive services start spans on any of a few event-loop threads, so a
// child's thread says little of whether async work or its handler called
// it. The async cap (even odds moved by what the threads say) used to be
// skipped whenever the two thread factors differed at all, and such children
// were written at confidence 1. Half of the operations async, every service
// reactive, overlap 8, every id stripped, 3 seeds: precision 97.7% before.
func TestReactiveThreadsDoNotMakeAsyncSure(t *testing.T) {
	p := DefaultParams()
	p.Concurrency, p.Async, p.ThreadIDs, p.EventLoop = 8, 0.5, 1, 1
	m := stitchScores(t, SyntheticScenario("reactive", "s", 8, p, StripAll), 1, 2, 3)
	t.Logf("reactive, half async, overlap 8, every id stripped: %.3f right, %.4f precise", m.Accuracy, m.Precision)
	if m.Precision < 0.98 {
		t.Errorf("precision %.4f, want ≥ 0.98", m.Precision)
	}
}
