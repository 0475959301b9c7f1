package causal

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/tierscope/tierscope/internal/span"
)

// spanStitcher holds one Stitch call's state.
type spanStitcher struct {
	spans []span.Span
	cfg   StitchConfig
	// median is the median span's duration (medianSpan), in nanoseconds: the
	// data's own time scale, 0 when no span lasts.
	median int64
	// proc is the process a span's local parents are looked for in: its
	// Instance, or its host process for a guest.
	proc []int32
	// tolStart, tolEnd and tol are the timestamp tolerances of each span's
	// process, for its starts, its ends, and either.
	tolStart, tolEnd, tol []int64
	// cands/start hold the candidate parents of every orphan (CSR); remote marks
	// orphans whose candidates are callers in other processes.
	cands  []int32
	start  []uint32
	remote []bool
	// parent is the current parent of every span (known or assigned); known
	// marks those from context.
	parent []int32
	known  []bool
	conf   []float32
	runner []int32
	// roundStamp counts the model fits; siteCache holds callers' sites per
	// fit, siteSlot each span's index in it plus one (0: none yet).
	roundStamp uint32
	siteCache  []callerSite
	siteSlot   []int32
	// kids lists every span's current local children, by start.
	kids [][]int32
	// hasKnownCallee marks callers whose SERVER child is known from context.
	hasKnownCallee []bool
	models         *delayModels
	site           *siteModels
	counts         *countModels
	seq            *seqModels
	callers        *callerModels
	// connPrev and connNext are each SERVER span's neighbours on its connection.
	connPrev, connNext []int32
	factorBuf          []float64
	queues             *queueModels
	guests, capped     int
	// offsets holds the fitted clock offsets of process pairs (fitOffsets),
	// in denseOffsets when there are few processes, numbered by procIndex.
	offsets      map[[2]int32]clockOffset
	denseOffsets []clockOffset
	procIndex    []int32
	procs        int
	// preSkew holds the offsets learnSkew measured beyond the skew window, by
	// process pair; skewAhead and skewBehind their largest either way.
	preSkew map[[2]int32]int64
	// skewTied marks the pairs whose measured offset another offset ties
	// with (secondPeak).
	skewTied map[[2]int32]bool
	// skewedSide marks, for each pair learnSkew measured beyond the skew
	// window and the fitted clocks confirm, the callee's process with the
	// caller's service and the caller's process with the callee's service
	// (skewSide keys).
	skewedSide map[[3]int32]bool
	// clock is each process's clock fitted to the measured offsets
	// (consistentOffsets), clockSet the anchor of the processes they connect.
	clock                 map[int32]int64
	clockSet              map[int32]int32
	skewAhead, skewBehind int64
	// perParent is 1 over the number of spans that share a span's parent
	// model (populationKey).
	perParent []float64
	// startOrder is every span by start (byStart).
	startOrder []int32
	// order, isCand, outer and stamp are reused by the sweeps (markOuter).
	order         []int32
	isCand, outer []uint32
	outerSure     []float32
	// bestScore is each local orphan's chosen score, nullBuf the scores of
	// candidates not chosen (nullScore).
	bestScore []float64
	nullBuf   []float64
	stamp     uint32
	arcs      arcBuffers
	// roaming marks the spans of a guest that no single process hosts; serves
	// the processes that serve requests.
	roaming []bool
	serves  map[int32]bool
	// servers lists every process's SERVER spans by start, for the chain rule.
	servers map[int32][]int32
	// threads holds each process's thread factors (fitThreads), empty when no
	// span records its thread.
	threads map[threadKey]threadStats
	// scratchCohort is cohortRatio's buffer.
	scratchCohort []int32
}

func newSpanStitcher(spans []span.Span, cfg StitchConfig) *spanStitcher {
	n := len(spans)
	s := &spanStitcher{
		spans: spans, cfg: cfg,
		parent: make([]int32, n), known: make([]bool, n), conf: make([]float32, n), runner: make([]int32, n),
		hasKnownCallee: make([]bool, n),
	}
	for i := range spans {
		s.parent[i] = spans[i].Parent
		s.runner[i] = -1
		if p := spans[i].Parent; p >= 0 && int(p) < n {
			s.known[i] = true
			if spans[i].Kind.RemoteEntry() && spans[p].Kind == span.KindClient {
				s.hasKnownCallee[p] = true
			}
		} else {
			s.parent[i] = -1
		}
	}
	return s
}

