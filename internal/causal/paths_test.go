package causal

import (
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/stats"
)

// Patterns must be what the string-keyed builder they replaced gives
// (refPatternBuilder, below): the same signatures, counts, total latencies and
// histograms to the bit, whatever the number of processors.
func TestPatternsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for trial := range 6 {
		// Small forests are aggregated on one goroutine, large ones in parallel.
		tr := randomNestedTrace(rng, []int{1000, 3 * largeForest}[trial%2]+rng.IntN(1000))
		pairs, _ := FindCallPairs(tr.Messages, 0)
		n, err := Nest(pairs, DefaultNestingConfig())
		if err != nil {
			t.Fatal(err)
		}
		ref := newRefPatternBuilder(refTree{nestingTree{n, tr.Nodes}}, len(pairs))
		for i := range n.Pairs {
			if n.Parent[i] < 0 {
				ref.add(int32(i), tr.Nodes[n.Pairs[i].Caller])
			}
		}
		want := ref.patterns()
		if trial < 2 && (len(want) < 20 || n.MeanParallelism() < 1.2) {
			t.Fatalf("%d patterns, parallelism %.2f: the trace should be harder", len(want), n.MeanParallelism())
		}
		for _, procs := range []int{1, 3} {
			old := runtime.GOMAXPROCS(procs)
			got := n.Patterns(tr.Nodes)
			runtime.GOMAXPROCS(old)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("trial %d, %d processors: %d patterns differ from the reference's %d", trial, procs, len(got), len(want))
			}
		}
		// The same forest as spans, without callers, and with two labels that
		// share a name: equal names make equal signatures.
		spans := make([]span.Span, len(pairs))
		label := make([]int32, len(pairs))
		for i, p := range pairs {
			spans[i] = span.Span{Start: p.Call, End: p.Return}
			label[i] = int32(p.Callee)
		}
		labels := append(slices.Clone(tr.Nodes), tr.Nodes[len(tr.Nodes)-1])
		for i := range label {
			if label[i] == int32(len(tr.Nodes)-1) && i%2 == 0 {
				label[i] = int32(len(labels) - 1)
			}
		}
		gotPatterns, gotSigs := SpanPaths(spans, n.Parent, label, labels, nil)
		st := newSpanTree(spans, n.Parent, label, labels, nil)
		ref = newRefPatternBuilder(refTree{st}, len(spans))
		wantSigs := make([]string, len(spans))
		sigOfRoot := map[int32]string{}
		for _, r := range st.roots {
			sigOfRoot[r] = ref.add(r, "")
		}
		for i := range spans {
			wantSigs[i] = sigOfRoot[st.root[i]]
		}
		if wantPatterns := ref.patterns(); !reflect.DeepEqual(gotPatterns, wantPatterns) || !slices.Equal(gotSigs, wantSigs) {
			t.Fatalf("trial %d: span paths differ from the reference's", trial)
		}
		if sigs := SpanSignatures(spans, n.Parent, label, labels, nil); !slices.Equal(sigs, wantSigs) {
			t.Fatalf("trial %d: span signatures differ from the reference's", trial)
		}
	}
}

// randomNestedTrace is a trace of nested RPCs among a few nodes, with concurrent
// requests, repeated and parallel children and sub-millisecond to second delays.
func randomNestedTrace(rng *rand.Rand, calls int) *Trace {
	b := NewTraceBuilder()
	nodes := []string{"client", "web", "app", "db", "cache", "auth"}
	var id uint32
	var emit func(from, depth int, at int64) int64
	emit = func(from, depth int, at int64) int64 {
		to := 1 + rng.IntN(len(nodes)-1)
		id++
		cid := b.CallID([]byte(strings.Repeat("x", int(id%3)) + string(rune('a'+id%26)) + itoa(int(id))))
		b.Add(Message{Time: at, Op: OpCall, Sender: b.Node([]byte(nodes[from])), Receiver: b.Node([]byte(nodes[to])), CallID: cid})
		t := at + int64(rng.ExpFloat64()*float64(time.Millisecond))
		for k := range rng.IntN(3 - min(depth, 2)) {
			if k > 0 && rng.IntN(2) == 0 {
				emit(to, depth+1, t) // parallel with the previous child
				continue
			}
			t = emit(to, depth+1, t)
		}
		t += int64(rng.ExpFloat64() * float64(time.Millisecond))
		b.Add(Message{Time: t, Op: OpReturn, Sender: b.Node([]byte(nodes[to])), Receiver: b.Node([]byte(nodes[from])), CallID: cid})
		return t
	}
	var at int64
	for int(id) < calls {
		at += int64(rng.ExpFloat64() * float64(500*time.Microsecond))
		emit(0, 0, at)
	}
	return b.Trace()
}

