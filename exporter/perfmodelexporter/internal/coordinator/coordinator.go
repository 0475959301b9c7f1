package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/timegrid"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/leaseapi"
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

// capacityBasis is the basis 1/(c·f − α·w) of a capacity element at its
// configured operating point, with α·w the demand its process's CPU
// readings show now (processDemand).
func (x *Coordinator) capacityBasis(cp Capacity) (gradient.Basis, error) {
	f, demand, err := x.cpuNode(cp.CPU)
	if err != nil {
		return gradient.Basis{}, err
	}
	b := gradient.Basis{Kind: gradient.KindCapacity, Operating: cp.Cores, FrequencyMHz: f, Alpha: demand, Workload: 1}
	return b, b.Validate()
}

// frequencyBasis is the basis 1/(f − α·w) of a frequency element at the
// CPUs' speed now. With n CPUs the queue's speed is n·f, and
// 1/(n·f − D) = (1/n)·1/(f − D/n): the demand is taken per CPU, which
// scales the gradient by n and leaves predictions alone.
func (x *Coordinator) frequencyBasis(fr Frequency) (gradient.Basis, error) {
	f, demand, err := x.cpuNode(fr.CPU)
	if err != nil {
		return gradient.Basis{}, err
	}
	b := gradient.Basis{Kind: gradient.KindCPUFreq, Operating: f, Alpha: demand / float64(len(fr.CPUs)), Workload: 1}
	return b, b.Validate()
}

// cpuNode is a node's CPU speed f (frequency_mhz, else core_mhz) and the
// demand α·w of its process.
func (x *Coordinator) cpuNode(n CPU) (f, demand float64, err error) {
	f = n.FrequencyMHz
	if f == 0 {
		f = x.set.CoreMHz
	}
	if !(f > 0) {
		return 0, 0, errors.New("no CPU speed: set frequency_mhz or core_mhz")
	}
	demand, err = x.processDemand(n.Machine, n.Process)
	return f, demand, err
}

// processDemand is α·w in MHz: the mean process.cpu.utilization of a
// process over the open windows (a share of the machine) times the
// machine's capacity.
func (x *Coordinator) processDemand(machineName, process string) (float64, error) {
	share, machine := x.set.Traffic.CPU(machineName, process)
	if share.Samples == 0 {
		return 0, fmt.Errorf("no process.cpu.utilization readings of %q on %q in the open windows: the demand α·w is unknown", process, machineName)
	}
	machineMHz := x.set.Capacity(machineName, &machine)
	if !(machineMHz > 0) {
		return 0, fmt.Errorf("no capacity for machine %q: set machine_capacity_mhz or capacity_mhz (frequency × logical CPUs)", machineName)
	}
	return share.Mean() * machineMHz, nil
}

// linkTarget is where a link's delay lease applies and which injector runs it.
type linkTarget struct {
	proto, host string
	port        uint16
	injector    string
}

// maxExperimentElements bounds the elements of one experiment.
const maxExperimentElements = 64

// elementPlan is one element of an experiment: what the state machine
// measures, and which injector perturbs what for it.
type elementPlan struct {
	// elements holds one element, or for a capacity one per side its
	// waves are measured on (Capacity.Sides).
	elements []gradient.Element
	target   leaseapi.Target
	inj      *leaseapi.Client
	route    elementRoute
}

// newRunner turns a request into a runner, or a 400.
func (x *Coordinator) newRunner(req api.ExperimentRequest) (*runner, error) {
	xc := x.set.Experiments
	names := req.Elements
	switch {
	case req.Element != "" && len(names) > 0:
		return nil, apierror.Badf("give element or elements, not both")
	case req.Element != "":
		names = []string{req.Element}
	case len(names) == 0:
		return nil, apierror.Badf("element: want link:<source>-><target>, frequency:<name> or capacity:<name>")
	case len(names) > maxExperimentElements:
		return nil, apierror.Badf("elements: %d, at most %d in one experiment", len(names), maxExperimentElements)
	}
	plans := make(map[string]elementPlan, len(names))
	elements := make([]gradient.Element, 0, len(names))
	routes := make([]elementRoute, 0, len(names))
	for _, name := range names {
		if _, dup := plans[name]; dup {
			return nil, apierror.Badf("elements: %q is listed twice", name)
		}
		p, err := x.planElement(name, req.Injector)
		if err != nil {
			return nil, err
		}
		plans[name] = p
		for _, el := range p.elements {
			elements = append(elements, el)
			routes = append(routes, p.route)
		}
	}
	settings := xc.Settings
	train := &settings.Train
	if req.K != 0 {
		train.K = req.K
	}
	if req.N != 0 {
		train.N = req.N
	}
	if req.Scale != 0 {
		train.Scale = req.Scale
	}
	if err := train.Validate(); err != nil {
		return nil, apierror.Badf("%v", err)
	}
	p99 := xc.MaxP99Ms
	if req.MaxP99Ms != 0 {
		p99 = req.MaxP99Ms
	}
	if !(p99 >= 0) || math.IsInf(p99, 0) {
		return nil, apierror.Badf("max_p99_ms: must be ≥ 0, got %v", req.MaxP99Ms)
	}
	lateness := xc.Lateness
	if lateness == 0 {
		// A sample reaches observe when its trace completes: up to
		// trace_wait after the request, plus the engine's 1 s expiry tick.
		lateness = x.set.TraceWait + 2*time.Second
	}
	id := newExperimentID()
	gcfg := gradient.Config{
		ID:       id,
		Settings: settings,
		Elements: elements,
		Lateness: lateness,
		Guard:    gradient.Guard{P99Ms: p99},
	}
	now := x.now()
	label := strings.Join(names, ",")
	run := &runner{
		x: x, id: id, element: label, plans: plans, gcfg: gcfg, routes: routes,
		samples:    make(chan frontSample, xc.SampleBuffer),
		covariates: make(chan covariateSample, covariateBuffer),
		stopCh:     make(chan struct{}),
		done:       make(chan struct{}),
		leases:     map[string]*leaseRef{},
		started:    now,
		snap: api.Experiment{ID: id, Element: label, Elements: slices.Clone(names),
			Phase: string(gradient.PhaseTraining), Started: now.Unix()},
	}
	return run, nil
}

