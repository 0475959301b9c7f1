// Package stitch repairs traces whose context was lost: it adapts OTLP spans to the
// span inference of package causal, writes the inferred parents back in one of
// three modes, and tags every span with the signature of its causal path. The
// causalpath processor and `tierscope stitch` share it, so a file and a pipeline
// give the same answer.
package stitch

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/stats"
)

// Attribute names written on spans (docs/formats.md §4).
const (
	AttrInferredParent     = "tierscope.inferred.parent_span_id"
	AttrInferredConfidence = "tierscope.inferred.confidence"
	AttrPathSignature      = "tierscope.path.signature"
	// AttrLinkType says why a span link was added: LinkInferredParent in link
	// mode, LinkCandidateParent for a parent below the confidence reparent
	// mode writes.
	AttrLinkType        = "tierscope.link.type"
	LinkInferredParent  = "inferred_parent"
	LinkCandidateParent = "candidate_parent"
	// AttrTruthParent carries the true parent of a span in test data
	// (`tierscope convert --strip`), so that a report can score the inference.
	AttrTruthParent = "tierscope.truth.parent_span_id"
)

// Mode says how an inferred parent is written back.
type Mode uint8

const (
	// ModeReparent sets the orphan's parentSpanId and moves its whole subtree into
	// the parent's trace.
	ModeReparent Mode = iota
	// ModeLink adds a span link to the parent and the attributes.
	ModeLink
	// ModeAnnotate only adds the attributes.
	ModeAnnotate
)

// ParseMode maps a mode name to a Mode.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "reparent":
		return ModeReparent, nil
	case "link":
		return ModeLink, nil
	case "annotate":
		return ModeAnnotate, nil
	}
	return 0, fmt.Errorf("unknown mode %q: want reparent, link or annotate", s)
}

func (m Mode) String() string {
	return [...]string{"reparent", "link", "annotate"}[m]
}

// learnConfidence is the confidence from which an inferred CLIENT→SERVER link is
// trusted to teach the address book.
const learnConfidence = 0.9

// Options configure a Stitcher.
type Options struct {
	Mode   Mode
	Config causal.StitchConfig
	// TagPaths writes AttrPathSignature on every span.
	TagPaths bool
	// MaxAddresses bounds the learned address book.
	MaxAddresses int
	// Patterns aggregates the path patterns into Report.Patterns; the processor
	// only tags spans and leaves it off.
	Patterns bool
	// MaxMovedTraces bounds the memory of traces moved by reparenting, which is
	// applied to their spans released later.
	MaxMovedTraces int
	// MaxHistory bounds the released spans remembered as possible parents of
	// orphans released in later rounds (0: none, as for a single file), and
	// HistoryWindow how far, in span time, behind the newest release they reach.
	MaxHistory    int
	HistoryWindow time.Duration
	// MinConfidence is the confidence from which reparent mode writes an
	// inferred parent; below it the orphan keeps its context and is annotated,
	// with a link to its best candidate, and counted as an abstention.
	MinConfidence float64
}

// DefaultMinConfidence is the default of Options.MinConfidence, chosen for
// precision over coverage: on the evaluation harness at its default load (4
// requests overlapping) the parents written from it are right 99.1% of the time
// on TrainTicket and 98.3–99.7% on generated applications (docs/causal-report.md).
const DefaultMinConfidence = 0.98

// DefaultOptions reparents, tags paths and remembers 10,000 addresses.
func DefaultOptions() Options {
	return Options{Mode: ModeReparent, Config: causal.DefaultStitchConfig(), TagPaths: true, MaxAddresses: 10000, Patterns: true,
		MaxMovedTraces: 100_000, MinConfidence: DefaultMinConfidence}
}

// Stitcher stitches batches of spans. It keeps the address book between batches;
// it is not safe for concurrent use.
type Stitcher struct {
	opt     Options
	book    *AddressBook
	moved   *movedTraces
	history *history
	join    joiner
	// The buffers of one round, kept for the next: a processor stitches a
	// round every few hundred milliseconds, and building them anew was a
	// third of the bytes it allocated.
	round     *round
	refs      []spanRef
	resources []Resource
}

