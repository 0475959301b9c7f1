package causalpathprocessor

import (
	"context"
	"math"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/tierscope/tierscope/internal/sim/loadgen"
	"github.com/tierscope/tierscope/internal/stitch"
	"github.com/tierscope/tierscope/processor/causalpathprocessor/internal/metadata"
	"github.com/tierscope/tierscope/processor/causalpathprocessor/internal/metadatatest"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for _, tc := range []struct {
		id      component.ID
		want    *Config
		wantErr bool
	}{
		{id: component.NewID(metadata.Type), want: createDefaultConfig().(*Config)},
		{id: component.NewIDWithName(metadata.Type, "custom"), want: &Config{
			Mode: "link", Wait: 2 * time.Second, MaxSpans: 5000, MaxBytes: 1 << 20, SkewWindow: 10 * time.Millisecond, MaxSkew: time.Second,
			LocalWindow: 500 * time.Microsecond, AsyncWindow: 30 * time.Second, TagPaths: false, MaxAddresses: 100, MinConfidence: 0.95,
		}},
		{id: component.NewIDWithName(metadata.Type, "bad"), wantErr: true},
	} {
		t.Run(tc.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tc.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = cfg.(*Config).Validate()
			if tc.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "mode")
				assert.Contains(t, err.Error(), "wait")
				assert.Contains(t, err.Error(), "max_spans")
				assert.Contains(t, err.Error(), "max_bytes")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, cfg)
		})
	}
}

// call appends a web → app call whose context was dropped at the app, to two
// batches: the web side and the app side, as two SDKs would export them.
func call(web, app ptrace.Traces, n int, at time.Time) (client, server ptrace.Span) {
	add := func(td ptrace.Traces, service string) ptrace.SpanSlice {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		return rs.ScopeSpans().AppendEmpty().Spans()
	}
	id := func(b byte) pcommon.SpanID { return pcommon.SpanID{b, byte(n), byte(n >> 8), byte(n >> 16), 1} }
	ts := func(ms int) pcommon.Timestamp {
		return pcommon.NewTimestampFromTime(at.Add(time.Duration(ms) * time.Millisecond))
	}
	ws := add(web, "web")
	root := ws.AppendEmpty()
	root.SetName("GET /")
	root.SetKind(ptrace.SpanKindServer)
	root.SetTraceID(pcommon.TraceID{1, byte(n), byte(n >> 8), byte(n >> 16)})
	root.SetSpanID(id(1))
	root.SetStartTimestamp(ts(0))
	root.SetEndTimestamp(ts(50))
	client = ws.AppendEmpty()
	client.SetName("GET app")
	client.SetKind(ptrace.SpanKindClient)
	client.SetTraceID(root.TraceID())
	client.SetSpanID(id(2))
	client.SetParentSpanID(root.SpanID())
	client.SetStartTimestamp(ts(5))
	client.SetEndTimestamp(ts(40))
	client.Attributes().PutStr("server.address", "app")
	server = add(app, "app").AppendEmpty()
	server.SetName("GET /items")
	server.SetKind(ptrace.SpanKindServer)
	server.SetTraceID(pcommon.TraceID{2, byte(n), byte(n >> 8), byte(n >> 16)})
	server.SetSpanID(id(3))
	server.SetStartTimestamp(ts(6))
	server.SetEndTimestamp(ts(39))
	return client, server
}

func newTestProcessor(t *testing.T, cfg *Config, tt *componenttest.Telemetry) (*causalPathProcessor, *consumertest.TracesSink) {
	t.Helper()
	sink := new(consumertest.TracesSink)
	set := processortest.NewNopSettings(metadata.Type)
	if tt != nil {
		set = metadatatest.NewSettings(tt)
	}
	p, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	return p.(*causalPathProcessor), sink
}

func testConfig(wait time.Duration, maxSpans int) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Wait, cfg.MaxSpans = wait, maxSpans
	return cfg
}

// Spans from two services arrive in separate batches; after the wait, the app's
// orphan SERVER span has been moved under the web CLIENT span that called it.
func TestStitchesAcrossBatches(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	p, sink := newTestProcessor(t, testConfig(100*time.Millisecond, 1000), tt)
	web, app := ptrace.NewTraces(), ptrace.NewTraces()
	base := time.Unix(1700000000, 0)
	for i := 0; i < 20; i++ {
		call(web, app, i, base.Add(time.Duration(i)*37*time.Millisecond))
	}
	require.NoError(t, p.ConsumeTraces(context.Background(), app)) // the callee's exporter is faster
	require.NoError(t, p.ConsumeTraces(context.Background(), web))
	require.Eventually(t, func() bool { return sink.SpanCount() == 60 }, 5*time.Second, 10*time.Millisecond)

	clients := map[pcommon.SpanID]pcommon.TraceID{}
	var servers []ptrace.Span
	for _, td := range sink.AllTraces() {
		stitch.ForEachSpan(td, func(s ptrace.Span) {
			switch s.Kind() {
			case ptrace.SpanKindClient:
				clients[s.SpanID()] = s.TraceID()
			case ptrace.SpanKindServer:
				if s.Name() == "GET /items" {
					servers = append(servers, s)
				}
			}
			sig, ok := s.Attributes().Get(stitch.AttrPathSignature)
			assert.True(t, ok, "span %s not tagged", s.Name())
			assert.Equal(t, "web(app)", sig.Str())
		})
	}
	require.Len(t, servers, 20)
	for _, s := range servers {
		trace, ok := clients[s.ParentSpanID()]
		require.True(t, ok, "server %s not reparented", s.SpanID())
		assert.Equal(t, trace, s.TraceID())
		assert.Equal(t, s.SpanID()[1], s.ParentSpanID()[1], "server attached to another request's client")
	}
	require.NoError(t, p.Shutdown(context.Background()))
	metadatatest.AssertEqualProcessorCausalpathSpansReceived(t, tt, []metricdata.DataPoint[int64]{{Value: 60}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorCausalpathSpansReleased(t, tt, []metricdata.DataPoint[int64]{{Value: 60}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorCausalpathInferred(t, tt, []metricdata.DataPoint[int64]{{Value: 20}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorCausalpathOrphans(t, tt, []metricdata.DataPoint[int64]{{Value: 40}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorCausalpathLeftOrphan(t, tt, []metricdata.DataPoint[int64]{{Value: 20}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorCausalpathBuffered(t, tt, []metricdata.DataPoint[int64]{{Value: 0}}, metricdatatest.IgnoreTimestamp())
}

// A burst of ten times max_spans never holds more than max_spans spans; the
// oldest leave early, stitched and counted, and every span comes out exactly once.
func TestMemoryBoundedUnderBurst(t *testing.T) {
	const maxSpans = 3000
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	p, sink := newTestProcessor(t, testConfig(time.Hour, maxSpans), tt)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	peakHeap := before.HeapAlloc
	base := time.Unix(1700000000, 0)
	sent := 0
	for sent < 10*maxSpans {
		web, app := ptrace.NewTraces(), ptrace.NewTraces()
		for i := 0; i < 50; i++ {
			call(web, app, sent/3+i, base.Add(time.Duration(sent+i)*time.Millisecond))
		}
		sent += web.SpanCount() + app.SpanCount()
		require.NoError(t, p.ConsumeTraces(context.Background(), web))
		require.NoError(t, p.ConsumeTraces(context.Background(), app))
		p.mu.Lock()
		buffered := p.buffered
		p.mu.Unlock()
		require.LessOrEqual(t, buffered, maxSpans)
		if sent%(maxSpans) == 0 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			peakHeap = max(peakHeap, m.HeapAlloc)
		}
	}
	early := sink.SpanCount()
	require.Positive(t, early)
	t.Logf("burst of %d spans with max_spans %d: %d released early; live heap grew by at most %.1f MB",
		sent, maxSpans, early, float64(peakHeap-before.HeapAlloc)/1e6)
	require.NoError(t, p.Shutdown(context.Background()))

	seen := map[pcommon.SpanID]int{}
	for _, td := range sink.AllTraces() {
		stitch.ForEachSpan(td, func(s ptrace.Span) { seen[s.SpanID()]++ })
	}
	require.Len(t, seen, sent)
	for id, n := range seen {
		require.Equal(t, 1, n, "span %s forwarded %d times", id, n)
	}
	metadatatest.AssertEqualProcessorCausalpathReleasedEarly(t, tt, []metricdata.DataPoint[int64]{{Value: int64(early)}}, metricdatatest.IgnoreTimestamp())
	// Released early is not released unstitched: the calls inside the burst still
	// found their callers.
	inferred, err := tt.GetMetric("otelcol_processor_causalpath_inferred")
	require.NoError(t, err)
	got := inferred.Data.(metricdata.Sum[int64]).DataPoints[0].Value
	t.Logf("inferred %d of %d broken calls", got, sent/3)
	require.Greater(t, got, int64(sent/3*9/10))
}

// Bad spans are forwarded untouched and counted, never dropped.
func TestBadSpansAreForwardedAndCounted(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	p, sink := newTestProcessor(t, testConfig(time.Hour, 1000), tt)
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	empty := ss.AppendEmpty() // no ids at all
	empty.SetName("empty")
	backwards := ss.AppendEmpty()
	backwards.SetName("backwards")
	backwards.SetTraceID(pcommon.TraceID{1})
	backwards.SetSpanID(pcommon.SpanID{1})
	backwards.SetStartTimestamp(200)
	backwards.SetEndTimestamp(100)
	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	require.NoError(t, p.ConsumeTraces(context.Background(), ptrace.NewTraces()))
	require.NoError(t, p.Shutdown(context.Background()))
	require.Equal(t, 2, sink.SpanCount())
	stitch.ForEachSpan(sink.AllTraces()[0], func(s ptrace.Span) {
		assert.Equal(t, 0, s.Attributes().Len(), "%s was touched", s.Name())
	})
	metadatatest.AssertEqualProcessorCausalpathSkipped(t, tt, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}

func TestConcurrentProducers(t *testing.T) {
	p, sink := newTestProcessor(t, testConfig(20*time.Millisecond, 100000), nil)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				web, app := ptrace.NewTraces(), ptrace.NewTraces()
				call(web, app, g*1000+i, time.Unix(1700000000, 0).Add(time.Duration(g*1000+i)*100*time.Millisecond))
				assert.NoError(t, p.ConsumeTraces(context.Background(), web))
				assert.NoError(t, p.ConsumeTraces(context.Background(), app))
			}
		}(g)
	}
	wg.Wait()
	require.NoError(t, p.Shutdown(context.Background()))
	require.Equal(t, 4*50*3, sink.SpanCount())
}

// A trace whose two sides are released in different rounds is stitched and
// tagged consistently: the callee's side first, with the caller's as context,
// then the caller's side, which still names its callee.
func TestTraceSplitAcrossReleases(t *testing.T) {
	cfg := testConfig(time.Second, 1000)
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	p := proc.(*causalPathProcessor) // not started: rounds are driven by hand
	clock := time.Unix(1800000000, 0)
	p.now = func() time.Time { return clock }

	web, app := ptrace.NewTraces(), ptrace.NewTraces()
	client, server := call(web, app, 1, time.Unix(1700000000, 0))
	require.NoError(t, p.ConsumeTraces(context.Background(), app))
	clock = clock.Add(600 * time.Millisecond)
	require.NoError(t, p.ConsumeTraces(context.Background(), web))
	clock = clock.Add(500 * time.Millisecond)
	require.NoError(t, p.release(context.Background(), false))
	require.Equal(t, 1, sink.SpanCount(), "only the app side is due")
	assert.Equal(t, client.SpanID(), server.ParentSpanID())
	clock = clock.Add(time.Second)
	require.NoError(t, p.release(context.Background(), false))
	require.Equal(t, 3, sink.SpanCount())
	for _, td := range sink.AllTraces() {
		stitch.ForEachSpan(td, func(s ptrace.Span) {
			sig, _ := s.Attributes().Get(stitch.AttrPathSignature)
			assert.Equal(t, "web(app)", sig.Str(), "span %s", s.Name())
			assert.Equal(t, client.TraceID(), s.TraceID(), "span %s", s.Name())
		})
	}
	require.NoError(t, p.Shutdown(context.Background()))
}

// The processor and `tierscope stitch` share internal/stitch: on the same input,
// released in one round, every span comes out with the same parent, trace id,
// attributes and links.
func TestSameOutputAsCLI(t *testing.T) {
	cfg := loadgen.DefaultConfig()
	cfg.MinGap, cfg.MaxGap = 2*time.Millisecond, 6*time.Millisecond
	cfg.Separation = 2 * time.Millisecond
	plan, err := loadgen.Generate(cfg, 300)
	require.NoError(t, err)
	input := ptrace.NewTraces()
	loadgen.AppendOTLP(input, plan, loadgen.NewIDs(7))
	viaCLI, viaProcessor := ptrace.NewTraces(), ptrace.NewTraces()
	input.CopyTo(viaCLI)
	input.CopyTo(viaProcessor)

	opt := stitch.DefaultOptions()
	st, err := stitch.New(opt)
	require.NoError(t, err)
	rep := st.Stitch(viaCLI)
	require.Positive(t, rep.Inferred)

	p, sink := newTestProcessor(t, testConfig(time.Hour, 1_000_000), nil)
	require.NoError(t, p.ConsumeTraces(context.Background(), viaProcessor))
	require.NoError(t, p.Shutdown(context.Background()))

	want := map[pcommon.SpanID]ptrace.Span{}
	stitch.ForEachSpan(viaCLI, func(s ptrace.Span) { want[s.SpanID()] = s })
	got := 0
	for _, td := range sink.AllTraces() {
		stitch.ForEachSpan(td, func(s ptrace.Span) {
			got++
			w, ok := want[s.SpanID()]
			require.True(t, ok)
			assert.Equal(t, w.ParentSpanID(), s.ParentSpanID(), "parent of %s", s.Name())
			assert.Equal(t, w.TraceID(), s.TraceID(), "trace of %s", s.Name())
			assert.Equal(t, w.Attributes().AsRaw(), s.Attributes().AsRaw(), "attributes of %s", s.Name())
			assert.Equal(t, w.Links().Len(), s.Links().Len(), "links of %s", s.Name())
		})
	}
	assert.Equal(t, len(want), got)
}

// A round leaves out of the context the waiting batches that start past the
// stitcher's reach: the output is the one of a round given every waiting batch.
func TestContextBeyondReachLeftOut(t *testing.T) {
	requests := func() []ptrace.Traces {
		cfg := loadgen.DefaultConfig()
		cfg.DropFraction = 0.5
		gen, err := loadgen.NewGenerator(cfg)
		require.NoError(t, err)
		ids := loadgen.NewIDs(3)
		// The app's exporter is faster: each request's app spans come a batch
		// before the web spans that hold their parents.
		var out []ptrace.Traces
		for range 30 {
			td, web, app := ptrace.NewTraces(), ptrace.NewTraces(), ptrace.NewTraces()
			loadgen.AppendOTLP(td, gen.Next(8), ids)
			td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
				to := app
				if v, _ := rs.Resource().Attributes().Get("service.name"); v.Str() == "web" {
					to = web
				}
				rs.MoveTo(to.ResourceSpans().AppendEmpty())
				return true
			})
			out = append(out, app, web)
		}
		return out
	}
	cfg := testConfig(time.Second, 1_000_000)
	sink := new(consumertest.TracesSink)
	proc, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	p := proc.(*causalPathProcessor)
	clock := time.Unix(1800000000, 0)
	p.now = func() time.Time { return clock }

	ref, err := stitch.New(cfg.stitchOptions())
	require.NoError(t, err)
	var want [][]byte
	var pending []ptrace.Traces
	marshal := func(batches []ptrace.Traces) []byte {
		out := ptrace.NewTraces()
		for _, b := range batches {
			b.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
		}
		data, err := (&ptrace.JSONMarshaler{}).MarshalTraces(out)
		require.NoError(t, err)
		return data
	}
	mine, theirs := requests(), requests()
	leftOut, kept := 0, 0
	for i := range mine {
		require.NoError(t, p.ConsumeTraces(context.Background(), mine[i]))
		pending = append(pending, theirs[i])
		if i%5 == 4 && i >= 10 {
			// The processor releases what arrived a wait (10 batches) ago.
			n := len(pending) - 10
			latest := int64(math.MinInt64)
			for _, b := range p.buffer[:n] {
				latest = max(latest, b.latest)
			}
			for _, b := range p.buffer[n:] {
				if b.earliest > latest+p.stitcher.ContextReach() {
					leftOut++
				} else {
					kept++
				}
			}
			require.NoError(t, p.release(context.Background(), false))
			require.Len(t, p.buffer, 10)
			ref.StitchWithContext(pending[:n], pending[n:])
			want = append(want, marshal(pending[:n]))
			pending = pending[n:]
		}
		clock = clock.Add(100 * time.Millisecond)
	}
	require.Len(t, sink.AllTraces(), len(want))
	for r, td := range sink.AllTraces() {
		got, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		require.Equal(t, string(want[r]), string(got), "round %d", r)
	}
	// Both cases came up: batches left out, and batches near enough to be read.
	require.Positive(t, leftOut)
	require.Positive(t, kept)
}