// planElement resolves one element of a request: its basis, bounds and
// injector target, or a 400 (422 when its operating point is unusable).
func (x *Coordinator) planElement(name, reqInjector string) (elementPlan, error) {
	xc := x.set.Experiments
	kind, rest, ok := strings.Cut(name, ":")
	if !ok || rest == "" {
		return elementPlan{}, apierror.Badf("element: want link:<source>-><target>, frequency:<name> or capacity:<name>, got %q", name)
	}
	var (
		p      elementPlan
		injURL string
	)
	switch kind {
	case "link":
		src, dst, ok := strings.Cut(rest, "->")
		if !ok || src == "" || dst == "" {
			return p, apierror.Badf("element: want link:<source>-><target>, got %q", name)
		}
		addresses, known := x.set.Traffic.Links(src, dst)
		lt, err := xc.linkTarget(rest, dst, addresses, known)
		var calls map[string]float64
		if err == nil {
			// The prior gradients: calls per request to the delayed
			// address, else on the link (spans may name the callee by
			// host name).
			calls = x.set.Traffic.CallsPerRequest(src, dst, net.JoinHostPort(lt.host, strconv.Itoa(int(lt.port))))
		}
		if err != nil {
			return p, apierror.Badf("element %q: %v", name, err)
		}
		injURL = firstNonEmpty(reqInjector, lt.injector, xc.Injector)
		p.target = leaseapi.Target{Link: &leaseapi.Link{Proto: lt.proto, Dst: lt.host, DstPort: lt.port, Direction: "out"}}
		p.route = elementRoute{caller: src, address: net.JoinHostPort(lt.host, strconv.Itoa(int(lt.port)))}
		p.elements = []gradient.Element{{
			ID: name, Basis: gradient.Link(),
			MinAmplitude: float64(xc.MinDelay) / float64(time.Millisecond),
			// The injector holds floor + amplitude under its max_delay.
			MaxAmplitude:   float64(xc.MaxDelay-xc.DelayFloor) / float64(time.Millisecond),
			PriorGradients: calls,
		}}
	case "capacity":
		cp, ok := xc.Capacities[rest]
		if !ok {
			return p, apierror.Badf("element %q: no experiments.capacities[%q] names its cgroup and process", name, rest)
		}
		basis, err := x.capacityBasis(cp)
		if err != nil {
			return p, apierror.New(http.StatusUnprocessableEntity, "element %q: %v", name, err)
		}
		injURL = firstNonEmpty(reqInjector, cp.Injector, xc.Injector)
		p.target = leaseapi.Target{Cgroup: cp.Cgroup}
		a0, maxA := cp.fractions()
		for _, b := range cp.bases(basis) {
			el := gradient.Element{ID: name, Basis: b, InitialAmplitude: a0, MinAmplitude: 0.01, MaxAmplitude: maxA, SeparateAdaptive: true}
			if b.Above {
				el.MaxAmplitude = cp.maxGrant()
			}
			p.elements = append(p.elements, el)
		}
	case "frequency":
		fr, ok := xc.Frequencies[rest]
		if !ok {
			return p, apierror.Badf("element %q: no experiments.frequencies[%q] names its CPUs and process", name, rest)
		}
		basis, err := x.frequencyBasis(fr)
		if err != nil {
			return p, apierror.New(http.StatusUnprocessableEntity, "element %q: %v", name, err)
		}
		injURL = firstNonEmpty(reqInjector, fr.Injector, xc.Injector)
		p.target = leaseapi.Target{CPUs: fr.CPUs}
		// The knob is kHz below f.
		a0, maxA := fr.fractions()
		khz := basis.Operating * 1000
		p.elements = []gradient.Element{{ID: name, Basis: basis, InitialAmplitude: a0 * khz, MinAmplitude: 0.01 * khz, MaxAmplitude: maxA * khz, SeparateAdaptive: true}}
	default:
		return p, apierror.Badf("element: %q: the coordinator measures link:<source>-><target>, frequency:<name> and capacity:<name> elements", name)
	}
	if injURL == "" {
		return p, apierror.Badf("element %q: injector: no injector URL in the request, the element's configuration or experiments.injector", name)
	}
	if err := checkURL(injURL); err != nil {
		return p, apierror.Badf("element %q: injector: %v", name, err)
	}
	// The token goes only where the configuration sends it: a request may
	// pick among the configured injectors, never name its own.
	injURL = strings.TrimRight(injURL, "/")
	if !slices.Contains(xc.InjectorURLs(), injURL) {
		return p, apierror.New(http.StatusForbidden, "element %q: injector %q is not a configured injector (experiments.injector or an element's own)", name, injURL)
	}
	p.inj = leaseapi.NewClient(injURL, string(xc.Token), x.injectorHTTP())
	return p, nil
}

func (c Config) linkTarget(link, dst string, discovered, known []string) (linkTarget, error) {
	addr, inj := dst, ""
	if l, ok := c.Links[link]; ok {
		addr, inj = l.Address, l.Injector
	} else if len(discovered) > 0 {
		// The address the caller's spans called the callee at most often.
		addr = discovered[0]
	}
	t, err := parseLinkAddress(addr)
	if err != nil {
		if len(known) > 20 {
			known = append(known[:20:20], "…")
		}
		return t, fmt.Errorf("no address for the link: the traces show no call on it with server.address and server.port (links seen: %s), and experiments.links[%q].address is not set (%v)",
			strings.Join(known, ", "), link, err)
	}
	t.injector = inj
	return t, nil
}

// parseLinkAddress reads "tcp://host:port", "udp://host:port" or
// "host:port" (tcp).
func parseLinkAddress(s string) (linkTarget, error) {
	t := linkTarget{proto: "tcp"}
	if p, rest, ok := strings.Cut(s, "://"); ok {
		t.proto, s = p, rest
	}
	if t.proto != "tcp" && t.proto != "udp" {
		return t, fmt.Errorf("protocol %q, want tcp or udp", t.proto)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return t, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || host == "" {
		return t, fmt.Errorf("%q is not host:port", s)
	}
	t.host, t.port = host, uint16(p)
	return t, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func newExperimentID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "exp-" + hex.EncodeToString(b)
}

// leaseRef is one lease the experiment holds at the injector.
type leaseRef struct {
	id        string // the injector's
	element   string
	amplitude float64
}

// runner drives one experiment: its goroutine alone owns the state machine
// and the leases; the API reads the snapshot.
type runner struct {
	x       *Coordinator
	id      string
	element string                 // the elements, comma-separated
	plans   map[string]elementPlan // by element: what its leases perturb, at which injector
	gcfg    gradient.Config
	routes  []elementRoute // by element index, for references (under x.mu)
	samples chan frontSample
	// covariates carries host steal readings (observeSteal).
	covariates chan covariateSample
	dropped    atomic.Int64

	stopOnce   sync.Once
	stopCh     chan struct{}
	stopReason atomic.Value // string
	done       chan struct{}

	// Owned by the run goroutine.
	exp         *gradient.Experiment
	pending     []frontSample
	pendingCovs []covariateSample
	leases      map[string]*leaseRef
	started     time.Time
	lastPersist time.Time
	lastPhase   string

	mu   sync.Mutex
	snap api.Experiment
}

func (r *runner) abort(reason string) {
	r.stopOnce.Do(func() {
		r.stopReason.Store(reason)
		close(r.stopCh)
	})
}

func (r *runner) snapshot() api.Experiment {
	r.mu.Lock()
	defer r.mu.Unlock()
	ex := r.snap
	ex.Gradients = append([]api.Gradient(nil), r.snap.Gradients...)
	return ex
}

func (r *runner) logger() *zap.Logger {
	return r.x.set.Logger.With(zap.String("experiment", r.id), zap.String("element", r.element))
}

// run ticks the state machine every second, feeds it the samples and
// executes its actions until it ends or is aborted.
func (r *runner) run() {
	defer close(r.done)
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	r.persist(true)
	for !r.finished() {
		select {
		case <-r.stopCh:
			reason, _ := r.stopReason.Load().(string)
			r.end(reason)
			return
		case s := <-r.samples:
			r.observe(s)
		case c := <-r.covariates:
			r.observeCovariate(c)
		case <-tick.C:
			r.drain()
			r.tick(r.x.now())
		}
	}
	r.end("")
}

func (r *runner) finished() bool { return r.exp != nil && r.exp.Finished() }

func (r *runner) drain() {
	for {
		select {
		case s := <-r.samples:
			r.observe(s)
		case c := <-r.covariates:
			r.observeCovariate(c)
		default:
			return
		}
	}
}

// observeCovariate feeds a steal reading to the state machine, or holds it
// (bounded) until the target is chosen: the training grid starts with the
// samples held then.
func (r *runner) observeCovariate(c covariateSample) {
	if r.exp == nil {
		holdPending(r, &r.pendingCovs, c, maxPendingCovariates)
		return
	}
	r.exp.ObserveCovariate(c.name, c.from, c.to, c.v)
}

// holdPending keeps v until the state machine exists, while buf has room,
// and counts what it drops.
func holdPending[T any](r *runner, buf *[]T, v T, limit int) {
	if len(*buf) < limit {
		*buf = append(*buf, v)
	} else {
		r.dropped.Add(1)
	}
}

func (r *runner) observe(s frontSample) {
	if r.exp == nil {
		holdPending(r, &r.pending, s, maxPending)
		return
	}
	r.feed(s)
}

// feed gives the state machine one sample and carries out what it says (a
// stop when the SLO guard trips).
func (r *runner) feed(s frontSample) {
	if s.routed {
		r.execute(r.exp.ObserveRouted(s.Sample, s.crossed))
		return
	}
	r.execute(r.exp.Observe(s.Sample))
}

func (r *runner) tick(now time.Time) {
	if r.exp == nil && !r.discover(now) {
		r.publish(now)
		return
	}
	r.execute(r.exp.Tick(now))
	r.publish(now)
}

// discover chooses the busiest front transaction as the target once enough
// samples came, and replays them into a new state machine.
func (r *runner) discover(now time.Time) bool {
	if len(r.pending) < discoverySamples {
		if now.Sub(r.started) > discoveryTimeout {
			r.fail(fmt.Sprintf("only %d front SERVER spans in %v: nothing to measure", len(r.pending), discoveryTimeout))
		}
		return false
	}
	counts := map[string]int{}
	for _, s := range r.pending {
		counts[s.Transaction]++
	}
	best := ""
	for _, tx := range slices.Sorted(maps.Keys(counts)) {
		if counts[tx] > counts[best] {
			best = tx
		}
	}
	cfg := r.gcfg
	cfg.Target = best
	exp, err := gradient.NewExperiment(cfg)
	if err != nil {
		r.fail(err.Error())
		return false
	}
	r.exp = exp
	for _, c := range r.pendingCovs {
		exp.ObserveCovariate(c.name, c.from, c.to, c.v)
	}
	for _, s := range r.pending {
		r.feed(s)
	}
	r.pending, r.pendingCovs = nil, nil
	return true
}

func (r *runner) fail(reason string) {
	r.mu.Lock()
	r.snap.Phase, r.snap.Reason, r.snap.Finished = "failed", reason, r.x.now().Unix()
	r.mu.Unlock()
	r.abort(reason)
}

// execute carries out the state machine's actions against the injector.
func (r *runner) execute(acts []gradient.Action) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a.Kind {
		case gradient.ActionStartLease:
			if err := r.startLease(a); err != nil {
				r.logger().Warn("perfmodel: injector lease failed", zap.String("lease", a.Lease), zap.Error(err))
				acts = append(acts, r.exp.LeaseFailed(a.Lease, r.x.now(), err)...)
			}
		case gradient.ActionStopLease:
			mean, stdErr, ok, failed := r.stopLease(a.Lease)
			switch {
			case failed != nil:
				// The perturbation stopped before its end (e.g. another
				// process deleted the rule): the window did not get the wave
				// it asked for, so its measurement is discarded.
				r.logger().Warn("perfmodel: injector lease failed while running; its measurement is discarded", zap.String("lease", a.Lease), zap.Error(failed))
				acts = append(acts, r.exp.LeaseFailed(a.Lease, r.x.now(), failed)...)
			case ok:
				r.exp.Injected(a.Lease, mean, stdErr)
			default:
				r.exp.NoInjectedReport(a.Lease)
			}
		}
	}
}

