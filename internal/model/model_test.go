package model

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/span/spantest"
	"github.com/tierscope/tierscope/internal/stats"
)

// testNames holds the names of the tests' spans.
var testNames = span.NewNames()

// trace builds web → app → (db, cache) with an internal span in app and a
// CLIENT span to the app whose SERVER span exists (so it is transparent).
func trace(base int64, dbMs int64, errDB bool) []span.Span {
	ms := int64(1e6)
	return spantest.Spans(testNames, []spantest.Named{
		{ID: 1, Service: "web", Kind: KindServer, Start: base, End: base + 50*ms},
		{ID: 2, ParentID: 1, Service: "web", Kind: KindClient, Peer: "app", Start: base + 2*ms, End: base + 40*ms},
		{ID: 3, ParentID: 2, Service: "app", Kind: KindServer, Start: base + 3*ms, End: base + 39*ms},
		{ID: 4, ParentID: 3, Service: "app", Kind: KindInternal, Start: base + 4*ms, End: base + 38*ms},
		{ID: 5, ParentID: 4, Service: "app", Kind: KindClient, Peer: "postgres", Database: true, Start: base + 5*ms, End: base + (5+dbMs)*ms, Error: errDB},
		{ID: 6, ParentID: 4, Service: "app", Kind: KindClient, Peer: "redis", Start: base + 30*ms, End: base + 31*ms},
	}...)
}

func TestAddTraceGraphAndPattern(t *testing.T) {
	w := NewWindow(0, DefaultLimits())
	w.AddTrace(trace(0, 10, false), testNames)
	w.AddTrace(trace(1e9, 20, true), testNames)
	require.Equal(t, int64(2), w.Traces)
	require.Len(t, w.Patterns, 1)
	ps := w.Patterns["web(app(postgres,redis))"]
	require.NotNil(t, ps)
	require.Equal(t, int64(2), ps.Count)
	require.Equal(t, []string{"web", "app", "postgres", "redis"}, []string{ps.Nodes[0].Node, ps.Nodes[1].Node, ps.Nodes[2].Node, ps.Nodes[3].Node})
	require.InDelta(t, 15, ps.Nodes[2].Latency.MeanMs(), 1e-9)
	require.InDelta(t, 2, ps.Nodes[2].CallDelay.MeanMs(), 1e-9, "db call starts 2 ms after app's server span")
	require.Equal(t, int64(2), w.Nodes["web"].Requests)
	require.Equal(t, int64(1), w.Nodes["postgres"].Errors)
	require.Equal(t, int64(2), w.Edges[EdgeKey{"app", "postgres", EdgeDatabase}].Requests)
	require.Equal(t, int64(2), w.Edges[EdgeKey{"web", "app", EdgeSync}].Requests)
	require.Len(t, w.Edges, 3)

	p := PathPattern("web(app(postgres,redis))", ps)
	require.Equal(t, "web", p.Root.Node)
	require.Len(t, p.Root.Children, 1)
	require.Equal(t, "app", p.Root.Children[0].Node)
	require.Len(t, p.Root.Children[0].Children, 2)
	require.Equal(t, "postgres", p.Root.Children[0].Children[0].Node)
	require.InDelta(t, 2, p.Root.Children[0].Children[0].CallDelayMs.Mean, 1e-9)
}

// Splitting traces over two shards and merging the records in any order gives
// exactly the single-window records.
func TestMergeIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	single := NewWindow(0, DefaultLimits())
	a, b := NewWindow(0, DefaultLimits()), NewWindow(0, DefaultLimits())
	for i := range 2000 {
		tr := trace(int64(i)*1e7, 1+rng.Int64N(200), rng.IntN(10) == 0)
		if rng.IntN(3) == 0 {
			tr = tr[:3] // web → app only
		}
		single.AddTrace(tr, testNames)
		if rng.IntN(2) == 0 {
			a.AddTrace(tr, testNames)
		} else {
			b.AddTrace(tr, testNames)
		}
	}
	want := merged(t, single)
	got := merged(t, a, b)
	got2 := merged(t, b, a)
	require.Equal(t, want, got)
	require.Equal(t, want, got2)
}

