package stitcheval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Generate returns the traces of a synthetic application with full context
// (Strip removes it): p.Requests requests through a random topology, placed in
// time so that the overlap is p.Concurrency, recorded with per-process clock
// skew, with the spans of uninstrumented services and a random fraction of the
// others dropped (each surviving span's parent is then its nearest surviving
// ancestor, the truth), batched as exporters send them. The same parameters and
// seed give the same traces.
func Generate(p Params, seed uint64) (ptrace.Traces, error) {
	if err := p.Validate(); err != nil {
		return ptrace.Traces{}, err
	}
	g := &generator{p: p, hop: float64(p.HopDelay), ids: map[pcommon.SpanID]bool{}, target: -1}
	// One stream per concern, each drawn a fixed number of times whatever the
	// parameters, so that changing one parameter (the skew, the hop delay, the
	// style) keeps the rest of the application and its requests as they were.
	stream := func(n uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e4e_7a7e_0000+n)) }
	g.rng, g.proc, g.req, g.time, g.skew, g.lost, g.arrive, g.idr = stream(1), stream(2), stream(3), stream(4), stream(5), stream(6), stream(7), stream(8)
	g.sock, g.thread, g.kinds = stream(9), stream(10), stream(11)
	g.topology()
	for r := range p.Requests {
		g.request(int32(r))
	}
	g.drop()
	g.placeRequests()
	g.queues()
	g.callerSockets()
	g.threads()
	for i := 1; i < len(g.svcs); i++ {
		g.svcs[i].unkinded = chance(g.kinds, p.Unkinded)
	}
	for i := range g.svcs {
		g.svcs[i].coarse = chance(g.kinds, p.CoarseClock)
	}
	return g.emit(), nil
}

// kv is an attribute: a string, or an int when isInt.
type kv struct {
	k, s  string
	i     int64
	isInt bool
}

func str(k, v string) kv     { return kv{k: k, s: v} }
func num(k string, v int) kv { return kv{k: k, i: int64(v), isInt: true} }

type operation struct {
	name, method, route, rpcMethod string
	calls                          []callee
	split                          int // calls made one after the other before the parallel group
	internal, cache                bool
	statements                     int     // SQL statements
	async                          int     // 0 none, 1 INTERNAL, 2 PRODUCER (and a CONSUMER)
	work                           float64 // mean own work, in hops
}

type callee struct{ svc, op int }

type service struct {
	name, dns, lang, sqlSystem string
	level, port                int
	grpc, legacy, peerService  bool
	instanceID, roundStart     bool
	rpcPackage, rpcService     string
	clientRPCName              int // 0 pkg.Service/Method, 1 /pkg.Service/Method, 2 grpc.pkg.Service
	serverRPCName              int // 0 pkg.Service/Method, 1 /pkg.Service/Method
	platform                   Platform
	dbReport                   DBReport
	ops                        []operation
	procs                      []int
	uninstrumented             bool
	unkinded                   bool // every span INTERNAL, as a manual tracer's default
	coarse                     bool // every timestamp on a whole millisecond
}

type process struct {
	svc       int
	res       int
	backends  map[string]int // database system -> resource of its CLIENT spans
	host, pod string
	pid       int
	skew      int64
}

type resource struct {
	svc, proc int
	attrs     []kv
}

type gspan struct {
	req, parent int32
	res         int32
	kind        ptrace.SpanKind
	name        string
	start, end  int64 // true time, from the request's start until placed
	attrs       []kv
	async       bool // may outlive its parent
	dropped     bool
	ownThread   bool // starts on a thread of its own (a parallel call, @Async work)
	id          pcommon.SpanID
}

type generator struct {
	p Params
	// rng draws the topology, proc the processes' identities, req each request's
	// path, time every duration, skew the clocks, lost the dropped spans, arrive
	// the arrivals and idr the ids.
	rng, proc, req, time, skew, lost, arrive, idr *rand.Rand
	sock, thread, kinds                           *rand.Rand
	hop                                           float64
	svcs                                          []service
	procs                                         []process
	res                                           []resource
	spans                                         []gspan
	traces                                        []pcommon.TraceID
	offset                                        []int64
	ids                                           map[pcommon.SpanID]bool
	sent                                          map[int]int // messages published per service's topic
	// target is the identifier the CLIENT span just made put in its path, for
	// its server to record alike (Params.TargetIDs); -1 when not shared.
	target int
}

