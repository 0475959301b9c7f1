package causal

import (
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/stats"
)

// PatternNode is one node of a causal path pattern. Latency is the time from the
// call into the node to its return, including its callees; CallDelay is the time
// from the call into its parent to the call into this node (figure 4,
// CreatePathNode). Both are in milliseconds. For message traces the pattern's root
// is the node that sent the first call, which has no timing, so both are nil there.
type PatternNode struct {
	Node      string
	Latency   *stats.LogHistogram
	CallDelay *stats.LogHistogram
	Children  []*PatternNode
}

// Pattern is a causal path pattern with its instance count and the distributions of
// its nodes' latencies (procedure FindCallPaths, §5.1.1.4).
type Pattern struct {
	Signature string
	Count     int
	// TotalLatency is the sum over instances of the first call's latency, in ms.
	TotalLatency float64
	Root         *PatternNode
}

// SortPatterns orders patterns by count, largest first, then by signature.
func SortPatterns(ps []*Pattern) {
	slices.SortFunc(ps, func(a, b *Pattern) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Signature, b.Signature)
	})
}

// callTree is a forest of timed calls from which patterns are built. Node names
// are given by label, an index into labelName's table; equal names under different
// labels still make equal signatures.
type callTree interface {
	span.Tree
	interval(i int32) (start, end int64)
}

// Patterns coalesces the nesting into causal path patterns, step 4 of the
// algorithm. Every pair that has no parent starts a path whose root is the pair's
// caller. Signatures are canonical (docs/formats.md §2): a node's name, followed, when it
// has children, by their signatures sorted as byte strings in parentheses. Children
// with equal signatures are matched to pattern nodes in call order, so repeated
// calls keep their own statistics. Patterns are sorted by SortPatterns.
func (n *Nesting) Patterns(nodes []string) []*Pattern {
	t := nestingTree{n, nodes}
	b := newPatternBuilder(t, len(n.Pairs))
	var roots, callers []int32
	for i := range n.Pairs {
		if n.Parent[i] < 0 {
			roots = append(roots, int32(i))
			callers = append(callers, int32(n.Pairs[i].Caller))
		}
	}
	b.addAll(roots, callers)
	return b.patterns()
}

type nestingTree struct {
	n     *Nesting
	nodes []string
}

func (t nestingTree) Label(i int32) int32                   { return int32(t.n.Pairs[i].Callee) }
func (t nestingTree) LabelName(l int32) string              { return t.nodes[l] }
func (t nestingTree) interval(i int32) (int64, int64)       { return t.n.Pairs[i].Call, t.n.Pairs[i].Return }
func (t nestingTree) Children(i int32, dst []int32) []int32 { return t.n.ChildrenOf(i, dst) }

// patternBuilder aggregates instances into patterns. Signatures and the
// canonical order of children are span.Signer's; the pattern of an instance is
// found by a pair of integers, its caller's name id and its subtree's sid.
type patternBuilder struct {
	t   callTree
	sig *span.Signer
	// Patterns by caller (its canonical name id, or −1) and sid, packed in 64 bits.
	index   map[uint64]int32
	entries []patternEntry
	bins    *stats.LogIndexer // stats.LatencyBins, shared by every histogram; nil when small
}

// patternEntry is a pattern and, while its statistics wait to be filled, its
// instances.
type patternEntry struct {
	p           *Pattern
	underCaller bool // message traces: the instance is the root's only child
	instances   []int32
}

func newPatternBuilder(t callTree, size int) *patternBuilder {
	b := &patternBuilder{t: t, sig: span.NewSigner(t, size), index: make(map[uint64]int32)}
	if size >= largeForest {
		b.bins = stats.NewLogIndexer(stats.LatencyBins)
	}
	return b
}

// largeForest is the number of calls (or of roots) from which a forest's patterns
// are worth a LogIndexer's edges (a few microseconds) and goroutines; smaller ones,
// such as a collector's batches of spans, are aggregated on the calling goroutine.
const largeForest = 1 << 12

// newHistogram is a histogram of stats.LatencyBins, indexed when the forest is large.
func (b *patternBuilder) newHistogram() *stats.LogHistogram {
	if b.bins == nil {
		return stats.NewLogHistogram(stats.LatencyBins)
	}
	return stats.NewIndexedLogHistogram(b.bins)
}

