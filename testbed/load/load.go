// Package load is the testbed's load generator: TPC-W-style sessions against
// the web tier's `GET /txn/{Name}` routes, following paper 004 §IV.
//
// A session is a sequence of requests separated by exponential think times;
// its length is geometric. Each request is a browsing transaction with the
// probability of the TPC-W mix (browsing 0.95, shopping 0.80, ordering 0.50,
// paper 004 §IV.A), otherwise an ordering one, and the transaction is uniform
// within its class.
//
// Closed loop emulates Users browsers running sessions back to back; open loop
// starts sessions as a Poisson process of Rate per second, at most MaxInFlight
// at a time. The nonstationary mix runs the paper's four processes: three base
// processes (browsing, shopping, ordering mixes) with fixed sizes in the
// 20/30/50 ratio of table III mix I, and the random process of fig. 2, which
// alternates shopping-mix execution periods of random size with sleep periods.
// See schedule for how the paper's 3-hour ranges are scaled to Duration.
//
// Every random choice comes from a PCG stream derived from Seed and the
// choice's owner (user, session, arrival process, schedule), so a seed gives
// the same sequence of transactions and think times per user whatever the
// network timing does.
package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a run. Zero values of the optional fields select the
// documented defaults.
type Options struct {
	Target   string              // web base URL
	Mode     string              // "closed" (default) or "open"
	Mix      string              // browsing | shopping (default) | ordering | nonstationary
	Users    int                 // closed loop: emulated browsers
	Rate     float64             // open loop: sessions per second
	Duration time.Duration       // 0: until ctx is cancelled
	Seed     uint64              // seeds every random choice
	Classes  map[string][]string // transaction names per class (browsing, ordering)
	Progress io.Writer           // one progress line every ProgressEvery; nil for none

	ThinkMean      time.Duration // mean think time between requests; default 1s
	SessionLength  float64       // mean requests per session (geometric, >= 1); default 10
	MaxInFlight    int           // open loop: sessions running at once; default 1000
	RequestTimeout time.Duration // per request; default 5s
	ProgressEvery  time.Duration // default 5s
	Client         *http.Client  // default: a keep-alive client without proxy
}

// Stats summarises a run; it is JSON-serialisable.
type Stats struct {
	Mode     string  `json:"mode"`
	Mix      string  `json:"mix"`
	Seed     uint64  `json:"seed"`
	Elapsed  float64 `json:"elapsed_s"`
	Requests int64   `json:"requests"` // completed requests, failed ones included
	Errors   int64   `json:"errors"`   // transport errors, timeouts and non-2xx responses
	Sessions int64   `json:"sessions"` // sessions started
	Refused  int64   `json:"refused"`  // open loop: sessions not started because MaxInFlight were running
	Rate     float64 `json:"rate"`     // achieved requests per second

	Classes      map[string]int64    `json:"classes"` // requests per class
	Transactions map[string]TxnStats `json:"transactions"`
	Processes    []ProcessInfo       `json:"processes"`
	Periods      []Period            `json:"random_periods,omitempty"` // nonstationary: execution periods of the random process
}

// TxnStats is one transaction's share of a run.
type TxnStats struct {
	Count         int64   `json:"count"`
	Errors        int64   `json:"errors"`
	MeanLatencyMs float64 `json:"mean_latency_ms"`
}

// ProcessInfo describes one load process; the random process reports its
// sizes in Stats.Periods instead.
type ProcessInfo struct {
	Name  string  `json:"name"`
	Mix   string  `json:"mix"`
	Users int     `json:"users,omitempty"` // closed loop
	Rate  float64 `json:"rate,omitempty"`  // open loop, sessions per second
}

// Period is one execution period of the random process, as offsets from the
// start of the run; the gaps between periods are its sleep periods.
type Period struct {
	Start float64 `json:"start_s"`
	End   float64 `json:"end_s"`
	Users int     `json:"users,omitempty"` // closed loop
	Rate  float64 `json:"rate,omitempty"`  // open loop, sessions per second
}

// browseProb is the probability of a browsing transaction per TPC-W mix.
var browseProb = map[string]float64{"browsing": 0.95, "shopping": 0.80, "ordering": 0.50}

func (o Options) normalize() (Options, error) {
	u, err := url.Parse(o.Target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return o, fmt.Errorf("load: Target %q: want an http(s) base URL", o.Target)
	}
	o.Target = strings.TrimRight(o.Target, "/")
	if o.Mode == "" {
		o.Mode = "closed"
	}
	if o.Mix == "" {
		o.Mix = "shopping"
	}
	switch o.Mode {
	case "closed":
		if o.Users < 1 {
			return o, fmt.Errorf("load: Users %d: closed loop needs at least 1", o.Users)
		}
	case "open":
		if !(o.Rate > 0) {
			return o, fmt.Errorf("load: Rate %g: open loop needs a positive rate", o.Rate)
		}
	default:
		return o, fmt.Errorf("load: Mode %q: want closed or open", o.Mode)
	}
	if _, ok := browseProb[o.Mix]; !ok && o.Mix != "nonstationary" {
		return o, fmt.Errorf("load: Mix %q: want browsing, shopping, ordering or nonstationary", o.Mix)
	}
	if o.Duration < 0 {
		return o, fmt.Errorf("load: Duration %v is negative", o.Duration)
	}
	n := 0
	for class, names := range o.Classes {
		if class != "browsing" && class != "ordering" {
			return o, fmt.Errorf("load: Classes: unknown class %q (want browsing or ordering)", class)
		}
		if slices.Contains(names, "") {
			return o, fmt.Errorf("load: Classes[%q]: empty transaction name", class)
		}
		n += len(names)
	}
	if n == 0 {
		return o, fmt.Errorf("load: Classes: no transactions")
	}
	if o.ThinkMean < 0 || o.RequestTimeout < 0 || o.ProgressEvery < 0 || o.MaxInFlight < 0 {
		return o, fmt.Errorf("load: ThinkMean, RequestTimeout, ProgressEvery and MaxInFlight must not be negative")
	}
	if o.SessionLength != 0 && !(o.SessionLength >= 1) {
		return o, fmt.Errorf("load: SessionLength %g: mean requests per session must be >= 1", o.SessionLength)
	}
	o.ThinkMean = orDefault(o.ThinkMean, time.Second)
	o.RequestTimeout = orDefault(o.RequestTimeout, 5*time.Second)
	o.ProgressEvery = orDefault(o.ProgressEvery, 5*time.Second)
	if o.SessionLength == 0 {
		o.SessionLength = 10
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 1000
	}
	return o, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

type runner struct {
	opt    Options
	client *http.Client
	urls   map[string]string // transaction name -> request URL
	ctx    context.Context   // the run; cancelled at Duration or by the caller
	start  time.Time
	wg     sync.WaitGroup // every goroutine that issues or schedules requests
	rec    *recorder

	active   atomic.Int64 // closed: users; open: sessions in flight
	sessions atomic.Int64
	refused  atomic.Int64
	sem      chan struct{} // open loop: MaxInFlight bound
}

// Run generates load until Duration elapses or ctx is cancelled, then waits
// for its goroutines and returns the statistics. Requests cut short by the
// end of the run are not counted; cancelling ctx is not an error.
func Run(ctx context.Context, opt Options) (Stats, error) {
	opt, err := opt.normalize()
	if err != nil {
		return Stats{}, err
	}
	r := &runner{opt: opt, client: opt.Client, urls: map[string]string{}, sem: make(chan struct{}, opt.MaxInFlight)}
	var names []string
	for _, class := range []string{"browsing", "ordering"} {
		for _, n := range opt.Classes[class] {
			r.urls[n] = opt.Target + "/txn/" + url.PathEscape(n)
			names = append(names, n)
		}
	}
	if r.client == nil {
		// A private transport, so that its keep-alive connections can be
		// closed at the end (no leaked goroutines), with enough idle
		// connections for hundreds of users and no proxy between the
		// generator and the tier under test.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		tr.MaxIdleConns = 0
		tr.MaxIdleConnsPerHost = 4096
		r.client = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}

	runCtx, cancel := context.WithCancel(ctx)
	if opt.Duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, opt.Duration)
	}
	defer cancel()
	r.ctx = runCtx
	r.start = time.Now()
	r.rec = newRecorder(names, r.start)

	procs, sched := r.launch()

	progDone := make(chan struct{})
	var progWG sync.WaitGroup
	if opt.Progress != nil {
		progWG.Go(func() { r.progressLoop(progDone) })
	}
	r.wg.Wait()
	end := time.Now()
	close(progDone)
	progWG.Wait()
	if opt.Progress != nil {
		r.progressLine(end, true)
	}
	return r.stats(end, procs, sched), nil
}

// launch starts the processes of the configured mix.
func (r *runner) launch() ([]ProcessInfo, []period) {
	o := r.opt
	if o.Mix != "nonstationary" {
		p := ProcessInfo{Name: o.Mix, Mix: o.Mix, Users: o.Users}
		if o.Mode == "open" {
			p.Users, p.Rate = 0, o.Rate
		}
		r.startBase(0, p)
		return []ProcessInfo{p}, nil
	}
	b, s, ord := baseUsers(o.Users)
	procs := []ProcessInfo{
		{Name: "browsing", Mix: "browsing", Users: b},
		{Name: "shopping", Mix: "shopping", Users: s},
		{Name: "ordering", Mix: "ordering", Users: ord},
	}
	if o.Mode == "open" {
		for i, share := range baseShares {
			procs[i].Users, procs[i].Rate = 0, share*o.Rate
		}
	}
	for i, p := range procs {
		r.startBase(uint64(i), p)
	}
	sched := schedule(o.Seed, o.Duration, o.Users, o.Rate)
	procs = append(procs, ProcessInfo{Name: "random", Mix: "shopping"})
	r.wg.Go(func() { r.randomProcess(procRandom, sched) })
	return procs, sched
}

