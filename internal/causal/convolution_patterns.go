package causal

import (
	"slices"
	"strings"
	"time"

	"github.com/tierscope/tierscope/internal/span"
)

// ConvPattern is a causal path pattern of the convolution algorithm: a chain of
// nodes (§5.4, figure 9), each edge labelled with its delays and message count.
type ConvPattern struct {
	// Signature is the chain in the canonical form of docs/formats.md §2: each node's
	// name followed by its single child in parentheses, as in A(B(C)).
	Signature string
	Nodes     []string
	// Count estimates the instances of the pattern: the messages that reach the
	// chain's last vertex and go no further.
	Count int
	// TotalLatency is Count times the sum of the edges' mean delays, in ms.
	TotalLatency float64
	// Hops[h] is the edge from Nodes[h] to Nodes[h+1].
	Hops []ConvHop
	// Vertices are the path-graph vertices whose ended messages make up Count.
	Vertices []int32
}

// ConvHop is one edge of a chain: its delays, ordered by declining frequency,
// and the total count of messages with those delays. The first edge, out of the
// root, has no delay.
type ConvHop struct {
	Delays   []ConvDelay
	Messages int
}

// ConvDelay is one spike position of an edge with its message count.
type ConvDelay struct {
	Delay    time.Duration
	Messages int
}

// seqTrie interns node sequences: id 0 is the empty sequence.
type seqTrie struct {
	next  map[[2]int32]int32
	nodes []NodeID // last node of each sequence
	up    []int32
}

func newSeqTrie() *seqTrie {
	return &seqTrie{next: map[[2]int32]int32{}, nodes: []NodeID{-1}, up: []int32{-1}}
}

// child returns the id of sequence id extended by n, adding it when add is set;
// −1 when absent.
func (t *seqTrie) child(id int32, n NodeID, add bool) int32 {
	if id < 0 {
		return -1
	}
	k := [2]int32{id, int32(n)}
	if c, ok := t.next[k]; ok {
		return c
	}
	if !add {
		return -1
	}
	c := int32(len(t.nodes))
	t.next[k] = c
	t.nodes = append(t.nodes, n)
	t.up = append(t.up, id)
	return c
}

// sequence returns the nodes of sequence id, first to last.
func (t *seqTrie) sequence(id int32) []NodeID {
	var out []NodeID
	for ; id > 0; id = t.up[id] {
		out = append(out, t.nodes[id])
	}
	slices.Reverse(out)
	return out
}

// chainSignature is the canonical signature of a chain, A(B(C)), by the one
// signature function (span.Signature).
func chainSignature(names []string) string {
	if len(names) == 0 {
		return ""
	}
	sig := names[len(names)-1]
	for i := len(names) - 2; i >= 0; i-- {
		sig = span.Signature(names[i], []string{sig})
	}
	return sig
}

// vertexSeqs interns the chain of every vertex (root to vertex) in t; add=false
// only looks up, giving −1 for chains t does not hold.
func vertexSeqs(vs []ConvVertex, t *seqTrie, add bool) []int32 {
	seq := make([]int32, len(vs))
	for i, v := range vs {
		parent := int32(0)
		if v.Parent >= 0 {
			parent = seq[v.Parent]
		}
		seq[i] = t.child(parent, v.Node, add)
	}
	return seq
}

