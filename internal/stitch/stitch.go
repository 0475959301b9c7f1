// Package stitch repairs traces whose context was lost: it adapts OTLP spans to the
// span inference of package causal, writes the inferred parents back in one of
// three modes, and tags every span with the signature of its causal path. The
// causalpath processor and `tierscope stitch` share it, so a file and a pipeline
// give the same answer.
package stitch

import (
	"fmt"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/causal"
)

// Attribute names written on spans (FORMATS.md §4).
const (
	AttrInferredParent     = "tierscope.inferred.parent_span_id"
	AttrInferredConfidence = "tierscope.inferred.confidence"
	AttrPathSignature      = "tierscope.path.signature"
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
}

// DefaultOptions reparents, tags paths and remembers 10,000 addresses.
func DefaultOptions() Options {
	return Options{Mode: ModeReparent, Config: causal.DefaultStitchConfig(), TagPaths: true, MaxAddresses: 10000}
}

// Stitcher stitches batches of spans. It keeps the address book between batches;
// it is not safe for concurrent use.
type Stitcher struct {
	opt  Options
	book *AddressBook
}

// New returns a Stitcher, or an error for unusable options.
func New(opt Options) (*Stitcher, error) {
	if err := opt.Config.Validate(); err != nil {
		return nil, err
	}
	if opt.Mode > ModeAnnotate {
		return nil, fmt.Errorf("stitch: unknown mode %d", opt.Mode)
	}
	return &Stitcher{opt: opt, book: NewAddressBook(opt.MaxAddresses)}, nil
}

// Report counts what one Stitch call did.
type Report struct {
	Spans      int // spans seen
	Orphans    int // spans without a parent, whose parent was looked for
	Inferred   int // orphans given a parent
	LeftOrphan int // orphans left without one (true roots among them)
	Unresolved int // CLIENT/PRODUCER spans whose peer could not be named
	// Skipped counts spans passed through untouched because they cannot take part:
	// empty trace or span id, or an end before the start.
	Skipped int
	// Unusual counts spans that take part but look odd: zero duration, an unknown
	// kind, an attribute value too long to use as an endpoint.
	ZeroDuration, UnknownKind, LongAttributes int
	Patterns                                  []*causal.Pattern
	Truth                                     *TruthScore // set when spans carry AttrTruthParent
}

type spanRef struct {
	span     ptrace.Span
	resource int32 // index into resources
	context  bool  // only context: a candidate parent, never an orphan, never written
}

type resourceInfo struct {
	service, instance string
}

// Stitch infers missing parents across the batches and writes them back in place.
// Every span stays where it was, exactly once.
func (s *Stitcher) Stitch(batches ...ptrace.Traces) Report {
	return s.StitchWithContext(batches, nil)
}

// StitchWithContext stitches the spans of release, using the spans of context
// (which are still waiting for their own context) only as candidate parents and
// known links: they are not treated as orphans and get no attributes, though a
// reparented subtree that reaches into them does move trace. The report counts
// the spans of release.
func (s *Stitcher) StitchWithContext(release, context []ptrace.Traces) Report {
	var rep Report
	refs, resources := collect(release, false, nil, nil)
	rep.Spans = len(refs)
	refs, resources = collect(context, true, refs, resources)

	names := newInterner()
	spans := make([]causal.Span, 0, len(refs))
	idx := make([]int32, len(refs)) // ref → index in spans, -1 when skipped
	byID := make(map[[24]byte]int32, len(refs))
	peers := make([]peer, len(refs))
	for i, r := range refs {
		sp := r.span
		idx[i] = -1
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
		kind := kindOf(sp.Kind())
		if kind == causal.KindUnspecified && sp.Kind() != ptrace.SpanKindUnspecified && final {
			rep.UnknownKind++
		}
		res := resources[r.resource]
		cs := causal.Span{
			Start: start, End: end,
			Service:  names.id(res.service),
			Instance: names.id(res.instance),
			Name:     names.id(sp.Name()),
			Kind:     kind,
			Peer:     -1,
			Parent:   -1,
			Orphan:   !r.context && sp.ParentSpanID().IsEmpty(),
		}
		if kind == causal.KindClient || kind == causal.KindProducer {
			peers[i] = peerOf(sp.Attributes(), &rep.LongAttributes)
		}
		idx[i] = int32(len(spans))
		byID[spanKey(sp.TraceID(), sp.SpanID())] = int32(len(spans))
		spans = append(spans, cs)
	}
	back := make([]int32, len(spans)) // spans index → ref
	for i, j := range idx {
		if j >= 0 {
			back[j] = int32(i)
		}
	}
	// Known parents, and what intact CLIENT→SERVER links teach about addresses.
	for j := range spans {
		sp := refs[back[j]].span
		if sp.ParentSpanID().IsEmpty() {
			continue
		}
		p, ok := byID[spanKey(sp.TraceID(), sp.ParentSpanID())]
		if !ok {
			continue // the parent is elsewhere; the context is intact
		}
		spans[j].Parent = p
		if spans[p].Kind == causal.KindClient && spans[j].Kind == causal.KindServer {
			s.book.Learn(peers[back[p]].address, names.name(spans[j].Service))
		}
	}
	for j := range spans {
		k := spans[j].Kind
		if k != causal.KindClient && k != causal.KindProducer {
			continue
		}
		p := peers[back[j]]
		switch {
		case p.service != "":
			spans[j].Peer = names.id(p.service)
		case p.database:
			// A name no service has, so no SERVER span nests in a database call.
			spans[j].Peer = names.id("database:" + p.label)
		case p.address != "":
			if svc := s.book.Resolve(p.address); svc != "" {
				spans[j].Peer = names.id(svc)
			}
		}
		if p.label == "" && spans[j].Peer < 0 && !refs[back[j]].context {
			rep.Unresolved++
		}
	}

	res, err := causal.Stitch(spans, s.opt.Config)
	if err != nil { // the options were validated in New
		panic(err)
	}
	rep.Orphans, rep.LeftOrphan = res.Orphans, res.LeftOrphan
	for j := range spans {
		if !res.Inferred[j] {
			continue
		}
		rep.Inferred++
		p := res.Parent[j]
		s.writeBack(refs[back[j]].span, refs[back[p]].span, res.Confidence[j])
		// Confident inferences teach addresses too, so that the caller's side of a
		// trace released later, without its callee, still names the callee.
		if spans[p].Kind == causal.KindClient && spans[j].Kind == causal.KindServer && res.Confidence[j] >= learnConfidence {
			s.book.Learn(peers[back[p]].address, names.name(spans[j].Service))
		}
	}
	if s.opt.Mode == ModeReparent {
		moveSubtrees(refs, back, res.Parent)
	}
	labels, labelOf := pathLabels(spans, res.Parent, peers, back, names, s.book)
	patterns, sigs := causal.SpanPaths(spans, res.Parent, labelOf, labels)
	rep.Patterns = patterns
	if s.opt.TagPaths {
		for j, sig := range sigs {
			if sig != "" && !refs[back[j]].context {
				refs[back[j]].span.Attributes().PutStr(AttrPathSignature, sig)
			}
		}
	}
	rep.Truth = scoreTruth(refs, back, res)
	return rep
}

// writeBack records an inferred parent on the orphan, as the mode says.
func (s *Stitcher) writeBack(orphan, parent ptrace.Span, confidence float32) {
	attrs := orphan.Attributes()
	attrs.PutStr(AttrInferredParent, parent.SpanID().String())
	attrs.PutDouble(AttrInferredConfidence, math.Round(float64(confidence)*1000)/1000)
	switch s.opt.Mode {
	case ModeLink:
		link := orphan.Links().AppendEmpty()
		link.SetTraceID(parent.TraceID())
		link.SetSpanID(parent.SpanID())
		link.Attributes().PutStr("tierscope.link.type", "inferred_parent")
	case ModeReparent:
		orphan.SetParentSpanID(parent.SpanID())
	}
}

