package perfmodelexporter

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/api"
)

// A call whose SERVER span is missing (context lost, or an uninstrumented
// hop) is named by the service learned to answer at its address, not by the
// address.
func TestUnansweredCallsNamedByLearnedAddress(t *testing.T) {
	base := time.Unix(alignDown(loadStart.Unix(), 60), 0)
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", base.Add(10*time.Minute), nil)
	td := ptrace.NewTraces()
	at := base.Add(time.Second)
	// Trace 1: web calls app at 10.0.0.7:8081 and app answers.
	appendTestSpan(td, "web", "", ptrace.SpanKindServer, 1, 1, 0, at, "")
	appendTestSpan(td, "web", "", ptrace.SpanKindClient, 1, 2, 1, at, "10.0.0.7:8081")
	appendTestSpan(td, "app", "", ptrace.SpanKindServer, 1, 3, 2, at, "")
	// Trace 2: the same call, but app's span lost its context.
	appendTestSpan(td, "web", "", ptrace.SpanKindServer, 2, 1, 0, at.Add(time.Second), "")
	appendTestSpan(td, "web", "", ptrace.SpanKindClient, 2, 2, 1, at.Add(time.Second), "10.0.0.7:8081")
	require.NoError(t, te.ConsumeTraces(context.Background(), td))
	te.completeAll()
	// The window is settled by the engine's clock: the flush must reset
	// the cache the warm-up may have filled from the empty store.
	gen := te.query.CacheGeneration()
	require.NoError(t, te.flush(context.Background(), false))
	require.Greater(t, te.query.CacheGeneration(), gen)

	var g api.Graph
	require.Equal(t, 200, te.get(api.PathGraph+"?from="+itoa(base.Unix())+"&to="+itoa(base.Unix()+60), &g))
	edges := map[string]int64{}
	for _, e := range g.Edges {
		edges[e.ID] = e.Requests
	}
	require.Equal(t, map[string]int64{"web->app": 2}, edges)
}

// appendTestSpan appends one span of 5 ms, in a resource of its own, to td;
// peer, when not empty, is the host:port a CLIENT span called.
func appendTestSpan(td ptrace.Traces, service, name string, kind ptrace.SpanKind, trace, id, parent byte, at time.Time, peer string) {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName(name)
	sp.SetTraceID(pcommon.TraceID{trace})
	sp.SetSpanID(pcommon.SpanID{trace, id})
	if parent != 0 {
		sp.SetParentSpanID(pcommon.SpanID{trace, parent})
	}
	sp.SetKind(kind)
	if host, port, ok := strings.Cut(peer, ":"); ok {
		sp.Attributes().PutStr("server.address", host)
		sp.Attributes().PutStr("server.port", port)
	}
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(5 * time.Millisecond)))
}