// patterns aggregates the path graph into chains. Every vertex contributes its
// ended messages to the chain that leads to it, unless the filter of
// accidentally short paths drops them: at a vertex whose messages mostly go on,
// the few that end are taken for continuations the algorithm missed, not for a
// shorter path. Chains with equal node sequences merge (figure 9 labels an edge
// with all its delays); chains below MinCount are dropped as low-frequency.
func (e *convEngine) patterns() []*ConvPattern {
	vs := e.res.Vertices
	t := newSeqTrie()
	seq := vertexSeqs(vs, t, true)
	byseq := map[int32]*ConvPattern{}
	var order []int32
	for i, v := range vs {
		if v.Parent < 0 || v.Ended == 0 || v.Suppressed {
			continue
		}
		if e.on(FilterShort) && v.Ended < v.Count && float64(v.Ended) < e.cfg.ShortFraction*float64(v.Count) {
			e.res.Stats.ShortPaths++
			continue
		}
		p := byseq[seq[i]]
		if p == nil {
			p = &ConvPattern{}
			byseq[seq[i]] = p
			order = append(order, seq[i])
		}
		p.Count += v.Ended
		p.Vertices = append(p.Vertices, int32(i))
	}
	var out []*ConvPattern
	for _, s := range order {
		p := byseq[s]
		if e.on(FilterLowFrequency) && p.Count < e.cfg.MinCount {
			e.res.Stats.LowFrequency++
			continue
		}
		ids := t.sequence(s)
		p.Nodes = make([]string, len(ids))
		for i, n := range ids {
			p.Nodes[i] = e.res.Nodes[n]
		}
		p.Signature = chainSignature(p.Nodes)
		p.Hops = chainHops(vs, p.Vertices, len(ids)-1, e.mu)
		total := 0.0
		for _, h := range p.Hops {
			total += h.meanDelayMs()
		}
		p.TotalLatency = total * float64(p.Count)
		out = append(out, p)
	}
	SortConvPatterns(out)
	return out
}

// SortConvPatterns orders patterns by count, largest first, then by signature.
func SortConvPatterns(ps []*ConvPattern) {
	slices.SortFunc(ps, func(a, b *ConvPattern) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Signature, b.Signature)
	})
}

// chainHops labels the hops of a chain from the distinct vertices on the paths
// to its contributing vertices: per hop, the delays of those vertices, merged
// when within one quantum of each other (weighted by messages), ordered by
// declining message count.
func chainHops(vs []ConvVertex, ends []int32, hops int, mu int64) []ConvHop {
	perHop := make([][]int32, hops)
	seen := map[int32]bool{}
	for _, x := range ends {
		for v := x; v >= 0 && vs[v].Parent >= 0 && !seen[v]; v = vs[v].Parent {
			seen[v] = true
			perHop[vs[v].Depth-1] = append(perHop[vs[v].Depth-1], v)
		}
	}
	out := make([]ConvHop, hops)
	for h, list := range perHop {
		entries := make([]ConvDelay, 0, len(list))
		for _, v := range list {
			out[h].Messages += vs[v].Count
			entries = append(entries, ConvDelay{vs[v].Delay, vs[v].Count})
		}
		if h == 0 {
			continue // the root's edge has no cause, so no delay
		}
		out[h].Delays = mergeDelays(entries, mu)
	}
	return out
}

// mergeDelays clusters delays within mu of their neighbour into one, at the
// message-weighted mean, and orders them by declining count.
func mergeDelays(entries []ConvDelay, mu int64) []ConvDelay {
	slices.SortFunc(entries, func(a, b ConvDelay) int { return int(a.Delay - b.Delay) })
	var out []ConvDelay
	for i := 0; i < len(entries); {
		j := i + 1
		for j < len(entries) && int64(entries[j].Delay-entries[j-1].Delay) <= mu {
			j++
		}
		var n int
		var sum float64
		for _, x := range entries[i:j] {
			n += x.Messages
			sum += float64(x.Delay) * float64(x.Messages)
		}
		d := entries[i].Delay
		if n > 0 {
			d = time.Duration(sum/float64(n) + 0.5)
		}
		out = append(out, ConvDelay{d, n})
		i = j
	}
	slices.SortStableFunc(out, func(a, b ConvDelay) int { return b.Messages - a.Messages })
	return out
}

// meanDelayMs is the message-weighted mean of a hop's delays, in ms.
func (h ConvHop) meanDelayMs() float64 {
	var n int
	var sum float64
	for _, d := range h.Delays {
		n += d.Messages
		sum += float64(d.Delay) * float64(d.Messages)
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n) / 1e6
}
