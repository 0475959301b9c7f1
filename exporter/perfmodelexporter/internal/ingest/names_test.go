package ingest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadatatest"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/span"
)

type nopObserver struct{}

func (nopObserver) IsFront(s *span.Span, _ *span.Names) bool { return s.ParentID == 0 }
func (nopObserver) Observe([]span.Span, *span.Names, int)    {}
func (nopObserver) ObserveSteal(string, int64, float64)      {}

// namedBatch is second sec's batch: the SERVER spans that start traces
// sec*10..sec*10+9, each serving a transaction of its own, and the CLIENT
// spans under the traces the batch before started, each calling an address
// of its own; so every batch brings new names, and every trace is open
// across a batch.
func namedBatch(sec int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "web")
	rs.Resource().Attributes().PutStr("host.name", "m1")
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	at := func(s int) pcommon.Timestamp { return pcommon.Timestamp(int64(1_700_000_000+s) * 1e9) }
	id := func(trace, n int) (pcommon.TraceID, pcommon.SpanID) {
		return pcommon.TraceID{byte(trace >> 8), byte(trace), 1}, pcommon.SpanID{byte(trace >> 8), byte(trace), byte(n), 1}
	}
	for k := range 10 {
		trace := sec*10 + k
		tid, sid := id(trace, 1)
		sp := ss.AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetName("GET")
		sp.Attributes().PutStr("http.route", fmt.Sprintf("/item/%d", trace))
		sp.SetStartTimestamp(at(sec))
		sp.SetEndTimestamp(at(sec) + 5e8)
		if sec == 0 {
			continue
		}
		trace -= 10
		tid, parent := id(trace, 1)
		_, sid = id(trace, 2)
		c := ss.AppendEmpty()
		c.SetTraceID(tid)
		c.SetSpanID(sid)
		c.SetParentSpanID(parent)
		c.SetKind(ptrace.SpanKindClient)
		c.SetName("call")
		c.Attributes().PutStr("server.address", fmt.Sprintf("10.0.%d.%d", trace/250, trace%250))
		c.Attributes().PutStr("server.port", "80")
		c.SetStartTimestamp(at(sec-1) + 1e8)
		c.SetEndTimestamp(at(sec-1) + 2e8)
	}
	return td
}

// ingestNamed feeds 60 seconds of namedBatch, completing each trace two
// seconds after its first span, and returns the engine's window records and
// the largest names table it held.
func ingestNamed(t *testing.T, maxNames int, tel *metadata.TelemetryBuilder) (map[string]string, int) {
	clock := time.Unix(1_700_000_000, 0)
	e := New(Settings{
		Window: 60, OpenWindows: 3, TraceWait: 1500 * time.Millisecond, MaxOpenTraces: 1000, MaxSpansPerTrace: 100,
		Limits: model.Limits{MaxServices: 1000, MaxEdges: 10000, MaxPatterns: 10000}, MaxAddresses: 1000, MaxNames: maxNames,
		AsyncQuantum: 10 * time.Millisecond, Now: func() time.Time { return clock }, Logger: zap.NewNop(), Telemetry: tel,
		Observer: nopObserver{},
	})
	largest := 0
	for sec := range 60 {
		clock = time.Unix(1_700_000_000+int64(sec), 0)
		require.NoError(t, e.ConsumeTraces(context.Background(), namedBatch(sec)))
		largest = max(largest, e.names.Len())
		e.Expire(clock)
	}
	e.CompleteAll()
	records := map[string]string{}
	for _, w := range e.windows {
		rs, err := w.Records()
		require.NoError(t, err)
		for _, r := range rs {
			records[fmt.Sprint(w.Start, r.Kind, r.Key)] = string(r.Payload)
		}
	}
	return records, largest
}

// The names of the spans being assembled stay bounded by limits.max_names
// (or twice what the open traces hold, when that is more), each compaction
// is counted, and the windows are what an unbounded table gives.
func TestNamesStayBounded(t *testing.T) {
	unboundedTel, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	want, grown := ingestNamed(t, 1<<20, unboundedTel)
	require.Greater(t, grown, 1000, "without a bound every transaction and address stays")

	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	tel, err := metadata.NewTelemetryBuilder(tt.NewTelemetrySettings())
	require.NoError(t, err)
	const bound = 100
	got, largest := ingestNamed(t, bound, tel)
	// After each batch: the open traces (about 20, a few names each) hold
	// less than half the bound, so the table stays within it.
	require.LessOrEqual(t, largest, bound, "names held")
	require.Equal(t, want, got, "compaction changed the windows")
	m, err := tt.GetMetric("otelcol_exporter_perfmodel_name_compactions")
	require.NoError(t, err)
	n := m.Data.(metricdata.Sum[int64]).DataPoints[0].Value
	t.Logf("names: %d unbounded, at most %d under a bound of %d; %d compactions", grown, largest, bound, n)
	require.Greater(t, n, int64(5), "compactions counted")
	metadatatest.AssertEqualExporterPerfmodelNameCompactions(t, tt, []metricdata.DataPoint[int64]{{Value: n}}, metricdatatest.IgnoreTimestamp())
}
