package model

import (
	"cmp"
	"slices"
	"strings"

	"github.com/tierscope/tierscope/internal/span"
)

// Kind is the span model's kind (internal/span). The names below are kept so
// that code written against model's own kind still reads; new code uses span's.
type Kind = span.Kind

// Span kinds, as span's.
const (
	KindInternal = span.KindInternal
	KindServer   = span.KindServer
	KindClient   = span.KindClient
	KindProducer = span.KindProducer
	KindConsumer = span.KindConsumer
)

// Edge kinds of the service graph.
const (
	EdgeSync     = "sync"
	EdgeAsync    = "async"
	EdgeDatabase = "database"
)

// EdgeKey names one edge of the service graph.
type EdgeKey struct{ Source, Target, Kind string }

// String is the edge's storage key.
func (k EdgeKey) String() string { return k.Source + "\x1f" + k.Target + "\x1f" + k.Kind }

// ParseEdgeKey inverts EdgeKey.String.
func ParseEdgeKey(s string) (EdgeKey, bool) {
	parts := strings.Split(s, "\x1f")
	if len(parts) != 3 {
		return EdgeKey{}, false
	}
	return EdgeKey{parts[0], parts[1], parts[2]}, true
}

// CallStats counts calls, errors and their latency: a node's SERVER spans, or an
// edge's calls.
type CallStats struct {
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	Latency  Hist  `json:"latency"`
}

// Merge adds o.
func (c *CallStats) Merge(o *CallStats) {
	c.Requests += o.Requests
	c.Errors += o.Errors
	c.Latency.Merge(&o.Latency)
}

// PatternStats is one causal path pattern of a window (docs/formats.md §2). Nodes are
// in canonical pre-order: children sorted by signature, equal siblings by start,
// so two windows' or shards' statistics of one signature align node by node.
type PatternStats struct {
	Count          int64         `json:"count"`
	TotalLatencyNs int64         `json:"total_latency_ns"`
	Nodes          []PatternNode `json:"nodes"`
}

// PatternNode is one node of a pattern: its name, the index of its parent in
// the pre-order (−1 for the root), and its latency and call delay.
type PatternNode struct {
	Node      string `json:"node"`
	Parent    int32  `json:"parent"`
	Latency   Hist   `json:"latency"`
	CallDelay Hist   `json:"call_delay"`
}

// Merge adds o, which must have the same signature.
func (p *PatternStats) Merge(o *PatternStats) bool {
	if len(p.Nodes) == 0 {
		p.Nodes = make([]PatternNode, len(o.Nodes))
		for i, n := range o.Nodes {
			p.Nodes[i] = PatternNode{Node: n.Node, Parent: n.Parent}
		}
	}
	if len(p.Nodes) != len(o.Nodes) {
		return false
	}
	p.Count += o.Count
	p.TotalLatencyNs += o.TotalLatencyNs
	for i := range p.Nodes {
		p.Nodes[i].Latency.Merge(&o.Nodes[i].Latency)
		p.Nodes[i].CallDelay.Merge(&o.Nodes[i].CallDelay)
	}
	return true
}

// Limits bound one window's state. Data beyond them is counted, not kept.
type Limits struct {
	MaxServices int
	MaxEdges    int
	MaxPatterns int
}

// DefaultLimits suit a few hundred services.
func DefaultLimits() Limits { return Limits{MaxServices: 1000, MaxEdges: 10000, MaxPatterns: 2000} }

// Overflow counts what a window's limits kept out.
type Overflow struct {
	Services   int64
	Edges      int64
	Patterns   int64
	Signatures int64
}

// Window is the model state of one time window: the service graph and the path
// patterns of the traces whose root started in it.
type Window struct {
	Start    int64 // unix seconds
	Traces   int64
	Nodes    map[string]*CallStats
	Edges    map[EdgeKey]*CallStats
	Patterns map[string]*PatternStats
	Flows    map[string]*FlowCounts      // by machine
	Sigs     map[string]*SignatureWindow // by SignatureKey
	CPU      map[string]*CPUStats        // by machine
	// OneWay holds the window's messages without context (PRODUCER spans and
	// CONSUMER spans that start a trace) for the convolution algorithm; it is
	// not persisted, only the edges it finds are.
	OneWay []OneWayMessage
	// OneWayDropped counts messages beyond the window's bound.
	OneWayDropped int64
	// Dirty is set by every change and cleared by whoever persists the window.
	Dirty bool

	limits Limits
	tree   treeScratch
}

// NewWindow returns an empty window starting at start (unix seconds).
func NewWindow(start int64, limits Limits) *Window {
	return &Window{Start: start, limits: limits, Nodes: map[string]*CallStats{}, Edges: map[EdgeKey]*CallStats{}, Patterns: map[string]*PatternStats{},
		Flows: map[string]*FlowCounts{}, Sigs: map[string]*SignatureWindow{}, CPU: map[string]*CPUStats{}}
}

// OneWayMessage is a message seen from one side only: a PRODUCER span (from its
// service to its destination) or a CONSUMER span without a parent (from its
// destination to its service).
type OneWayMessage struct {
	Time     int64 // unix nanoseconds
	From, To string
}

// AddAsyncEdge adds an edge found by convolution: n messages with delay ns.
// Edges that traces already established keep their own statistics.
func (w *Window) AddAsyncEdge(source, target string, ns int64, n int64, fromTraces map[EdgeKey]bool) {
	k := EdgeKey{source, target, EdgeAsync}
	if fromTraces[k] {
		return
	}
	var of Overflow
	es := w.edge(k, &of)
	if es == nil {
		return
	}
	es.Requests += n
	es.Latency.AddN(ns, uint64(n))
	w.Dirty = true
}

// ProcessKey keys a process's flows and CPU: machine/process, as the CPU of
// process.cpu.utilization is keyed.
func ProcessKey(machine, process string) string { return machine + "/" + process }

func (w *Window) countFlow(key, flow string) {
	fc, ok := w.Flows[key]
	if !ok {
		if len(w.Flows) >= w.limits.MaxServices {
			return
		}
		fc = &FlowCounts{Counts: map[string]int64{}}
		w.Flows[key] = fc
	}
	fc.Counts[flow]++
}

// SignatureKey keys a transaction's signature window.
func SignatureKey(service, version, transaction string) string {
	return service + "\x1f" + version + "\x1f" + transaction
}

// FlowName names a work-factor flow: the service and its transaction.
func FlowName(service, transaction string) string { return service + " " + transaction }

// AddCPU records one utilization sample (0..1) of a machine; capacityMHz is 0
// when unknown.
func (w *Window) AddCPU(machine string, utilization, capacityMHz float64, logicalCPUs int) {
	c, ok := w.CPU[machine]
	if !ok {
		if len(w.CPU) >= w.limits.MaxServices {
			return
		}
		c = &CPUStats{}
		w.CPU[machine] = c
	}
	c.Merge(&CPUStats{SumUtilization: utilization, Samples: 1, CapacityMHz: capacityMHz, LogicalCPUs: logicalCPUs})
	w.Dirty = true
}

// treeScratch is reused across traces so adding one does not allocate per span.
type treeScratch struct {
	label    []string // node name, "" for transparent spans
	up       []int32  // nearest labelled proper ancestor
	children [][]int32
	order    []int32
	byID     map[uint64]int32
	answered map[uint64]bool
	signer   *span.Signer // keeps the path shapes of earlier traces
}

// maxShapes bounds the path shapes a window's signer remembers between traces.
const maxShapes = 1 << 14

// The labelled spans form a span.Tree: each span is its own label.
func (t *treeScratch) Label(i int32) int32      { return i }
func (t *treeScratch) LabelName(l int32) string { return t.label[l] }
func (t *treeScratch) Children(i int32, dst []int32) []int32 {
	return append(dst, t.children[i]...)
}

// AddTrace adds one complete trace (its spans in any order, their names in
// names) and returns the overflow it caused.
func (w *Window) AddTrace(spans []span.Span, names *span.Names) Overflow {
	var of Overflow
	if len(spans) == 0 {
		return of
	}
	roots := w.tree.build(spans, names)
	w.addGraph(spans, &of)
	w.addFlowsAndSignatures(spans, names, &of)
	w.addOutboundCalls(spans, names)
	w.addPatterns(spans, roots, &of)
	w.Dirty = true
	return of
}

// parentOf is span i's parent within the trace, -1 when it has none there.
func (t *treeScratch) parentOf(spans []span.Span, i int) int32 {
	if p, ok := t.byID[spans[i].ParentID]; ok && spans[i].ParentID != 0 && int(p) != i {
		return p
	}
	return -1
}

// build labels the trace's spans with their node (the service, or the peer of
// a call no instrumented span answered; "" for transparent spans), links each
// labelled span to its nearest labelled ancestor, and returns the roots by
// start.
func (t *treeScratch) build(spans []span.Span, names *span.Names) []int32 {
	n := len(spans)
	if t.byID == nil {
		t.byID, t.answered = map[uint64]int32{}, map[uint64]bool{}
	}
	clear(t.byID)
	clear(t.answered)
	for i := range spans {
		t.byID[spans[i].ID] = int32(i)
	}
	// A CLIENT/PRODUCER span is answered when a SERVER/CONSUMER span of the
	// trace is its child; it is then transparent, else its peer is a node.
	for i := range spans {
		if spans[i].Kind.RemoteEntry() {
			if p := t.parentOf(spans, i); p >= 0 {
				t.answered[spans[p].ID] = true
			}
		}
	}
	t.label = resize(t.label, n)
	for i := range spans {
		s := &spans[i]
		switch span.NodeOf(s.Kind, t.parentOf(spans, i) < 0, t.answered[s.ID]) {
		case span.NodeService:
			t.label[i] = names.Name(s.Service)
		case span.NodeCallee:
			t.label[i] = cmp.Or(names.Name(s.Peer), "unknown")
		default:
			t.label[i] = ""
		}
	}
	t.up = resize(t.up, n)
	for i := range spans {
		t.up[i] = -1
		for p, steps := t.parentOf(spans, i), 0; p >= 0 && steps < n; p, steps = t.parentOf(spans, int(p)), steps+1 {
			if t.label[p] != "" {
				t.up[i] = p
				break
			}
		}
	}
	if cap(t.children) < n {
		t.children = make([][]int32, n)
	}
	t.children = t.children[:n]
	for i := range t.children {
		t.children[i] = t.children[i][:0]
	}
	t.order = t.order[:0]
	for i := range spans {
		if t.label[i] != "" {
			t.order = append(t.order, int32(i))
		}
	}
	slices.SortFunc(t.order, func(a, b int32) int { return cmp.Compare(spans[a].Start, spans[b].Start) })
	var roots []int32
	for _, i := range t.order {
		if p := t.up[i]; p >= 0 {
			t.children[p] = append(t.children[p], i)
		} else {
			roots = append(roots, i)
		}
	}
	return roots
}

// addGraph adds one request per labelled span at its node, and one call per
// labelled span on the edge from its labelled ancestor.
func (w *Window) addGraph(spans []span.Span, of *Overflow) {
	t := &w.tree
	for _, i := range t.order {
		s := &spans[i]
		d := s.End - s.Start
		name := t.label[i]
		if ns := w.node(name, of); ns != nil {
			ns.Requests++
			if s.Error {
				ns.Errors++
			}
			ns.Latency.Add(d)
		}
		if p := t.up[i]; p >= 0 {
			kind := EdgeSync
			switch {
			case s.Database:
				kind = EdgeDatabase
			case s.Kind == KindProducer || s.Kind == KindConsumer:
				kind = EdgeAsync
			}
			if es := w.edge(EdgeKey{t.label[p], name, kind}, of); es != nil {
				es.Requests++
				if s.Error {
					es.Errors++
				}
				es.Latency.Add(d)
			}
		}
	}
}

// CountFlow counts a SERVER span as one request of its work-factor flow on
// its machine (and process). AddTrace does not: the work-factor regression
// pairs a process's requests with its CPU readings of the same window, so a
// span counts in the window it started in, which for a span deep in a trace
// can be a later one than its root's.
func (w *Window) CountFlow(s *span.Span, names *span.Names) {
	machine := names.Name(s.Machine)
	if s.Kind != KindServer || machine == "" {
		return
	}
	flow := FlowName(names.Name(s.Service), cmp.Or(names.Name(s.Transaction), "unknown"))
	w.countFlow(machine, flow)
	if process := names.Name(s.Process); process != "" {
		w.countFlow(ProcessKey(machine, process), flow)
	}
	w.Dirty = true
}

