package span

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// forest is a Tree of random shape; names repeat under different labels.
type forest struct {
	labels []int32
	names  []string
	kids   [][]int32
}

func (f *forest) Label(i int32) int32                   { return f.labels[i] }
func (f *forest) LabelName(l int32) string              { return f.names[l] }
func (f *forest) Children(i int32, dst []int32) []int32 { return append(dst, f.kids[i]...) }

// reference is the signature of docs/formats.md §2 written out directly.
func (f *forest) reference(i int32) string {
	var sigs []string
	for _, c := range f.kids[i] {
		sigs = append(sigs, f.reference(c))
	}
	slices.Sort(sigs)
	if len(sigs) == 0 {
		return f.names[f.labels[i]]
	}
	return f.names[f.labels[i]] + "(" + strings.Join(sigs, ",") + ")"
}

// randomForest hangs every node under one of the first fan nodes, so that a
// small fan makes wide nodes.
func randomForest(r *rand.Rand, n, fan int) (*forest, []int32) {
	f := &forest{names: []string{"a", "b", "c", "a", "db", "b(", ""}}
	var roots []int32
	for i := range n {
		f.labels = append(f.labels, int32(r.IntN(len(f.names))))
		f.kids = append(f.kids, nil)
		if i == 0 || r.IntN(8) == 0 {
			roots = append(roots, int32(i))
			continue
		}
		p := r.IntN(min(i, fan))
		f.kids[p] = append(f.kids[p], int32(i))
	}
	return f, roots
}

func TestSignerMatchesTheDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := NewSigner(&forest{}, 0)
	for trial := range 200 {
		f, roots := randomForest(r, 1+r.IntN(80), []int{2, 5, 1000}[trial%3])
		s.Reset(f, len(f.labels))
		if trial%50 == 49 {
			s.Forget()
		}
		for _, root := range roots {
			if got, want := s.Signature(root), f.reference(root); got != want {
				t.Fatalf("trial %d: signature %q, want %q", trial, got, want)
			}
		}
		// Children in canonical order: by signature, ties in their own order.
		for i := range f.labels {
			got := slices.Clone(s.SortedChildren(int32(i), 0))
			want := slices.Clone(f.kids[i])
			slices.SortStableFunc(want, func(x, y int32) int { return strings.Compare(f.reference(x), f.reference(y)) })
			if !slices.Equal(got, want) {
				t.Fatalf("trial %d: children of %d in order %v, want %v", trial, i, got, want)
			}
		}
	}
}

func TestSignature(t *testing.T) {
	if got := Signature("client", []string{"WS1(AP1(DB),AUTH)"}); got != "client(WS1(AP1(DB),AUTH))" {
		t.Fatalf("got %q", got)
	}
	if got := Signature("DB", nil); got != "DB" {
		t.Fatalf("got %q", got)
	}
}

func TestKinds(t *testing.T) {
	for k, want := range map[Kind][2]bool{
		KindUnspecified: {}, KindInternal: {}, KindServer: {true, false}, KindConsumer: {true, false},
		KindClient: {false, true}, KindProducer: {false, true},
	} {
		if k.RemoteEntry() != want[0] || k.RemoteCaller() != want[1] {
			t.Errorf("kind %d: entry %v caller %v", k, k.RemoteEntry(), k.RemoteCaller())
		}
	}
}

func TestNodeOf(t *testing.T) {
	cases := []struct {
		kind           Kind
		root, answered bool
		want           Node
	}{
		{KindServer, false, false, NodeService}, {KindConsumer, false, true, NodeService},
		{KindInternal, true, false, NodeService}, {KindClient, true, true, NodeService},
		{KindClient, false, false, NodeCallee}, {KindProducer, false, false, NodeCallee},
		{KindClient, false, true, NodeNone}, {KindInternal, false, false, NodeNone}, {KindUnspecified, false, false, NodeNone},
	}
	for _, c := range cases {
		if got := NodeOf(c.kind, c.root, c.answered); got != c.want {
			t.Errorf("NodeOf(%d, root %v, answered %v) = %d, want %d", c.kind, c.root, c.answered, got, c.want)
		}
	}
}