// New returns a Stitcher, or an error for unusable options.
func New(opt Options) (*Stitcher, error) {
	if err := opt.Config.Validate(); err != nil {
		return nil, err
	}
	if opt.Mode > ModeAnnotate {
		return nil, fmt.Errorf("stitch: unknown mode %d", opt.Mode)
	}
	if !(opt.MinConfidence >= 0 && opt.MinConfidence <= 1) {
		return nil, fmt.Errorf("stitch: min confidence must be in [0, 1], got %v", opt.MinConfidence)
	}
	return &Stitcher{opt: opt, book: NewAddressBook(opt.MaxAddresses), moved: newMovedTraces(opt.MaxMovedTraces),
		history: &history{max: opt.MaxHistory, window: int64(opt.HistoryWindow)}}, nil
}

// Report counts what one Stitch call did.
type Report struct {
	Spans    int // spans seen
	Orphans  int // spans without a parent, whose parent was looked for
	Inferred int // orphans given a parent
	// Abstained counts the inferred parents below MinConfidence, which reparent
	// mode annotated and linked instead of writing.
	Abstained  int
	LeftOrphan int // orphans left without one (true roots among them)
	// Unresolved counts CLIENT/PRODUCER spans that name an address or operation
	// but whose callee's service could not be resolved.
	Unresolved int
	// Guests counts client-only processes placed in the process that hosts
	// them (causal.StitchResult.Guests); Capped the orphans whose candidates
	// were cut to the configured maximum.
	Guests, Capped int
	// Skipped counts spans passed through untouched because they cannot take part:
	// empty trace or span id, or an end before the start.
	Skipped int
	// Unusual counts spans that take part but look odd: zero duration, an unknown
	// kind, an attribute value too long to use as an endpoint.
	ZeroDuration, UnknownKind, LongAttributes int
	Patterns                                  []*causal.Pattern
	// Edges is the service graph of the released spans (with Options.Patterns).
	Edges []*Edge
	Truth *TruthScore // set when spans carry AttrTruthParent
}

// Edge is one caller → callee edge of the service graph, between path nodes: the
// callee's latency is its span's duration, seen from the callee when it is
// instrumented and from the caller otherwise.
type Edge struct {
	From, To string
	Calls    int
	Errors   int
	Latency  *stats.LogHistogram // milliseconds
}

type spanRef struct {
	span     ptrace.Span
	resource int32 // index into resources
	context  bool  // only context: a candidate parent, never an orphan, never written
}

// Stitch infers missing parents across the batches and writes them back in place.
// Every span stays where it was, exactly once.
func (s *Stitcher) Stitch(batches ...ptrace.Traces) Report {
	return s.StitchWithContext(batches, nil)
}

// StitchWithContext stitches the spans of release, using the spans of context
// (which are still waiting for their own context) only as candidate parents and
// known links. Context spans are only read, never written: only those that start
// early enough to enclose an orphan of release are looked at at all, and when a
// reparented subtree reaches into them, the move is remembered and applied when
// they are released. The report counts the spans of release.
func (s *Stitcher) StitchWithContext(release, context []ptrace.Traces) Report {
	var rep Report
	refs, resources := collect(release, false, s.refs[:0], s.resources[:0], 0)
	defer func() {
		// Drop the references into the batches, so that released spans are not
		// kept alive until the next round.
		clear(refs)
		clear(resources)
		s.refs, s.resources = refs[:0], resources[:0]
	}()
	rep.Spans = len(refs)
	s.moved.apply(refs)
	if len(refs) == 0 {
		return rep
	}
	earliest, latest := int64(math.MaxInt64), int64(math.MinInt64)
	for _, r := range refs {
		earliest = min(earliest, int64(r.span.StartTimestamp()))
		latest = max(latest, int64(r.span.StartTimestamp()))
	}
	cfg := s.opt.Config
	window := s.ContextReach()
	refs, resources = collect(context, true, refs, resources, latest+window)

	if s.round == nil {
		s.round = newRound(len(refs))
	}
	t := s.round
	t.reset()
	truth := s.readSpans(t, refs, resources, &rep)
	// Spans released in earlier rounds that may still be a parent here.
	for _, h := range s.history.since(earliest-window, earliest-int64(cfg.AsyncWindow)) {
		t.add(-1, h, false)
	}
	s.linkKnownParents(t, refs)
	s.resolvePeers(t, refs, &rep)

	res, err := causal.Stitch(t.spans, cfg)
	if err != nil { // the options were validated in New
		panic(err)
	}
	rep.Orphans, rep.LeftOrphan, rep.Guests, rep.Capped = res.Orphans, res.LeftOrphan, res.Guests, res.Capped
	written := s.writeParents(t, refs, res, &rep)
	if s.opt.Mode == ModeReparent {
		s.moveSubtrees(refs, t, written)
	}
	s.tagPaths(t, refs, written, res.ByStart, &rep)
	if truth {
		rep.Truth = scoreTruth(refs, t, res, written)
	}
	return rep
}

