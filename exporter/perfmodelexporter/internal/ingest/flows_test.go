package ingest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
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
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "m.db"))
	require.NoError(t, err)
	defer st.Close()
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
