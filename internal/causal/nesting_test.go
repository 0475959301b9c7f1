package causal

import (
	"math"
	"strings"
	"testing"
	"time"
)

// build makes a trace from lines "ms OP sender receiver [id [path]]", with times in
// milliseconds and OP one of C (call), R (return) or M (one-way message).
func build(t *testing.T, lines ...string) *Trace {
	t.Helper()
	b := NewTraceBuilder()
	ops := map[string]Op{"C": OpCall, "R": OpReturn, "M": OpMessage}
	for _, l := range lines {
		f := strings.Fields(l)
		var ms float64
		if _, err := fmtSscan(f[0], &ms); err != nil {
			t.Fatalf("bad time in %q", l)
		}
		m := Message{Time: int64(ms * 1e6), Op: ops[f[1]], Sender: b.Node([]byte(f[2])), Receiver: b.Node([]byte(f[3]))}
		if len(f) > 4 {
			m.CallID = b.CallID([]byte(f[4]))
		}
		if len(f) > 5 {
			m.PathID = b.PathID([]byte(f[5]))
		}
		b.Add(m)
	}
	return b.Trace()
}

func nest(t *testing.T, tr *Trace, cfg NestingConfig) (*Nesting, []*Pattern) {
	t.Helper()
	pairs, _ := FindCallPairs(tr.Messages, cfg.SkewWindow)
	n, err := Nest(pairs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n, n.Patterns(tr.Nodes)
}

func signatures(ps []*Pattern) map[string]int {
	m := make(map[string]int)
	for _, p := range ps {
		m[p.Signature] = p.Count
	}
	return m
}

// Figures 2–4: A calls B; B calls C, then D, then returns.
func TestFigure3Example(t *testing.T) {
	tr := build(t,
		"1 C A B", "3 C B C", "5 R C B", "7 C B D", "9 R D B", "11 R B A")
	n, ps := nest(t, tr, DefaultNestingConfig())
	if len(ps) != 1 || ps[0].Signature != "A(B(C,D))" || ps[0].Count != 1 {
		t.Fatalf("patterns = %v, want A(B(C,D)) once", signatures(ps))
	}
	b := ps[0].Root.Children[0]
	if b.Node != "B" || b.Latency.Mean() != 10 || b.CallDelay.Mean() != 0 {
		t.Fatalf("B: latency %v call delay %v, want 10 and 0", b.Latency.Mean(), b.CallDelay.Mean())
	}
	c, d := b.Children[0], b.Children[1]
	if c.Node != "C" || c.Latency.Mean() != 2 || c.CallDelay.Mean() != 2 {
		t.Fatalf("C: latency %v call delay %v, want 2 and 2", c.Latency.Mean(), c.CallDelay.Mean())
	}
	if d.Node != "D" || d.CallDelay.Mean() != 6 {
		t.Fatalf("D: call delay %v, want 6", d.CallDelay.Mean())
	}
	if ps[0].TotalLatency != 10 {
		t.Fatalf("total latency %v, want 10", ps[0].TotalLatency)
	}
	if n.MeanParallelism() != 1 {
		t.Fatalf("parallelism %v, want 1", n.MeanParallelism())
	}
}

// Figure 5: two B→C calls each nested in two A→B calls. The medium delay recurs, so
// each child goes to the parent whose delay matches the trace-wide peak, and the
// overlapping-child penalty sends the two children to different parents.
func TestFigure5ParallelCalls(t *testing.T) {
	var lines []string
	// Many isolated instances establish the 30 ms A→B→C delay in the scoreboard.
	for i := 0; i < 50; i++ {
		base := 1000 + float64(i)*500
		lines = append(lines, f3(base, "C A B", i), f3(base+30, "C B C", i+1000), f3(base+40, "R C B", i+1000), f3(base+60, "R B A", i))
	}
	// Then the ambiguous case: t1=0, t2=10, t3=30 (call C), t4=40 (call C).
	lines = append(lines,
		"0 C A B p1", "10 C A B p2", "30 C B C c1", "40 C B C c2", "50 R C B c1", "55 R C B c2", "70 R B A p1", "80 R B A p2")
	tr := build(t, lines...)
	n, _ := nest(t, tr, DefaultNestingConfig())
	byID := map[string]int32{}
	for i, p := range n.Pairs {
		if p.Call < int64(time.Second) {
			byID[tr.Nodes[p.Caller]+ms(p.Call)] = int32(i)
		}
	}
	if n.Parent[byID["B30"]] != byID["A0"] || n.Parent[byID["B40"]] != byID["A10"] {
		t.Fatalf("children assigned to %d and %d, want %d and %d",
			n.Parent[byID["B30"]], n.Parent[byID["B40"]], byID["A0"], byID["A10"])
	}
}

func f3(base float64, op string, id int) string {
	return strings.Join([]string{ftoa(base), op, "x" + itoa(id)}, " ")
}

// The overlapping-child penalty alone separates parallel children when the
// scoreboard cannot: with equal scores, the first child goes to the earliest
// parent and the second, overlapping it, is pushed to the other parent.
func TestOverlapPenaltySeparatesChildren(t *testing.T) {
	tr := build(t,
		"0 C A B p1", "0 C A B p2", "10 C B C c1", "10 C B C c2", "20 R C B c1", "20 R C B c2", "30 R B A p1", "30 R B A p2")
	_, ps := nest(t, tr, DefaultNestingConfig())
	if got := signatures(ps); got["A(B(C))"] != 2 {
		t.Fatalf("patterns %v, want A(B(C)) twice", got)
	}
	noPenalty := DefaultNestingConfig()
	noPenalty.OverlapPenalty = 0
	_, ps = nest(t, tr, noPenalty)
	if got := signatures(ps); got["A(B(C,C))"] != 1 || got["A(B)"] != 1 {
		t.Fatalf("without penalty got %v, want both children on the earliest parent", got)
	}
}

func TestSameChildAndGenericPenalties(t *testing.T) {
	// Serial children of B (C then D) with two open candidate parents of equal score.
	tr := build(t,
		"0 C A B p1", "0 C A B p2", "10 C B C c1", "20 R C B c1", "30 C B C c2", "40 R C B c2", "50 R B A p1", "50 R B A p2")
	cfg := DefaultNestingConfig()
	_, ps := nest(t, tr, cfg)
	if got := signatures(ps); got["A(B(C,C))"] != 1 {
		t.Fatalf("x=2 only: %v, want serial children kept together", got)
	}
	cfg.SameChildPenalty = 1
	_, ps = nest(t, tr, cfg)
	if got := signatures(ps); got["A(B(C))"] != 2 {
		t.Fatalf("y=1: %v, want the same-child penalty to split them", got)
	}
	cfg.SameChildPenalty, cfg.GenericPenalty = 0, 1
	_, ps = nest(t, tr, cfg)
	if got := signatures(ps); got["A(B(C))"] != 2 {
		t.Fatalf("z=1: %v, want the generic penalty to split them", got)
	}
}

func TestCallPairMatching(t *testing.T) {
	tr := build(t,
		"1 C A B x", "2 C A B y", "3 R B A y", "4 R B A x", // ids cross: matched by id
		"5 C A B -", "6 C A B -", "7 R B A -", "8 R B A -", // no ids: earliest open call
		"9 R B A zz", "10 C A B lost", "11 M A B -")
	pairs, disc := FindCallPairs(tr.Messages, 0)
	if len(pairs) != 4 {
		t.Fatalf("%d pairs, want 4", len(pairs))
	}
	want := [][2]int64{{2, 3}, {1, 4}, {5, 7}, {6, 8}}
	for i, w := range want {
		if pairs[i].Call != w[0]*1e6 || pairs[i].Return != w[1]*1e6 {
			t.Errorf("pair %d = [%d,%d] ms, want %v", i, pairs[i].Call/1e6, pairs[i].Return/1e6, w)
		}
	}
	if disc != (Discards{ReturnWithoutCall: 1, CallWithoutReturn: 1, OneWay: 1}) || disc.Total() != 3 {
		t.Fatalf("discards %+v", disc)
	}
}

func TestTieBreaksTowardEarliestParent(t *testing.T) {
	tr := build(t, "0 C A B p1", "1 C X B p2", "10 C B C c", "20 R C B c", "30 R B A p1", "30 R B X p2")
	cfg := DefaultNestingConfig()
	cfg.Bins.Min = float64(100 * time.Millisecond) // both delays fall in bin 0: a tie
	n, _ := nest(t, tr, cfg)
	for i, p := range n.Pairs {
		if tr.Nodes[p.Callee] == "C" {
			if par := n.Pairs[n.Parent[i]]; tr.Nodes[par.Caller] != "A" {
				t.Fatalf("tie went to %s, want the earliest parent A", tr.Nodes[par.Caller])
			}
			if math.Abs(float64(n.Confidence[i])-0.5) > 1e-6 {
				t.Fatalf("confidence %v, want 0.5 for a tie", n.Confidence[i])
			}
		}
	}
}

func TestSkewWindowAdmitsSkewedParents(t *testing.T) {
	// B's clock runs 5 ms fast: its call to C appears before the call into B ends...
	// here the call into B is stamped after B's own outgoing call.
	tr := build(t, "10 C A B p", "8 C B C c", "12 R C B c", "20 R B A p")
	_, ps := nest(t, tr, DefaultNestingConfig())
	if got := signatures(ps); got["A(B)"] != 1 || got["B(C)"] != 1 {
		t.Fatalf("without a window: %v, want two separate paths", got)
	}
	cfg := DefaultNestingConfig()
	cfg.SkewWindow = 5 * time.Millisecond
	_, ps = nest(t, tr, cfg)
	if got := signatures(ps); got["A(B(C))"] != 1 {
		t.Fatalf("with a 5 ms window: %v, want A(B(C))", got)
	}
}

func TestNoCyclesWithSkewWindow(t *testing.T) {
	// A→B and B→A overlap almost exactly; with a window each could contain the other.
	tr := build(t, "0 C A B x", "1 C B A y", "9 R A B y", "10 R B A x")
	cfg := DefaultNestingConfig()
	cfg.SkewWindow = 5 * time.Millisecond
	n, ps := nest(t, tr, cfg)
	roots := 0
	for _, p := range n.Parent {
		if p < 0 {
			roots++
		}
	}
	if roots != 1 || len(ps) != 1 {
		t.Fatalf("roots %d patterns %v: a cycle or a lost pair", roots, signatures(ps))
	}
}

func TestSignatureIsCanonical(t *testing.T) {
	// The same tree with children in two different call orders gives one signature.
	tr := build(t,
		"0 C client WS a", "1 C WS AUTH b", "2 R AUTH WS b", "3 C WS AP c", "4 C AP DB d", "5 R DB AP d", "6 R AP WS c", "7 R WS client a",
		"100 C client WS e", "101 C WS AP f", "102 C AP DB g", "103 R DB AP g", "104 R AP WS f", "105 C WS AUTH h", "106 R AUTH WS h", "107 R WS client e")
	_, ps := nest(t, tr, DefaultNestingConfig())
	if len(ps) != 1 || ps[0].Signature != "client(WS(AP(DB),AUTH))" || ps[0].Count != 2 {
		t.Fatalf("patterns %v", signatures(ps))
	}
}

func TestRepeatedChildrenKeepTheirOwnStatistics(t *testing.T) {
	tr := build(t, "0 C A B p", "10 C B C c1", "12 R C B c1", "30 C B C c2", "35 R C B c2", "40 R B A p")
	_, ps := nest(t, tr, DefaultNestingConfig())
	b := ps[0].Root.Children[0]
	if b.Children[0].CallDelay.Mean() != 10 || b.Children[1].CallDelay.Mean() != 30 {
		t.Fatalf("repeated children delays %v, %v; want 10, 30", b.Children[0].CallDelay.Mean(), b.Children[1].CallDelay.Mean())
	}
}

// §7.5.1: the truth has A→B→C→D twice; inference finds one whole instance, one
// A→B and one C→D... here with nesting: one A(B(C(D))) and the second broken.
func TestAccuracyMetricsPaperExample(t *testing.T) {
	truth := []*Pattern{{Signature: "A(B(C(D)))", Count: 2}}
	inferred := []*Pattern{{Signature: "A(B(C(D)))", Count: 1}, {Signature: "A(B)", Count: 1}, {Signature: "B(C(D))", Count: 1}}
	SortPatterns(inferred)
	empty := &Nesting{}
	a := Compare(empty, empty, inferred, truth, 3)
	if a.FalseNegativeInstances != 1 || a.FalsePositiveInstances != 2 || a.FalsePositivePatterns != 2 {
		t.Fatalf("got %+v, want 1 FN instance, 2 FP instances, 2 FP patterns", a)
	}
	if a.TopNFalseNegatives[0] != 0 || a.FalseNegativeInstanceRate != 0.5 {
		t.Fatalf("got %+v", a)
	}
}

func TestCompareAttributionError(t *testing.T) {
	// Two interleaved A→B calls, each with one B→C child; truth from path ids.
	tr := build(t,
		"0 C A B a p1", "1 C A B b p2", "5 C B C c p2", "6 R C B c p2", "8 C B C d p1", "9 R C B d p1", "10 R B A a p1", "20 R B A b p2")
	pairs, _ := FindCallPairs(tr.Messages, 0)
	cheat := DefaultNestingConfig()
	cheat.UsePathIDs = true
	truth, _ := Nest(pairs, cheat)
	inf, _ := Nest(pairs, DefaultNestingConfig())
	// Inference puts child c (call at 5) on parent a (earliest tie), the truth on b.
	a := Compare(inf, truth, inf.Patterns(tr.Nodes), truth.Patterns(tr.Nodes), 2)
	if a.MessageAttributionError == 0 {
		t.Fatalf("expected attribution errors, got %+v", a)
	}
	self := Compare(truth, truth, truth.Patterns(tr.Nodes), truth.Patterns(tr.Nodes), 2)
	if self.MessageAttributionError != 0 || self.FalseNegativeInstances != 0 || self.FalsePositivePatterns != 0 {
		t.Fatalf("truth against itself: %+v", self)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*NestingConfig){
		func(c *NestingConfig) { c.SkewWindow = -1 },
		func(c *NestingConfig) { c.SmoothSigma = math.NaN() },
		func(c *NestingConfig) { c.OverlapPenalty = -1 },
		func(c *NestingConfig) { c.Bins.Count = 1 },
	}
	for i, mutate := range bad {
		c := DefaultNestingConfig()
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("case %d: Validate() = nil", i)
		}
		if _, err := Nest(nil, c); err == nil {
			t.Errorf("case %d: Nest accepted a bad config", i)
		}
	}
}

func TestEmptyInput(t *testing.T) {
	n, err := Nest(nil, DefaultNestingConfig())
	if err != nil || len(n.Patterns(nil)) != 0 || n.MeanParallelism() != 0 {
		t.Fatalf("empty input: %v", err)
	}
}

func TestInternTable(t *testing.T) {
	var strs []string
	tab := newInternTable(&strs)
	ids := map[string]uint32{}
	for i := 0; i < 100000; i++ {
		s := "id" + itoa(i%37000) + strings.Repeat("x", i%5)
		got := tab.intern([]byte(s))
		if want, ok := ids[s]; ok && want != got {
			t.Fatalf("%q interned as %d and %d", s, want, got)
		}
		ids[s] = got
		if strs[got] != s {
			t.Fatalf("table[%d] = %q, want %q", got, strs[got], s)
		}
	}
	if len(strs) != len(ids) {
		t.Fatalf("%d strings for %d distinct ids", len(strs), len(ids))
	}
	long := strings.Repeat("L", arenaChunk)
	if strs[tab.intern([]byte(long))] != long || tab.intern([]byte(long)) != tab.intern([]byte(long)) {
		t.Fatal("long string not interned")
	}
}