var serviceNames = []string{"gateway", "cart", "checkout", "payment", "shipping", "catalog", "user", "auth", "pricing",
	"inventory", "search", "review", "recommend", "email", "currency", "ad", "order", "stock", "quote", "fraud"}

var verbs = []struct{ name, method string }{
	{"get", "GET"}, {"list", "GET"}, {"search", "GET"}, {"create", "POST"}, {"update", "PUT"}, {"check", "POST"},
	{"quote", "POST"}, {"delete", "DELETE"},
}

func chance(r *rand.Rand, p float64) bool { return r.Float64() < p }

func uniform(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

// dur is a duration of lo to hi hops times the log-normal noise (mean 1), at
// least 1 ns.
func (g *generator) dur(lo, hi float64) int64 {
	s := g.p.Noise
	f := math.Exp(g.time.NormFloat64()*s - s*s/2)
	return max(1, int64(g.hop*uniform(g.time, lo, hi)*f))
}

func hexOf(r *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[r.IntN(16)]
	}
	return string(b)
}

func uuidOf(r *rand.Rand) string {
	return hexOf(r, 8) + "-" + hexOf(r, 4) + "-" + hexOf(r, 4) + "-" + hexOf(r, 4) + "-" + hexOf(r, 12)
}

// k8sName draws n characters of the alphabet Kubernetes uses for pod names.
func k8sName(r *rand.Rand, n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// topology draws the services, their operations and processes, the calls
// between them, each operation's fan-out style and the uninstrumented tiers,
// in that order (each step draws from the same generator).
func (g *generator) topology() {
	g.services()
	g.wireCalls()
	g.fanOutStyles()
	g.uninstrumented()
}

// services draws every service: level, protocol, conventions, naming, its
// operations and its processes.
func (g *generator) services() {
	p, r := g.p, g.rng
	g.svcs = make([]service, p.Services)
	nodes := max(2, (p.Services*p.Instances+2)/3)
	for i := range g.svcs {
		s := &g.svcs[i]
		s.name = serviceNames[i%len(serviceNames)]
		if i >= len(serviceNames) {
			s.name += fmt.Sprint(i / len(serviceNames))
		}
		level := 1 + r.IntN(p.Depth)
		switch {
		case i == 0:
		case i <= p.Depth: // one service per level at least
			s.level = i
		default:
			s.level = level
		}
		grpc, legacy, peer, fqdn := r.Float64(), r.Float64(), r.Float64(), r.Float64()
		s.grpc = i > 0 && grpc < p.GRPC
		s.legacy = p.Semconv == SemconvLegacy || (p.Semconv == SemconvMixed && legacy < 0.5)
		s.peerService = s.legacy && peer < p.PeerService
		s.dns = s.name
		if fqdn < 0.3 {
			s.dns = s.name + ".shop.svc.cluster.local"
		}
		s.port = 8080
		if s.grpc {
			s.port = 50051
		}
		s.lang = []string{"java", "go", "python", "nodejs", "dotnet"}[r.IntN(5)]
		s.sqlSystem = []string{"mysql", "postgresql"}[r.IntN(2)]
		s.rpcPackage = "shop." + s.name + ".v1"
		s.rpcService = strings.ToUpper(s.name[:1]) + s.name[1:] + "Service"
		s.clientRPCName, s.serverRPCName = r.IntN(3), r.IntN(2)
		s.instanceID = chance(r, p.InstanceID)
		s.roundStart = chance(r, p.RoundServerStart)
		platform, report := Platform(1+r.IntN(3)), DBReport(1+r.IntN(3))
		s.platform, s.dbReport = p.Platform, p.DBReport
		if s.platform == PlatformMixed {
			s.platform = platform
		}
		if s.dbReport == DBReportMixed {
			s.dbReport = report
		}
		for o := range p.Operations {
			v := verbs[r.IntN(len(verbs))]
			name := fmt.Sprintf("%s%d", v.name, o)
			route := "/api/" + s.name + "/" + name
			if g.sharesTarget(i, o) {
				route += "/{id}"
			}
			op := operation{
				name: name, method: v.method, route: route,
				rpcMethod: strings.ToUpper(name[:1]) + name[1:],
				internal:  chance(r, p.Internal), cache: chance(r, p.Cache), work: uniform(r, 1, 10),
			}
			db, statements, async, kind := r.Float64(), 1+r.IntN(3), r.Float64(), 1+r.IntN(2)
			if db < p.DB {
				op.statements = statements
			}
			if async < p.Async {
				op.async = kind
			}
			s.ops = append(s.ops, op)
		}
		for range p.Instances {
			g.newProcess(i, nodes)
		}
	}
}

// wireCalls gives every operation its calls, to deeper levels only and mostly
// the next one, and makes sure every service is called.
func (g *generator) wireCalls() {
	p, r := g.p, g.rng
	called := make([]bool, len(g.svcs))
	for i := range g.svcs {
		s := &g.svcs[i]
		var next, deeper []int
		for j := range g.svcs {
			switch {
			case g.svcs[j].level == s.level+1:
				next = append(next, j)
			case g.svcs[j].level > s.level+1:
				deeper = append(deeper, j)
			}
		}
		for o := range s.ops {
			op := &s.ops[o]
			n := p.MinCalls + r.IntN(p.MaxCalls-p.MinCalls+1)
			for range n {
				skip, target, top := r.Float64(), r.Float64(), r.IntN(p.Operations)
				pool := next
				if len(deeper) > 0 && skip < 0.3 {
					pool = deeper
				}
				if len(pool) > 0 { // none below the last level
					t := pool[int(target*float64(len(pool)))]
					op.calls = append(op.calls, callee{t, top})
					called[t] = true
				}
			}
		}
	}
	// Every service takes part: one that no operation calls gets a call from an
	// operation of the level above it (the entry's level included).
	for j := 1; j < len(g.svcs); j++ {
		if called[j] {
			continue
		}
		var above []int
		for i := range g.svcs {
			if g.svcs[i].level == g.svcs[j].level-1 {
				above = append(above, i)
			}
		}
		caller := &g.svcs[above[r.IntN(len(above))]]
		op := &caller.ops[r.IntN(len(caller.ops))]
		op.calls = append(op.calls, callee{j, r.IntN(p.Operations)})
	}
}

// fanOutStyles splits each operation's calls into sequential ones, then
// parallel ones.
func (g *generator) fanOutStyles() {
	p, r := g.p, g.rng
	for i := range g.svcs {
		for o := range g.svcs[i].ops {
			op := &g.svcs[i].ops[o]
			style, halves, split := r.Float64(), r.Float64(), r.IntN(len(op.calls)+1)
			switch {
			case p.FanOut == FanOutSequential || (p.FanOut == FanOutMixed && style < 1.0/3):
				op.split = len(op.calls)
			case p.FanOut == FanOutParallel || halves < 0.5:
				op.split = 0
			default:
				op.split = split
			}
		}
	}
}

// uninstrumented marks the uninstrumented tiers: the most called middle tiers
// first, never the entry.
func (g *generator) uninstrumented() {
	p, r := g.p, g.rng
	incoming := make([]int, len(g.svcs))
	for i := range g.svcs {
		for _, op := range g.svcs[i].ops {
			for _, c := range op.calls {
				incoming[c.svc]++
			}
		}
	}
	var middle, leaves []int
	for _, i := range r.Perm(p.Services) {
		switch l := g.svcs[i].level; {
		case i == 0:
		case l < p.Depth:
			middle = append(middle, i)
		default:
			leaves = append(leaves, i)
		}
	}
	slices.SortStableFunc(middle, func(a, b int) int { return incoming[b] - incoming[a] })
	for _, i := range append(middle, leaves...)[:p.Uninstrumented] {
		g.svcs[i].uninstrumented = true
	}
}

func (g *generator) newProcess(svc, nodes int) {
	s, r := &g.svcs[svc], g.proc
	pi := len(g.procs)
	pr := process{svc: svc, res: len(g.res), backends: map[string]int{}, pid: 1}
	node := fmt.Sprintf("node-%d", 1+r.IntN(nodes))
	instance, pod, uid, container, pid := uuidOf(r), s.name+"-"+k8sName(r, 8+r.IntN(3))+"-"+k8sName(r, 5), uuidOf(r), hexOf(r, 64), 1000+r.IntN(60000)
	attrs := []kv{str("service.name", s.name), str("telemetry.sdk.language", s.lang), str("telemetry.sdk.name", "opentelemetry")}
	if s.instanceID {
		attrs = append(attrs, str("service.instance.id", instance))
	}
	switch s.platform {
	case PlatformK8s:
		pr.pod, pr.host = pod, pod
		attrs = append(attrs, str("k8s.namespace.name", "shop"), str("k8s.pod.name", pod), str("k8s.pod.uid", uid),
			str("k8s.node.name", node), str("container.id", container))
	case PlatformDocker:
		pr.host = container[:12]
		attrs = append(attrs, str("container.id", container))
	default:
		pr.host, pr.pid = node, pid
	}
	attrs = append(attrs, str("host.name", pr.host), num("process.pid", pr.pid), str(AttrTruthProcess, fmt.Sprintf("%s/%d", s.name, len(s.procs))))
	pr.skew = int64(uniform(g.skew, -1, 1) * float64(g.p.Skew))
	g.res = append(g.res, resource{svc: svc, proc: pi, attrs: attrs})
	g.procs = append(g.procs, pr)
	s.procs = append(s.procs, pi)
}

// backend is the resource of the database CLIENT spans of process pi.
func (g *generator) backend(pi int, system string) int {
	pr := &g.procs[pi]
	s := &g.svcs[pr.svc]
	if s.dbReport == DBReportOwn {
		return pr.res
	}
	if r, ok := pr.backends[system]; ok {
		return r
	}
	attrs := []kv{str("service.name", system), str("host.name", pr.host)}
	if s.dbReport == DBReportBackendPID {
		attrs = append(attrs, num("process.pid", pr.pid))
	}
	truth, _ := attrOf(g.res[pr.res].attrs, AttrTruthProcess)
	attrs = append(attrs, str(AttrTruthProcess, truth))
	g.res = append(g.res, resource{svc: pr.svc, proc: pi, attrs: attrs})
	pr.backends[system] = len(g.res) - 1
	return len(g.res) - 1
}

func attrOf(attrs []kv, k string) (string, bool) {
	for _, a := range attrs {
		if a.k == k {
			return a.s, true
		}
	}
	return "", false
}

func (g *generator) add(req, parent int32, res int, kind ptrace.SpanKind, name string, start int64, attrs []kv) int32 {
	g.spans = append(g.spans, gspan{req: req, parent: parent, res: int32(res), kind: kind, name: name, start: start, end: start, attrs: attrs})
	return int32(len(g.spans) - 1)
}

func (g *generator) request(req int32) {
	var t pcommon.TraceID
	for i := range t {
		t[i] = byte(g.idr.IntN(256))
	}
	g.traces = append(g.traces, t)
	g.serve(req, 0, g.req.IntN(len(g.svcs[0].ops)), -1, 0)
}

// serve makes the SERVER span of operation op of service svc, arriving at t,
// and everything below it; it returns the server's end.
func (g *generator) serve(req int32, svc, op int, parent int32, t int64) int64 {
	s := &g.svcs[svc]
	o := &s.ops[op]
	pi := s.procs[g.req.IntN(len(s.procs))]
	srv := g.add(req, parent, g.procs[pi].res, ptrace.SpanKindServer, g.serverName(svc, op), t, g.serverAttrs(svc, op))
	c := t + g.dur(0.05, 0.3)
	handler := srv
	if o.internal {
		handler = g.add(req, srv, g.procs[pi].res, ptrace.SpanKindInternal, s.rpcService[:len(s.rpcService)-7]+"Controller."+o.name, c, nil)
		c += g.dur(0.02, 0.1)
	}
	if o.cache {
		c = g.dbCall(req, handler, pi, "redis", c) + g.dur(0.05, 0.2)
	}
	writes := o.statements / 2
	for range o.statements - writes {
		c = g.dbCall(req, handler, pi, s.sqlSystem, c) + g.dur(0.05, 0.2)
	}
	asyncAt := c
	c += g.dur(0.4*o.work, 0.4*o.work)
	c = g.calls(req, handler, pi, o, c)
	for range writes {
		c = g.dbCall(req, handler, pi, s.sqlSystem, c) + g.dur(0.05, 0.2)
	}
	c += g.dur(0.6*o.work, 0.6*o.work)
	if o.internal {
		g.spans[handler].end = c
		c += g.dur(0.02, 0.1)
	}
	g.spans[srv].end = c
	if o.async != 0 {
		g.async(req, handler, pi, o.async, asyncAt, c)
	}
	return c
}

// calls makes the downstream calls of o from process pi, starting at t; it
// returns when the last one returned.
func (g *generator) calls(req, parent int32, pi int, o *operation, t int64) int64 {
	for _, c := range o.calls[:o.split] {
		t = g.call(req, parent, pi, c, t) + g.dur(0.1, 0.5)
	}
	if rest := o.calls[o.split:]; len(rest) > 0 {
		end, at := t, t
		for _, c := range rest {
			cl := int32(len(g.spans))
			end = max(end, g.call(req, parent, pi, c, at))
			g.spans[cl].ownThread = true
			at += g.dur(0.01, 0.1) // a thread pool starts them one after the other
		}
		t = end + g.dur(0.05, 0.2)
	}
	return t
}

// call makes a CLIENT span of process pi calling c at t and the server side;
// it returns the client's end.
func (g *generator) call(req, parent int32, pi int, c callee, t int64) int64 {
	caller := g.procs[pi].svc
	cl := g.add(req, parent, g.procs[pi].res, ptrace.SpanKindClient, g.clientName(caller, c), t, g.clientAttrs(caller, c))
	end := g.serve(req, c.svc, c.op, cl, t+g.dur(0.5, 1.5)) + g.dur(0.5, 1.5)
	g.spans[cl].end = end
	return end
}

// dbCall makes a database (or cache) CLIENT span of process pi at t, in a
// repository INTERNAL span sometimes; it returns its end.
func (g *generator) dbCall(req, parent int32, pi int, system string, t int64) int64 {
	s := &g.svcs[g.procs[pi].svc]
	wrap := int32(-1)
	if chance(g.req, g.p.Internal) && system != "redis" {
		wrap = g.add(req, parent, g.procs[pi].res, ptrace.SpanKindInternal, s.rpcService[:len(s.rpcService)-7]+"Repository.find", t, nil)
		parent = wrap
		t += g.dur(0.02, 0.1)
	}
	name, attrs := g.dbSpan(s, system)
	cl := g.add(req, parent, g.backend(pi, system), ptrace.SpanKindClient, name, t, attrs)
	lo, hi := 1.0, 5.0
	if system == "redis" {
		lo, hi = 0.3, 1.5
	}
	end := t + g.dur(lo, hi)
	g.spans[cl].end = end
	if wrap >= 0 {
		end += g.dur(0.02, 0.1)
		g.spans[wrap].end = end
	}
	return end
}

// async fires work that outlives its parent: an INTERNAL span, or a PRODUCER
// span whose message a CONSUMER span of another service processes later.
func (g *generator) async(req, parent int32, pi int, kind int, start, parentEnd int64) {
	end := parentEnd + g.dur(1, 10)
	res := g.procs[pi].res
	s := &g.svcs[g.procs[pi].svc]
	if kind == 1 {
		sp := g.add(req, parent, res, ptrace.SpanKindInternal, s.rpcService[:len(s.rpcService)-7]+"Notifier.sendAsync", start, nil)
		g.spans[sp].end, g.spans[sp].async, g.spans[sp].ownThread = end, true, true
		if g.p.AsyncWork > 0 && chance(g.kinds, g.p.AsyncWork) {
			// The work writes its own record while the handler goes on.
			done := g.dbCall(req, sp, pi, s.sqlSystem, start+g.dur(0.05, 0.3))
			g.spans[sp].end = max(end, done+g.dur(0.05, 0.2))
		}
		return
	}
	topic := "events." + s.name
	var pattrs, cattrs []kv
	if s.legacy {
		pattrs = []kv{str("messaging.system", "kafka"), str("messaging.destination", topic), str("messaging.operation", "publish")}
	} else {
		pattrs = []kv{str("messaging.system", "kafka"), str("messaging.destination.name", topic), str("messaging.operation.type", "send")}
	}
	pr := g.add(req, parent, res, ptrace.SpanKindProducer, topic+" publish", start, pattrs)
	g.spans[pr].end, g.spans[pr].async = end, true
	// A consumer in another service, the entry excepted.
	cs := 1 + g.req.IntN(len(g.svcs)-1)
	if g.p.QueueWorkers > 0 {
		cs = g.subscriber(g.procs[pi].svc)
	}
	if cs == g.procs[pi].svc {
		cs = 1 + cs%(len(g.svcs)-1)
	}
	c := &g.svcs[cs]
	cpi := c.procs[g.req.IntN(len(c.procs))]
	if c.legacy {
		cattrs = []kv{str("messaging.system", "kafka"), str("messaging.destination", topic), str("messaging.operation", "process")}
	} else {
		cattrs = []kv{str("messaging.system", "kafka"), str("messaging.destination.name", topic), str("messaging.operation.type", "process")}
	}
	at := start + g.dur(2, 20)
	if ids, ok := g.messageIDs(g.procs[pi].svc, s.legacy, c.legacy); ok {
		g.spans[pr].attrs = append(g.spans[pr].attrs, ids[0]...)
		cattrs = append(cattrs, ids[1]...)
	}
	co := g.add(req, pr, g.procs[cpi].res, ptrace.SpanKindConsumer, topic+" process", at, cattrs)
	g.spans[co].async = true
	g.spans[co].end = g.dbCall(req, co, cpi, c.sqlSystem, at+g.dur(0.05, 0.3)) + g.dur(0.5, 3)
}

func (g *generator) serverName(svc, op int) string {
	s, o := &g.svcs[svc], &g.svcs[svc].ops[op]
	switch {
	case s.grpc && s.serverRPCName == 1:
		return "/" + s.rpcPackage + "." + s.rpcService + "/" + o.rpcMethod
	case s.grpc:
		return s.rpcPackage + "." + s.rpcService + "/" + o.rpcMethod
	case s.legacy:
		return o.route
	}
	return o.method + " " + o.route
}

func (g *generator) serverAttrs(svc, op int) []kv {
	s, o := &g.svcs[svc], &g.svcs[svc].ops[op]
	id := g.req.IntN(10000)
	if g.target >= 0 {
		id, g.target = g.target, -1
	}
	path := strings.Replace(o.route, "{id}", fmt.Sprint(id), 1)
	switch {
	case s.grpc && s.legacy:
		return []kv{str("rpc.system", "grpc"), str("rpc.service", s.rpcPackage+"."+s.rpcService), str("rpc.method", o.rpcMethod),
			str("net.host.name", s.dns), num("net.host.port", s.port)}
	case s.grpc:
		return []kv{str("rpc.system", "grpc"), str("rpc.service", s.rpcPackage+"."+s.rpcService), str("rpc.method", o.rpcMethod),
			str("server.address", s.dns), num("server.port", s.port)}
	case s.legacy:
		return []kv{str("http.method", o.method), str("http.target", path), str("http.route", o.route), str("http.scheme", "http"),
			str("net.host.name", s.dns), num("net.host.port", s.port)}
	}
	return []kv{str("http.request.method", o.method), str("http.route", o.route), str("url.path", path), str("url.scheme", "http"),
		str("server.address", s.dns), num("server.port", s.port)}
}

// sharesTarget says whether operation op of service svc has an identifier in
// its route (Params.TargetIDs, drawn per operation without a random stream, so
// that the other draws stay as they were).
func (g *generator) sharesTarget(svc, op int) bool {
	return float64((37*svc+53*op+11)%100)/100 < g.p.TargetIDs
}

// clientName names a CLIENT span as the caller's instrumentation does.
func (g *generator) clientName(caller int, c callee) string {
	s, t, o := &g.svcs[caller], &g.svcs[c.svc], &g.svcs[c.svc].ops[c.op]
	if t.grpc {
		full := t.rpcPackage + "." + t.rpcService
		switch s.clientRPCName {
		case 1:
			return "/" + full + "/" + o.rpcMethod
		case 2:
			return "grpc." + full
		}
		return full + "/" + o.rpcMethod
	}
	if s.legacy {
		return "HTTP " + o.method
	}
	return o.method
}

func (g *generator) clientAttrs(caller int, c callee) []kv {
	s, t, o := &g.svcs[caller], &g.svcs[c.svc], &g.svcs[c.svc].ops[c.op]
	var attrs []kv
	switch {
	case t.grpc && s.legacy:
		attrs = []kv{str("rpc.system", "grpc"), str("rpc.service", t.rpcPackage+"."+t.rpcService), str("rpc.method", o.rpcMethod),
			str("net.peer.name", t.dns), num("net.peer.port", t.port)}
	case t.grpc:
		attrs = []kv{str("rpc.system", "grpc"), str("rpc.service", t.rpcPackage+"."+t.rpcService), str("rpc.method", o.rpcMethod),
			str("server.address", t.dns), num("server.port", t.port)}
	default:
		// The draw is made whether the route has an identifier or not, so
		// that Params.TargetIDs leaves every other draw as it was.
		id := g.req.IntN(10000) % g.p.TargetPool
		if strings.Contains(o.route, "{id}") {
			g.target = id
		}
		path := strings.Replace(o.route, "{id}", fmt.Sprint(id), 1)
		u := fmt.Sprintf("http://%s:%d%s", t.dns, t.port, path)
		if s.legacy {
			attrs = []kv{str("http.method", o.method), str("http.url", u), str("net.peer.name", t.dns), num("net.peer.port", t.port)}
		} else {
			attrs = []kv{str("http.request.method", o.method), str("url.full", u), str("server.address", t.dns), num("server.port", t.port)}
		}
	}
	if s.peerService {
		attrs = append(attrs, str("peer.service", t.name))
	}
	return attrs
}

// dbSpan names and describes a statement of service s on system.
func (g *generator) dbSpan(s *service, system string) (string, []kv) {
	port := map[string]int{"mysql": 3306, "postgresql": 5432, "redis": 6379}[system]
	if system == "redis" {
		cmd := []string{"GET", "SET", "MGET"}[g.req.IntN(3)]
		if s.legacy {
			return cmd, []kv{str("db.system", "redis"), str("db.statement", cmd+" key"), str("net.peer.name", "redis"), num("net.peer.port", port)}
		}
		return cmd, []kv{str("db.system.name", "redis"), str("db.operation.name", cmd), str("server.address", "redis"), num("server.port", port)}
	}
	verb := []string{"SELECT", "SELECT", "INSERT", "UPDATE"}[g.req.IntN(4)]
	table := s.name + "s"
	if s.legacy {
		return verb + " " + s.name + "." + table, []kv{str("db.system", system), str("db.name", s.name), str("db.operation", verb),
			str("db.sql.table", table), str("net.peer.name", system), num("net.peer.port", port)}
	}
	return verb + " " + table, []kv{str("db.system.name", system), str("db.namespace", s.name), str("db.operation.name", verb),
		str("db.collection.name", table), str("server.address", system), num("server.port", port)}
}

// drop marks the spans of uninstrumented services, then a random fraction of
// the rest.
func (g *generator) drop() {
	for i := range g.spans {
		sp := &g.spans[i]
		lost := chance(g.lost, g.p.Drop)
		sp.dropped = g.svcs[g.res[sp.res].svc].uninstrumented || lost
	}
}

// placeRequests sets each request's offset so that the surviving spans reach
// the target overlap, as seen without skew.
func (g *generator) placeRequests() {
	n := len(g.traces)
	length := make([]int64, n)
	var visits []visit
	at := map[[2]int]int{}
	for i := range g.spans {
		sp := &g.spans[i]
		if sp.dropped {
			continue
		}
		r := int(sp.req)
		length[r] = max(length[r], sp.end)
		k := [2]int{r, g.res[sp.res].proc}
		v, ok := at[k]
		if !ok {
			at[k] = len(visits)
			visits = append(visits, visit{r, k[1], sp.start, sp.end})
			continue
		}
		visits[v].start = min(visits[v].start, sp.start)
		visits[v].end = max(visits[v].end, sp.end)
	}
	if g.p.ShiftTo <= 0 || n < 2 {
		g.offset, _ = place(visits, length, g.p.Concurrency, g.arrive)
		return
	}
	// A load shift: each half placed at its own overlap, the second after the
	// first has ended.
	h := n / 2
	var first, second []visit
	for _, v := range visits {
		if v.trace < h {
			first = append(first, v)
		} else {
			v.trace -= h
			second = append(second, v)
		}
	}
	a, _ := place(first, length[:h], g.p.Concurrency, g.arrive)
	b, _ := place(second, length[h:], g.p.ShiftTo, g.arrive)
	var end int64
	for t, o := range a {
		end = max(end, o+length[t])
	}
	g.offset = append(a, b...)
	for t := h; t < n; t++ {
		g.offset[t] += end + 1
	}
}

// base is the time of the first request: 2023-11-14T22:13:20Z.
const base = int64(1_700_000_000) * int64(time.Second)

func (g *generator) spanID() pcommon.SpanID {
	for {
		var id pcommon.SpanID
		for i := range id {
			id[i] = byte(g.idr.IntN(256))
		}
		if !id.IsEmpty() && !g.ids[id] {
			g.ids[id] = true
			return id
		}
	}
}

// emit writes the surviving spans with their recorded times (true time plus
// their process's skew, server starts rounded for some services), each parented
// to its nearest surviving ancestor, then batches them.
func (g *generator) emit() ptrace.Traces {
	for i := range g.spans {
		g.spans[i].id = g.spanID()
	}
	staging := ptrace.NewTraces()
	resSpans := make([]ptrace.SpanSlice, len(g.res))
	for r, res := range g.res {
		rs := staging.ResourceSpans().AppendEmpty()
		for _, a := range res.attrs {
			if a.isInt {
				rs.Resource().Attributes().PutInt(a.k, a.i)
			} else {
				rs.Resource().Attributes().PutStr(a.k, a.s)
			}
		}
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("tierscope/stitcheval/" + g.svcs[res.svc].lang)
		resSpans[r] = ss.Spans()
	}
	for i := range g.spans {
		sp := &g.spans[i]
		if sp.dropped {
			continue
		}
		parent, async := sp.parent, sp.async
		for parent >= 0 && g.spans[parent].dropped {
			async = async || g.spans[parent].async
			parent = g.spans[parent].parent
		}
		res := &g.res[sp.res]
		shift := base + g.offset[sp.req] + g.procs[res.proc].skew
		start, end := sp.start+shift, sp.end+shift
		if sp.kind == ptrace.SpanKindServer && g.svcs[res.svc].roundStart {
			start -= start % int64(time.Millisecond)
		}
		if g.svcs[res.svc].coarse {
			start -= start % int64(time.Millisecond)
			end -= end % int64(time.Millisecond)
		}
		out := resSpans[sp.res].AppendEmpty()
		out.SetName(sp.name)
		if g.svcs[res.svc].unkinded {
			out.SetKind(ptrace.SpanKindInternal)
		} else {
			out.SetKind(sp.kind)
		}
		out.SetTraceID(g.traces[sp.req])
		out.SetSpanID(sp.id)
		if parent >= 0 {
			out.SetParentSpanID(g.spans[parent].id)
		}
		out.SetStartTimestamp(pcommon.Timestamp(start))
		out.SetEndTimestamp(pcommon.Timestamp(end))
		attrs := out.Attributes()
		attrs.EnsureCapacity(len(sp.attrs) + 1)
		for _, a := range sp.attrs {
			if a.isInt {
				attrs.PutInt(a.k, a.i)
			} else {
				attrs.PutStr(a.k, a.s)
			}
		}
		if async {
			attrs.PutBool(AttrTruthAsync, true)
		}
	}
	return rebatch(collect(staging), nil, g.p.Batch)
}