func (s *spanStitcher) run() *StitchResult {
	n := len(s.spans)
	res := &StitchResult{Parent: s.parent, Inferred: make([]bool, n), Confidence: s.conf, Runner: s.runner}
	for i := range s.spans {
		if s.spans[i].Orphan && !s.known[i] {
			res.Orphans++
		}
	}
	s.learnTolerances()
	s.placeGuests()
	res.Guests = s.guests
	s.indexProcesses()
	s.median = s.medianSpan()
	s.learnSkew()
	s.candidates()
	res.Capped = s.capped
	s.fitThreads()
	s.pruneByThread()
	s.models = newDelayModels(s.cfg.Bins)
	s.models.unit = timeUnit(s.median)
	s.site = newSiteModels()
	s.counts = newCountModels()
	s.seq = newSeqModels()
	s.callers = newCallerModels(s.spans, s.proc)
	s.indexConnections()
	s.indexQueues()

	// Round 0 is the paper's scoreboard; every later round refits the models to
	// the assignment before assigning again.
	s.offsets = make(map[[2]int32]clockOffset)
	var last []int32
	for round := 0; round <= s.cfg.Rounds; round++ {
		s.fitOffsets(round)
		s.fit(round)
		s.assign(round)
		// A round that changed no parent would refit the same models.
		if round > 0 && slices.Equal(last, s.parent) {
			break
		}
		if round == s.cfg.Rounds && round > 0 {
			s.unsettledConfidence(last)
		}
		last = append(last[:0], s.parent...)
	}
	s.reviseConfidence()
	s.breakCycles()
	res.ByStart = s.byStart()
	for i := range s.spans {
		if s.known[i] {
			continue
		}
		if s.parent[i] >= 0 {
			res.Inferred[i] = true
		} else if s.spans[i].Orphan {
			res.LeftOrphan++
		}
	}
	return res
}

// reviseConfidence is the one place where evidence outside the assignment's
// posterior revises the confidence of the parents it chose; each step only
// lowers it, but for a message's identity, which is the link itself:
//   - exchangeConfidence: the joint alternative a lone candidate hides (two
//     children of one key exchanged between their parents);
//   - asyncConfidence: a child that asynchronous work and its handler both
//     enclose, with no thread to tell them apart;
//   - sporadicOrphans: a local orphan whose kind mostly keeps its parent lost
//     it with the parent, so its true parent is not a candidate;
//   - messageConfidence: a consumer whose lone candidate names its message;
//   - unsidedConfidence: a span that records a call without its side, which
//     may be a server whose parent is in another process;
//   - orderConfidence: a local parent out of order with its child on their
//     common clock;
//   - skewConfidence: a caller across a pair of processes whose clock offset
//     another offset ties with, or that nothing measured while a sibling
//     instance was measured beyond the skew window.
//
// unsettledConfidence, applied after the last round, is the eighth: a parent
// the last refit still changed.
func (s *spanStitcher) reviseConfidence() {
	s.exchangeConfidence(s.cfg.Rounds)
	s.asyncConfidence()
	s.sporadicOrphans()
	s.messageConfidence()
	s.unsidedConfidence()
	s.orderConfidence()
	s.skewConfidence()
}

// orderConfidence caps at ½ a local parent out of order with its child on
// their common clock (outOfOrder). Such a parent stays a candidate: dropping
// the candidates made the others surer than their precision bears
// (docs/causal-report.md, eighth round). A handler that left work behind
// (a SERVER or CONSUMER span) may end before that work starts.
func (s *spanStitcher) orderConfidence() {
	for c, p := range s.parent {
		if p < 0 || s.known[c] || s.remote[c] || s.isRemote(p, int32(c)) {
			continue
		}
		ps, cs := &s.spans[p], &s.spans[c]
		if s.outOfOrder(p, int32(c)) && !(ps.Kind.RemoteEntry() && ps.End < cs.Start && ps.Start <= cs.Start) {
			s.conf[c] = min(s.conf[c], 0.5)
		}
	}
}

// unsidedConfidence caps at ½ the local parent of a span whose call kind is
// unspecified though it records a call (span.KindUnspecified): a client's
// parent is local, a server's remote and among no candidate, and nothing
// tells which it is. Timing alone gave such servers another request's span,
// surely, once the local leaves (database calls, publishers) were known.
func (s *spanStitcher) unsidedConfidence() {
	for c, p := range s.parent {
		if p >= 0 && !s.known[c] && s.spans[c].Kind == span.KindUnspecified && !s.isRemote(p, int32(c)) {
			s.conf[c] = min(s.conf[c], 0.5)
		}
	}
}

// unsettledConfidence caps at ½ the parents that the last refit round still
// changed from last: they are not settled, not ones to write into a trace.
func (s *spanStitcher) unsettledConfidence(last []int32) {
	for i, p := range s.parent {
		if p != last[i] {
			s.conf[i] = min(s.conf[i], 0.5)
		}
	}
}

// byStart is every span by start, sorted once.
func (s *spanStitcher) byStart() []int32 {
	if s.startOrder == nil {
		s.startOrder = orderSpansByStart(s.spans)
	}
	return s.startOrder
}

// learnTolerances sets each process's timestamp tolerance: the coarsest power
// of ten dividing all of its timestamps (an SDK that stamps in milliseconds can
// start a child "before" its parent by up to 1 ms), or LocalWindow when set.
func (s *spanStitcher) learnTolerances() {
	n := len(s.spans)
	s.tol, s.tolStart, s.tolEnd = make([]int64, n), make([]int64, n), make([]int64, n)
	if w := int64(s.cfg.LocalWindow); w > 0 {
		for i := range s.tol {
			s.tol[i], s.tolStart[i], s.tolEnd[i] = w, w, w
		}
		return
	}
	// Starts and ends apart, and per span kind: some SDKs round only the start
	// of a server span.
	type res struct{ start, end int64 }
	type key struct {
		proc int32
		kind span.Kind
	}
	byProc := make(map[key]res)
	coarsest := func(r, t int64) int64 {
		for r > 1 && t%r != 0 {
			r /= 10
		}
		return r
	}
	for i := range s.spans {
		sp := &s.spans[i]
		k := key{sp.Instance, sp.Kind}
		r, ok := byProc[k]
		if !ok {
			r = res{1e9, 1e9}
		}
		r.start, r.end = coarsest(r.start, sp.Start), coarsest(r.end, sp.End)
		byProc[k] = r
	}
	for i := range s.spans {
		r := byProc[key{s.spans[i].Instance, s.spans[i].Kind}]
		if r.start > 1 {
			s.tolStart[i] = r.start
		}
		if r.end > 1 {
			s.tolEnd[i] = r.end
		}
		s.tol[i] = max(s.tolStart[i], s.tolEnd[i])
	}
}

// placeGuests finds the host process of every client-only process: a process
// with orphan spans that serves no request (no SERVER or CONSUMER span) runs
// inside another, when one process of its host encloses nearly all of its spans
// and no other does nearly as often. Its spans then look for local parents
// there.
func (s *spanStitcher) placeGuests() {
	spans := s.spans
	s.proc = make([]int32, len(spans))
	serves := make(map[int32]bool)
	orphans := make(map[int32][]int32)
	for i := range spans {
		sp := &spans[i]
		s.proc[i] = sp.Instance
		if sp.Kind.RemoteEntry() {
			serves[sp.Instance] = true
		}
	}
	for i := range spans {
		sp := &spans[i]
		if !serves[sp.Instance] && sp.Orphan && !s.known[i] {
			orphans[sp.Instance] = append(orphans[sp.Instance], int32(i))
		}
	}
	if len(orphans) == 0 {
		return
	}
	idx := s.enclosures(serves)
	guests := make([]int32, 0, len(orphans))
	for g := range orphans {
		guests = append(guests, g)
	}
	slices.Sort(guests)
	const sample = 64
	counts := make(map[int32]int)
	for _, g := range guests {
		list := orphans[g]
		step := max(1, len(list)/sample)
		m := 0
		clear(counts)
		for k := 0; k < len(list); k += step {
			c := &spans[list[k]]
			m++
			for _, pid := range idx.order {
				if idx.encloses(pid, c) {
					counts[pid]++
				}
			}
		}
		best, first, second := int32(-1), 0, 0
		for _, pid := range idx.order {
			switch k := counts[pid]; {
			case k > first:
				best, first, second = pid, k, first
			case k > second:
				second = k
			}
		}
		// Nearly always enclosed by one process and clearly less by any other:
		// under load every busy process encloses some spans by chance.
		if m >= 3 && 10*first >= 9*m && 10*second <= 6*m {
			s.guests++
			for i := range spans {
				if spans[i].Instance == g {
					s.proc[i] = best
				}
			}
			continue
		}
		// Several processes of the host share the guest's identity (a client
		// reported under the back end's name with only host.name): each span
		// looks for its parent among all the host's serving processes.
		for _, i := range list {
			if spans[i].Host >= 0 {
				if s.roaming == nil {
					s.roaming = make([]bool, len(spans))
				}
				s.roaming[i] = true
			}
		}
	}
	s.serves = serves
}

// enclosureIndex holds the enclosing spans of every serving process by start,
// with the running maximum of their ends: some span encloses [a, b] iff the
// maximum end of those starting by a reaches b.
type enclosureIndex struct {
	procs map[int32]*processEnclosures
	order []int32 // processes in order of their first span
}

type processEnclosures struct {
	host   int32
	starts []int64
	maxEnd []int64
}

