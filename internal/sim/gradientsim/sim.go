// Package gradientsim is a deterministic discrete-event simulator of a front tier
// calling back ends over one-way links, with an injector that runs the
// experiment's square-wave leases. It reproduces the micro-benchmark of
// paper 000 §4 (a front end calling one back end whose service time is
// N(100 ms, 30 ms), one request at a time) and the communication patterns
// of §2.1 and §5.4: a synchronous call, m serial calls, an asynchronous
// message and load balancing over replicas. Back ends are either delay
// stations (every request served at once for a random time) or
// processor-sharing CPUs whose speed is capacity × frequency, for the
// queueing bases of paper 003 §III.
//
// Time is in Unix seconds. The same Config and seed always give the same
// samples.
package gradientsim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/tierscope/tierscope/internal/spectral"
)

// Dist is a random duration or amount.
type Dist struct {
	// Kind is "const", "normal" (truncated at 0 by redrawing), "exp" or
	// "lognormal" (with the given mean and standard deviation).
	Kind      string
	Mean, Std float64
}

// Const returns a constant.
func Const(v float64) Dist { return Dist{Kind: "const", Mean: v} }

// Normal returns a normal distribution truncated at 0.
func Normal(mean, std float64) Dist { return Dist{Kind: "normal", Mean: mean, Std: std} }

// Exp returns an exponential distribution.
func Exp(mean float64) Dist { return Dist{Kind: "exp", Mean: mean} }

// LogNormal returns a lognormal distribution with this mean and std.
func LogNormal(mean, std float64) Dist { return Dist{Kind: "lognormal", Mean: mean, Std: std} }

func (d Dist) sample(r *rand.Rand) float64 {
	switch d.Kind {
	case "", "const":
		return d.Mean
	case "normal":
		for range 64 {
			if v := d.Mean + d.Std*r.NormFloat64(); v >= 0 {
				return v
			}
		}
		return 0
	case "exp":
		return d.Mean * r.ExpFloat64()
	case "lognormal":
		s2 := math.Log(1 + d.Std*d.Std/(d.Mean*d.Mean))
		mu := math.Log(d.Mean) - s2/2
		return math.Exp(mu + math.Sqrt(s2)*r.NormFloat64())
	}
	panic("sim: unknown distribution " + d.Kind)
}

// Server is a back end.
type Server struct {
	// Kind is "delay" (infinitely many servers, Service seconds each) or
	// "ps" (one processor-sharing CPU of CapacityFraction × FrequencyMHz
	// megacycles per second; each request needs Work megacycles).
	Kind     string
	Service  Dist
	Work     Dist
	Capacity float64
	FreqMHz  float64
	// Modulation, if set, multiplies every service time (delay) or work
	// (ps) drawn at time t: slow drifts, periodic noise.
	Modulation func(t float64) float64
}

// Call is one step of a transaction at the front.
type Call struct {
	// Targets are replicas, taken round-robin per call.
	Targets []string
	// Repeat makes the call this many times in series (m serial calls).
	Repeat int
	// Async sends the request and goes on without waiting for the reply.
	Async bool
}

// Pattern is what the front does for one transaction: Pre, then the calls
// in order, then Post, and reply.
type Pattern struct {
	Front     string
	Pre, Post Dist
	Calls     []Call
}

// Clients is a closed population: Count clients each issue a request,
// wait for its reply, think, and issue the next; each request's
// transaction is drawn with the given weights.
type Clients struct {
	Count        int
	Think        Dist
	Transactions []string
	Weights      []float64 // nil: uniform
}

// Open is a Poisson source of Rate requests per second.
type Open struct {
	Rate         float64
	Transactions []string
	Weights      []float64
}

// Config describes the simulated system.
type Config struct {
	Seed  uint64
	Start float64 // Unix seconds of time zero
	// Links holds the base one-way latency (seconds) of named links "a->b";
	// links not listed have zero latency.
	Links        map[string]float64
	Servers      map[string]Server
	Transactions map[string]Pattern
	Clients      []Clients
	Open         []Open
	// InjectorOffsetMs is added to every injected delay and InjectorJitterMs
	// is the standard deviation of its error: the injected delay is not
	// the requested one (paper 000 §4, figure 7), and the experiment must
	// use what the injector reports.
	InjectorOffsetMs, InjectorJitterMs float64
}

// event is one scheduled action.
type event struct {
	t   float64
	seq uint64
	fn  func()
}

