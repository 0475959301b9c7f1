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
// CreatePathNode). Both are in milliseconds and nil at the pattern's root, which is
// the node that sent the first call.
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
	// TotalLatency is the sum over instances of the root call's latency, in ms.
	TotalLatency float64
	Root         *PatternNode
}

// Patterns coalesces the nesting into causal path patterns, step 4 of the
// algorithm. Every pair that has no parent starts a path; the path's signature is
// canonical (FORMATS.md §2): a node's name, followed, when it has children, by their
// signatures sorted as byte strings in parentheses. Children with equal signatures
// are matched to pattern nodes in call order, so repeated calls keep their own
// statistics. Patterns are sorted by count, largest first, then by signature.
func (n *Nesting) Patterns(nodes []string) []*Pattern {
	b := patternBuilder{n: n, nodes: nodes, sigs: make(sliceSigs, len(n.Pairs)), table: make(map[string]*Pattern)}
	for i := range n.Pairs {
		if n.Parent[i] < 0 {
			b.addInstance(int32(i))
		}
	}
	out := make([]*Pattern, 0, len(b.table))
	for _, p := range b.table {
		out = append(out, p)
	}
	SortPatterns(out)
	return out
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

// RootSignature is the signature of the path that starts at pair root.
func (n *Nesting) RootSignature(nodes []string, root int32) string {
	b := patternBuilder{n: n, nodes: nodes, sigs: make(mapSigs)}
	return nodes[n.Pairs[root].Caller] + "(" + b.signature(root) + ")"
}

type patternBuilder struct {
	n     *Nesting
	nodes []string
	sigs  sigStore
	table map[string]*Pattern
	kids  [][]int32 // per-depth scratch for sorted children
}

// sigStore memoises subtree signatures per pair: a slice for whole-trace work, a map
// for single look-ups.
type sigStore interface {
	get(i int32) string
	set(i int32, s string)
}

type sliceSigs []string

func (s sliceSigs) get(i int32) string    { return s[i] }
func (s sliceSigs) set(i int32, v string) { s[i] = v }

type mapSigs map[int32]string

func (s mapSigs) get(i int32) string    { return s[i] }
func (s mapSigs) set(i int32, v string) { s[i] = v }

func (b *patternBuilder) addInstance(root int32) {
	sig := b.nodes[b.n.Pairs[root].Caller] + "(" + b.signature(root) + ")"
	p, ok := b.table[sig]
	if !ok {
		p = &Pattern{Signature: sig, Root: &PatternNode{Node: b.nodes[b.n.Pairs[root].Caller]}}
		p.Root.Children = []*PatternNode{b.newNode(root, 0)}
		b.table[sig] = p
	}
	p.Count++
	p.TotalLatency += nsToMs(b.n.Pairs[root].Latency())
	b.record(p.Root.Children[0], root, b.n.Pairs[root].Call, 0)
}

// signature computes (and memoises) the canonical signature of pair i's subtree.
func (b *patternBuilder) signature(i int32) string {
	if s := b.sigs.get(i); s != "" {
		return s
	}
	name := b.nodes[b.n.Pairs[i].Callee]
	if b.n.firstChild[i] < 0 {
		b.sigs.set(i, name)
		return name
	}
	var childSigs []string
	for c := b.n.firstChild[i]; c >= 0; c = b.n.nextSibling[c] {
		childSigs = append(childSigs, b.signature(c))
	}
	slices.Sort(childSigs)
	s := name + "(" + strings.Join(childSigs, ",") + ")"
	b.sigs.set(i, s)
	return s
}

// sortedChildren returns pair i's children in canonical order: by signature, then by
// call time. The slice is scratch owned by depth.
func (b *patternBuilder) sortedChildren(i int32, depth int) []int32 {
	for len(b.kids) <= depth {
		b.kids = append(b.kids, nil)
	}
	kids := b.n.ChildrenOf(i, b.kids[depth][:0])
	slices.SortStableFunc(kids, func(x, y int32) int { return strings.Compare(b.sigs.get(x), b.sigs.get(y)) })
	b.kids[depth] = kids
	return kids
}

func (b *patternBuilder) newNode(i int32, depth int) *PatternNode {
	node := &PatternNode{
		Node:      b.nodes[b.n.Pairs[i].Callee],
		Latency:   stats.NewLogHistogram(LatencyBins),
		CallDelay: stats.NewLogHistogram(LatencyBins),
	}
	for _, c := range b.sortedChildren(i, depth) {
		node.Children = append(node.Children, b.newNode(c, depth+1))
	}
	return node
}

// record adds pair i's latency and call delay to node, and recurses; parentCall is
// the call time of i's parent (its own call time for a root, so its delay is 0).
func (b *patternBuilder) record(node *PatternNode, i int32, parentCall int64, depth int) {
	p := &b.n.Pairs[i]
	node.Latency.Add(nsToMs(p.Latency()))
	node.CallDelay.Add(nsToMs(p.Call - parentCall))
	for k, c := range b.sortedChildren(i, depth) {
		b.record(node.Children[k], c, p.Call, depth+1)
	}
}

func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }
