package coordinator

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/spectral"
	"github.com/tierscope/tierscope/internal/store"
)

// Coordinator constants that are not worth a setting.
const (
	tickInterval = time.Second
	// discoverySamples front samples are gathered before the busiest
	// transaction is chosen as the experiment's target.
	discoverySamples = 400
	// discoveryTimeout fails an experiment that sees no front traffic.
	discoveryTimeout = 5 * time.Minute
	// maxPending bounds the samples held while the target is chosen.
	maxPending = 200000
	// maxPendingCovariates bounds the steal readings held meanwhile (an
	// hour of one host scraped every second), and covariateBuffer those
	// queued to a running experiment.
	maxPendingCovariates = 4096
	covariateBuffer      = 1024
	// persistEvery rewrites a running experiment's record this often (and
	// on every phase change), so a crash leaves a recent one.
	persistEvery = 10 * time.Second
	// releaseTimeout bounds releasing the leases when aborting.
	releaseTimeout = 15 * time.Second
)

// Traffic is what the coordinator reads of the ingested traffic (the
// ingest side implements it; each call takes its lock).
type Traffic interface {
	// Links are the addresses caller→callee was called at, the most called
	// first, and every known link as "caller->callee".
	Links(caller, callee string) (addresses, known []string)
	// CallsPerRequest is, per front transaction, the calls per request to
	// address, else on caller→callee when none went to it.
	CallsPerRequest(caller, callee, address string) map[string]float64
	// CPU merges the open windows' readings of a process and of its machine.
	CPU(machine, process string) (share, host model.CPUStats)
}

// Settings is what the coordinator needs of the exporter.
type Settings struct {
	Experiments Config
	// TraceWait is the exporter's trace_wait: a sample reaches the
	// coordinator that long after its request.
	TraceWait time.Duration
	// CoreMHz is the default CPU speed f of capacity and frequency elements.
	CoreMHz float64
	// Capacity is a machine's Ω in MHz: configured, else measured, else 0.
	Capacity func(machine string, readings *model.CPUStats) float64
	// Shard and Window (seconds) key the records the coordinator stores.
	Shard  string
	Window int64
	Logger *zap.Logger
	// Now is the clock; experiments run on it.
	Now     func() time.Time
	Traffic Traffic
}

// Coordinator runs the gradient experiments this instance coordinates.
type Coordinator struct {
	set     Settings
	st      store.Store // set by Start
	mu      sync.Mutex
	running map[string]*runner
	active  atomic.Int32 // len(running), read without the lock by Observe
	wg      sync.WaitGroup

	injMu   sync.Mutex
	injHTTP *http.Client // to the injectors: experiments.client

	// lastSteal is each host's previous steal reading (under the ingest
	// lock, as ObserveSteal is called): a reading is the mean since the one
	// before.
	lastSteal map[string]int64

	// shared coordinates with the other analyzers of a shared store
	// (shared.go); nil when this instance coordinates alone.
	shared *sharedCoord
	stop   chan struct{}
	done   sync.WaitGroup
}

// New returns a coordinator; Start gives it the store.
func New(set Settings) *Coordinator {
	return &Coordinator{set: set, running: map[string]*runner{}, lastSteal: map[string]int64{}}
}

// SetTraffic gives the coordinator the traffic it plans experiments on,
// when that is built after it (the ingest side observes for it).
func (x *Coordinator) SetTraffic(t Traffic) { x.set.Traffic = t }

func (x *Coordinator) now() time.Time { return x.set.Now() }

// Start gives the coordinator the store and the injectors' client (nil: a
// plain one with request_timeout), and coordinates through the store with
// the other analyzers when dsn names a shared one.
func (x *Coordinator) Start(st store.Store, dsn string, injectors *http.Client) {
	x.st = st
	if injectors != nil {
		x.injMu.Lock()
		x.injHTTP = injectors
		x.injMu.Unlock()
	}
	x.stop = make(chan struct{})
	x.startShared(dsn)
}

// Shutdown stops the shared coordination and every running experiment,
// releasing their leases (bounded).
func (x *Coordinator) Shutdown() {
	if x.stop != nil {
		close(x.stop)
		x.done.Wait()
		x.stop = nil
	}
	x.abortAll("collector shutting down")
}

// covariateSample is one exogenous reading for the running experiments.
type covariateSample struct {
	name     string
	from, to float64
	v        float64
}

// maxStealHosts bounds the hosts whose last steal reading is remembered.
const maxStealHosts = 256