// enclosures indexes the spans of the serving processes (callers excepted).
func (s *spanStitcher) enclosures(serves map[int32]bool) enclosureIndex {
	idx := enclosureIndex{procs: make(map[int32]*processEnclosures)}
	for _, i := range s.byStart() {
		sp := &s.spans[i]
		if !serves[sp.Instance] || sp.Kind.RemoteCaller() {
			continue
		}
		e := idx.procs[sp.Instance]
		if e == nil {
			e = &processEnclosures{host: sp.Host}
			idx.procs[sp.Instance] = e
			idx.order = append(idx.order, sp.Instance)
		}
		m := sp.End
		if k := len(e.maxEnd); k > 0 && e.maxEnd[k-1] > m {
			m = e.maxEnd[k-1]
		}
		e.starts = append(e.starts, sp.Start)
		e.maxEnd = append(e.maxEnd, m)
	}
	return idx
}

// encloses says whether a span of process pid, on c's host when both are
// known, encloses c.
func (idx *enclosureIndex) encloses(pid int32, c *span.Span) bool {
	e := idx.procs[pid]
	if c.Host >= 0 && e.host >= 0 && e.host != c.Host {
		return false
	}
	j := sort.Search(len(e.starts), func(x int) bool { return e.starts[x] > c.Start })
	return j > 0 && e.maxEnd[j-1] >= c.End
}

// candidates finds the candidate parents of every orphan, in one sweep by start.
func (s *spanStitcher) candidates() {
	spans := s.spans
	n := len(spans)
	w, aw := int64(s.cfg.SkewWindow), int64(s.cfg.AsyncWindow)
	var maxTol int64
	for _, t := range s.tol {
		maxTol = max(maxTol, t)
	}
	byStart := s.byStart()
	local := make(map[int32][]int32)
	// ended holds, per process, local spans that ended lately: work started
	// as a request finishes (a publish, a background task) may start after it.
	ended := make(map[int32][]int32)
	// onHost holds the serving processes' spans by host, for roaming guests.
	var onHost map[int32][]int32
	if s.roaming != nil {
		onHost = make(map[int32][]int32)
	}
	var producers []int32
	// Active CLIENT spans by the service they call (-1: not known), so that a
	// SERVER span scans only the callers that may have called its service.
	clients := make(map[int32][]int32)
	lists := make([][]int32, n)
	s.remote = make([]bool, n)
	next := 0
	for _, c := range byStart {
		cs := &spans[c]
		horizon := cs.Start + max(w+s.skewBehind, maxTol)
		for next < len(byStart) && spans[byStart[next]].Start <= horizon {
			p := byStart[next]
			switch spans[p].Kind {
			case span.KindClient:
				clients[spans[p].Peer] = append(clients[spans[p].Peer], p)
			case span.KindProducer:
				producers = append(producers, p)
			default:
				local[s.proc[p]] = append(local[s.proc[p]], p)
				if onHost != nil && spans[p].Host >= 0 && s.serves[spans[p].Instance] {
					onHost[spans[p].Host] = append(onHost[spans[p].Host], p)
				}
			}
			next++
		}
		if !cs.Orphan || s.known[c] {
			continue
		}
		if cs.Kind.RemoteEntry() {
			s.remote[c] = true
			if cs.Kind == span.KindConsumer {
				producers = pruneStarted(spans, producers, cs.Start-aw)
				lists[c] = sameIdentity(spans, c, s.remoteCandidates(producers, c, w, aw, nil))
			} else {
				named := prune(spans, clients[cs.Service], cs.Start-w-s.skewAhead)
				unnamed := prune(spans, clients[-1], cs.Start-w-s.skewAhead)
				clients[cs.Service], clients[-1] = named, unnamed
				lists[c] = sameIdentity(spans, c, s.remoteCandidates(unnamed, c, w, aw, s.remoteCandidates(named, c, w, aw, nil)))
			}
			continue
		}
		var act []int32
		if s.roaming != nil && s.roaming[c] {
			act = prune(spans, onHost[cs.Host], cs.Start-maxTol)
			onHost[cs.Host] = act
		} else {
			proc := s.proc[c]
			act, ended[proc] = pruneInto(spans, local[proc], cs.Start-maxTol, ended[proc])
			local[proc] = act
			if cs.Kind == span.KindProducer || cs.Kind == span.KindInternal {
				ended[proc] = pruneEnded(spans, ended[proc], cs.Start)
				for _, p := range ended[proc] {
					// Work is left behind by a request's handler as it returns
					// (its SERVER or CONSUMER span); a span that ended inside
					// the handler is an earlier sibling, not a parent.
					if spans[p].Kind.RemoteEntry() && s.startsAfter(p, c) {
						lists[c] = append(lists[c], p)
					}
				}
			}
		}
		lists[c] = s.enclosing(act, c, lists[c])
	}
	s.chainCallers(lists)
	s.capCandidates(lists)
	s.start = make([]uint32, n+1)
	for i, l := range lists {
		s.start[i+1] = s.start[i] + uint32(len(l))
	}
	s.cands = make([]int32, 0, s.start[n])
	for _, l := range lists {
		s.cands = append(s.cands, l...)
	}
}