var refIndexer = stats.NewLogIndexer(stats.LatencyBins)

func refHistogram(size int) *stats.LogHistogram {
	if size >= largeForest {
		return stats.NewIndexedLogHistogram(refIndexer)
	}
	return stats.NewLogHistogram(stats.LatencyBins)
}

// refTree adapts a callTree to the reference builder's interface.
type refTree struct{ callTree }

func (t refTree) name(i int32) string { return t.LabelName(t.Label(i)) }

// refPatternBuilder is the pattern builder as it was before signature ids: a
// memoised signature string per call, patterns keyed by their signature.
type refPatternBuilder struct {
	t     refTree
	sigs  []string // memoised subtree signatures
	table map[string]*Pattern
	kids  [][]int32 // per-depth scratch for sorted children
}

func newRefPatternBuilder(t refTree, size int) *refPatternBuilder {
	return &refPatternBuilder{t: t, sigs: make([]string, size), table: make(map[string]*Pattern)}
}

// add records the instance rooted at i. With a caller name, the pattern's root is
// that caller and i is its only child (message traces); without, i is the root.
func (b *refPatternBuilder) add(i int32, caller string) string {
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

func (b *refPatternBuilder) patterns() []*Pattern {
	out := make([]*Pattern, 0, len(b.table))
	for _, p := range b.table {
		out = append(out, p)
	}
	SortPatterns(out)
	return out
}

// signature computes (and memoises) the canonical signature of i's subtree.
func (b *refPatternBuilder) signature(i int32) string {
	if s := b.sigs[i]; s != "" {
		return s
	}
	name := b.t.name(i)
	kids := b.t.Children(i, nil)
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
func (b *refPatternBuilder) sortedChildren(i int32, depth int) []int32 {
	for len(b.kids) <= depth {
		b.kids = append(b.kids, nil)
	}
	kids := b.t.Children(i, b.kids[depth][:0])
	slices.SortStableFunc(kids, func(x, y int32) int { return strings.Compare(b.sigs[x], b.sigs[y]) })
	b.kids[depth] = kids
	return kids
}

func (b *refPatternBuilder) newNode(i int32, depth int) *PatternNode {
	node := &PatternNode{
		Node: b.t.name(i),
		// Indexed when Patterns' are, so that DeepEqual may compare them
		// (TestLogIndexerMatchesIndex shows the indexer changes nothing).
		Latency:   refHistogram(len(b.sigs)),
		CallDelay: refHistogram(len(b.sigs)),
	}
	for _, c := range b.sortedChildren(i, depth) {
		node.Children = append(node.Children, b.newNode(c, depth+1))
	}
	return node
}

// record adds i's latency and call delay to node, and recurses; parentStart is the
// start of i's parent (its own start at the root, so its delay is 0).
func (b *refPatternBuilder) record(node *PatternNode, i int32, parentStart int64, depth int) {
	start, end := b.t.interval(i)
	node.Latency.Add(nsToMs(end - start))
	node.CallDelay.Add(nsToMs(start - parentStart))
	for k, c := range b.sortedChildren(i, depth) {
		b.record(node.Children[k], c, start, depth+1)
	}
}