// ObserveSteal takes a host's CPU steal fraction over the scrape that ended
// at ts (under the ingest lock; must be fast) and hands it to each running experiment
// without blocking, as observe does with spans.
func (x *Coordinator) ObserveSteal(host string, ts int64, steal float64) {
	prev, seen := x.lastSteal[host]
	if seen || len(x.lastSteal) < maxStealHosts {
		x.lastSteal[host] = ts
	}
	if !seen || ts <= prev || x.active.Load() == 0 || !x.set.Experiments.StealCovariate {
		return
	}
	c := covariateSample{name: "cpu.steal host=" + host, from: float64(prev) / 1e9, to: float64(ts) / 1e9, v: steal}
	fanOut(x, c, func(r *runner) chan covariateSample { return r.covariates })
}

// fanOut offers v to every running experiment's channel without blocking,
// counting what a full buffer drops.
func fanOut[T any](x *Coordinator, v T, ch func(*runner) chan T) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.running {
		select {
		case ch(r) <- v:
		default:
			r.dropped.Add(1)
		}
	}
}

// IsFront reports whether a SERVER span is a front-tier request: of a
// configured front service, or else the root of its trace.
func (x *Coordinator) IsFront(s *span.Span, names *span.Names) bool {
	fronts := x.set.Experiments.FrontServices
	if len(fronts) == 0 {
		return s.ParentID == 0
	}
	service := names.Name(s.Service)
	for _, f := range fronts {
		if f == service {
			return true
		}
	}
	return false
}

// frontSample is a front request for one experiment, with the elements
// its trace crossed when the experiment uses references.
type frontSample struct {
	spectral.Sample
	crossed gradient.Crossings
	routed  bool
}

// Observe sees every completed SERVER span, spans[i] of its trace (under the
// ingest lock; must be fast): it hands front samples to each running experiment
// without blocking, counting what a full buffer drops.
func (x *Coordinator) Observe(spans []span.Span, names *span.Names, i int) {
	s := &spans[i]
	remote := x.shared != nil && x.shared.publishing.Load()
	if (x.active.Load() == 0 && !remote) || !x.IsFront(s, names) {
		return
	}
	sample := frontSample{Sample: spectral.Sample{Time: float64(s.Start) / 1e9, Transaction: names.Name(s.Transaction), Ms: float64(s.End-s.Start) / 1e6}}
	if remote {
		x.shared.offer(spans, names, sample.Sample)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.running {
		fs := sample
		if r.gcfg.References {
			fs.crossed, fs.routed = r.crossings(spans, names), true
		}
		select {
		case r.samples <- fs:
		default:
			r.dropped.Add(1)
		}
	}
}

// elementRoute tells the requests that crossed a link element from those
// that did not, by the calls in their traces.
type elementRoute struct {
	caller, address string // "" for elements that are not links
	// seen says a trace has called the delayed address: until one has, the
	// spans may name it otherwise (a host name for the configured IP), and
	// no request can be said not to have crossed.
	seen bool
	// callerID and addressID are caller's and address's ids in names, -1
	// while not interned there: a trace's spans are compared as integers.
	names               *span.Names
	callerID, addressID int32
}

// lookUp finds the route's ids in the trace's names table. Ids once found
// stay valid as long as the table does.
func (er *elementRoute) lookUp(names *span.Names) {
	if er.names == names && er.callerID >= 0 && er.addressID >= 0 {
		return
	}
	er.names, er.callerID, er.addressID = names, names.Lookup(er.caller), names.Lookup(er.address)
}

// crossedBy reports whether a trace's request crossed the element, or may
// have: it did not only when the trace shows the link's caller calling,
// every call at a known address, none at the delayed one, which earlier
// traces have called. A request taken wrongly for one that did not cross
// would carry the wave into the reference and take part of the gradient
// away with it.
func (er *elementRoute) crossedBy(spans []span.Span, names *span.Names) bool {
	if er.address == "" {
		return true
	}
	er.lookUp(names)
	calledElsewhere := false
	for i := range spans {
		s := &spans[i]
		if s.Kind != span.KindClient {
			continue
		}
		if s.Endpoint == er.addressID && s.Endpoint >= 0 {
			er.seen = true
			return true
		}
		if s.Service == er.callerID && s.Service >= 0 {
			if s.Endpoint < 0 {
				return true
			}
			calledElsewhere = true
		}
	}
	return !calledElsewhere || !er.seen
}

// crossings is the set of the runner's elements a trace crossed, or may
// have (x.mu held: it marks the addresses seen).
func (r *runner) crossings(spans []span.Span, names *span.Names) gradient.Crossings {
	var c gradient.Crossings
	for i := range r.routes {
		if r.routes[i].crossedBy(spans, names) {
			c |= 1 << uint(i)
		}
	}
	return c
}

// abortAll stops every running experiment and waits (bounded) until each
// has released its injector lease and stored its final record. Leases that
// cannot be released expire at the injector by themselves.
func (x *Coordinator) abortAll(reason string) {
	x.mu.Lock()
	runners := make([]*runner, 0, len(x.running))
	for _, r := range x.running {
		runners = append(runners, r)
	}
	x.mu.Unlock()
	for _, r := range runners {
		r.abort(reason)
	}
	done := make(chan struct{})
	go func() { x.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * releaseTimeout):
		x.set.Logger.Warn("perfmodel: experiments still releasing leases at shutdown; the injector's lease expiry ends them")
	}
}

