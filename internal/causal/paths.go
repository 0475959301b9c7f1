package causal

import (
	"slices"
	"strings"

	"github.com/tierscope/tierscope/internal/stats"
)

// LatencyBins is the layout of the per-node latency histograms of a pattern, in
// milliseconds: base 1.05 like the scoreboard, but from 1 µs so that sub-millisecond
// tiers keep their resolution (the storage is sparse, so the extra bins cost
// nothing when unused).
var LatencyBins = stats.LogBins{Base: 1.05, Min: 0.001, Count: 500}

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

// callTree is a forest of timed calls from which patterns are built.
type callTree interface {
	name(i int32) string
	interval(i int32) (start, end int64)
	children(i int32, dst []int32) []int32
}

// Patterns coalesces the nesting into causal path patterns, step 4 of the
// algorithm. Every pair that has no parent starts a path whose root is the pair's
// caller. Signatures are canonical (FORMATS.md §2): a node's name, followed, when it
// has children, by their signatures sorted as byte strings in parentheses. Children
// with equal signatures are matched to pattern nodes in call order, so repeated
// calls keep their own statistics. Patterns are sorted by SortPatterns.
func (n *Nesting) Patterns(nodes []string) []*Pattern {
	t := nestingTree{n, nodes}
	b := newPatternBuilder(t, len(n.Pairs))
	for i := range n.Pairs {
		if n.Parent[i] < 0 {
			b.add(int32(i), nodes[n.Pairs[i].Caller])
		}
	}
	return b.patterns()
}

type nestingTree struct {
	n     *Nesting
	nodes []string
}

func (t nestingTree) name(i int32) string                   { return t.nodes[t.n.Pairs[i].Callee] }
func (t nestingTree) interval(i int32) (int64, int64)       { return t.n.Pairs[i].Call, t.n.Pairs[i].Return }
func (t nestingTree) children(i int32, dst []int32) []int32 { return t.n.ChildrenOf(i, dst) }

type patternBuilder struct {
	t     callTree
	sigs  []string // memoised subtree signatures
	table map[string]*Pattern
	kids  [][]int32 // per-depth scratch for sorted children
}

func newPatternBuilder(t callTree, size int) *patternBuilder {
	return &patternBuilder{t: t, sigs: make([]string, size), table: make(map[string]*Pattern)}
}

// add records the instance rooted at i. With a caller name, the pattern's root is
// that caller and i is its only child (message traces); without, i is the root.
func (b *patternBuilder) add(i int32, caller string) string {
	sig := b.signature(i)
	if caller != "" {
		sig = caller + "(" + sig + ")"
	}
	p, ok := b.table[sig]
	if !ok {
		p = &Pattern{Signature: sig}
		if caller != "" {
			p.Root = &PatternNode{Node: caller, Children: []*PatternNode{b.newNode(i, 0)}}
		} else {
			p.Root = b.newNode(i, 0)
		}
		b.table[sig] = p
	}
	start, end := b.t.interval(i)
	p.Count++
	p.TotalLatency += nsToMs(end - start)
	node := p.Root
	if caller != "" {
		node = p.Root.Children[0]
	}
	b.record(node, i, start, 0)
	return sig
}

func (b *patternBuilder) patterns() []*Pattern {
	out := make([]*Pattern, 0, len(b.table))
	for _, p := range b.table {
		out = append(out, p)
	}
	SortPatterns(out)
	return out
}

// signature computes (and memoises) the canonical signature of i's subtree.
func (b *patternBuilder) signature(i int32) string {
	if s := b.sigs[i]; s != "" {
		return s
	}
	name := b.t.name(i)
	kids := b.t.children(i, nil)
	if len(kids) == 0 {
		b.sigs[i] = name
		return name
	}
	childSigs := make([]string, len(kids))
	for k, c := range kids {
		childSigs[k] = b.signature(c)
	}
	slices.Sort(childSigs)
	s := name + "(" + strings.Join(childSigs, ",") + ")"
	b.sigs[i] = s
	return s
}

// sortedChildren returns i's children in canonical order: by signature, then in
// their own order (call time). The slice is scratch owned by depth.
func (b *patternBuilder) sortedChildren(i int32, depth int) []int32 {
	for len(b.kids) <= depth {
		b.kids = append(b.kids, nil)
	}
	kids := b.t.children(i, b.kids[depth][:0])
	slices.SortStableFunc(kids, func(x, y int32) int { return strings.Compare(b.sigs[x], b.sigs[y]) })
	b.kids[depth] = kids
	return kids
}

func (b *patternBuilder) newNode(i int32, depth int) *PatternNode {
	node := &PatternNode{
		Node:      b.t.name(i),
		Latency:   stats.NewLogHistogram(LatencyBins),
		CallDelay: stats.NewLogHistogram(LatencyBins),
	}
	for _, c := range b.sortedChildren(i, depth) {
		node.Children = append(node.Children, b.newNode(c, depth+1))
	}
	return node
}

// record adds i's latency and call delay to node, and recurses; parentStart is the
// start of i's parent (its own start at the root, so its delay is 0).
func (b *patternBuilder) record(node *PatternNode, i int32, parentStart int64, depth int) {
	start, end := b.t.interval(i)
	node.Latency.Add(nsToMs(end - start))
	node.CallDelay.Add(nsToMs(start - parentStart))
	for k, c := range b.sortedChildren(i, depth) {
		b.record(node.Children[k], c, start, depth+1)
	}
}

func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }
