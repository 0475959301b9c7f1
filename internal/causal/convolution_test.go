package causal

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func naiveCorrelation(s1, s2 []float64, maxLag int) []float64 {
	out := make([]float64, 2*maxLag+1)
	for d := -maxLag; d <= maxLag; d++ {
		for t := range s1 {
			if u := t + d; u >= 0 && u < len(s2) {
				out[d+maxLag] += s1[t] * s2[u]
			}
		}
	}
	return out
}

// The FFT correlation equals the direct sum at every lag, including lags whose
// products would wrap around a circular correlation without the zero padding.
func TestCrossCorrelationMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 300, 1000} {
		for _, maxLag := range []int{1, 5, n - 1} {
			if maxLag < 1 {
				continue
			}
			s1, s2 := make([]float64, n), make([]float64, n)
			for i := range s1 {
				s1[i], s2[i] = r.Float64(), r.Float64()
			}
			// Mass at both ends: a circular correlation would fold these in.
			s1[0], s2[n-1] = 50, 70
			got, want := CrossCorrelation(s1, s2, maxLag), naiveCorrelation(s1, s2, maxLag)
			for k := range want {
				if math.Abs(got[k]-want[k]) > 1e-9*max(1, math.Abs(want[k])) {
					t.Fatalf("n=%d L=%d lag %d: fft %g, naive %g", n, maxLag, k-maxLag, got[k], want[k])
				}
			}
		}
	}
}

func TestFFTSize(t *testing.T) {
	smooth := func(n int) bool {
		for _, p := range []int{2, 3, 5} {
			for n%p == 0 {
				n /= p
			}
		}
		return n == 1
	}
	for m := 1; m <= 3000; m++ {
		n := fftSize(m)
		if n < m || !smooth(n) {
			t.Fatalf("fftSize(%d) = %d", m, n)
		}
		for k := m; k < n; k++ {
			if smooth(k) {
				t.Fatalf("fftSize(%d) = %d, but %d is smaller and 5-smooth", m, n, k)
			}
		}
	}
}

// §5.2.1: quantum t holds √(messages in [t·μ, (t+1)·μ)).
func TestIndicatorSqrtCounts(t *testing.T) {
	times := []int64{100, 100, 105, 109, 110, 250, 251, 252, 253}
	got := indicator(nil, times, 100, 10)
	want := []quantum{{0, 2}, {1, 1}, {15, 2}}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i].bin != want[i].bin || math.Abs(got[i].val-want[i].val) > 1e-12 {
			t.Fatalf("quantum %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// The three ways of correlating give the same values, for sparse and dense
// signals, with the overlap normalisation.
func TestCorrelatorMethodsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const mu, S, L = 10, 5000, 300
	for _, rate := range []float64{0.01, 0.3, 3} {
		gen := func() []int64 {
			var ts []int64
			for b := range S {
				for k := 0; k < int(rate) || (k == 0 && r.Float64() < rate); k++ {
					ts = append(ts, int64(b)*mu+r.Int64N(mu))
				}
			}
			slices.Sort(ts)
			return ts
		}
		v, z := gen(), gen()
		s1 := indicator(nil, v, 0, mu)
		var outs [][]float64
		for _, m := range []CorrelationMethod{CorrelateFFT, CorrelateDirect, CorrelateDirect} {
			c := newCorrelator(S, L, m)
			if len(outs) == 2 { // force the pairs method
				outs = append(outs, nil)
				clear(c.out)
				c.correlatePairs(s1, z, 0, mu)
				outs[2] = slices.Clone(c.out)
				continue
			}
			if len(outs) == 1 { // force the dense method
				clear(c.out)
				c.correlateDirect(s1, z, 0, mu)
				outs = append(outs, slices.Clone(c.out))
				continue
			}
			outs = append(outs, slices.Clone(c.correlate(s1, signalKey{0, allNodes}, z, 0, mu)))
			// undo the normalisation for comparison with the raw sums
			for k := range outs[0] {
				d := k - L
				if d < 0 {
					d = -d
				}
				outs[0][k] *= float64(S-d) / float64(S)
			}
		}
		for k := range outs[0] {
			for m := 1; m < 3; m++ {
				if math.Abs(outs[0][k]-outs[m][k]) > 1e-6*max(1, math.Abs(outs[0][k])) {
					t.Fatalf("rate %g lag %d: fft %g, method %d %g", rate, k-L, outs[0][k], m, outs[m][k])
				}
			}
		}
	}
}

// §5.2: a spike is a local maximum N σ above the mean; spikes are separated by
// a point below S σ, or by a relative dip.
func TestFindSpikes(t *testing.T) {
	flat := func(n int) []float64 { return make([]float64, n) }
	const N, S = 4, 3
	// mean 0, σ 1 given directly.
	c := flat(30)
	c[5] = 10                    // a spike
	c[9], c[10], c[11] = 5, 8, 6 // one spike over three points
	c[20], c[21], c[22] = 5, 3.5, 4.5
	c[25] = 3.5 // above S, below N: no spike
	got := FindSpikes(c, 0, N, S, 0, 1)
	want := []Spike{{Lag: 5, Lo: 5, Hi: 5, Height: 10, Sigmas: 10}, {Lag: 10, Lo: 9, Hi: 11, Height: 8, Sigmas: 8}, {Lag: 20, Lo: 20, Hi: 22, Height: 5, Sigmas: 5}}
	if !slices.Equal(got, want) {
		t.Fatalf("spikes %+v\nwant %+v", got, want)
	}
	// Two maxima with no point below S σ between them, and no deep dip: one spike.
	c = flat(10)
	c[3], c[4], c[5] = 9, 7, 8
	if got := FindSpikes(c, 0, N, S, 0, 1); len(got) != 1 || got[0].Lag != 3 || got[0].Lo != 3 || got[0].Hi != 5 {
		t.Fatalf("no dip: %+v", got)
	}
	// A strong spike whose shoulder stays above S σ next to a weaker one: the
	// shoulder is a dip to less than half the weaker one, so two spikes, and the
	// dip belongs to neither.
	c = flat(10)
	c[2], c[3], c[4] = 100, 6, 20
	got = FindSpikes(c, 2, N, S, 0, 1)
	if len(got) != 2 || got[0].Lag != 0 || got[0].Hi != 0 || got[1].Lag != 2 || got[1].Lo != 2 {
		t.Fatalf("relative dip: %+v", got)
	}
	if FindSpikes(c, 0, N, S, 0, 0) != nil {
		t.Fatal("spikes with σ = 0")
	}
}

// Sigma clipping keeps a strong spike from inflating σ (which would hide weaker
// spikes), and σ never drops below the floor.
func TestSpikeStats(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	c := make([]float64, 2001)
	for i := range c {
		c[i] = 100 + r.NormFloat64()
	}
	c[1000] = 10000
	mean, sigma := SpikeStats(c, 3, 0)
	if math.Abs(mean-100) > 0.2 || math.Abs(sigma-1) > 0.1 {
		t.Fatalf("mean %g σ %g, want about 100 and 1", mean, sigma)
	}
	if _, s := SpikeStats(c, 3, 5); s != 5 {
		t.Fatalf("σ %g below the floor 5", s)
	}
}

func TestFreeListNearest(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ts := make([]int64, 200)
	for i := range ts {
		ts[i] = r.Int64N(1000)
	}
	slices.Sort(ts)
	f := newFreeList(len(ts))
	f.reset()
	taken := make([]bool, len(ts))
	for range 300 {
		p := r.IntN(len(ts))
		q := p + r.IntN(len(ts)-p) + 1
		target := r.Int64N(1100) - 50
		got := f.nearest(ts, p, q, target)
		want := -1
		for i := p; i < q; i++ {
			if !taken[i] && (want < 0 || abs(ts[i]-target) < abs(ts[want]-target)) {
				want = i
			}
		}
		if (got < 0) != (want < 0) || (got >= 0 && abs(ts[got]-target) != abs(ts[want]-target)) {
			t.Fatalf("nearest in [%d,%d) to %d: %d, want %d", p, q, target, got, want)
		}
		if got >= 0 {
			f.take(got)
			taken[got] = true
		}
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// synth builds traces of one-way message chains for the filter tests. Each
// instance starts at an exponentially distributed time; hops are given as
// (from, to, delay after the previous hop).
type synth struct {
	b    *TraceBuilder
	r    *rand.Rand
	path int
}

type hop struct {
	from, to string
	delay    time.Duration
}

func newSynth(seed uint64) *synth {
	return &synth{b: NewTraceBuilder(), r: rand.New(rand.NewPCG(seed, seed+1))}
}

// chains adds n instances of the chain, starting uniformly over span; jitter
// is added to every delay (clamped at zero delay after the previous hop).
func (s *synth) chains(n int, span, jitter time.Duration, hops ...hop) {
	for range n {
		s.path++
		pid := s.b.PathID([]byte("p" + itoa(s.path)))
		t := int64(1e18) + s.r.Int64N(int64(span))
		for _, h := range hops {
			d := int64(h.delay)
			if jitter > 0 {
				d += int64(float64(jitter) * s.r.NormFloat64())
			}
			if h.delay >= 0 {
				d = max(d, 0)
			}
			t += d
			s.b.Add(Message{Time: t, Sender: s.b.Node([]byte(h.from)), Receiver: s.b.Node([]byte(h.to)), PathID: pid, Op: OpMessage})
		}
	}
}

func (s *synth) run(t *testing.T, cfg ConvolutionConfig) (*Trace, *ConvolutionResult) {
	t.Helper()
	tr := s.b.Trace()
	res, err := Convolve(tr.Messages, tr.Nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr, res
}

func patternSet(res *ConvolutionResult) map[string]*ConvPattern {
	m := map[string]*ConvPattern{}
	for _, p := range res.Patterns {
		m[p.Signature] = p
	}
	return m
}

// A relay with multi-modal forwarding: the edge out of it carries both delays,
// the frequent one first, each within a quantum; the chain is counted right.
func TestConvolutionRelayDelays(t *testing.T) {
	s := newSynth(1)
	span := 20000 * time.Second
	s.chains(900, span, 50*time.Millisecond, hop{"A", "B", 0}, hop{"B", "C", 0}, hop{"C", "D", time.Second})
	s.chains(300, span, 50*time.Millisecond, hop{"A", "B", 0}, hop{"B", "C", 4 * time.Second}, hop{"C", "D", time.Second})
	_, res := s.run(t, DefaultConvolutionConfig(500*time.Millisecond))
	ps := patternSet(res)
	p := ps["A(B(C(D)))"]
	if p == nil || len(ps) != 1 {
		t.Fatalf("patterns %v", keys(ps))
	}
	if p.Count < 1150 || p.Count > 1250 {
		t.Errorf("count %d, want about 1200", p.Count)
	}
	bc := p.Hops[1]
	if len(bc.Delays) != 2 || bc.Delays[0].Delay > 500*time.Millisecond || (bc.Delays[1].Delay-4*time.Second).Abs() > 500*time.Millisecond {
		t.Fatalf("B→C delays %+v, want 0 then 4 s", bc.Delays)
	}
	if cd := p.Hops[2].Delays; (cd[0].Delay - time.Second).Abs() > 500*time.Millisecond {
		t.Errorf("C→D delays %+v, want 1 s", cd)
	}
	if p.Hops[0].Delays != nil {
		t.Errorf("the root's edge has delays %+v", p.Hops[0].Delays)
	}
}

func keys(m map[string]*ConvPattern) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// §5.3.1: an RPC chain A→B→C→B→A also correlates A→B with B→A, which would
// report A→B→A; the derived filter drops it and keeps the long chain.
func TestConvolutionDerivedFilter(t *testing.T) {
	build := func() *synth {
		s := newSynth(2)
		s.chains(800, 40000*time.Second, 30*time.Millisecond,
			hop{"A", "B", 0}, hop{"B", "C", time.Second}, hop{"C", "B", time.Second}, hop{"B", "A", time.Second})
		return s
	}
	cfg := DefaultConvolutionConfig(200 * time.Millisecond)
	_, res := build().run(t, cfg)
	ps := patternSet(res)
	if ps["A(B(C(B(A))))"] == nil || ps["A(B(A))"] != nil || res.Stats.Derived == 0 {
		t.Fatalf("with the filter: patterns %v, derived %d", keys(ps), res.Stats.Derived)
	}
	cfg.Disable = FilterDerived
	_, res = build().run(t, cfg)
	ps = patternSet(res)
	if p := ps["A(B(A))"]; p == nil || (p.Hops[1].Delays[0].Delay-3*time.Second).Abs() > 200*time.Millisecond {
		t.Fatalf("without the filter, A→B→A at 3 s should appear: %v", keys(ps))
	}
}

// Zero-delay ping-pong makes the same messages look caused by themselves; the
// cycle filter stops the path where it would reuse them.
func TestConvolutionCycleFilter(t *testing.T) {
	build := func() *synth {
		s := newSynth(3)
		s.chains(500, 10000*time.Second, 0, hop{"S", "A", 0}, hop{"A", "B", 0}, hop{"B", "A", 0})
		return s
	}
	cfg := DefaultConvolutionConfig(time.Second)
	cfg.MaxDepth = 12
	_, res := build().run(t, cfg)
	ps := patternSet(res)
	if ps["S(A(B(A)))"] == nil || len(ps) != 1 || res.Stats.Cycles == 0 || res.Stats.Truncated != 0 {
		t.Fatalf("with the filter: %v, stats %+v", keys(ps), res.Stats)
	}
	cfg.Disable = FilterCycles
	_, res = build().run(t, cfg)
	if res.Stats.Truncated == 0 {
		t.Fatalf("without the filter the path should run to MaxDepth: %v", keys(patternSet(res)))
	}
}

// A node that regularly sends 2 s before it receives shows a spike at −2 s; the
// negative-delay filter drops it.
func TestConvolutionNegativeFilter(t *testing.T) {
	build := func() *synth {
		s := newSynth(4)
		s.chains(600, 30000*time.Second, 20*time.Millisecond, hop{"B", "C", 0}, hop{"S", "B", 2 * time.Second})
		return s
	}
	cfg := DefaultConvolutionConfig(200 * time.Millisecond)
	cfg.Roots = nil
	s := build()
	tr := s.b.Trace()
	cfg.Roots = []NodeID{NodeID(slices.Index(tr.Nodes, "S"))}
	res, err := Convolve(tr.Messages, tr.Nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ps := patternSet(res); ps["S(B(C))"] != nil || ps["S(B)"] == nil || res.Stats.NegativeSpikes == 0 {
		t.Fatalf("with the filter: %v, stats %+v", keys(ps), res.Stats)
	}
	cfg.Disable = FilterNegative
	res, err = Convolve(tr.Messages, tr.Nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := patternSet(res)["S(B(C))"]
	if p == nil || (p.Hops[1].Delays[0].Delay+2*time.Second).Abs() > 200*time.Millisecond {
		t.Fatalf("without the filter, B→C at −2 s should appear: %v", keys(patternSet(res)))
	}
}

// Unrelated traffic gives no edges (low-frequency filter of edges), and
// MinCount drops rare patterns (of paths).
func TestConvolutionLowFrequencyFilter(t *testing.T) {
	for seed := uint64(10); seed < 15; seed++ {
		s := newSynth(seed)
		span := 50000 * time.Second
		s.chains(2000, span, 0, hop{"S", "B", 0})
		s.chains(3000, span, 0, hop{"B", "C", 0}) // independent of S→B
		s.chains(3000, span, 0, hop{"B", "D", 0})
		_, res := s.run(t, DefaultConvolutionConfig(time.Second))
		for _, p := range res.Patterns {
			if strings.HasPrefix(p.Signature, "S(") && p.Signature != "S(B)" {
				t.Errorf("seed %d: chance edge %s (%d)", seed, p.Signature, p.Count)
			}
		}
	}
	s := newSynth(20)
	s.chains(1000, 20000*time.Second, 10*time.Millisecond, hop{"A", "B", 0}, hop{"B", "C", time.Second})
	s.chains(40, 20000*time.Second, 10*time.Millisecond, hop{"A", "E", 0})
	cfg := DefaultConvolutionConfig(200 * time.Millisecond)
	cfg.MinCount = 50
	_, res := s.run(t, cfg)
	if ps := patternSet(res); ps["A(E)"] != nil || ps["A(B(C))"] == nil || res.Stats.LowFrequency == 0 {
		t.Fatalf("MinCount 50: %v", keys(ps))
	}
}

// When nearly every message of a vertex goes on, the few that end there are
// missed continuations, not a shorter path.
func TestConvolutionShortFilter(t *testing.T) {
	build := func() *synth {
		s := newSynth(6)
		span := 40000 * time.Second
		s.chains(970, span, 10*time.Millisecond, hop{"A", "B", 0}, hop{"B", "C", time.Second})
		s.chains(30, span, 10*time.Millisecond, hop{"A", "B", 0})
		return s
	}
	_, res := build().run(t, DefaultConvolutionConfig(200*time.Millisecond))
	if ps := patternSet(res); ps["A(B)"] != nil || ps["A(B(C))"] == nil || res.Stats.ShortPaths == 0 {
		t.Fatalf("with the filter: %v", keys(ps))
	}
	cfg := DefaultConvolutionConfig(200 * time.Millisecond)
	cfg.Disable = FilterShort
	_, res = build().run(t, cfg)
	if p := patternSet(res)["A(B)"]; p == nil || p.Count < 20 || p.Count > 40 {
		t.Fatalf("without the filter, A→B should end 30 times: %v", keys(patternSet(res)))
	}
}

// The same input, in any order, gives the same result; KeepMessages reports the
// input's own indices, each on an edge from its sender to its receiver.
func TestConvolutionDeterministicAndMessages(t *testing.T) {
	s := newSynth(7)
	s.chains(500, 10000*time.Second, 20*time.Millisecond, hop{"A", "B", 0}, hop{"B", "C", 300 * time.Millisecond})
	tr := s.b.Trace()
	cfg := DefaultConvolutionConfig(100 * time.Millisecond)
	cfg.KeepMessages = true
	a, err := Convolve(tr.Messages, tr.Nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	shuffled := slices.Clone(tr.Messages)
	perm := rand.New(rand.NewPCG(1, 1)).Perm(len(shuffled))
	for i, p := range perm {
		shuffled[i] = tr.Messages[p]
	}
	b, err := Convolve(shuffled, tr.Nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Vertices, b.Vertices) || len(a.Patterns) != len(b.Patterns) {
		t.Fatal("input order changed the result")
	}
	for v, msgs := range b.VertexMessages {
		vx := b.Vertices[v]
		for _, i := range msgs {
			m := shuffled[i]
			if m.Receiver != vx.Node || m.Sender != b.Vertices[vx.Parent].Node {
				t.Fatalf("vertex %d (%s) holds message %d %s→%s", v, tr.Nodes[vx.Node], i, tr.Nodes[m.Sender], tr.Nodes[m.Receiver])
			}
		}
	}
}

func TestConvolveOneWayAndErrors(t *testing.T) {
	var msgs []OneWayMessage
	r := rand.New(rand.NewPCG(9, 9))
	for range 200 {
		t0 := r.Int64N(int64(10000 * time.Second))
		msgs = append(msgs, OneWayMessage{t0, "producer", "queue"}, OneWayMessage{t0 + int64(2*time.Second), "queue", "consumer"})
	}
	res, err := ConvolveOneWay(msgs, DefaultConvolutionConfig(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Patterns) != 1 || res.Patterns[0].Signature != "producer(queue(consumer))" || res.Patterns[0].Count != 200 {
		for _, p := range res.Patterns {
			t.Logf("%s %d", p.Signature, p.Count)
		}
		t.Fatal("want producer(queue(consumer)) × 200")
	}
	if _, err := ConvolveOneWay(nil, DefaultConvolutionConfig(time.Second)); err == nil {
		t.Error("no messages: no error")
	}
	for _, bad := range []ConvolutionConfig{{}, {Quantum: -1}, {Quantum: 1, SpikeN: 2, SpikeS: 3}, {Quantum: 1, ShortFraction: 2}, {Quantum: 1, MaxDelay: -1}} {
		if _, err := ConvolveOneWay(msgs, bad); err == nil {
			t.Errorf("config %+v: no error", bad)
		}
	}
	// Degenerate traces: one message; every message in one quantum.
	for _, ms := range [][]OneWayMessage{{{5, "a", "b"}}, {{5, "a", "b"}, {5, "b", "c"}, {6, "b", "c"}}} {
		cfg := DefaultConvolutionConfig(time.Second)
		cfg.MinMessages = 1
		res, err := ConvolveOneWay(ms, cfg)
		if err != nil || res.MaxLag != 0 || len(res.Patterns) != 1 || res.Patterns[0].Signature != "a(b)" {
			t.Errorf("%v: %v, %+v", ms, err, res)
		}
	}
	tr := &Trace{Nodes: []string{"a"}, Messages: []Message{{Time: 1, Sender: 0, Receiver: 3}}}
	if _, err := Convolve(tr.Messages, tr.Nodes, DefaultConvolutionConfig(time.Second)); err == nil {
		t.Error("node out of range: no error")
	}
}

// The truth in chains: a serial RPC is one chain; a fan-out gives one chain per
// branch; scoring counts instances per chain as §7.5.1 does.
func TestChainTruthAndScore(t *testing.T) {
	b := NewTraceBuilder()
	add := func(t int64, op Op, from, to, path string) {
		b.Add(Message{Time: t, Op: op, Sender: b.Node([]byte(from)), Receiver: b.Node([]byte(to)), PathID: b.PathID([]byte(path))})
	}
	// figure 3: A→B, B→C, C→B, B→D, D→B, B→A
	for i, p := range []string{"p1", "p2"} {
		o := int64(i) * 100
		add(o+1, OpCall, "A", "B", p)
		add(o+3, OpCall, "B", "C", p)
		add(o+5, OpReturn, "C", "B", p)
		add(o+7, OpCall, "B", "D", p)
		add(o+9, OpReturn, "D", "B", p)
		add(o+11, OpReturn, "B", "A", p)
	}
	// a fan-out: X→Y, then Y→Z and Y→W
	add(1000, OpMessage, "X", "Y", "p3")
	add(1001, OpMessage, "Y", "Z", "p3")
	add(1001, OpMessage, "Y", "W", "p3")
	tr := b.Trace()
	truth := ChainTruth(tr.Messages, tr.Nodes)
	got := map[string]int{}
	for _, c := range truth.Chains {
		got[c.Signature] = c.Count
	}
	want := map[string]int{"A(B(C(B(D(B(A))))))": 2, "X(Y(W))": 1, "X(Y(Z))": 1}
	if len(got) != len(want) {
		t.Fatalf("chains %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("chains %v, want %v", got, want)
		}
	}
	res := &ConvolutionResult{Patterns: []*ConvPattern{{Signature: "A(B(C(B(D(B(A))))))", Count: 2}, {Signature: "X(Y(Z))", Count: 150}, {Signature: "A(B(A))", Count: 120}}}
	a := truth.Score(res, 3, 2)
	if a.FalsePositivePatterns != 1 || a.FalseNegativeInstances != 1 || a.TruthInstances != 4 || a.FrequentTruth != 1 ||
		a.FrequentFalsePositives != 1 || a.FrequentFalseNegatives != 0 || a.MessageAttributionError != -1 || a.FalsePositiveInstances != 149+120 {
		t.Fatalf("score %+v", a)
	}
}