// addAll records the instances rooted at roots. With callers, the pattern of
// roots[k] has the node labelled callers[k] as its root and roots[k] as its only
// child (message traces); without, roots[k] is the root. Signatures and patterns
// are found on this goroutine, in order; then the patterns' statistics are filled
// in parallel, each pattern by one goroutine in instance order, so every sum is
// what adding one instance after the other gives, to the bit.
func (b *patternBuilder) addAll(roots, callers []int32) {
	for k, r := range roots {
		caller := int32(-1)
		if callers != nil {
			caller = callers[k]
		}
		e := b.pattern(r, caller)
		e.instances = append(e.instances, r)
	}
	// The largest first, so that the last to start is small.
	todo := make([]*patternEntry, len(b.entries))
	for i := range b.entries {
		todo[i] = &b.entries[i]
	}
	slices.SortStableFunc(todo, func(x, y *patternEntry) int { return len(y.instances) - len(x.instances) })
	procs := runtime.GOMAXPROCS(0)
	if len(roots) < largeForest {
		procs = 1
	}
	var next atomic.Int64
	parallel(procs, 1, func(_, _ int) {
		var kids [][]int32
		for t := next.Add(1) - 1; t < int64(len(todo)); t = next.Add(1) - 1 {
			e := todo[t]
			node := e.p.Root
			if e.underCaller {
				node = node.Children[0]
			}
			for _, r := range e.instances {
				start, _ := b.t.interval(r)
				b.record(node, r, start, 0, &kids)
			}
			e.instances = nil
		}
	})
}

// pattern returns the pattern of the instance rooted at i, creating it when new,
// and counts the instance and its latency.
func (b *patternBuilder) pattern(i int32, caller int32) *patternEntry {
	sid, callerID := b.sig.SID(i), int32(-1)
	if caller >= 0 {
		callerID = b.sig.Canonical(caller)
	}
	key := uint64(uint32(callerID))<<32 | uint64(uint32(sid))
	k, ok := b.index[key]
	if !ok {
		p := &Pattern{Signature: b.sig.SignatureOf(sid)}
		if caller >= 0 {
			name := b.t.LabelName(caller)
			p.Signature = span.Signature(name, []string{p.Signature})
			p.Root = &PatternNode{Node: name, Children: []*PatternNode{b.newNode(i, 0)}}
		} else {
			p.Root = b.newNode(i, 0)
		}
		k = int32(len(b.entries))
		b.index[key] = k
		b.entries = append(b.entries, patternEntry{p: p, underCaller: caller >= 0})
	}
	e := &b.entries[k]
	start, end := b.t.interval(i)
	e.p.Count++
	e.p.TotalLatency += nsToMs(end - start)
	return e
}

func (b *patternBuilder) patterns() []*Pattern {
	out := make([]*Pattern, len(b.entries))
	for i := range b.entries {
		out[i] = b.entries[i].p
	}
	SortPatterns(out)
	return out
}

// signature is the canonical signature of i's subtree.
func (b *patternBuilder) signature(i int32) string { return b.sig.Signature(i) }

func (b *patternBuilder) newNode(i int32, depth int) *PatternNode {
	node := &PatternNode{
		Node:      b.t.LabelName(b.t.Label(i)),
		Latency:   b.newHistogram(),
		CallDelay: b.newHistogram(),
	}
	for _, c := range b.sig.SortedChildren(i, depth) {
		node.Children = append(node.Children, b.newNode(c, depth+1))
	}
	return node
}

// record adds i's latency and call delay to node, and recurses; parentStart is the
// start of i's parent (its own start at the root, so its delay is 0). The sids of
// i's subtree are known, so it only reads the builder, and kids is the caller's
// own scratch: goroutines record different patterns at once.
func (b *patternBuilder) record(node *PatternNode, i int32, parentStart int64, depth int, kids *[][]int32) {
	start, end := b.t.interval(i)
	node.Latency.Add(nsToMs(end - start))
	node.CallDelay.Add(nsToMs(start - parentStart))
	for k, c := range b.sig.SortBySignature(span.ChildrenAt(b.t, i, depth, kids)) {
		b.record(node.Children[k], c, start, depth+1, kids)
	}
}

func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }
