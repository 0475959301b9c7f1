package load

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

type txnAcc struct {
	count, errors int64
	latSum        time.Duration
}

// recorder accumulates per-request outcomes for the totals and for the
// progress interval.
type recorder struct {
	mu       sync.Mutex
	txns     map[string]*txnAcc
	classes  map[string]int64
	requests int64
	errors   int64

	ivStart    time.Time
	ivRequests int64
	ivLat      []time.Duration
}

func newRecorder(names []string, start time.Time) *recorder {
	rec := &recorder{txns: map[string]*txnAcc{}, classes: map[string]int64{}, ivStart: start}
	for _, n := range names {
		rec.txns[n] = &txnAcc{}
	}
	return rec
}

func (rec *recorder) record(name, class string, lat time.Duration, failed bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	a := rec.txns[name]
	a.count++
	a.latSum += lat
	rec.requests++
	rec.classes[class]++
	if failed {
		a.errors++
		rec.errors++
	}
	rec.ivRequests++
	rec.ivLat = append(rec.ivLat, lat)
}

// interval returns the interval's request count, length and median latency
// and starts a new interval at now.
func (rec *recorder) interval(now time.Time) (n int64, d time.Duration, p50 time.Duration, total, errs int64) {
	rec.mu.Lock()
	lat := rec.ivLat
	n, d, total, errs = rec.ivRequests, now.Sub(rec.ivStart), rec.requests, rec.errors
	rec.ivLat, rec.ivRequests, rec.ivStart = make([]time.Duration, 0, len(lat)), 0, now
	rec.mu.Unlock()
	if len(lat) > 0 {
		slices.Sort(lat)
		p50 = lat[len(lat)/2]
	}
	return n, d, p50, total, errs
}

func (rec *recorder) fill(st *Stats) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	st.Requests, st.Errors = rec.requests, rec.errors
	st.Classes = map[string]int64{}
	for c, n := range rec.classes {
		st.Classes[c] = n
	}
	st.Transactions = map[string]TxnStats{}
	for name, a := range rec.txns {
		t := TxnStats{Count: a.count, Errors: a.errors}
		if a.count > 0 {
			t.MeanLatencyMs = float64(a.latSum) / float64(a.count) / float64(time.Millisecond)
		}
		st.Transactions[name] = t
	}
}

func (r *runner) progressLoop(done <-chan struct{}) {
	tick := time.NewTicker(r.opt.ProgressEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			r.progressLine(now, false)
		}
	}
}

// progressLine writes one line: elapsed time, total requests, the rate and
// median latency of the interval since the previous line, total errors and
// the users (closed) or sessions (open) active now.
func (r *runner) progressLine(now time.Time, final bool) {
	n, d, p50, total, errs := r.rec.interval(now)
	rate := 0.0
	if d > 0 {
		rate = float64(n) / d.Seconds()
	}
	p := "-"
	if n > 0 {
		p = fmt.Sprintf("%.1fms", float64(p50)/float64(time.Millisecond))
	}
	tag := "load"
	if final {
		tag = "load done"
	}
	active := fmt.Sprintf("users=%d", r.active.Load())
	if r.opt.Mode == "open" {
		active = fmt.Sprintf("sessions=%d refused=%d", r.active.Load(), r.refused.Load())
	}
	fmt.Fprintf(r.opt.Progress, "%s t=%.1fs requests=%d rate=%.1f/s errors=%d %s p50=%s\n",
		tag, now.Sub(r.start).Seconds(), total, rate, errs, active, p)
}
