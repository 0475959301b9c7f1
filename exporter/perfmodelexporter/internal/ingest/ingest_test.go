package ingest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/ingest"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/query"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/sim/loadgen"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/store"
)

// countingObserver counts what ingestion shows the coordinator.
type countingObserver struct{ servers, fronts int }

func (o *countingObserver) IsFront(s *span.Span, _ *span.Names) bool { return s.ParentID == 0 }
func (o *countingObserver) Observe(spans []span.Span, _ *span.Names, i int) {
	o.servers++
	if spans[i].ParentID == 0 {
		o.fronts++
	}
}
func (o *countingObserver) ObserveSteal(string, int64, float64) {}

// The write side and the read side meet only in the store: traces ingested
// and flushed by one are the graph the other reads, and every completed
// SERVER span is shown to the observer.
func TestIngestedTracesAreWhatTheReaderReads(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	cfg := loadgen.DefaultConfig()
	cfg.DropFraction = 0
	cfg.Start = start
	traces, err := loadgen.Generate(cfg, 500)
	require.NoError(t, err)

	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "m.db"))
	require.NoError(t, err)
	defer st.Close()
	tel, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	now := func() time.Time { return start.Add(10 * time.Minute) }
	reader := query.New(query.Settings{Window: 60, OpenWindows: 3, FlushInterval: 10 * time.Second, Shard: "s", Now: now, Logger: zap.NewNop()})
	reader.Open(st)
	invalidated := 0
	obs := &countingObserver{}
	eng := ingest.New(ingest.Settings{
		Window: 60, OpenWindows: 3, TraceWait: 15 * time.Second, MaxOpenTraces: 50000, MaxSpansPerTrace: 1000,
		Limits: model.DefaultLimits(), MaxAddresses: 100, AsyncQuantum: 10 * time.Millisecond, MaxMessages: 1000,
		Shard: "s", Now: now, Logger: zap.NewNop(), Telemetry: tel, Observer: obs,
		SettledBefore: reader.SettledBefore, Invalidate: func() { invalidated++; reader.ResetCache() },
	})
	eng.Open(st)

	td := ptrace.NewTraces()
	loadgen.AppendOTLP(td, traces, loadgen.NewIDs(1))
	require.NoError(t, eng.ConsumeTraces(ctx, td))
	require.Equal(t, len(traces), eng.OpenTraces(), "assembled for trace_wait")
	eng.CompleteAll()
	require.Zero(t, eng.OpenTraces())
	require.Equal(t, len(traces), obs.fronts, "each trace's root SERVER span")
	require.Greater(t, obs.servers, obs.fronts)
	require.NoError(t, eng.Flush(ctx, true))
	require.Positive(t, invalidated, "the windows written are settled by the clock: cached reads of them are dropped")
	require.Positive(t, eng.ClosedBefore())

	from := start.Unix() - start.Unix()%60
	g, err := reader.Graph(ctx, api.TimeRange{From: from, To: from + 600}, "")
	require.NoError(t, err)
	requests := map[string]int64{}
	for _, n := range g.Nodes {
		requests[n.ID] = n.Requests
	}
	require.Equal(t, int64(len(traces)), requests["web"])
	require.Contains(t, requests, "postgresql/shop")
}
