package tpcwsim

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tierscope/tierscope/internal/signature"
)

// Config is one experiment.
type Config struct {
	Workload Workload
	Seed     uint64
	// Duration of the experiment (paper 004: three hours).
	Duration time.Duration
	// Window is the monitoring window (paper 004: one minute).
	Window time.Duration
	// Start is the wall-clock time of the first window.
	Start time.Time
	// Service and Version label the output rows.
	Service, Version string
	// ExtraMs adds deterministic front CPU time to transactions, by name: the
	// code change of a new version.
	ExtraMs map[string]float64
	// DemandScale multiplies every front demand (1 when zero).
	DemandScale float64
	// ThinkMean and ThinkMax shape the EBs' think time.
	ThinkMean, ThinkMax time.Duration
	// ErlangK is the shape of the front and database demands (CV 1/√k).
	ErlangK int
	// BackgroundUtil is the CPU share of background work at the front.
	BackgroundUtil float64
	// RTT is the network round trip of each outbound call.
	RTT time.Duration
	// LockCapacity is the number of slots of Execute Search's critical
	// section; 0 turns the bottleneck off.
	LockCapacity int
	// Random process of figure 2: execution and sleep ranges.
	ExecMin, ExecMax, SleepMin, SleepMax time.Duration
}

// DefaultConfig returns the paper's settings for workload w.
func DefaultConfig(w Workload, seed uint64) Config {
	return Config{
		Workload:       w,
		Seed:           seed,
		Duration:       3 * time.Hour,
		Window:         time.Minute,
		Start:          time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Service:        "tpcw",
		Version:        "v1",
		DemandScale:    1,
		ThinkMean:      7 * time.Second,
		ThinkMax:       70 * time.Second,
		ErlangK:        4,
		BackgroundUtil: 0.01,
		RTT:            200 * time.Microsecond,
		LockCapacity:   3,
		ExecMin:        20 * time.Minute,
		ExecMax:        30 * time.Minute,
		SleepMin:       10 * time.Minute,
		SleepMax:       20 * time.Minute,
	}
}

// Result is what an experiment observed.
type Result struct {
	// Rows are the monitoring windows, one per window and transaction that
	// completed at least one request, in window then transaction order.
	Rows []signature.Row
	// FrontUtil and DBUtil are the CPU utilizations of each window; EBs the
	// number of EBs active at each window's end.
	FrontUtil, DBUtil []float64
	EBs               []int
	// Requests is the number of transactions completed.
	Requests int
	// Events is the number of simulation events processed.
	Events int
}

// psServer is a processor-sharing CPU of capacity 1, kept in virtual time:
// V advances at 1/n while n jobs are in service, and a job that entered with
// demand d at virtual time V0 leaves when V reaches V0 + d.
type psServer struct {
	v, last float64
	jobs    psHeap
	busy    []float64 // per window
	window  float64
}

type psJob struct {
	finish float64
	req    int32 // request index, −1 for background work
}

type psHeap []psJob

