package causalpathprocessor

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/tierscope/tierscope/processor/causalpathprocessor/internal/metadatatest"
)

// countingSink counts spans and drops them, so the heap holds only the buffer.
type countingSink struct{ spans atomic.Int64 }

func (c *countingSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *countingSink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	c.spans.Add(int64(td.SpanCount()))
	return nil
}

// TestMemoryBoundedInBytes: spans that each carry a 1 MiB attribute are
// held to max_bytes, not max_spans; a batch larger than max_bytes alone
// passes at once, unstitched and counted; the live heap stays within a few
// budgets however many spans go through.
func TestMemoryBoundedInBytes(t *testing.T) {
	const budget = 8 << 20
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	cfg := testConfig(time.Hour, 1000)
	cfg.MaxBytes = budget
	sink := &countingSink{}
	p, err := newProcessor(metadatatest.NewSettings(tt), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))

	base := time.Unix(1700000000, 0)
	batchOf := func(spans, n int) ptrace.Traces {
		web, app := ptrace.NewTraces(), ptrace.NewTraces()
		for i := 0; i < spans; i++ {
			c, _ := call(web, app, n+i, base.Add(time.Duration(n+i)*time.Millisecond))
			// Its own copy, as a receiver decoding it would allocate.
			c.Attributes().PutStr("http.request.body", strings.Repeat(string(rune('a'+(n+i)%26)), 1<<20))
		}
		return web
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	peak := before.HeapAlloc
	const sent = 200
	for n := 0; n < sent; n++ {
		require.NoError(t, p.ConsumeTraces(context.Background(), batchOf(1, n)))
		p.mu.Lock()
		bytes, buffered := p.bytes, p.buffered
		p.mu.Unlock()
		require.LessOrEqual(t, bytes, int64(budget), "after %d batches", n+1)
		require.Less(t, buffered, 1000)
		if n%20 == 0 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
		}
	}
	grew := float64(peak-before.HeapAlloc) / (1 << 20)
	t.Logf("%d spans of 1 MiB through max_bytes %d MiB: live heap grew by at most %.1f MiB; %d forwarded early",
		2*sent, budget>>20, grew, sink.spans.Load())
	require.Less(t, grew, 3.0*budget/(1<<20), "the heap is bounded by the byte budget")
	early := sink.spans.Load()
	require.Positive(t, early)
	metadatatest.AssertEqualProcessorCausalpathReleasedEarly(t, tt, []metricdata.DataPoint[int64]{{Value: early}}, metricdatatest.IgnoreTimestamp())

	// Ten such spans in one batch: over the budget alone.
	require.NoError(t, p.ConsumeTraces(context.Background(), batchOf(10, 10_000)))
	require.Equal(t, early+20, sink.spans.Load(), "the oversized batch went on at once")
	metadatatest.AssertEqualProcessorCausalpathReleasedUnstitched(t, tt, []metricdata.DataPoint[int64]{{Value: 20}}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, p.Shutdown(context.Background()))
	require.Equal(t, int64(2*sent+20), sink.spans.Load(), "every span forwarded")
}
