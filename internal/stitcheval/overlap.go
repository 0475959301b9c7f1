package stitcheval

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// visit is one request's stay in one process (see the package comment).
type visit struct {
	trace, proc int
	start, end  int64
}

// requests groups spans into requests (by traceKey) and returns each request's
// visits, its span indices, and its start and end, requests in order of start.
type requestSet struct {
	visits     []visit // absolute times
	spans      [][]int // span indices per request
	start, end []int64
}

func requestsOf(recs []spanRec) requestSet {
	byTrace := map[string]int{}
	var rs requestSet
	var keys []string
	for i, r := range recs {
		k := traceKey(r.span)
		t, ok := byTrace[k]
		if !ok {
			t = len(keys)
			byTrace[k] = t
			keys = append(keys, k)
			rs.spans = append(rs.spans, nil)
			rs.start = append(rs.start, math.MaxInt64)
			rs.end = append(rs.end, math.MinInt64)
		}
		rs.spans[t] = append(rs.spans[t], i)
		rs.start[t] = min(rs.start[t], int64(r.span.StartTimestamp()))
		rs.end[t] = max(rs.end[t], int64(r.span.EndTimestamp()))
	}
	// Order requests by start, then key, so that the order does not depend on
	// how the spans were batched.
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(rs.start[a], rs.start[b]); c != 0 {
			return c
		}
		return cmp.Compare(keys[a], keys[b])
	})
	sorted := requestSet{spans: make([][]int, len(order)), start: make([]int64, len(order)), end: make([]int64, len(order))}
	for n, t := range order {
		sorted.spans[n], sorted.start[n], sorted.end[n] = rs.spans[t], rs.start[t], rs.end[t]
	}
	procs := map[string]int{}
	for t, idx := range sorted.spans {
		at := map[int]int{} // process -> visit index
		for _, i := range idx {
			p, ok := procs[recs[i].process]
			if !ok {
				p = len(procs)
				procs[recs[i].process] = p
			}
			s, e := int64(recs[i].span.StartTimestamp()), int64(recs[i].span.EndTimestamp())
			v, ok := at[p]
			if !ok {
				at[p] = len(sorted.visits)
				sorted.visits = append(sorted.visits, visit{t, p, s, e})
				continue
			}
			sorted.visits[v].start = min(sorted.visits[v].start, s)
			sorted.visits[v].end = max(sorted.visits[v].end, e)
		}
	}
	return sorted
}

// MeasureOverlap returns the overlap of the requests in the batches (see the
// package comment): requests are told apart by their true trace id once
// stripped, processes by the resource.
func MeasureOverlap(batches ...ptrace.Traces) float64 {
	rs := requestsOf(collect(batches...))
	return overlapOf(rs.visits, nil)
}

// overlapOf measures the overlap of visits, request t shifted by shift[t] (nil:
// none).
func overlapOf(visits []visit, shift []int64) float64 {
	type event struct {
		at    int64
		proc  int
		delta int
	}
	ev := make([]event, 0, 2*len(visits))
	for _, v := range visits {
		var d int64
		if shift != nil {
			d = shift[v.trace]
		}
		ev = append(ev, event{v.start + d, v.proc, +1}, event{v.end + d, v.proc, -1})
	}
	// Per process in time order; an end before a start at the same instant, so
	// that back-to-back requests do not overlap.
	slices.SortFunc(ev, func(a, b event) int {
		if c := cmp.Compare(a.proc, b.proc); c != 0 {
			return c
		}
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta)
	})
	var pairs, busy float64
	n, last, proc := 0, int64(0), -1
	for _, e := range ev {
		if e.proc != proc {
			n, proc = 0, e.proc
		} else if n > 0 {
			dt := float64(e.at - last)
			busy += float64(n) * dt
			pairs += float64(n*(n-1)) * dt
		}
		n += e.delta
		last = e.at
	}
	if busy == 0 {
		return 0
	}
	return pairs / busy
}

