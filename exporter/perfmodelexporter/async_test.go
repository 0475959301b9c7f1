package perfmodelexporter

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/api"
)

// A queue with no context propagation: "orders" produces to kafka/orders and
// "billing" consumes each message 200 ± 5 ms later in a trace of its own. The
// convolution at window close finds the async edge kafka/orders → billing and
// its delay.
func TestAsyncEdgeFromConvolution(t *testing.T) {
	base := time.Unix(alignDown(loadStart.Unix(), 60), 0)
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", base.Add(10*time.Minute), nil)
	rng := rand.New(rand.NewPCG(8, 9))
	td := ptrace.NewTraces()
	add := func(service string, kind ptrace.SpanKind, at time.Time, id uint64) {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		var tid [16]byte
		var sid [8]byte
		for b := range 8 {
			tid[b], sid[b] = byte(id>>(8*b)), byte(id>>(8*b))
		}
		tid[15] = byte(kind)
		sid[7] |= 0x80 * byte(kind&1)
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		sp.SetKind(kind)
		sp.SetName("orders process")
		sp.Attributes().PutStr("messaging.system", "kafka")
		sp.Attributes().PutStr("messaging.destination.name", "orders")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Millisecond)))
	}
	at := base.Add(time.Second)
	n := 0
	for at.Before(base.Add(58 * time.Second)) {
		n++
		add("orders", ptrace.SpanKindProducer, at, uint64(n))
		add("billing", ptrace.SpanKindConsumer, at.Add(200*time.Millisecond+time.Duration(rng.NormFloat64()*5e6)), uint64(n))
		at = at.Add(time.Duration(rng.ExpFloat64() * 50e6)) // 20 messages/s
	}
	require.NoError(t, te.ConsumeTraces(context.Background(), td))
	te.completeAll()
	require.NoError(t, te.flush(context.Background(), true))
	te.query.ResetCache()

	var g api.Graph
	require.Equal(t, 200, te.get(api.PathGraph+"?from="+itoa(base.Unix())+"&to="+itoa(base.Unix()+60), &g))
	var found *api.GraphEdge
	for i := range g.Edges {
		t.Logf("edge %s %s requests %d latency %+v", g.Edges[i].ID, g.Edges[i].Kind, g.Edges[i].Requests, g.Edges[i].LatencyMs)
		if g.Edges[i].Source == "msg:kafka/orders" && g.Edges[i].Target == "billing" {
			found = &g.Edges[i]
		}
	}
	require.NotNil(t, found, "the async edge the convolution found")
	require.Equal(t, "async", found.Kind)
	require.InDelta(t, 200, found.LatencyMs.Mean, 10, "delay within μ = 10 ms")
	require.Greater(t, found.Requests, int64(n/2))
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