func (r *runner) startLease(a gradient.Action) error {
	p, ok := r.plans[a.Element]
	if !ok {
		return fmt.Errorf("no element %q in this experiment", a.Element)
	}
	start := a.Start.UTC()
	body := leaseapi.Request{
		Kind:   a.LeaseKind,
		Target: p.target,
		Wave: leaseapi.Wave{Amplitude: a.Amplitude, Period: a.Period.String(), Cycles: a.Cycles,
			Start: &start},
		Duration: a.Duration.Round(time.Millisecond).String(),
	}
	if a.LeaseKind == gradient.KindLink.LeaseKind() {
		body.Wave.Floor = float64(r.x.set.Experiments.DelayFloor) / float64(time.Millisecond)
	} else {
		body.Wave.Floor = a.Floor // a centered or above capacity wave's grant
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	st, err := p.inj.Create(ctx, body)
	if err != nil {
		return err
	}
	if st.ID == "" {
		return errors.New("injector answered without a lease id")
	}
	r.leases[a.Lease] = &leaseRef{id: st.ID, element: a.Element, amplitude: a.Amplitude}
	return nil
}

// stopLease deletes the lease at the injector and returns the on-phase delay
// it actually applied, with its standard error (see injectedDelay); failed
// is set when the injector reports that the lease failed while it ran.
func (r *runner) stopLease(name string) (mean, stdErr float64, ok bool, failed error) {
	ref, ok := r.leases[name]
	if !ok {
		return 0, 0, false, nil
	}
	p := r.plans[ref.element]
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	st, err := p.inj.Stop(ctx, ref.id)
	if leaseapi.IsNotFound(err) {
		delete(r.leases, name) // already forgotten by the injector: nothing active
		return 0, 0, false, nil
	}
	if err != nil {
		// Kept for a retry at the end; the lease expires by itself anyway.
		r.logger().Warn("perfmodel: releasing injector lease failed", zap.String("lease", ref.id), zap.Error(err))
		return 0, 0, false, nil
	}
	delete(r.leases, name)
	if st.State == leaseapi.StateFailed {
		return 0, 0, false, fmt.Errorf("lease %s failed: %s", ref.id, st.Error)
	}
	if p.target.CPUs != nil {
		// The injector rounds a frequency wave to a P-state: the step it
		// took is the change injected, known exactly.
		if st.Stats == nil || !(st.Stats.StepKHz > 0) {
			return 0, 0, false, nil
		}
		return st.Stats.StepKHz, 0, true, nil
	}
	mean, stdErr, ok = injectedDelay(ref.amplitude, st)
	if s := st.Stats; ok && s != nil {
		fields := []zap.Field{zap.String("lease_element", ref.element), zap.Float64("amplitude_ms", ref.amplitude),
			zap.Float64("injected_ms", mean), zap.Float64("injected_se_ms", stdErr)}
		if s.On != nil && s.Off != nil {
			fields = append(fields, zap.Float64("packets_on_minus_off_ms", s.On.MeanMs-s.Off.MeanMs), zap.Int("packets_on", s.On.Count))
		}
		if p := s.Probe; p != nil && p.On != nil && p.Off != nil {
			fields = append(fields, zap.Float64("probes_on_minus_off_ms", p.On.MeanMs-p.Off.MeanMs), zap.Int("probes_on", p.On.Count))
		}
		r.logger().Info("perfmodel: injector lease released", fields...)
	}
	return mean, stdErr, ok, nil
}

// minProbesPerPhase is how many probes each phase needs before their on −
// off is taken over the hook-to-verdict one: 20 s of the injector's default
// 50 ms probe stream, so an active window qualifies and a single cycle not.
const minProbesPerPhase = 200

// injectedDelay is the on-phase delay a lease's statistics show (paper 000
// §3: the delay actually injected, not the amplitude requested). The
// injector splits its measurements by phase: the on-phase mean less the
// off-phase mean is the delay the wave added, free of the pass-through time
// and the floor every packet pays, scaled to the amplitude by the phases'
// requested difference. Its loopback probes, timed from send to receive,
// are preferred when there are enough of them: the packets' own times run
// from the injector's hook to its verdict and miss the extra wait a busy
// host adds to the on-phase before the hook and after the verdict (a 1.5 ms
// wave reached a receiver 4–11% larger than those times; the probes read
// it within two standard errors in 11 of 12 cases, `make bench-hold-cost`). An injector
// without the split gives only the mean over every packet; then the
// on-phase delay is the amplitude scaled by the ratio of actual to requested
// means, after the pass-through time (at least min_ms) is subtracted.
func injectedDelay(amplitude float64, st leaseapi.Status[*leaseapi.Stats]) (mean, stdErr float64, ok bool) {
	s := st.Stats
	if s == nil || s.Count == 0 {
		return 0, 0, false
	}
	byPhase := func(on, off *leaseapi.PhaseStats, min int) (mean, stdErr float64, ok bool) {
		if on == nil || off == nil || on.Count < min || off.Count < min || !(on.RequestedMeanMs > off.RequestedMeanMs) {
			return 0, 0, false
		}
		// Both phases' requests include the floor; their difference is the wave.
		scale := amplitude / (on.RequestedMeanMs - off.RequestedMeanMs)
		mean = math.Max(0, on.MeanMs-off.MeanMs) * scale
		stdErr = math.Hypot(on.StdMs/math.Sqrt(float64(on.Count)), off.StdMs/math.Sqrt(float64(off.Count))) * scale
		return mean, stdErr, true
	}
	if p := s.Probe; p != nil {
		if mean, stdErr, ok := byPhase(p.On, p.Off, minProbesPerPhase); ok {
			return mean, stdErr, true
		}
	}
	if mean, stdErr, ok := byPhase(s.On, s.Off, 2); ok {
		return mean, stdErr, true
	}
	if !(s.RequestedMeanMs > 0) {
		return 0, 0, false
	}
	return amplitude * math.Max(0, s.MeanMs-s.MinMs) / s.RequestedMeanMs, 0, true
}

// end aborts the state machine if it still runs, releases every lease
// left, and stores the final record and the gradients.
func (r *runner) end(reason string) {
	now := r.x.now()
	if r.exp != nil && !r.exp.Finished() {
		r.execute(r.exp.Abort(now, reason))
	}
	for name := range r.leases {
		r.stopLease(name)
	}
	if len(r.leases) > 0 {
		r.logger().Error("perfmodel: injector leases not released; they end at their expiry", zap.Int("leases", len(r.leases)))
	}
	r.mu.Lock()
	if r.exp == nil && r.snap.Phase != "failed" {
		r.snap.Phase, r.snap.Reason = string(gradient.PhaseAborted), reason
	}
	r.mu.Unlock()
	r.publish(now)
	r.mu.Lock()
	if r.snap.Finished == 0 {
		r.snap.Finished = now.Unix()
	}
	r.mu.Unlock()
	r.persist(true)
	r.logger().Info("perfmodel: experiment ended", zap.String("phase", r.snapshot().Phase), zap.Duration("wall", now.Sub(r.started)))
}

// publish refreshes the snapshot the API serves from the state machine.
func (r *runner) publish(now time.Time) {
	if r.exp == nil {
		r.persist(false)
		return
	}
	p := r.exp.Progress(now)
	res := r.exp.Result()
	detail, _ := json.Marshal(res)
	r.mu.Lock()
	r.snap.Detail = detail
	r.snap.Phase, r.snap.Reason = string(p.Phase), p.Reason
	r.snap.Percent = p.Percent
	r.snap.ETASeconds = p.ETA.Seconds()
	r.snap.Gradients = gradientsOf(r.id, res)
	r.snap.CurrentElement = ""
	if !r.exp.Finished() {
		r.snap.CurrentElement = p.Element
	}
	if p.Phase == gradient.PhaseDone {
		// Failed only if no element succeeded; otherwise the reason names
		// the elements that failed beside the gradients of the others.
		var failed []string
		for _, el := range res.Elements {
			if el.Status == "failed" {
				failed = append(failed, el.Element+": "+el.Error)
			}
		}
		if len(failed) > 0 {
			r.snap.Reason = strings.Join(failed, "; ")
			if len(failed) == len(res.Elements) {
				r.snap.Phase = "failed"
			}
			if len(res.Elements) == 1 {
				r.snap.Reason = res.Elements[0].Error
			}
		}
	}
	if r.exp.Finished() && r.snap.Finished == 0 {
		r.snap.Finished = now.Unix()
		r.snap.ETASeconds = 0
	}
	r.mu.Unlock()
	r.persist(false)
}

func gradientsOf(id string, res gradient.Result) []api.Gradient {
	var out []api.Gradient
	for _, el := range res.Elements {
		if el.Status != "done" {
			continue
		}
		var basis *api.Basis
		if b := el.Basis; b.Kind != gradient.KindLink {
			basis = &api.Basis{Kind: string(b.Kind), Operating: b.Operating, FrequencyMHz: b.FrequencyMHz, Alpha: b.Alpha, Workload: b.Workload, Side: b.Side()}
		}
		interval := el.Interval()
		for _, tx := range slices.Sorted(maps.Keys(el.Transactions)) {
			est := el.Transactions[tx]
			out = append(out, api.Gradient{
				Element: el.Element, Transaction: tx, Gradient: est.Gradient, CI95: est.CI95,
				SNR: est.SNR, Bins: est.Bins, PerturbationMs: est.PerturbationMs,
				Experiment: id, Measured: el.WindowEnd.Unix(), Basis: basis, Interval: interval,
			})
		}
	}
	return out
}

// persist stores the experiment record (on a phase change, every
// persistEvery, or when forced) and, once it is finished, its gradients.
func (r *runner) persist(force bool) {
	ex := r.snapshot()
	now := r.x.now()
	if !force && ex.Phase == r.lastPhase && now.Sub(r.lastPersist) < persistEvery {
		return
	}
	r.lastPhase, r.lastPersist = ex.Phase, now
	x := r.x
	var recs []store.Record
	put := func(kind, key string, at int64, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		recs = append(recs, store.Record{Kind: kind, Key: key, Shard: x.set.Shard, WindowStart: timegrid.AlignDown(at, x.set.Window), Resolution: x.set.Window, Payload: b})
	}
	put(model.KindExperimnt, ex.ID, ex.Started, ex)
	if ex.Finished != 0 {
		for _, g := range ex.Gradients {
			put(model.KindGradient, GradientKey(g), g.Measured, g)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := x.st.Put(ctx, recs); err != nil {
		r.logger().Warn("perfmodel: storing the experiment failed", zap.Error(err))
	}
}

// GradientKey keeps the newest gradient per element, transaction and, for a
// capacity measured on several sides of its operating point, side: those are
// one set (gradient.Secant). A below wave keeps the key it always had.
func GradientKey(g api.Gradient) string {
	k := g.Element + "\x1f" + g.Transaction
	if g.Basis != nil && g.Basis.Side != "" && g.Basis.Side != gradient.SideBelow {
		k += "\x1f" + g.Basis.Side
	}
	return k
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