type events []*event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].t != e[j].t {
		return e[i].t < e[j].t
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(*event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// Sim is one simulation run.
type Sim struct {
	cfg      Config
	now      float64
	seq      uint64
	q        events
	rng      *rand.Rand
	out      []spectral.Sample
	visited  [][]string // per sample in out: the links and servers its request crossed
	rr       map[string]int
	servers  map[string]*server
	leases   map[string]*lease
	byLink   map[string]*lease // active delay lease per link
	capLease map[string]*lease // active capacity lease per server
}

// New builds a simulation and schedules its first requests.
func New(cfg Config) (*Sim, error) {
	s := &Sim{cfg: cfg, now: cfg.Start, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		rr: map[string]int{}, servers: map[string]*server{}, leases: map[string]*lease{}, byLink: map[string]*lease{}, capLease: map[string]*lease{}}
	for _, name := range sortedNames(cfg.Servers) {
		sc := cfg.Servers[name]
		switch sc.Kind {
		case "delay", "":
		case "ps":
			if !(sc.Capacity > 0) || !(sc.FreqMHz > 0) {
				return nil, fmt.Errorf("sim: ps server %q needs capacity and frequency", name)
			}
		default:
			return nil, fmt.Errorf("sim: server %q: unknown kind %q", name, sc.Kind)
		}
		s.servers[name] = &server{name: name, cfg: sc, capacity: sc.Capacity, lastT: cfg.Start}
	}
	for name, p := range cfg.Transactions {
		for _, c := range p.Calls {
			for _, t := range c.Targets {
				if s.servers[t] == nil {
					return nil, fmt.Errorf("sim: transaction %q calls unknown server %q", name, t)
				}
			}
		}
	}
	check := func(txs []string, w []float64) error {
		if len(txs) == 0 || (w != nil && len(w) != len(txs)) {
			return fmt.Errorf("sim: a workload needs transactions (and as many weights)")
		}
		for _, tx := range txs {
			if _, ok := cfg.Transactions[tx]; !ok {
				return fmt.Errorf("sim: unknown transaction %q", tx)
			}
		}
		return nil
	}
	for _, c := range cfg.Clients {
		if err := check(c.Transactions, c.Weights); err != nil {
			return nil, err
		}
		for range c.Count {
			s.at(s.now+c.Think.sample(s.rng), func() { s.clientRequest(c) })
		}
	}
	for _, o := range cfg.Open {
		if err := check(o.Transactions, o.Weights); err != nil {
			return nil, err
		}
		if !(o.Rate > 0) {
			return nil, fmt.Errorf("sim: open workload rate must be > 0")
		}
		s.at(s.now+s.rng.ExpFloat64()/o.Rate, func() { s.openArrival(o) })
	}
	return s, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Now is the simulation time.
func (s *Sim) Now() float64 { return s.now }

func (s *Sim) at(t float64, fn func()) {
	s.seq++
	heap.Push(&s.q, &event{t: t, seq: s.seq, fn: fn})
}

// RunUntil processes every event up to and including time t.
func (s *Sim) RunUntil(t float64) {
	for len(s.q) > 0 && s.q[0].t <= t {
		e := heap.Pop(&s.q).(*event)
		s.now = e.t
		e.fn()
	}
	if t > s.now {
		s.now = t
	}
}

// Drain returns the samples of the requests completed since the last
// Drain, in the order they completed. Sample.Time is the request's start.
func (s *Sim) Drain() []spectral.Sample {
	out := s.out
	s.out, s.visited = nil, nil
	return out
}

// DrainVisited is Drain with, for each sample, the links ("a->b") and
// servers its request crossed, asynchronous calls included.
func (s *Sim) DrainVisited() ([]spectral.Sample, [][]string) {
	out, visited := s.out, s.visited
	s.out, s.visited = nil, nil
	return out, visited
}

func pick(r *rand.Rand, txs []string, w []float64) string {
	if len(txs) == 1 {
		return txs[0]
	}
	if w == nil {
		return txs[r.IntN(len(txs))]
	}
	var sum float64
	for _, v := range w {
		sum += v
	}
	u := r.Float64() * sum
	for i, v := range w {
		if u < v {
			return txs[i]
		}
		u -= v
	}
	return txs[len(txs)-1]
}

func (s *Sim) clientRequest(c Clients) {
	tx := pick(s.rng, c.Transactions, c.Weights)
	s.request(tx, func() {
		s.at(s.now+c.Think.sample(s.rng), func() { s.clientRequest(c) })
	})
}

func (s *Sim) openArrival(o Open) {
	s.request(pick(s.rng, o.Transactions, o.Weights), func() {})
	s.at(s.now+s.rng.ExpFloat64()/o.Rate, func() { s.openArrival(o) })
}

// request runs one transaction at the front and calls then() at its reply.
func (s *Sim) request(tx string, then func()) {
	p := s.cfg.Transactions[tx]
	start := s.now
	var visited []string
	finish := func() {
		s.out = append(s.out, spectral.Sample{Time: start, Transaction: tx, Ms: (s.now - start) * 1000})
		s.visited = append(s.visited, visited)
		then()
	}
	var calls func(i, rep int)
	calls = func(i, rep int) {
		if i == len(p.Calls) {
			s.at(s.now+p.Post.sample(s.rng), finish)
			return
		}
		c := p.Calls[i]
		reps := max(1, c.Repeat)
		next := func() {
			if rep+1 < reps {
				calls(i, rep+1)
			} else {
				calls(i+1, 0)
			}
		}
		key := tx + "/" + fmt.Sprint(i)
		target := c.Targets[s.rr[key]%len(c.Targets)]
		s.rr[key]++
		visited = append(visited, p.Front+"->"+target, target)
		if c.Async {
			s.call(p.Front, target, func() {})
			next()
			return
		}
		s.call(p.Front, target, next)
	}
	s.at(s.now+p.Pre.sample(s.rng), func() { calls(0, 0) })
}

// call sends a request from → to, serves it and sends the reply back.
func (s *Sim) call(from, to string, replied func()) {
	s.at(s.now+s.linkDelay(from+"->"+to), func() {
		s.servers[to].serve(s, func() {
			s.at(s.now+s.linkDelay(to+"->"+from), replied)
		})
	})
}

// linkDelay is the link's latency now plus any delay injected on it.
func (s *Sim) linkDelay(link string) float64 {
	d := s.cfg.Links[link]
	if l := s.byLink[link]; l != nil && l.on(s.now) {
		ms := l.amplitude + s.cfg.InjectorOffsetMs
		if s.cfg.InjectorJitterMs > 0 {
			ms += s.cfg.InjectorJitterMs * s.rng.NormFloat64()
		}
		ms = math.Max(0, ms)
		l.count++
		l.sum += ms
		l.sumsq += ms * ms
		d += ms / 1000
	}
	return d
}

// server is a back end at run time.
type server struct {
	name     string
	cfg      Server
	capacity float64
	// Processor sharing: jobs finish when the attained service (virtual
	// time, megacycles per job) reaches their finish tag.
	vt     float64
	lastT  float64
	jobs   jobHeap
	gen    uint64
	busy   float64 // seconds with at least one job
	served int
}

type job struct {
	tag  float64
	done func()
}

type jobHeap []job

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(i, j int) bool { return h[i].tag < h[j].tag }
func (h jobHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)        { *h = append(*h, x.(job)) }
func (h *jobHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (v *server) speed() float64 { return v.capacity * v.cfg.FreqMHz }

func (v *server) serve(s *Sim, done func()) {
	mod := 1.0
	if v.cfg.Modulation != nil {
		mod = v.cfg.Modulation(s.now)
	}
	if v.cfg.Kind != "ps" {
		v.served++
		s.at(s.now+v.cfg.Service.sample(s.rng)*mod, done)
		return
	}
	v.advance(s.now)
	w := math.Max(1e-9, v.cfg.Work.sample(s.rng)*mod)
	heap.Push(&v.jobs, job{tag: v.vt + w, done: done})
	v.plan(s)
}

// advance moves virtual time to t at the current speed.
func (v *server) advance(t float64) {
	if n := len(v.jobs); n > 0 {
		v.vt += (t - v.lastT) * v.speed() / float64(n)
		v.busy += t - v.lastT
	}
	v.lastT = t
}

// plan schedules the next departure; older plans are void.
func (v *server) plan(s *Sim) {
	v.gen++
	if len(v.jobs) == 0 {
		return
	}
	gen := v.gen
	dt := math.Max(0, (v.jobs[0].tag-v.vt)*float64(len(v.jobs))/v.speed())
	s.at(s.now+dt, func() {
		if gen != v.gen {
			return
		}
		v.advance(s.now)
		j := heap.Pop(&v.jobs).(job)
		v.served++
		v.plan(s)
		j.done()
	})
}

// setCapacity changes a ps server's capacity now.
func (v *server) setCapacity(s *Sim, c float64) {
	v.advance(s.now)
	v.capacity = c
	v.plan(s)
}

// Busy is the time server has had work since the start (ps servers), and
// Served the requests it has finished.
func (s *Sim) Busy(server string) (busySeconds float64, served int) {
	v := s.servers[server]
	v.advance(s.now)
	return v.busy, v.served
}

// lease is a running square wave.
type lease struct {
	key        string
	kind       string
	base       float64 // capacity to restore
	target     string
	amplitude  float64
	floor      float64 // capacity withheld in the off-phases; < 0 grants
	start      float64
	period     float64
	end        float64
	stopped    bool
	count      int
	sum, sumsq float64
}

func (l *lease) on(t float64) bool {
	if l.stopped || t < l.start || t >= l.end {
		return false
	}
	return math.Mod(t-l.start, l.period) < l.period/2
}

// Wave is a lease request, as the experiment's start action gives it.
type Wave struct {
	Key       string
	Kind      string // "delay" or "capacity"
	Target    string // a link "a->b" or a ps server
	Amplitude float64
	// Floor, for capacity, is the fraction withheld in the off-phases, the
	// on-phases withholding Floor + Amplitude; below 0 it grants, as a
	// centered wave does (gradient.Basis.OffKnob).
	Floor  float64
	Start  float64
	Period float64
	Cycles int
	Single bool
}

// StartLease runs a square wave until it ends or is stopped.
func (s *Sim) StartLease(w Wave) error {
	if _, dup := s.leases[w.Key]; dup {
		return fmt.Errorf("sim: lease %q exists", w.Key)
	}
	l := &lease{key: w.Key, kind: w.Kind, target: w.Target, amplitude: w.Amplitude, floor: w.Floor, start: w.Start, period: w.Period}
	switch {
	case w.Single:
		l.end = w.Start + w.Period/2
	case w.Cycles > 0:
		l.end = w.Start + float64(w.Cycles)*w.Period
	default:
		l.end = math.Inf(1)
	}
	switch w.Kind {
	case "delay":
		if w.Floor != 0 {
			return fmt.Errorf("sim: only capacity leases take a floor")
		}
		if !strings.Contains(w.Target, "->") {
			return fmt.Errorf("sim: delay target %q is not a link", w.Target)
		}
		if old := s.byLink[w.Target]; old != nil && !old.stopped && s.now < old.end {
			return fmt.Errorf("sim: link %q already has a lease", w.Target)
		}
		s.byLink[w.Target] = l
	case "capacity":
		v := s.servers[w.Target]
		if v == nil || v.cfg.Kind != "ps" {
			return fmt.Errorf("sim: capacity target %q is not a ps server", w.Target)
		}
		if s.capLease[w.Target] != nil {
			return fmt.Errorf("sim: server %q already has a capacity lease", w.Target)
		}
		s.capLease[w.Target] = l
		l.base = v.capacity
		// Edges every half period; each re-reads the lease so a stop wins.
		var edge func(t float64, on bool)
		edge = func(t float64, on bool) {
			s.at(t, func() {
				if l.stopped || s.now >= l.end {
					return
				}
				c := l.base * (1 - l.floor)
				if on {
					c = l.base * (1 - l.floor - l.amplitude)
					l.count++
					l.sum += l.amplitude
					l.sumsq += l.amplitude * l.amplitude
				}
				v.setCapacity(s, c)
				edge(t+l.period/2, !on)
			})
		}
		edge(math.Max(w.Start, s.now), true)
		if !math.IsInf(l.end, 1) {
			s.at(l.end, func() { s.endCapacity(l) })
		}
	default:
		return fmt.Errorf("sim: unknown lease kind %q", w.Kind)
	}
	s.leases[w.Key] = l
	return nil
}

// endCapacity restores a capacity lease's server, once.
func (s *Sim) endCapacity(l *lease) {
	if s.capLease[l.target] != l {
		return
	}
	delete(s.capLease, l.target)
	s.servers[l.target].setCapacity(s, l.base)
}

// Injected is what a lease did: the mean and standard error of the
// injected change (ms per delayed message, or the capacity fraction per
// on-phase) and how many there were.
type Injected struct {
	Mean, StdErr float64
	Count        int
}

// StopLease stops a lease (idempotent) and returns what it injected.
func (s *Sim) StopLease(key string) (Injected, error) {
	l := s.leases[key]
	if l == nil {
		return Injected{}, fmt.Errorf("sim: no lease %q", key)
	}
	if !l.stopped {
		l.stopped = true
		if l.kind == "delay" && s.byLink[l.target] == l {
			delete(s.byLink, l.target)
		}
		if l.kind == "capacity" {
			s.endCapacity(l)
		}
	}
	return l.injected(), nil
}

func (l *lease) injected() Injected {
	in := Injected{Count: l.count}
	if l.count > 0 {
		in.Mean = l.sum / float64(l.count)
	}
	if l.count > 1 {
		v := math.Max(0, (l.sumsq-float64(l.count)*in.Mean*in.Mean)/float64(l.count-1))
		in.StdErr = math.Sqrt(v / float64(l.count))
	}
	return in
}

// WaveOn reports whether a delay wave on link is in its on-phase at t.
func (s *Sim) WaveOn(link string, t float64) bool {
	l := s.byLink[link]
	return l != nil && l.on(t)
}

// Active lists the leases injecting at time t (for safety checks).
func (s *Sim) Active(t float64) []string {
	var out []string
	for k, l := range s.leases {
		if !l.stopped && t < l.end && (l.kind != "capacity" || s.capLease[l.target] == l) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