// moveSubtrees gives every span the trace id of its final root, which moves each
// reparented orphan and its descendants into the parent's trace. Roots are read
// before anything is rewritten.
func moveSubtrees(refs []spanRef, back []int32, parent []int32) {
	root := make([]int32, len(parent))
	for j := range parent {
		r := int32(j)
		for steps := 0; parent[r] >= 0 && steps < len(parent); steps++ {
			r = parent[r]
		}
		root[j] = r
	}
	traceOfRoot := make(map[int32]pcommon.TraceID)
	for j := range parent {
		if _, ok := traceOfRoot[root[j]]; !ok {
			traceOfRoot[root[j]] = refs[back[root[j]]].span.TraceID()
		}
	}
	for j := range parent {
		if t := traceOfRoot[root[j]]; refs[back[j]].span.TraceID() != t {
			refs[back[j]].span.SetTraceID(t)
		}
	}
}

// pathLabels names the path node of every span: SERVER and CONSUMER spans and
// roots are their service; a CLIENT or PRODUCER span whose callee's span is not in
// the trace is its callee (resolved service, database, address); other spans are
// transparent (-1).
func pathLabels(spans []causal.Span, parent []int32, peers []peer, back []int32, names *interner, book *AddressBook) ([]string, []int32) {
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
		switch {
		case sp.Kind.RemoteEntry() || parent[j] < 0:
			labelOf[j] = labelID(names.name(sp.Service))
		case sp.Kind.RemoteCaller() && !hasRemoteChild[j]:
			p := peers[back[j]]
			l := p.label
			switch {
			case sp.Peer >= 0 && !p.database:
				l = names.name(sp.Peer)
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

func kindOf(k ptrace.SpanKind) causal.SpanKind {
	switch k {
	case ptrace.SpanKindInternal:
		return causal.KindInternal
	case ptrace.SpanKindServer:
		return causal.KindServer
	case ptrace.SpanKindClient:
		return causal.KindClient
	case ptrace.SpanKindProducer:
		return causal.KindProducer
	case ptrace.SpanKindConsumer:
		return causal.KindConsumer
	}
	return causal.KindUnspecified
}

func spanKey(t pcommon.TraceID, s pcommon.SpanID) [24]byte {
	var k [24]byte
	copy(k[:16], t[:])
	copy(k[16:], s[:])
	return k
}

// collect appends every span of the batches, with its resource's identity.
func collect(batches []ptrace.Traces, context bool, refs []spanRef, resources []resourceInfo) ([]spanRef, []resourceInfo) {
	for _, td := range batches {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			resources = append(resources, identity(rs.Resource().Attributes()))
			r := int32(len(resources) - 1)
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				ss := sss.At(j).Spans()
				for k := 0; k < ss.Len(); k++ {
					refs = append(refs, spanRef{ss.At(k), r, context})
				}
			}
		}
	}
	return refs, resources
}

// identity names a resource's service and process. Local parents are looked for
// within one process: service.instance.id, else the pod or host, else the service.
func identity(attrs pcommon.Map) resourceInfo {
	str := func(k string) string {
		if v, ok := attrs.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	info := resourceInfo{service: str("service.name")}
	if info.service == "" {
		info.service = "unknown_service"
	}
	info.instance = str("service.instance.id")
	if info.instance == "" {
		for _, k := range []string{"k8s.pod.uid", "k8s.pod.name", "host.name", "host.id"} {
			if v := str(k); v != "" {
				info.instance = info.service + "@" + v
				break
			}
		}
	}
	if info.instance == "" {
		info.instance = info.service
	}
	return info
}

// interner maps strings to small ids and back.
type interner struct {
	ids   map[string]int32
	names []string
}

func newInterner() *interner { return &interner{ids: make(map[string]int32)} }

func (n *interner) id(s string) int32 {
	if id, ok := n.ids[s]; ok {
		return id
	}
	id := int32(len(n.names))
	n.ids[s] = id
	n.names = append(n.names, s)
	return id
}

func (n *interner) name(id int32) string { return n.names[id] }