// ContextReach is how far (ns) past the latest start among the released spans a
// context span may start and still be read (the skew window, widened by the
// largest clock offset measured, MaxSkew): a caller that keeps batches can
// leave out of the context those whose every span starts later, which would
// only be looked at and passed over.
func (s *Stitcher) ContextReach() int64 {
	return int64(max(s.opt.Config.SkewWindow+s.opt.Config.MaxSkew, s.opt.Config.LocalWindow))
}

// readSpans adds every span of refs to the round, with what its attributes say
// of its kind, peer, address and operation, and counts the released spans it
// must skip or cannot read fully. It reports whether a released span carries
// AttrTruthParent.
func (s *Stitcher) readSpans(t *round, refs []spanRef, resources []Resource, rep *Report) (truth bool) {
	var attrs spanAttrs
	for i, r := range refs {
		sp := r.span
		start, end := int64(sp.StartTimestamp()), int64(sp.EndTimestamp())
		final := !r.context
		if sp.TraceID().IsEmpty() || sp.SpanID().IsEmpty() || end < start {
			if final {
				rep.Skipped++
			}
			continue
		}
		if end == start && final {
			rep.ZeroDuration++
		}
		kind := KindOf(sp.Kind())
		if kind == span.KindUnspecified && sp.Kind() != ptrace.SpanKindUnspecified && final {
			rep.UnknownKind++
		}
		var pr peer
		endpoint, callerAddr, conn := "", "", ""
		readAttrs(sp.Attributes(), &attrs, &s.join)
		if final {
			rep.LongAttributes += attrs.tooLong
			truth = truth || attrs.truth
		}
		kind = sideOf(roleOf(kind, &attrs), &attrs)
		switch kind {
		case span.KindClient, span.KindProducer:
			pr = peerOf(&attrs, &s.join)
		case span.KindServer:
			endpoint = ownAddress(&attrs, &s.join)
			callerAddr, conn = callerAddress(&attrs, &s.join)
		}
		op, class := operation(&attrs, sp.Name(), kind, &s.join)
		res := resources[r.resource]
		t.add(int32(i), released{
			start: start, end: end, kind: kind, service: res.Service, instance: res.Instance, host: res.Host,
			name: sp.Name(), op: op, class: class, thread: threadOf(&attrs, &s.join), peer: pr, trace: sp.TraceID(), span: sp.SpanID(),
			caller: conn, callerAddress: callerAddr, identity: identityOf(&attrs, kind),
		}, final && sp.ParentSpanID().IsEmpty())
		if endpoint != "" {
			t.spans[len(t.spans)-1].Endpoint = t.names.ID(endpoint)
		}
		// What a server says of itself names the service at its address and
		// operation, with no context needed.
		if kind.RemoteEntry() {
			s.book.Learn(endpoint, res.Service)
			s.book.Learn(s.join.opAddress(op), res.Service)
		}
	}
	return truth
}

// linkKnownParents sets the parents that context gives within the round, and
// learns addresses from intact CLIENT → SERVER links.
func (s *Stitcher) linkKnownParents(t *round, refs []spanRef) {
	for j := range t.spans {
		if t.ref[j] < 0 {
			continue
		}
		sp := refs[t.ref[j]].span
		if sp.ParentSpanID().IsEmpty() {
			continue
		}
		p, ok := t.byID[sp.ParentSpanID()]
		if !ok {
			continue // the parent is elsewhere; the context is intact
		}
		t.spans[j].Parent = p
		if t.spans[p].Kind == span.KindClient && t.spans[j].Kind == span.KindServer {
			s.book.Learn(t.peers[p].address, t.names.Name(t.spans[j].Service))
		}
	}
}

