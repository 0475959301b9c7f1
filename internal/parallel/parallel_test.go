package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// Every index is called once, and never more than GOMAXPROCS at a time.
func TestDo(t *testing.T) {
	const n = 200
	var calls [n]atomic.Int32
	var running, most atomic.Int32
	Do(n, func(i int) {
		r := running.Add(1)
		for {
			m := most.Load()
			if r <= m || most.CompareAndSwap(m, r) {
				break
			}
		}
		calls[i].Add(1)
		runtime.Gosched()
		running.Add(-1)
	})
	for i := range calls {
		if c := calls[i].Load(); c != 1 {
			t.Fatalf("index %d called %d times", i, c)
		}
	}
	if m, limit := most.Load(), int32(runtime.GOMAXPROCS(0)); m > limit {
		t.Fatalf("%d calls at once, want ≤ %d", m, limit)
	}
	Do(0, func(int) { t.Fatal("called with n = 0") })
}