func (h psHeap) Len() int           { return len(h) }
func (h psHeap) Less(i, j int) bool { return h[i].finish < h[j].finish }
func (h psHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *psHeap) Push(x any)        { *h = append(*h, x.(psJob)) }
func (h *psHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (s *psServer) advance(t float64) {
	if n := len(s.jobs); n > 0 && t > s.last {
		s.v += (t - s.last) / float64(n)
		// Busy time, split across window boundaries.
		a := s.last
		for a < t {
			w := int(a / s.window)
			end := math.Min(t, float64(w+1)*s.window)
			if w < len(s.busy) {
				s.busy[w] += end - a
			}
			a = end
		}
	}
	s.last = t
}

func (s *psServer) next() float64 {
	if len(s.jobs) == 0 {
		return math.Inf(1)
	}
	return s.last + math.Max(0, s.jobs[0].finish-s.v)*float64(len(s.jobs))
}

func (s *psServer) add(t, demand float64, req int32) {
	s.advance(t)
	heap.Push(&s.jobs, psJob{finish: s.v + demand, req: req})
}

func (s *psServer) pop(t float64) int32 {
	s.advance(t)
	j := heap.Pop(&s.jobs).(psJob)
	if j.finish > s.v {
		s.v = j.finish
	}
	return j.req
}

// Timed events.
const (
	evThinkEnd   = iota // an EB issues its next request
	evDBReturn          // a database reply reaches the front
	evBackground        // a background job arrives at the front CPU
	evPhase             // the random process starts or stops
)

type event struct {
	t    float64
	kind int
	id   int32
	seq  uint64 // ties in arrival order, for determinism
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Processes of EBs.
const (
	procBrowsing = iota
	procShopping
	procOrdering
	procRandom
)

type eb struct {
	proc int
	gen  int
}

type request struct {
	tx        int
	eb        int32
	start     float64
	burst     float64 // front demand of each burst
	callsLeft int
	calls     int
	callStart float64
	dbSum     float64
	locked    bool
}

type cell struct {
	count    int64
	latSum   float64
	calls    int64
	dbLatSum float64
}

// Run simulates one experiment.
func Run(cfg Config) Result {
	if cfg.DemandScale == 0 {
		cfg.DemandScale = 1
	}
	if cfg.ErlangK < 1 {
		cfg.ErlangK = 1
	}
	W := cfg.Window.Seconds()
	horizon := cfg.Duration.Seconds()
	nWin := int(math.Ceil(horizon / W))
	rLoad := rand.New(rand.NewPCG(cfg.Seed, 0x10ad))  // the random process of figure 2
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5e55107)) // everything else

	front := &psServer{window: W, busy: make([]float64, nWin)}
	db := &psServer{window: W, busy: make([]float64, nWin)}
	var events eventHeap
	var seq uint64
	schedule := func(t float64, kind int, id int32) {
		seq++
		heap.Push(&events, event{t: t, kind: kind, id: id, seq: seq})
	}

	mixes := [4]*[14]float64{&Browsing.Pct, &Shopping.Pct, &Ordering.Pct, &Shopping.Pct}
	var cum [4][14]float64
	for p, m := range mixes {
		var s float64
		for i, v := range m {
			s += v
			cum[p][i] = s
		}
		for i := range cum[p] {
			cum[p][i] /= s
		}
	}
	extra := make([]float64, len(Transactions))
	for name, ms := range cfg.ExtraMs {
		if i := ByName(name); i >= 0 {
			extra[i] = ms / 1000
		}
	}
	searchTx := ByName("Execute Search")

	thinkMean, thinkMax := cfg.ThinkMean.Seconds(), cfg.ThinkMax.Seconds()
	think := func() float64 { return math.Min(rng.ExpFloat64()*thinkMean, thinkMax) }
	erlang := func(mean float64) float64 {
		var s float64
		for range cfg.ErlangK {
			s += rng.ExpFloat64()
		}
		return mean * s / float64(cfg.ErlangK)
	}

	// EBs.
	var ebs []eb
	var freeEB []int32
	randGen, randActive := 0, false
	active := 0
	spawn := func(t float64, proc int) {
		var id int32
		if n := len(freeEB); n > 0 {
			id = freeEB[n-1]
			freeEB = freeEB[:n-1]
			ebs[id] = eb{proc: proc, gen: randGen}
		} else {
			id = int32(len(ebs))
			ebs = append(ebs, eb{proc: proc, gen: randGen})
		}
		active++
		schedule(t+think(), evThinkEnd, id)
	}
	alive := func(id int32) bool {
		e := ebs[id]
		return e.proc != procRandom || (randActive && e.gen == randGen)
	}
	retire := func(id int32) {
		active--
		freeEB = append(freeEB, id)
	}
	for range cfg.Workload.BrowsingEBs {
		spawn(0, procBrowsing)
	}
	for range cfg.Workload.ShoppingEBs {
		spawn(0, procShopping)
	}
	for range cfg.Workload.OrderingEBs {
		spawn(0, procOrdering)
	}
	// The random process: phase events alternate start (id 1) and stop (id 0).
	uniform := func(a, b time.Duration) float64 {
		return a.Seconds() + rLoad.Float64()*(b-a).Seconds()
	}
	schedule(0, evPhase, 1)

	if cfg.BackgroundUtil > 0 {
		schedule(rng.ExpFloat64()*0.002/cfg.BackgroundUtil, evBackground, 0)
	}

	// Requests.
	var reqs []request
	var freeReq []int32
	var lockWait []int32
	lockUsed := 0
	cells := make([]cell, nWin*len(Transactions))
	res := Result{}

	startBurst := func(t float64, id int32) { front.add(t, reqs[id].burst, id) }
	begin := func(t float64, id int32) {
		r := &reqs[id]
		if r.tx == searchTx && cfg.LockCapacity > 0 {
			if lockUsed >= cfg.LockCapacity {
				lockWait = append(lockWait, id)
				return
			}
			lockUsed++
			r.locked = true
		}
		startBurst(t, id)
	}
	newRequest := func(t float64, ebID int32) {
		x := rng.Float64()
		c := &cum[ebs[ebID].proc]
		tx := 0
		for tx < len(c)-1 && x >= c[tx] {
			tx++
		}
		T := Transactions[tx]
		demand := erlang(T.FrontMs/1000*cfg.DemandScale) + extra[tx]
		var id int32
		if n := len(freeReq); n > 0 {
			id = freeReq[n-1]
			freeReq = freeReq[:n-1]
		} else {
			id = int32(len(reqs))
			reqs = append(reqs, request{})
		}
		reqs[id] = request{tx: tx, eb: ebID, start: t, burst: demand / float64(T.DBCalls+1), callsLeft: T.DBCalls}
		begin(t, id)
	}
	finish := func(t float64, id int32) {
		r := &reqs[id]
		w := int(t / W)
		if w < nWin {
			c := &cells[w*len(Transactions)+r.tx]
			c.count++
			c.latSum += t - r.start
			c.calls += int64(r.calls)
			c.dbLatSum += r.dbSum
		}
		res.Requests++
		if r.locked {
			lockUsed--
			if len(lockWait) > 0 {
				next := lockWait[0]
				lockWait = lockWait[1:]
				lockUsed++
				reqs[next].locked = true
				startBurst(t, next)
			}
		}
		ebID := r.eb
		freeReq = append(freeReq, id)
		if alive(ebID) {
			schedule(t+think(), evThinkEnd, ebID)
		} else {
			retire(ebID)
		}
	}

	ebsAt := make([]int, nWin)
	lastWin := 0
	for {
		tEv := math.Inf(1)
		if len(events) > 0 {
			tEv = events[0].t
		}
		tF, tD := front.next(), db.next()
		t := math.Min(tEv, math.Min(tF, tD))
		if t >= horizon {
			break
		}
		for w := int(t / W); lastWin < w && lastWin < nWin; lastWin++ {
			ebsAt[lastWin] = active
		}
		res.Events++
		switch {
		case tF <= t && tF <= tD:
			id := front.pop(t)
			if id < 0 {
				continue // background work done
			}
			r := &reqs[id]
			if r.callsLeft == 0 {
				finish(t, id)
				continue
			}
			r.callsLeft--
			r.calls++
			r.callStart = t
			db.add(t, erlang(Transactions[r.tx].DBMs/1000), id)
		case tD <= t:
			id := db.pop(t)
			schedule(t+cfg.RTT.Seconds(), evDBReturn, id)
		default:
			e := heap.Pop(&events).(event)
			switch e.kind {
			case evThinkEnd:
				if !alive(e.id) {
					retire(e.id)
					continue
				}
				newRequest(t, e.id)
			case evDBReturn:
				r := &reqs[e.id]
				r.dbSum += t - r.callStart
				startBurst(t, e.id)
			case evBackground:
				front.add(t, rng.ExpFloat64()*0.002, -1)
				schedule(t+rng.ExpFloat64()*0.002/cfg.BackgroundUtil, evBackground, 0)
			case evPhase:
				if e.id == 1 {
					randGen++
					randActive = true
					n := cfg.Workload.RandomMinEBs + rLoad.IntN(cfg.Workload.RandomMaxEBs-cfg.Workload.RandomMinEBs+1)
					for range n {
						spawn(t, procRandom)
					}
					schedule(t+uniform(cfg.ExecMin, cfg.ExecMax), evPhase, 0)
				} else {
					randActive = false
					schedule(t+uniform(cfg.SleepMin, cfg.SleepMax), evPhase, 1)
				}
			}
		}
	}
	front.advance(horizon)
	db.advance(horizon)
	for ; lastWin < nWin; lastWin++ {
		ebsAt[lastWin] = active
	}

	res.FrontUtil = make([]float64, nWin)
	res.DBUtil = make([]float64, nWin)
	res.EBs = ebsAt
	for w := range nWin {
		span := math.Min(W, horizon-float64(w)*W)
		res.FrontUtil[w] = front.busy[w] / span
		res.DBUtil[w] = db.busy[w] / span
		u := round(res.FrontUtil[w], 1e-4)
		for tx, T := range Transactions {
			c := cells[w*len(Transactions)+tx]
			if c.count == 0 {
				continue
			}
			row := signature.Row{
				WindowStart: cfg.Start.Add(time.Duration(w) * cfg.Window),
				Key:         signature.Key{Service: cfg.Service, Version: cfg.Version, Transaction: T.Name},
				Window: signature.Window{
					Count:          c.count,
					LatencyMs:      round(c.latSum*1000/float64(c.count), 1e-3),
					OutboundCalls:  c.calls,
					CPUUtilization: u,
				},
			}
			if c.calls > 0 {
				row.OutboundLatencyMs = round(c.dbLatSum*1000/float64(c.calls), 1e-3)
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res
}

// round rounds v to a multiple of unit, as a monitoring tool reports it.
func round(v, unit float64) float64 { return math.Round(v/unit) / math.Round(1/unit) }