// Running is how many experiments run here now.
func (x *Coordinator) Running() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.running)
}

func (x *Coordinator) get(id string) (*runner, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r, ok := x.running[id]
	return r, ok
}

func (x *Coordinator) remove(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.running, id)
	x.active.Store(int32(len(x.running)))
}

// List is every experiment: the running ones as they are now, the others
// as stored.
func (x *Coordinator) List(ctx context.Context) (api.Experiments, error) {
	out := api.Experiments{Experiments: []api.Experiment{}}
	all, err := store.MergeScan(ctx, x.st, store.Query{Kind: model.KindExperimnt, From: 0, To: 1 << 40}, model.Merge)
	if err != nil {
		return out, err
	}
	live := map[string]api.Experiment{}
	x.mu.Lock()
	for id, run := range x.running {
		live[id] = run.snapshot()
	}
	x.mu.Unlock()
	for id, ex := range live {
		b, err := json.Marshal(ex)
		if err != nil {
			return out, err
		}
		all[id] = b // fresher than the stored record
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		var ex api.Experiment
		if err := json.Unmarshal(all[id], &ex); err != nil {
			return out, err
		}
		out.Experiments = append(out.Experiments, ex)
	}
	return out, nil
}

// Get is one experiment, running or stored; 404 when there is none.
func (x *Coordinator) Get(ctx context.Context, id string) (api.Experiment, error) {
	if run, ok := x.get(id); ok {
		return run.snapshot(), nil
	}
	all, err := store.MergeScan(ctx, x.st, store.Query{Kind: model.KindExperimnt, KeyPrefix: id, From: 0, To: 1 << 40}, model.Merge)
	if err != nil {
		return api.Experiment{}, err
	}
	b, ok := all[id]
	if !ok {
		return api.Experiment{}, apierror.New(http.StatusNotFound, "no experiment %s", id)
	}
	var ex api.Experiment
	return ex, json.Unmarshal(b, &ex)
}

// Begin validates the request and starts the experiment's goroutine; 409
// when max_concurrent run already.
func (x *Coordinator) Begin(ctx context.Context, req api.ExperimentRequest) (api.Experiment, error) {
	run, err := x.newRunner(req)
	if err != nil {
		return api.Experiment{}, err
	}
	x.mu.Lock()
	if len(x.running) >= x.set.Experiments.MaxConcurrent {
		x.mu.Unlock()
		return api.Experiment{}, apierror.New(http.StatusConflict, "%d experiment(s) already running (experiments.max_concurrent)", len(x.running))
	}
	x.running[run.id] = run
	x.active.Store(int32(len(x.running)))
	x.wg.Add(1)
	x.mu.Unlock()
	if x.shared != nil {
		if err := x.shared.acquire(ctx, run); err != nil {
			x.remove(run.id)
			x.wg.Done()
			return api.Experiment{}, err
		}
	}
	go func() {
		defer x.wg.Done()
		defer x.remove(run.id)
		if x.shared != nil {
			defer x.shared.release(run.id)
		}
		run.run()
	}()
	return run.snapshot(), nil
}

// Abort stops a running experiment, releasing its lease before it returns.
func (x *Coordinator) Abort(ctx context.Context, id string) (api.Experiment, error) {
	run, ok := x.get(id)
	if !ok {
		if _, err := x.Get(ctx, id); err != nil {
			return api.Experiment{}, err
		}
		return api.Experiment{}, apierror.New(http.StatusConflict, "experiment %s has already ended", id)
	}
	run.abort("aborted through the API")
	select {
	case <-run.done:
	case <-time.After(2 * releaseTimeout):
		return api.Experiment{}, apierror.New(http.StatusGatewayTimeout, "experiment %s is still releasing its lease", id)
	}
	return run.snapshot(), nil
}

// injectorHTTP is the client built from experiments.client at Start; before
// Start (in tests) a plain one with request_timeout.
func (x *Coordinator) injectorHTTP() *http.Client {
	x.injMu.Lock()
	defer x.injMu.Unlock()
	if x.injHTTP == nil {
		x.injHTTP = &http.Client{Timeout: x.set.Experiments.RequestTimeout}
	}
	return x.injHTTP
}