func (r *runner) startBase(proc uint64, p ProcessInfo) {
	if r.opt.Mode == "open" {
		if p.Rate > 0 {
			r.wg.Go(func() { r.arrivals(r.ctx, p.Rate, browseProb[p.Mix], proc, 0) })
		}
		return
	}
	for u := range p.Users {
		ch := r.chooser(browseProb[p.Mix], kindUser, proc, 0, uint64(u))
		r.wg.Go(func() { r.user(r.ctx, ch) })
	}
}

// randomProcess runs fig. 2: execute the shopping mix with a random size for
// a random period, sleep for a random period, repeat. Closed-loop browsers
// leave at the end of their period; open-loop sessions that arrived in it run
// to their end, as arrivals of a real site would.
func (r *runner) randomProcess(proc uint64, sched []period) {
	var sl sleeper
	for i, p := range sched {
		if !sl.sleep(r.ctx, time.Until(r.start.Add(p.start))) {
			return
		}
		pctx, cancel := context.WithCancel(r.ctx)
		if r.opt.Mode == "open" {
			r.wg.Go(func() { r.arrivals(pctx, p.rate, browseProb["shopping"], proc, uint64(i)) })
		} else {
			for u := range p.users {
				ch := r.chooser(browseProb["shopping"], kindUser, proc, uint64(i), uint64(u))
				r.wg.Go(func() { r.user(pctx, ch) })
			}
		}
		ok := sl.sleep(r.ctx, time.Until(r.start.Add(p.end)))
		cancel()
		if !ok {
			return
		}
	}
}

// user is one closed-loop emulated browser: think, request, repeat, starting
// a new session whenever the previous one ends. It leaves when stop is done,
// after its request in flight, if any.
func (r *runner) user(stop context.Context, ch *chooser) {
	r.active.Add(1)
	defer r.active.Add(-1)
	var sl sleeper
	newSession := true
	for {
		s := ch.next()
		// Thinking before the first request too spreads the start of a
		// period's users over a think time instead of a burst.
		if !sl.sleep(stop, s.think) {
			return
		}
		if newSession {
			r.sessions.Add(1)
		}
		r.do(s)
		newSession = s.last
	}
}

// arrivals starts open-loop sessions as a Poisson process until stop is done.
// Arrival times are absolute, so a late wake-up on a loaded machine catches
// up instead of lowering the rate.
func (r *runner) arrivals(stop context.Context, rate, pBrowse float64, proc, period uint64) {
	rng := stream(r.opt.Seed, kindArrivals, proc, period)
	var sl sleeper
	next := time.Now()
	for k := uint64(0); ; k++ {
		next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if !sl.sleep(stop, time.Until(next)) {
			return
		}
		select {
		case r.sem <- struct{}{}:
		default:
			r.refused.Add(1)
			continue
		}
		ch := r.chooser(pBrowse, kindSession, proc, period, k)
		r.wg.Go(func() { r.session(ch) })
	}
}

// session is one open-loop session; it runs to its end unless the run ends.
func (r *runner) session(ch *chooser) {
	defer func() { <-r.sem }()
	r.active.Add(1)
	defer r.active.Add(-1)
	r.sessions.Add(1)
	var sl sleeper
	for first := true; ; first = false {
		s := ch.next()
		if !first && !sl.sleep(r.ctx, s.think) {
			return
		}
		r.do(s)
		if s.last || r.ctx.Err() != nil {
			return
		}
	}
}

func (r *runner) do(s step) {
	ctx, cancel := context.WithTimeout(r.ctx, r.opt.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.urls[s.name], nil)
	if err != nil {
		return // cannot happen: the URL was built from a valid base
	}
	t0 := time.Now()
	resp, err := r.client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
	lat := time.Since(t0)
	if err != nil && r.ctx.Err() != nil {
		return // cut short by the end of the run, not the target's fault
	}
	failed := err != nil || resp.StatusCode < 200 || resp.StatusCode > 299
	r.rec.record(s.name, s.class, lat, failed)
}

// sleeper reuses one timer across a goroutine's think times.
type sleeper struct{ t *time.Timer }

// sleep waits d or until ctx is done; it reports whether ctx is still live.
func (s *sleeper) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	if s.t == nil {
		s.t = time.NewTimer(d)
	} else {
		s.t.Reset(d)
	}
	select {
	case <-ctx.Done():
		s.t.Stop()
		return false
	case <-s.t.C:
		return true
	}
}

func (r *runner) stats(end time.Time, procs []ProcessInfo, sched []period) Stats {
	el := end.Sub(r.start)
	st := Stats{
		Mode: r.opt.Mode, Mix: r.opt.Mix, Seed: r.opt.Seed, Elapsed: el.Seconds(),
		Sessions: r.sessions.Load(), Refused: r.refused.Load(), Processes: procs,
	}
	r.rec.fill(&st)
	if el > 0 {
		st.Rate = float64(st.Requests) / el.Seconds()
	}
	for _, p := range sched {
		if p.start >= el {
			break
		}
		q := Period{Start: p.start.Seconds(), End: min(p.end, el).Seconds(), Users: p.users}
		if r.opt.Mode == "open" {
			q.Users, q.Rate = 0, p.rate
		}
		st.Periods = append(st.Periods, q)
	}
	return st
}