// enclosing appends to dst the spans of act that enclose c's start within the
// timestamps' resolution. What their threads say is a factor of the scores
// (spanthread.go).
func (s *spanStitcher) enclosing(act []int32, c int32, dst []int32) []int32 {
	spans := s.spans
	cs := &spans[c]
	for _, p := range act {
		ps := &spans[p]
		if p != c && ps.Start <= cs.Start+s.tolStart[c]+s.tolStart[p] && ps.End >= cs.Start-s.tolStart[c]-s.tolEnd[p] {
			dst = append(dst, p)
		}
	}
	return dst
}

// outOfOrder reports whether local candidate p started after c, or ended
// before c started, on one clock of one resolution: rounding is monotone, so a
// parent stamped in whole milliseconds never starts a tick after its child,
// nor ends a tick before it starts. Timestamps of different resolutions may
// cross, which the candidates' tolerances allow for. A guest (an in-process
// client reported under another name, hosted or roaming) reads its host's
// clock.
func (s *spanStitcher) outOfOrder(p, c int32) bool {
	ps, cs := &s.spans[p], &s.spans[c]
	sameClock := s.proc[p] == s.proc[c] || (s.roaming != nil && s.roaming[c] && cs.Host >= 0 && ps.Host == cs.Host)
	if !sameClock {
		return false
	}
	return (s.tolStart[p] == s.tolStart[c] && ps.Start > cs.Start) || (s.tolEnd[p] == s.tolStart[c] && ps.End < cs.Start)
}

// capCandidates bounds the work per orphan: under a flood of messages or calls
// only the MaxCandidates candidates that started last before it are kept.
func (s *spanStitcher) capCandidates(lists [][]int32) {
	k := s.cfg.MaxCandidates
	if k <= 0 {
		return
	}
	for c, l := range lists {
		if len(l) <= k {
			continue
		}
		s.capped++
		slices.SortFunc(l, func(a, b int32) int {
			if c := cmp.Compare(s.spans[a].Start, s.spans[b].Start); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		lists[c] = l[len(l)-k:]
	}
}

// remoteCandidates appends the callers of another process that may have called
// span c: a CLIENT span enclosing it within the skew window w, or a PRODUCER span
// that started at most aw before it; a known peer or operation must agree, and
// a CLIENT whose callee is known from context is taken.
func (s *spanStitcher) remoteCandidates(active []int32, c int32, w, aw int64, dst []int32) []int32 {
	spans := s.spans
	cs := &spans[c]
	for _, p := range active {
		ps := &spans[p]
		if p == c || s.proc[p] == s.proc[c] || (ps.Peer >= 0 && ps.Peer != cs.Service) || !opsAgree(ps, cs) {
			continue
		}
		if cs.Kind == span.KindConsumer {
			if ps.Kind != span.KindProducer || ps.Start > cs.Start+w || cs.Start-ps.Start > aw {
				continue
			}
			dst = append(dst, p)
			continue
		}
		// The callee's times on the caller's clock, when learnSkew measured
		// the two apart.
		theta := s.skewOf(p, c)
		if ps.Start > cs.Start-theta+w || ps.Kind != span.KindClient || ps.End < cs.End-theta-w || s.hasKnownCallee[p] {
			continue
		}
		dst = append(dst, p)
	}
	return dst
}

func opsAgree(caller, callee *span.Span) bool {
	return (caller.Op < 0 || callee.Op < 0 || caller.Op == callee.Op) &&
		(caller.OpClass < 0 || callee.OpClass < 0 || caller.OpClass == callee.OpClass)
}

// prune drops spans that ended before horizon, keeping start order.
func prune(spans []span.Span, active []int32, horizon int64) []int32 {
	kept := active[:0]
	for _, p := range active {
		if spans[p].End >= horizon {
			kept = append(kept, p)
		}
	}
	return kept
}

// pruneInto is prune that appends the dropped spans to out.
func pruneInto(spans []span.Span, active []int32, horizon int64, out []int32) ([]int32, []int32) {
	kept := active[:0]
	for _, p := range active {
		if spans[p].End >= horizon {
			kept = append(kept, p)
		} else {
			out = append(out, p)
		}
	}
	return kept, out
}

// pruneEnded drops the ended spans that can no longer be the parent of work
// starting at t: those that ended longer ago than they ran.
func pruneEnded(spans []span.Span, ended []int32, t int64) []int32 {
	kept := ended[:0]
	for _, p := range ended {
		if 2*spans[p].End-spans[p].Start >= t {
			kept = append(kept, p)
		}
	}
	return kept
}

// pruneStarted drops spans that started before horizon: a PRODUCER stays a
// candidate for the async window after its start, whenever it ended.
func pruneStarted(spans []span.Span, active []int32, horizon int64) []int32 {
	i := 0
	for i < len(active) && spans[active[i]].Start < horizon {
		i++
	}
	return active[i:]
}

// isSpanAncestorOrSelf reports whether a is p or an ancestor of p.
func isSpanAncestorOrSelf(parent []int32, a, p int32) bool {
	for steps := 0; p >= 0 && steps <= len(parent); steps++ {
		if p == a {
			return true
		}
		p = parent[p]
	}
	return false
}

// breakCycles removes, from every cycle the joint assignment closed, its least
// confident inferred link.
func (s *spanStitcher) breakCycles() {
	n := len(s.parent)
	state := make([]uint8, n) // 0 unseen, 1 on the current path, 2 done
	var path []int32
	for i := range s.parent {
		if state[i] != 0 {
			continue
		}
		path = path[:0]
		j := int32(i)
		for j >= 0 && state[j] == 0 {
			state[j] = 1
			path = append(path, j)
			j = s.parent[j]
		}
		if j >= 0 && state[j] == 1 {
			// path from j to the end is a cycle; cut its weakest inferred link
			weakest, wc := int32(-1), float32(math.Inf(1))
			for k := len(path) - 1; k >= 0; k-- {
				v := path[k]
				if !s.known[v] && s.conf[v] < wc {
					weakest, wc = v, s.conf[v]
				}
				if v == j {
					break
				}
			}
			if weakest >= 0 {
				s.parent[weakest], s.conf[weakest] = -1, 0
			}
		}
		for _, v := range path {
			state[v] = 2
		}
	}
}

// chainCallers narrows every orphan SERVER span's callers: to those that
// called its own address when any did (sameEndpointFirst), then by the chain
// rule (innermostCallers).
func (s *spanStitcher) chainCallers(lists [][]int32) {
	for c, l := range lists {
		if !s.remote[c] || s.spans[c].Kind != span.KindServer || len(l) < 2 {
			continue
		}
		l = s.sameEndpointFirst(int32(c), l)
		lists[c] = l
		// The rule holds among the callers that started first; the others are
		// kept for when the clock offsets are known.
		var first, late []int32
		for _, p := range l {
			if s.spans[c].Start-s.spans[p].Start >= -(s.tolStart[c] + s.tolStart[p]) {
				first = append(first, p)
			} else {
				late = append(late, p)
			}
		}
		if len(first) == 0 {
			lists[c] = s.innermostCallers(l)
			continue
		}
		lists[c] = append(s.innermostCallers(first), late...)
	}
}

// sameEndpointFirst keeps, when some callers called exactly the address the
// server span answered on, only those: replicas of one service share its name
// but not their addresses. It is a preference, not a rule: behind a proxy, NAT
// or a service name the two addresses differ for the right caller too.
func (s *spanStitcher) sameEndpointFirst(c int32, l []int32) []int32 {
	ep := s.spans[c].Endpoint
	if ep < 0 {
		return l
	}
	n := 0
	for _, p := range l {
		if s.spans[p].Endpoint == ep {
			n++
		}
	}
	if n == 0 || n == len(l) {
		return l
	}
	kept := make([]int32, 0, n)
	for _, p := range l {
		if s.spans[p].Endpoint == ep {
			kept = append(kept, p)
		}
	}
	return kept
}

// clockOffset is the offset of the callee's clock from the caller's, per pair
// of processes, with the spread of its estimates (the median distance from it).
type clockOffset struct{ theta, spread int64 }

// fitOffsets estimates the clock offset of every caller → callee process pair
// from the SERVER spans whose caller is known or assigned (in round 0, from
// all their candidates): NTP's estimate ((request delay) − (response
// delay))/2 with the delays taken as symmetric, at its densest cluster over
// the pair's calls, and the median distance from it as the spread. Skew
// between hosts can exceed a call's network delay, so a callee can seem to
// start before its caller; corrected delays put it back in order.
// Synchronised clocks are the prior: the offset is 0 when the densest run of
// estimates holds 0, as it does with microsecond hops on one clock, where a
// run among many candidates is wider than the hops. Real delays are seldom
// symmetric (a server queues a request before its span starts), so the
// spread, not 0, is what inTime tolerates around the offset.
func (s *spanStitcher) fitOffsets(round int) {
	type pair struct{ caller, callee int32 }
	samples := make(map[pair][]int64)
	sample := func(p, c int32) {
		ps, cs := &s.spans[p], &s.spans[c]
		k := pair{s.procIndex[p], s.procIndex[c]}
		samples[k] = append(samples[k], ((cs.Start-ps.Start)-(ps.End-cs.End))/2)
	}
	for c := range s.spans {
		ci := int32(c)
		cs := &s.spans[c]
		if cs.Kind != span.KindServer {
			continue
		}
		if p := s.parent[c]; p >= 0 && (s.known[c] || round > 0) {
			if s.spans[p].Kind == span.KindClient && s.proc[p] != s.proc[c] {
				sample(p, ci)
			}
			continue
		}
		// Before any assignment, every candidate: the true pairs agree on the
		// offset, the others scatter, and the densest cluster is taken.
		if round == 0 && s.remote[c] {
			for k := s.start[c]; k < s.start[c+1]; k++ {
				sample(s.cands[k], ci)
			}
		}
	}
	clear(s.offsets)
	if s.procs <= 256 {
		if s.denseOffsets == nil {
			s.denseOffsets = make([]clockOffset, s.procs*s.procs)
		}
		clear(s.denseOffsets)
	}
	for k, v := range samples {
		if len(v) < 3 {
			continue
		}
		slices.Sort(v)
		theta, lo, hi := densest(v)
		if round == 0 && hi-lo > s.offsetScale() {
			// Among every candidate, the true callers may be fewer than the
			// fifth densest takes, and its run, wider than the data's scale,
			// is scatter: a window of that scale finds them when they stand
			// out of it.
			if t, ok := s.offsetPeak(v); ok {
				theta, lo, hi = t, t, t
			}
		}
		if lo <= 0 && 0 <= hi {
			// Synchronised clocks are the prior: no offset when the densest
			// run holds 0.
			theta = 0
		}
		for i := range v {
			v[i] = max(v[i]-theta, theta-v[i])
		}
		slices.Sort(v)
		o := clockOffset{theta, v[len(v)/2]}
		if s.denseOffsets != nil {
			s.denseOffsets[int(k.caller)*s.procs+int(k.callee)] = o
			continue
		}
		s.offsets[[2]int32{k.caller, k.callee}] = o
	}
}

// offsetPeak is the densest window of candidate offsets, of learnSkew's width
// b = min(w/2, the median span), when it stands out of a uniform scatter over
// the values' range as learnSkew requires of a far offset (standsOut).
func (s *spanStitcher) offsetPeak(v []int64) (int64, bool) {
	b := s.offsetScale()
	span := v[len(v)-1] - v[0]
	if b <= 0 || span <= 4*b {
		return 0, false
	}
	theta, n := densestWindow(v, b)
	if !standsOut(n, float64(len(v))*float64(b)/float64(span)) {
		return 0, false
	}
	return theta, true
}

// offsetScale is the width b = min(w/2, the median span) in which the offsets
// of a pair's true calls gather (learnSkew's window).
func (s *spanStitcher) offsetScale() int64 {
	b := int64(s.cfg.SkewWindow) / 2
	if s.median > 0 {
		b = min(b, s.median)
	}
	return b
}

// densest is the median of the narrowest run of a fifth of the sorted values
// (at least 3), and the run's ends: the mode of a cluster among scattered
// values, as the shortest half is for a majority.
func densest(v []int64) (mode, lo, hi int64) {
	h := max(3, len(v)/5)
	if h >= len(v) {
		return v[len(v)/2], v[0], v[len(v)-1]
	}
	best := 0
	for i := 1; i+h <= len(v); i++ {
		if v[i+h-1]-v[i] < v[best+h-1]-v[best] {
			best = i
		}
	}
	return v[best+h/2], v[best], v[best+h-1]
}

// offset is the fitted clock offset between the processes of caller p and
// callee c.
func (s *spanStitcher) offset(p, c int32) clockOffset {
	if s.denseOffsets != nil {
		return s.denseOffsets[int(s.procIndex[p])*s.procs+int(s.procIndex[c])]
	}
	return s.offsets[[2]int32{s.procIndex[p], s.procIndex[c]}]
}

// indexProcesses numbers the processes densely, so that the offsets of up to
// 256 processes are a table rather than a map.
func (s *spanStitcher) indexProcesses() {
	ids := make(map[int32]int32)
	s.procIndex = make([]int32, len(s.spans))
	for i, p := range s.proc {
		id, ok := ids[p]
		if !ok {
			id = int32(len(ids))
			ids[p] = id
		}
		s.procIndex[i] = id
	}
	s.procs = len(ids)
}

// inTime reports whether caller p started before callee c, once the pair's
// clock offset is corrected, within the timestamps' resolution and the
// offset's spread. A caller that started after its callee is explained only by
// skew not yet measured, which the window admits for when no caller is in time.
func (s *spanStitcher) inTime(p, c int32) bool {
	o := s.offset(p, c)
	return s.spans[c].Start-s.spans[p].Start-o.theta >= -(s.tolStart[c] + s.tolStart[p] + o.spread)
}

// innermostCallers drops a caller that encloses another candidate caller of a
// different process when that process served the outer call: a SERVER span of
// the inner caller's process nests in the outer caller and encloses the inner
// one. The outer caller is then further up the same chain of calls (a
// gateway's call enclosing the call its callee made). Without that witness,
// under concurrency, the inner caller may belong to another request.
func (s *spanStitcher) innermostCallers(l []int32) []int32 {
	if len(l) < 2 {
		return l
	}
	kept := l[:0:0]
	for _, p := range l {
		ps := &s.spans[p]
		outer := false
		for _, q := range l {
			qs := &s.spans[q]
			if q != p && s.proc[q] != s.proc[p] && ps.Start <= qs.Start && qs.End <= ps.End &&
				(ps.Start != qs.Start || ps.End != qs.End) && s.servedBetween(q, p) {
				outer = true
				break
			}
		}
		if !outer {
			kept = append(kept, p)
		}
	}
	return kept
}

// servedBetween reports whether a SERVER span of inner's process nests in
// outer and encloses inner.
func (s *spanStitcher) servedBetween(inner, outer int32) bool {
	if s.servers == nil {
		s.servers = make(map[int32][]int32)
		for _, i := range s.byStart() {
			if s.spans[i].Kind == span.KindServer {
				s.servers[s.proc[i]] = append(s.servers[s.proc[i]], i)
			}
		}
	}
	is, os := &s.spans[inner], &s.spans[outer]
	list := s.servers[s.proc[inner]]
	j := sort.Search(len(list), func(k int) bool { return s.spans[list[k]].Start >= os.Start })
	for ; j < len(list); j++ {
		v := &s.spans[list[j]]
		if v.Start > is.Start {
			break
		}
		if v.End <= os.End && v.End >= is.End {
			return true
		}
	}
	return false
}

// timeUnit is the width, in nanoseconds, in which the delay models count
// densities: the median span's duration over unitsPerMedian. Fixed in
// nanoseconds, the floors that keep a delay never seen from scoring zero
// (scoreFloor, relativeFloor) weighed more the longer the requests, and
// second-long calls were left unwritten that millisecond ones were not; in a
// unit of the data's own scale they are the same share of a density at any.
func timeUnit(median int64) float64 {
	if median <= 0 {
		return densityUnit
	}
	return float64(median) / unitsPerMedian
}

// medianSpan is the median duration of the spans that last, 0 when none
// does. A systematic sample of at most unitSample spans gives it to within a
// few percent at a fraction of a round's sort.
func (s *spanStitcher) medianSpan() int64 {
	step := max(1, len(s.spans)/unitSample)
	d := make([]int64, 0, min(len(s.spans), unitSample+1))
	for i := 0; i < len(s.spans); i += step {
		if v := s.spans[i].End - s.spans[i].Start; v > 0 {
			d = append(d, v)
		}
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// unitsPerMedian divides the median span's duration into timeUnit: 3,000
// keeps the unit near 1 µs for the millisecond spans of most services.
const unitsPerMedian = 3000

// unitSample bounds the spans medianSpan reads.
const unitSample = 4096

// sameIdentity keeps, of remote entry c's candidate callers, those that name
// the message or request target c names (span.Span.Identity), when any does:
// the identity is the link itself, as a call id is, or narrows it to the
// calls of one target. The others stay when none does: the two ends may name
// it in different forms (a proxy that rewrites paths, another message id).
func sameIdentity(spans []span.Span, c int32, l []int32) []int32 {
	m := spans[c].Identity
	if m < 0 {
		return l
	}
	n := 0
	for _, p := range l {
		if spans[p].Identity == m {
			l[n] = p
			n++
		}
	}
	if n == 0 {
		return l
	}
	return l[:n]
}

// messageConfidence makes sure the consumers whose one candidate producer
// names the message they took. A message id is unique, unlike a request
// target, which only narrows the candidates.
func (s *spanStitcher) messageConfidence() {
	for c, p := range s.parent {
		cs := &s.spans[c]
		if p < 0 || s.known[c] || cs.Kind != span.KindConsumer || cs.Identity < 0 || s.spans[p].Identity != cs.Identity {
			continue
		}
		if s.start[c+1]-s.start[c] == 1 {
			s.conf[c] = 1
		}
	}
}
