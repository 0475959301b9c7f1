package stitch

import (
	"maps"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/span/spantest"
)

// windowSpans reads td as the perfmodel exporter's ConsumeTraces does, through
// the adapter, into the spans of one assembled trace.
func windowSpans(td ptrace.Traces, names *span.Names) []span.Span {
	var out []span.Span
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		res := ResourceOf(rss.At(i).Resource().Attributes())
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			for k := 0; k < sss.At(j).Spans().Len(); k++ {
				sp := sss.At(j).Spans().At(k)
				kind := RoleOf(sp)
				n := spantest.Named{ID: SpanID(sp.SpanID()), ParentID: SpanID(sp.ParentSpanID()), Service: res.Service, Kind: kind,
					Start: int64(sp.StartTimestamp()), End: int64(sp.EndTimestamp()), Transaction: Transaction(sp, kind)}
				if kind.RemoteCaller() {
					n.Peer, n.Endpoint, n.Database = PeerOf(sp.Attributes())
				}
				out = append(out, n.Span(names))
			}
		}
	}
	return out
}

// The path tag the processor writes on a trace's spans is the signature of the
// pattern the exporter stores for it: both come from span.Signer over the same
// reading of the spans, the role of a span without a call kind included (the
// calls to auth are INTERNAL on both sides, as a manual tracer leaves them).
func TestPathTagIsTheStoredPattern(t *testing.T) {
	b := newBuilder()
	root := b.span("web", "GET /", ptrace.SpanKindServer, 1, noParent, 0, 100)
	for k, callee := range []string{"auth", "app", "auth"} {
		at := float64(5 + 30*k)
		kind, serverKind := ptrace.SpanKindClient, ptrace.SpanKindServer
		if callee == "auth" {
			kind, serverKind = ptrace.SpanKindInternal, ptrace.SpanKindInternal
		}
		c := b.span("web", "call "+callee, kind, 1, root.SpanID(), at, at+20)
		s := b.span(callee, "serve", serverKind, 1, c.SpanID(), at+1, at+19)
		if callee == "auth" {
			c.Attributes().PutStr("http.request.method", "POST")
			c.Attributes().PutStr("url.full", "http://auth:8080/check")
			s.Attributes().PutStr("http.request.method", "POST")
			s.Attributes().PutStr("url.path", "/check")
		}
		if callee == "app" {
			db := b.span("app", "SELECT", ptrace.SpanKindClient, 1, s.SpanID(), at+2, at+5)
			db.Attributes().PutStr("db.system.name", "postgresql")
			db.Attributes().PutStr("db.namespace", "shop")
			cache := b.span("app", "GET", ptrace.SpanKindClient, 1, s.SpanID(), at+6, at+7)
			cache.Attributes().PutStr("service.peer.name", "redis")
			in := b.span("app", "render", ptrace.SpanKindInternal, 1, s.SpanID(), at+8, at+18)
			b.span("app", "GET", ptrace.SpanKindClient, 1, in.SpanID(), at+9, at+10).Attributes().PutStr("service.peer.name", "redis")
		}
	}
	names := span.NewNames()
	spans := windowSpans(b.td, names)

	rep := mustNew(t, ModeAnnotate).Stitch(b.td)
	tags := map[string]bool{}
	ForEachSpan(b.td, func(sp ptrace.Span) {
		v, ok := sp.Attributes().Get(AttrPathSignature)
		if !ok {
			t.Fatalf("span %q has no path tag", sp.Name())
		}
		tags[v.Str()] = true
	})
	w := model.NewWindow(0, model.DefaultLimits())
	w.AddTrace(spans, names)
	stored := slices.Sorted(maps.Keys(w.Patterns))
	tagged := slices.Sorted(maps.Keys(tags))
	if !slices.Equal(stored, tagged) || len(rep.Patterns) != 1 || rep.Patterns[0].Signature != stored[0] {
		t.Fatalf("exporter stores %q, the processor tags %q, the report has %d patterns", stored, tagged, len(rep.Patterns))
	}
	const want = "web(app(postgresql/shop,redis,redis),auth,auth)"
	if stored[0] != want {
		t.Fatalf("signature %q, want %q", stored[0], want)
	}
}
