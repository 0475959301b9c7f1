package ingest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/ingest"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/query"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
)

// The work-factor regression pairs a process's requests with its CPU
// readings of the same window, so a SERVER span counts in the window it
// started in: a db request served 7 s after its trace's root belongs to the
// db's next window, not to the root's.
func TestFlowsCountInTheWindowTheirSpanStarted(t *testing.T) {
	const window = 5
	start := time.Unix(1_700_000_000, 0) // a multiple of 5 s
	ctx := context.Background()
	eng, reader := newEngine(t, start, window)

	td := ptrace.NewTraces()
	at := func(s float64) pcommon.Timestamp { return pcommon.Timestamp(start.UnixNano() + int64(s*1e9)) }
	server := func(service string, id byte, parent byte, route string, from, to float64) {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		rs.Resource().Attributes().PutStr("host.name", "m1")
		rs.Resource().Attributes().PutStr("process.executable.name", service)
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1})
		sp.SetSpanID(pcommon.SpanID{id})
		if parent != 0 {
			sp.SetParentSpanID(pcommon.SpanID{parent})
		}
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetName("GET " + route)
		sp.Attributes().PutStr("http.route", route)
		sp.SetStartTimestamp(at(from))
		sp.SetEndTimestamp(at(to))
	}
	server("web", 1, 0, "/home", 1, 8)
	server("db", 2, 1, "/query", 7, 7.5) // a child of the root, in the next window
	require.NoError(t, eng.ConsumeTraces(ctx, td))
	for _, s := range []float64{1, 2, 6, 7} {
		for _, p := range []string{"web", "db"} {
			eng.AddCPU(at(s).AsTime().UnixNano(), model.ProcessKey("m1", p), 0.1, 4000, 0)
		}
	}
	eng.CompleteAll()
	require.NoError(t, eng.Flush(ctx, true))

	perProcess, periods, err := reader.WorkFactorPeriods(ctx, api.TimeRange{From: start.Unix(), To: start.Unix() + 2*window}, "")
	require.NoError(t, err)
	require.True(t, perProcess)
	rates := map[int64]map[string]float64{}
	for _, p := range periods {
		rates[p.Start] = map[string]float64{}
		for _, o := range p.Obs {
			for f, r := range o.Rates {
				rates[p.Start][o.Process+" "+f] = r
			}
		}
	}
	require.Equal(t, map[int64]map[string]float64{
		start.Unix():          {"web web /home": 1.0 / window},
		start.Unix() + window: {"db db /query": 1.0 / window},
	}, rates)
}

// newEngine is an ingest engine and a reader over one store, at start + 1 min.
func newEngine(t *testing.T, start time.Time, window int64) (*ingest.Engine, *query.Reader) {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "m.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	tel, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	now := func() time.Time { return start.Add(time.Minute) }
	reader := query.New(query.Settings{Window: window, OpenWindows: 3, FlushInterval: time.Second, Shard: "s", Now: now, Logger: zap.NewNop()})
	reader.Open(st)
	eng := ingest.New(ingest.Settings{
		Window: window, OpenWindows: 3, TraceWait: 15 * time.Second, MaxOpenTraces: 100, MaxSpansPerTrace: 100,
		Limits: model.DefaultLimits(), MaxAddresses: 100, AsyncQuantum: 10 * time.Millisecond, MaxMessages: 100,
		Shard: "s", Now: now, Logger: zap.NewNop(), Telemetry: tel, Observer: &countingObserver{},
		SettledBefore: reader.SettledBefore, Invalidate: reader.ResetCache,
	})
	eng.Open(st)
	return eng, reader
}

// A utilization reading is the mean since the previous one, so it belongs to
// the window of its interval's middle: readings taken 0.2 s into each second
// of a process that runs at 10% for one window and 30% for the next give the
// second window 30% exactly, not a mean with the reading that straddles.
func TestCPUReadingsCountAtTheirIntervalsMiddle(t *testing.T) {
	const window = 5
	start := time.Unix(1_700_000_000, 0)
	ctx := context.Background()
	eng, reader := newEngine(t, start, window)
	busy := func(from, to float64) float64 { // the true utilization's mean over [from, to]
		at := func(x float64) float64 { return 0.1*min(x, window) + 0.3*max(x-window, 0) }
		return (at(to) - at(from)) / (to - from)
	}
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", "m1")
	rm.Resource().Attributes().PutStr("process.executable.name", "db")
	g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("process.cpu.utilization")
	g.SetEmptyGauge()
	for k := 1; k < 2*window; k++ {
		md2 := pmetric.NewMetrics()
		rm.CopyTo(md2.ResourceMetrics().AppendEmpty())
		dp := md2.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().AppendEmpty()
		ts := float64(k) + 0.2
		dp.SetTimestamp(pcommon.Timestamp(start.UnixNano() + int64(ts*1e9)))
		dp.SetDoubleValue(busy(ts-1, ts))
		require.NoError(t, eng.ConsumeMetrics(ctx, md2))
	}
	td := ptrace.NewTraces()
	for w, id := range []byte{1, 2} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "db")
		rs.Resource().Attributes().PutStr("host.name", "m1")
		rs.Resource().Attributes().PutStr("process.executable.name", "db")
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{id})
		sp.SetSpanID(pcommon.SpanID{id})
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetName("GET /q")
		at := pcommon.Timestamp(start.UnixNano() + int64(w*window+2)*1e9)
		sp.SetStartTimestamp(at)
		sp.SetEndTimestamp(at + 1e6)
	}
	require.NoError(t, eng.ConsumeTraces(ctx, td))
	for w := range 2 { // the machine's reading gives the capacity
		eng.AddCPU(start.UnixNano()+int64(w*window+3)*1e9, "m1", 0.5, 4000, 2)
	}
	eng.CompleteAll()
	require.NoError(t, eng.Flush(ctx, true))

	_, periods, err := reader.WorkFactorPeriods(ctx, api.TimeRange{From: start.Unix(), To: start.Unix() + 2*window}, "")
	require.NoError(t, err)
	require.Len(t, periods, 2)
	// The first window's readings: 1.2 s (no interval known yet), 2.2 … 5.2 s.
	require.InDelta(t, (0.1*4+busy(4.2, 5.2))/5, periods[0].Obs[0].Utilization, 1e-9)
	require.InDelta(t, 0.3, periods[1].Obs[0].Utilization, 1e-9)
}