func merged(t *testing.T, ws ...*Window) map[string]string {
	t.Helper()
	acc := map[string][]byte{}
	for _, w := range ws {
		recs, err := w.Records()
		require.NoError(t, err)
		for _, r := range recs {
			k := r.Kind + "|" + r.Key
			m, err := Merge(r.Kind, acc[k], r.Payload)
			require.NoError(t, err)
			acc[k] = m
		}
	}
	out := map[string]string{}
	for k, v := range acc {
		// Decode and re-encode so equal statistics compare equal whatever
		// the merge path.
		kind, _, _ := strings.Cut(k, "|")
		x, err := Decode(kind, v)
		require.NoError(t, err)
		b, _ := json.Marshal(x)
		out[k] = string(b)
	}
	return out
}

func TestHistQuantiles(t *testing.T) {
	var h Hist
	for i := 1; i <= 1000; i++ {
		h.Add(int64(i) * 1e6) // 1..1000 ms
	}
	require.InDelta(t, 500.5, h.MeanMs(), 1e-9)
	require.InDelta(t, 500, h.QuantileMs(0.5), 500*0.05)
	require.InDelta(t, 990, h.QuantileMs(0.99), 990*0.05)
	require.Equal(t, 1000.0, h.QuantileMs(1))
	var e Hist
	require.Nil(t, e.Quantiles())
}

func TestLimitsCountOverflow(t *testing.T) {
	w := NewWindow(0, Limits{MaxServices: 2, MaxEdges: 1, MaxPatterns: 1})
	of := w.AddTrace(trace(0, 10, false), testNames)
	require.Len(t, w.Nodes, 2)
	require.Len(t, w.Edges, 1)
	require.Equal(t, int64(2), of.Services)
	require.Equal(t, int64(2), of.Edges)
	of = w.AddTrace(trace(0, 10, false)[:3], testNames)
	require.Equal(t, int64(1), of.Patterns)
}

func TestAssemblerWaitsAndBounds(t *testing.T) {
	a := NewAssembler(100, 2, 3)
	var got [][]span.Span
	emit := func(s []span.Span) { got = append(got, append([]span.Span(nil), s...)) }
	a.Add(TraceID{1}, span.Span{ID: 1}, 0, emit)
	a.Add(TraceID{1}, span.Span{ID: 2}, 50, emit)
	a.Add(TraceID{2}, span.Span{ID: 3}, 60, emit)
	a.Expire(99, emit)
	require.Empty(t, got)
	a.Expire(100, emit)
	require.Len(t, got, 1)
	require.Len(t, got[0], 2)
	// Bounds: a third open trace completes the oldest early; a 4th span is dropped.
	a.Add(TraceID{3}, span.Span{ID: 4}, 120, emit)
	a.Add(TraceID{4}, span.Span{ID: 5}, 130, emit)
	require.Equal(t, int64(1), a.CompletedEarly)
	for i := range 4 {
		a.Add(TraceID{4}, span.Span{ID: uint64(10 + i)}, 131, emit)
	}
	require.Equal(t, int64(2), a.DroppedSpans)
	a.Flush(emit)
	require.Equal(t, 0, a.Open())
	require.Len(t, got, 4)
}

func BenchmarkAddTrace(b *testing.B) {
	w := NewWindow(0, DefaultLimits())
	tr := trace(0, 10, false)
	b.ReportAllocs()
	for b.Loop() {
		w.AddTrace(tr, testNames)
	}
	b.ReportMetric(float64(b.N*len(tr))/b.Elapsed().Seconds(), "spans/s")
}

func TestCodecRoundTripAndCorruption(t *testing.T) {
	w := NewWindow(0, DefaultLimits())
	w.AddTrace(trace(0, 10, true), testNames)
	for _, ps := range w.Patterns {
		b := EncodePattern(ps)
		var got PatternStats
		require.NoError(t, DecodePattern(b, &got))
		require.Equal(t, *ps, got)
		for cut := 1; cut < len(b); cut++ {
			var x PatternStats
			require.Error(t, DecodePattern(b[:cut], &x), "truncated at %d", cut)
		}
	}
	for _, cs := range w.Nodes {
		var got CallStats
		require.NoError(t, DecodeCallStats(EncodeCallStats(cs), &got))
		require.Equal(t, *cs, got)
	}
}

func FuzzDecodePattern(f *testing.F) {
	w := NewWindow(0, DefaultLimits())
	w.AddTrace(trace(0, 10, true), testNames)
	for _, ps := range w.Patterns {
		f.Add(EncodePattern(ps))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p PatternStats
		_ = DecodePattern(b, &p) // must not panic
	})
}

// Sub-millisecond durations have bins of their own: a 300 µs database reads
// 300 µs, where every duration under 1 ms once read 0.5 ms.
func TestHistResolvesMicroseconds(t *testing.T) {
	for _, us := range []int64{50, 200, 700, 3000} {
		var h Hist
		for i := int64(0); i < 100; i++ {
			h.Add((us*1000 - 500) + i*10) // a spread of ±0.5 µs around us
		}
		got := h.QuantileMs(0.5) * 1000
		if math.Abs(got-float64(us))/float64(us) > 0.05 {
			t.Errorf("%d µs: p50 %.1f µs", us, got)
		}
	}
}

// Histograms stored before the bins below 1 ms existed (binary v1 and JSON
// without a layout) read as they did: bins from 1 ms keep their values and
// the old bin 0 reads 0.5 ms.
func TestLegacyHistUpgraded(t *testing.T) {
	legacy := stats.LogBins{Base: 1.05, Min: 1, Count: 340}
	// 60 durations under 1 ms and 40 of 20 ms, binned the legacy way.
	b20 := int32(legacy.Index(20))
	counts := make([]uint64, b20+1)
	counts[0], counts[b20] = 60, 40
	old := Hist{First: 0, Counts: counts, N: 100, SumNs: 60*400_000 + 40*20_000_000, MinNs: 100_000, MaxNs: 20_000_000}

	e := encoder{b: []byte{binaryV1}}
	e.varint(3)
	e.varint(1)
	e.hist(&old)
	var cs CallStats
	if err := DecodeCallStats(e.b, &cs); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON Hist
	if err := json.Unmarshal(raw, &fromJSON); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]*Hist{"binary v1": &cs.Latency, "json": &fromJSON} {
		if h.Layout != layoutMicro || h.N != 100 {
			t.Fatalf("%s: layout %d, n %d", name, h.Layout, h.N)
		}
		if p := h.QuantileMs(0.3); math.Abs(p-0.5) > 0.03 {
			t.Errorf("%s: p30 %.3f ms, want the legacy 0.5 ms", name, p)
		}
		if p := h.QuantileMs(0.9); math.Abs(p-20)/20 > 0.05 {
			t.Errorf("%s: p90 %.3f ms, want 20 ms", name, p)
		}
		// A new duration merges into the same layout.
		h.Add(300_000)
		if p := h.QuantileMs(0); p != 0.1 {
			t.Errorf("%s: min %.3f ms", name, p)
		}
	}
}

// Reintern moves the open traces' names to a new table: the traces complete
// with the names they had, and the new table holds no other.
func TestAssemblerReintern(t *testing.T) {
	from := span.NewNames()
	a := NewAssembler(100, 10, 10)
	var got []string
	emit := func(s []span.Span) {
		for i := range s {
			got = append(got, from.Name(s[i].Service)+" "+from.Name(s[i].Transaction))
		}
	}
	add := func(trace byte, service, tx string, now int64) {
		a.Add(TraceID{trace}, spantest.Named{ID: uint64(now), Service: service, Transaction: tx}.Span(from), now, emit)
	}
	add(1, "web", "/a", 0)
	add(2, "app", "/b", 10)
	a.Expire(100, emit) // trace 1 completes; its /a stays in from
	add(2, "app", "/c", 110)
	to := span.NewNames()
	a.Reintern(from, to)
	from = to
	a.Flush(emit)
	require.Equal(t, []string{"web /a", "app /b", "app /c"}, got)
	require.Equal(t, 3, to.Len(), "app, /b and /c")
}