// resolvePeers names the service each CLIENT and PRODUCER span calls, from its
// attributes or the address book, and counts the released ones that give an
// address no one answers for.
func (s *Stitcher) resolvePeers(t *round, refs []spanRef, rep *Report) {
	for j := range t.spans {
		k := t.spans[j].Kind
		if k != span.KindClient && k != span.KindProducer {
			continue
		}
		p := t.peers[j]
		svc := p.service
		if svc == "" {
			svc = s.book.Resolve(p.address)
		}
		if svc == "" && t.spans[j].Op >= 0 {
			svc = s.book.Resolve(s.join.opAddress(t.names.Name(t.spans[j].Op)))
		}
		switch {
		case svc != "":
			t.spans[j].Peer = t.names.ID(svc)
		case p.database:
			// A database no instrumented server answers for: a name no service
			// has, so no SERVER span nests in the call.
			t.spans[j].Peer = t.names.ID("database:" + p.label)
		}
		named := p.address != "" || t.spans[j].Op >= 0
		if named && !p.database && t.spans[j].Peer < 0 && t.ref[j] >= 0 && !refs[t.ref[j]].context {
			rep.Unresolved++
		}
	}
}

// writeParents writes every inferred parent into its orphan and returns the
// parents that stand after write-back, for the paths and the score: a parent
// below MinConfidence leaves the orphan a root of its own trace (res.Parent
// keeps every best candidate).
func (s *Stitcher) writeParents(t *round, refs []spanRef, res *causal.StitchResult, rep *Report) []int32 {
	written := slices.Clone(res.Parent)
	for j := range t.spans {
		if !res.Inferred[j] {
			continue
		}
		rep.Inferred++
		p := res.Parent[j]
		trusted := float64(res.Confidence[j]) >= s.opt.MinConfidence
		if !trusted {
			rep.Abstained++
			written[j] = -1
		}
		s.writeBack(refs[t.ref[j]].span, t.traces[p], t.ids[p], res.Confidence[j], trusted)
		// Confident inferences teach addresses too, so that the caller's side of a
		// trace released later, without its callee, still names the callee.
		if t.spans[p].Kind == span.KindClient && t.spans[j].Kind == span.KindServer && res.Confidence[j] >= learnConfidence {
			s.book.Learn(t.peers[p].address, t.names.Name(t.spans[j].Service))
		}
	}
	return written
}

// tagPaths gives every released span its path signature (and the report its
// patterns and service graph when asked), and remembers the released callers
// for the rounds to come.
func (s *Stitcher) tagPaths(t *round, refs []spanRef, written, byStart []int32, rep *Report) {
	labels, labelOf := pathLabels(t, written, s.book)
	var sigs []string
	if s.opt.Patterns {
		rep.Patterns, sigs = causal.SpanPaths(t.spans, written, labelOf, labels, byStart)
		rep.Edges = serviceGraph(refs, t, written, labelOf, labels)
	} else if s.opt.TagPaths {
		sigs = causal.SpanSignatures(t.spans, written, labelOf, labels, byStart)
	}
	for j := range t.spans {
		r := t.ref[j]
		if r < 0 || refs[r].context {
			continue
		}
		if s.opt.TagPaths && sigs[j] != "" {
			refs[r].span.Attributes().PutStr(AttrPathSignature, sigs[j])
		}
		// Only callers are remembered: the parent an orphan misses across rounds is
		// the CLIENT or PRODUCER span of another process, exported (and released)
		// before the callee's side, while a local parent comes in the orphan's own
		// batch.
		if !t.spans[j].Kind.RemoteCaller() {
			continue
		}
		s.history.add(t.facts(int32(j), refs[r].span.TraceID()))
	}
}

// serviceGraph counts, for every labelled span with a labelled ancestor, one call
// from the ancestor's node to the span's node.
func serviceGraph(refs []spanRef, t *round, parent, labelOf []int32, labels []string) []*Edge {
	type key struct{ from, to int32 }
	edges := make(map[key]*Edge)
	for j := range t.spans {
		if labelOf[j] < 0 || t.ref[j] < 0 {
			continue
		}
		a := parent[j]
		for steps := 0; a >= 0 && labelOf[a] < 0 && steps < len(parent); steps++ {
			a = parent[a]
		}
		if a < 0 {
			continue
		}
		k := key{labelOf[a], labelOf[j]}
		e, ok := edges[k]
		if !ok {
			e = &Edge{From: labels[k.from], To: labels[k.to], Latency: stats.NewLogHistogram(stats.LatencyBins)}
			edges[k] = e
		}
		e.Calls++
		if refs[t.ref[j]].span.Status().Code() == ptrace.StatusCodeError {
			e.Errors++
		}
		e.Latency.Add(float64(t.spans[j].End-t.spans[j].Start) / 1e6)
	}
	out := make([]*Edge, 0, len(edges))
	for _, e := range edges {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *Edge) int {
		if a.Calls != b.Calls {
			return b.Calls - a.Calls
		}
		return strings.Compare(a.From+"\x00"+a.To, b.From+"\x00"+b.To)
	})
	return out
}

// round holds one stitching round's spans: the live ones (ref ≥ 0, an index into
// the round's refs) and the released ones recalled from history (ref −1).
type round struct {
	spans  []span.Span
	ref    []int32
	traces []pcommon.TraceID
	ids    []pcommon.SpanID
	peers  []peer
	// byID finds known parents by span id alone: span ids are 64-bit random, and
	// a descendant released before its orphan ancestor was reparented still
	// carries the old trace id.
	byID  map[pcommon.SpanID]int32
	names *span.Names
}

func newRound(size int) *round {
	return &round{
		spans: make([]span.Span, 0, size), ref: make([]int32, 0, size),
		traces: make([]pcommon.TraceID, 0, size), ids: make([]pcommon.SpanID, 0, size), peers: make([]peer, 0, size),
		byID: make(map[pcommon.SpanID]int32, size), names: span.NewNames(),
	}
}

// reset empties the round, keeping its buffers.
func (t *round) reset() {
	t.spans, t.ref, t.traces, t.ids, t.peers = t.spans[:0], t.ref[:0], t.traces[:0], t.ids[:0], t.peers[:0]
	clear(t.byID)
	t.names.Reset()
}

func (t *round) add(ref int32, f released, orphan bool) {
	j := int32(len(t.spans))
	t.spans = append(t.spans, span.Span{
		Start: f.start, End: f.end,
		Service: t.names.ID(f.service), Instance: t.names.ID(f.instance), Host: t.names.Optional(f.host), Name: t.names.ID(f.name),
		Kind: f.kind, Peer: -1, Parent: -1, Endpoint: -1, Op: t.names.Optional(f.op), OpClass: t.names.Optional(f.class),
		Thread: t.names.Optional(f.thread), Identity: t.names.Optional(f.identity), Orphan: orphan,
		Caller: t.names.Optional(f.caller), CallerAddress: t.names.Optional(f.callerAddress),
		// What only the exporter reads is left unknown.
		Transaction: -1, Version: -1, Machine: -1, Process: -1,
	})
	if f.kind.RemoteCaller() && f.peer.address != "" {
		t.spans[j].Endpoint = t.names.ID(f.peer.address)
	}
	t.ref = append(t.ref, ref)
	t.traces = append(t.traces, f.trace)
	t.ids = append(t.ids, f.span)
	t.peers = append(t.peers, f.peer)
	t.byID[f.span] = j
}

// facts is what history keeps of span j.
func (t *round) facts(j int32, trace pcommon.TraceID) released {
	sp := &t.spans[j]
	name := t.names.Name
	return released{
		start: sp.Start, end: sp.End, kind: sp.Kind,
		service: name(sp.Service), instance: name(sp.Instance), host: name(sp.Host), name: name(sp.Name),
		op: name(sp.Op), class: name(sp.OpClass), thread: name(sp.Thread), peer: t.peers[j], trace: trace, span: t.ids[j],
		caller: name(sp.Caller), callerAddress: name(sp.CallerAddress), identity: name(sp.Identity),
	}
}

// released is what history keeps of a span after it left: enough to be a parent.
// It is a record of history, not a second span model: its names are strings
// because each round's table is reset, and round.add makes it a span.Span of
// the round that recalls it.
type released struct {
	start, end                    int64
	service, instance, host, name string
	op, class, thread             string
	caller, callerAddress         string // a SERVER span's caller connection and address
	identity                      string // the message or request target both ends name (span.Span.Identity)
	kind                          span.Kind
	peer                          peer
	trace                         pcommon.TraceID
	span                          pcommon.SpanID
}

// history is a bounded FIFO of released spans, so that an orphan released in a
// later round (its callee's exporter was slower, or a burst pushed its caller out
// early) can still find its parent.
type history struct {
	max    int
	window int64
	recs   []released
}

func (h *history) add(r released) {
	if h.max <= 0 {
		return
	}
	if len(h.recs) >= h.max {
		drop := len(h.recs) - h.max + 1 + h.max/8 // amortise the copy
		h.recs = append(h.recs[:0], h.recs[drop:]...)
	}
	h.recs = append(h.recs, r)
}

// since returns the records that may enclose a span starting at or after
// endAfter's bound: those ending at or after endAfter, and PRODUCER spans that
// started at or after producedAfter.
func (h *history) since(endAfter, producedAfter int64) []released {
	// Records are roughly in time order; those that ended a window before this
	// release are of no use any more.
	old := 0
	for old < len(h.recs) && h.recs[old].end < min(endAfter, producedAfter)-h.window {
		old++
	}
	if old > 0 {
		h.recs = append(h.recs[:0], h.recs[old:]...)
	}
	var out []released
	for _, r := range h.recs {
		if r.end >= endAfter || (r.kind == span.KindProducer && r.start >= producedAfter) {
			out = append(out, r)
		}
	}
	return out
}

// writeBack records an inferred parent on the orphan, as the mode says; in
// reparent mode an untrusted parent is only linked.
func (s *Stitcher) writeBack(orphan ptrace.Span, parentTrace pcommon.TraceID, parent pcommon.SpanID, confidence float32, trusted bool) {
	attrs := orphan.Attributes()
	attrs.PutStr(AttrInferredParent, parent.String())
	attrs.PutDouble(AttrInferredConfidence, math.Round(float64(confidence)*1000)/1000)
	switch {
	case s.opt.Mode == ModeReparent && trusted:
		orphan.SetParentSpanID(parent)
	case s.opt.Mode == ModeLink || s.opt.Mode == ModeReparent:
		link := orphan.Links().AppendEmpty()
		link.SetTraceID(parentTrace)
		link.SetSpanID(parent)
		linkType := LinkInferredParent
		if !trusted {
			linkType = LinkCandidateParent
		}
		link.Attributes().PutStr(AttrLinkType, linkType)
	}
}

// moveSubtrees gives every released span the trace id of its final root, which
// moves each reparented orphan and its descendants into the parent's trace, and
// remembers the move for the spans of those traces that are still to come. Roots
// are read before anything is rewritten.
func (s *Stitcher) moveSubtrees(refs []spanRef, t *round, parent []int32) {
	root := make([]int32, len(parent))
	for j := range parent {
		r := int32(j)
		for steps := 0; parent[r] >= 0 && steps < len(parent); steps++ {
			r = parent[r]
		}
		root[j] = r
	}
	for j := range parent {
		want := t.traces[root[j]]
		if t.ref[j] < 0 || t.traces[j] == want {
			continue
		}
		s.moved.record(t.traces[j], want)
		if r := refs[t.ref[j]]; !r.context {
			r.span.SetTraceID(want)
		}
	}
}

// movedTraces remembers, boundedly, which traces reparenting merged into which, so
// that spans of a moved trace released later, or arriving late, follow it.
type movedTraces struct {
	max int
	to  map[pcommon.TraceID]pcommon.TraceID
	// order holds the recorded traces by first record: a ring once full, its
	// oldest at next, so that evicting allocates nothing.
	order []pcommon.TraceID
	next  int
}

func newMovedTraces(max int) *movedTraces {
	return &movedTraces{max: max, to: make(map[pcommon.TraceID]pcommon.TraceID)}
}

func (m *movedTraces) record(from, to pcommon.TraceID) {
	if m.max <= 0 || from == to {
		return
	}
	if _, ok := m.to[from]; !ok {
		if len(m.order) < m.max {
			m.order = append(m.order, from)
		} else {
			delete(m.to, m.order[m.next])
			m.order[m.next] = from
			m.next = (m.next + 1) % m.max
		}
	}
	m.to[from] = to
}

// apply rewrites the trace ids of moved traces, following chains of moves.
func (m *movedTraces) apply(refs []spanRef) {
	if len(m.to) == 0 {
		return
	}
	// The spans of a trace mostly come in a row: the last answer is kept.
	var last, lastTo pcommon.TraceID
	var lastMoved, hasLast bool
	for _, r := range refs {
		from := r.span.TraceID()
		if hasLast && from == last {
			if lastMoved {
				r.span.SetTraceID(lastTo)
			}
			continue
		}
		t := from
		moved := false
		for steps := 0; steps < 8; steps++ {
			next, ok := m.to[t]
			if !ok {
				break
			}
			t, moved = next, true
		}
		if moved {
			r.span.SetTraceID(t)
		}
		last, lastTo, lastMoved, hasLast = from, t, moved, true
	}
}

// pathLabels names the path node of every span: SERVER and CONSUMER spans and
// roots are their service; a CLIENT or PRODUCER span whose callee's span is not in
// the trace is its callee (resolved service, database, address); other spans are
// transparent (-1).
func pathLabels(t *round, parent []int32, book *AddressBook) ([]string, []int32) {
	spans := t.spans
	hasRemoteChild := make([]bool, len(spans))
	for j, p := range parent {
		if p >= 0 && spans[j].Kind.RemoteEntry() {
			hasRemoteChild[p] = true
		}
	}
	var labels []string
	labelIDs := make(map[string]int32)
	labelID := func(s string) int32 {
		id, ok := labelIDs[s]
		if !ok {
			id = int32(len(labels))
			labelIDs[s] = id
			labels = append(labels, s)
		}
		return id
	}
	labelOf := make([]int32, len(spans))
	for j := range spans {
		sp := &spans[j]
		labelOf[j] = -1
		switch span.NodeOf(sp.Kind, parent[j] < 0, hasRemoteChild[j]) {
		case span.NodeService:
			labelOf[j] = labelID(t.names.Name(sp.Service))
		case span.NodeCallee:
			p := t.peers[j]
			l := p.label
			switch {
			case sp.Peer >= 0 && !p.database:
				l = t.names.Name(sp.Peer)
			case !p.database && book.Resolve(p.address) != "":
				l = book.Resolve(p.address)
			}
			if l == "" {
				l = "unknown"
			}
			labelOf[j] = labelID(l)
		}
	}
	return labels, labelOf
}

// ForEachSpan calls f for every span of td.
func ForEachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				f(spans.At(k))
			}
		}
	}
}

// collect appends every span of the batches, with its resource's identity; for
// context, only spans that start no later than horizon.
func collect(batches []ptrace.Traces, context bool, refs []spanRef, resources []Resource, horizon int64) ([]spanRef, []Resource) {
	for _, td := range batches {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			// A context resource none of whose spans start in time is never read.
			r := int32(-1)
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				ss := sss.At(j).Spans()
				for k := 0; k < ss.Len(); k++ {
					sp := ss.At(k)
					if context && int64(sp.StartTimestamp()) > horizon {
						continue
					}
					if r < 0 {
						resources = append(resources, ResourceOf(rs.Resource().Attributes()))
						r = int32(len(resources) - 1)
					}
					refs = append(refs, spanRef{sp, r, context})
				}
			}
		}
	}
	return refs, resources
}

// threadOf is the span's thread (thread.id, else thread.name), "" when not
// given; interned apart from other names.
func threadOf(a *spanAttrs, j *joiner) string {
	if id := a.v[aThreadID]; id != "" {
		return j.concat("thread:id=", id, "")
	}
	if name := a.v[aThreadName]; name != "" {
		return j.concat("thread:name=", name, "")
	}
	return ""
}

// opAddress is the address book's key for an operation a server serves.
func (j *joiner) opAddress(op string) string {
	if op == "" {
		return ""
	}
	return j.concat("op:", op, "")
}
