package causal

import "github.com/tierscope/tierscope/internal/span"

// SpanPaths builds the causal path patterns of stitched spans (docs/formats.md §4: the
// same form as §2, with service names as node names). Spans are the nodes of the
// path where label[i] ≥ 0: labels[label[i]] names the node, normally the span's
// service for SERVER/CONSUMER spans and the callee for CLIENT/PRODUCER spans that
// reach no instrumented server (a database, an uninstrumented back end). Spans with
// label −1 (INTERNAL spans, CLIENT spans whose SERVER span is known) are
// transparent: their children hang from their nearest labelled ancestor. Every root
// of the forest starts one path and should be labelled.
//
// It returns the patterns and, for every span, the signature of the path it is on.
// byStart is the spans' order by start, ties by index (StitchResult.ByStart);
// nil sorts them here.
func SpanPaths(spans []span.Span, parent []int32, label []int32, labels []string, byStart []int32) ([]*Pattern, []string) {
	return spanPaths(spans, parent, label, labels, byStart, true)
}

// SpanSignatures is SpanPaths without the patterns' statistics, for callers that
// only tag spans.
func SpanSignatures(spans []span.Span, parent []int32, label []int32, labels []string, byStart []int32) []string {
	_, sigs := spanPaths(spans, parent, label, labels, byStart, false)
	return sigs
}

func spanPaths(spans []span.Span, parent []int32, label []int32, labels []string, byStart []int32, withPatterns bool) ([]*Pattern, []string) {
	t := newSpanTree(spans, parent, label, labels, byStart)
	b := newPatternBuilder(t, len(spans))
	if withPatterns {
		b.addAll(t.roots, nil)
	}
	sigOfRoot := make(map[int32]string, len(t.roots))
	for _, r := range t.roots {
		sigOfRoot[r] = b.signature(r)
	}
	sigs := make([]string, len(spans))
	for i := range spans {
		sigs[i] = sigOfRoot[t.root[i]]
	}
	if !withPatterns {
		return nil, sigs
	}
	return b.patterns(), sigs
}

// spanTree is the forest of labelled spans, each hung from its nearest labelled
// ancestor.
type spanTree struct {
	spans       []span.Span
	labelOf     []int32
	labels      []string
	first, next []int32 // children lists, in start order
	roots       []int32
	root        []int32 // the root of every span's tree (labelled or not)
}

func newSpanTree(spans []span.Span, parent, label []int32, labels []string, order []int32) *spanTree {
	n := len(spans)
	t := &spanTree{spans: spans, labelOf: label, labels: labels, first: make([]int32, n), next: make([]int32, n), root: make([]int32, n)}
	for i := range t.first {
		t.first[i], t.next[i], t.root[i] = -1, -1, -1
	}
	up := make([]int32, n) // nearest labelled proper ancestor, -1 if none
	for i := range spans {
		up[i] = -1
		for p, steps := parent[i], 0; p >= 0 && steps < n; p, steps = parent[p], steps+1 {
			if label[p] >= 0 {
				up[i] = p
				break
			}
		}
		r := int32(i)
		for p, steps := parent[i], 0; p >= 0 && steps < n; p, steps = parent[p], steps+1 {
			r = p
		}
		t.root[i] = r
	}
	if order == nil {
		order = orderSpansByStart(spans)
	}
	last := make([]int32, n)
	for i := range last {
		last[i] = -1
	}
	for _, i := range order {
		if label[i] < 0 {
			continue
		}
		p := up[i]
		if p < 0 {
			t.roots = append(t.roots, i)
			continue
		}
		if last[p] < 0 {
			t.first[p] = i
		} else {
			t.next[last[p]] = i
		}
		last[p] = i
	}
	return t
}

func (t *spanTree) Label(i int32) int32             { return t.labelOf[i] }
func (t *spanTree) LabelName(l int32) string        { return t.labels[l] }
func (t *spanTree) interval(i int32) (int64, int64) { return t.spans[i].Start, t.spans[i].End }
func (t *spanTree) Children(i int32, dst []int32) []int32 {
	for c := t.first[i]; c >= 0; c = t.next[c] {
		dst = append(dst, c)
	}
	return dst
}

// orderSpansByStart is every span's index by start, ties by index: a stable
// radix sort of the starts (sign bit flipped, so that unsigned order is signed
// order), which reads each span once instead of at every comparison.
func orderSpansByStart(spans []span.Span) []int32 {
	items := make([]keyed, 2*len(spans))
	for i := range spans {
		items[i] = keyed{key: uint64(spans[i].Start) ^ 1<<63, idx: int32(i)}
	}
	sorted := radixSort(items[:len(spans)], items[len(spans):])
	order := make([]int32, len(spans))
	for i, it := range sorted {
		order[i] = it.idx
	}
	return order
}