// addFlowsAndSignatures counts every SERVER span as a request of its
// signature window.
func (w *Window) addFlowsAndSignatures(spans []span.Span, names *span.Names, of *Overflow) {
	for i := range spans {
		s := &spans[i]
		if s.Kind != KindServer {
			continue
		}
		service := names.Name(s.Service)
		tx := cmp.Or(names.Name(s.Transaction), "unknown")
		machine := names.Name(s.Machine)
		key := SignatureKey(service, names.Name(s.Version), tx)
		sw, ok := w.Sigs[key]
		if !ok {
			if len(w.Sigs) >= w.limits.MaxPatterns {
				of.Signatures++
				continue
			}
			sw = &SignatureWindow{Machine: machine}
			w.Sigs[key] = sw
		}
		sw.Count++
		sw.SumLatencyNs += s.End - s.Start
	}
}

// addOutboundCalls adds each database CLIENT span to the signature window of
// its nearest SERVER ancestor when that is of the same service.
func (w *Window) addOutboundCalls(spans []span.Span, names *span.Names) {
	t := &w.tree
	n := len(spans)
	for i := range spans {
		s := &spans[i]
		if s.Kind != KindClient || !s.Database {
			continue
		}
		for p, steps := t.parentOf(spans, i), 0; p >= 0 && steps < n; p, steps = t.parentOf(spans, int(p)), steps+1 {
			a := &spans[p]
			if a.Kind != KindServer {
				continue
			}
			if a.Service == s.Service {
				if sw := w.Sigs[SignatureKey(names.Name(a.Service), names.Name(a.Version), cmp.Or(names.Name(a.Transaction), "unknown"))]; sw != nil {
					sw.OutboundCalls++
					sw.SumOutboundNs += s.End - s.Start
				}
			}
			break
		}
	}
}

// addPatterns adds one pattern per root, in canonical form, with its nodes'
// statistics.
func (w *Window) addPatterns(spans []span.Span, roots []int32, of *Overflow) {
	t := &w.tree
	if t.signer == nil {
		t.signer = span.NewSigner(t, len(spans))
	} else {
		if t.signer.Shapes() > maxShapes {
			t.signer.Forget()
		}
		t.signer.Reset(t, len(spans))
	}
	for _, r := range roots {
		w.Traces++
		sig := t.signature(r)
		ps, ok := w.Patterns[sig]
		if !ok {
			if len(w.Patterns) >= w.limits.MaxPatterns {
				of.Patterns++
				continue
			}
			ps = &PatternStats{}
			w.Patterns[sig] = ps
		}
		ps.Count++
		ps.TotalLatencyNs += spans[r].End - spans[r].Start
		if len(ps.Nodes) == 0 {
			ps.Nodes = t.appendNodes(ps.Nodes, r, -1)
		}
		idx := 0
		t.addNodeStats(spans, ps, r, -1, &idx)
	}
}

func (w *Window) node(name string, of *Overflow) *CallStats {
	cs, ok := w.Nodes[name]
	if !ok {
		if len(w.Nodes) >= w.limits.MaxServices {
			of.Services++
			return nil
		}
		cs = &CallStats{}
		w.Nodes[name] = cs
	}
	return cs
}

func (w *Window) edge(k EdgeKey, of *Overflow) *CallStats {
	cs, ok := w.Edges[k]
	if !ok {
		if len(w.Edges) >= w.limits.MaxEdges {
			of.Edges++
			return nil
		}
		cs = &CallStats{}
		w.Edges[k] = cs
	}
	return cs
}

// signature is the canonical signature of i's subtree (docs/formats.md §2); it
// sorts every children list of the subtree canonically: by signature, then by
// start.
func (t *treeScratch) signature(i int32) string {
	sig := t.signer.Signature(i)
	t.sortChildren(i)
	return sig
}

func (t *treeScratch) sortChildren(i int32) {
	for _, c := range t.signer.SortBySignature(t.children[i]) {
		t.sortChildren(c)
	}
}

func (t *treeScratch) appendNodes(dst []PatternNode, i int32, parent int32) []PatternNode {
	self := int32(len(dst))
	dst = append(dst, PatternNode{Node: t.label[i], Parent: parent})
	for _, c := range t.children[i] {
		dst = t.appendNodes(dst, c, self)
	}
	return dst
}

func (t *treeScratch) addNodeStats(spans []span.Span, ps *PatternStats, i int32, parent int32, idx *int) {
	n := &ps.Nodes[*idx]
	*idx++
	n.Latency.Add(spans[i].End - spans[i].Start)
	if parent >= 0 {
		n.CallDelay.Add(spans[i].Start - spans[parent].Start)
	}
	for _, c := range t.children[i] {
		t.addNodeStats(spans, ps, c, i, idx)
	}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