// place returns, for requests of the given relative visits (request t starting
// at 0), start offsets from Poisson arrivals whose rate is set so that the
// overlap is target, and the overlap reached. The arrival gaps are drawn, then
// scaled: the search is over one number, as the overlap falls when the gaps
// grow. With few requests the overlap moves in steps as they slide past one
// another, so when the nearest step misses the target by more than 1% the gaps
// are drawn again, a few times, and the closest placement kept. A target of 0
// or less places the requests one after the other.
func place(visits []visit, length []int64, target float64, rng *rand.Rand) ([]int64, float64) {
	n := len(length)
	offset := make([]int64, n)
	if n == 0 {
		return offset, 0
	}
	var mean float64
	for t := range n {
		mean += float64(length[t]) / float64(n)
	}
	gaps := make([]float64, n)
	draw := func() {
		for t := 1; t < n; t++ {
			gaps[t] = rng.ExpFloat64()
		}
	}
	draw()
	if target <= 0 {
		for t := 1; t < n; t++ {
			offset[t] = offset[t-1] + length[t-1] + int64(gaps[t]*mean) + 1
		}
		return offset, overlapOf(visits, offset)
	}
	at := func(scale float64) float64 {
		var cum float64
		for t := range n {
			cum += gaps[t]
			offset[t] = int64(cum * scale)
		}
		return overlapOf(visits, offset)
	}
	best, bestErr := make([]int64, n), math.Inf(1)
	for attempt := 0; attempt < 8 && bestErr > 0.01*target; attempt++ {
		if attempt > 0 {
			draw()
		}
		// Bracket the target between lo (more overlap) and hi (less), then bisect
		// on a log scale.
		lo, hi := max(mean, 1), max(mean, 1)
		if at(lo) > target {
			for i := 0; i < 64 && at(hi) > target; i++ {
				lo, hi = hi, hi*2
			}
		} else {
			for i := 0; i < 64 && lo > 1e-3 && at(lo) < target; i++ {
				lo, hi = lo/2, lo
			}
		}
		for i := 0; i < 60; i++ {
			mid := math.Sqrt(lo * hi)
			o := at(mid)
			if e := math.Abs(o - target); e < bestErr {
				copy(best, offset)
				bestErr = e
			}
			if bestErr <= 0.002*target {
				break
			}
			if o > target {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	return best, overlapOf(visits, best)
}

// Superimpose returns the complete traces of td (full context) moved in time so
// that, on average, overlap other requests are in flight in a process while one
// is (see the package comment; MeasureOverlap gives the value reached, within
// 1% unless the traces are too few to come that close, or cannot overlap that
// much). Each
// whole trace moves: its internal timing is kept to the nanosecond. Arrivals
// are Poisson in the traces' original order, from the seed; the first trace
// keeps its start. The spans are copied and batched as exporters would send
// them (DefaultBatching).
func Superimpose(td ptrace.Traces, overlap float64, seed uint64) ptrace.Traces {
	recs := collect(td)
	rs := requestsOf(recs)
	if len(rs.start) == 0 {
		return ptrace.NewTraces()
	}
	rel := make([]visit, len(rs.visits))
	for i, v := range rs.visits {
		rel[i] = visit{v.trace, v.proc, v.start - rs.start[v.trace], v.end - rs.start[v.trace]}
	}
	length := make([]int64, len(rs.start))
	for t := range length {
		length[t] = rs.end[t] - rs.start[t]
	}
	offset, _ := place(rel, length, overlap, rand.New(rand.NewPCG(seed, 0x5eed_0f_5a9e)))
	shift := make([]int64, len(recs))
	base := rs.start[0]
	for t, idx := range rs.spans {
		for _, i := range idx {
			shift[i] = base + offset[t] - rs.start[t]
		}
	}
	return rebatch(recs, shift, DefaultBatching())
}
