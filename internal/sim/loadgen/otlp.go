package loadgen

import (
	"encoding/binary"
	"math/rand"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// IDs hands out trace and span IDs from a seeded generator (never all-zero).
type IDs struct{ rng *rand.Rand }

// NewIDs returns an ID source; equal seeds give equal sequences.
func NewIDs(seed int64) *IDs { return &IDs{rng: rand.New(rand.NewSource(seed))} }

// TraceID returns a fresh, non-zero trace ID.
func (g *IDs) TraceID() pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[:8], g.rng.Uint64()|1<<63)
	binary.BigEndian.PutUint64(id[8:], g.rng.Uint64())
	return id
}

// SpanID returns a fresh, non-zero span ID.
func (g *IDs) SpanID() pcommon.SpanID {
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], g.rng.Uint64()|1<<63)
	return id
}

// SpanIDs are the identifiers one planned span received.
type SpanIDs struct {
	TraceID      pcommon.TraceID
	SpanID       pcommon.SpanID
	ParentSpanID pcommon.SpanID // empty for a root, including a span whose context was dropped
}

// Resource attributes shared by every instance of a service.
var serviceVersion = map[string]string{"web": "2.7.1", "app": "1.14.0"}

// AppendOTLP adds the spans of traces to td, one ResourceSpans per service
// instance, as the SDKs of those instances would have exported them. A span
// whose context was dropped starts a new trace. It returns the IDs it assigned,
// indexed like traces[i].Spans.
func AppendOTLP(td ptrace.Traces, traces []Trace, ids *IDs) [][]SpanIDs {
	scopes := map[string]ptrace.SpanSlice{}
	out := make([][]SpanIDs, len(traces))
	for i, tr := range traces {
		assigned := make([]SpanIDs, len(tr.Spans))
		rootTrace := ids.TraceID()
		for j, s := range tr.Spans {
			a := SpanIDs{SpanID: ids.SpanID()}
			switch {
			case s.Parent < 0:
				a.TraceID = rootTrace
			case s.ContextDropped:
				a.TraceID = ids.TraceID()
			default:
				a.TraceID = assigned[s.Parent].TraceID
				a.ParentSpanID = assigned[s.Parent].SpanID
			}
			assigned[j] = a

			spans, ok := scopes[s.Instance]
			if !ok {
				rs := td.ResourceSpans().AppendEmpty()
				attrs := rs.Resource().Attributes()
				attrs.PutStr("service.name", s.Service)
				attrs.PutStr("service.instance.id", s.Instance)
				if v, ok := serviceVersion[s.Service]; ok {
					attrs.PutStr("service.version", v)
				}
				attrs.PutStr("host.name", s.Instance)
				attrs.PutStr("telemetry.sdk.language", "go")
				attrs.PutStr("telemetry.sdk.name", "opentelemetry")
				ss := rs.ScopeSpans().AppendEmpty()
				ss.Scope().SetName("github.com/tierscope/tierscope/internal/sim/loadgen")
				spans = ss.Spans()
				scopes[s.Instance] = spans
			}
			sp := spans.AppendEmpty()
			sp.SetTraceID(a.TraceID)
			sp.SetSpanID(a.SpanID)
			sp.SetParentSpanID(a.ParentSpanID)
			sp.SetName(s.Name)
			if s.Kind == KindServer {
				sp.SetKind(ptrace.SpanKindServer)
			} else {
				sp.SetKind(ptrace.SpanKindClient)
			}
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(s.Start))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(s.End))
			attrs := sp.Attributes()
			attrs.EnsureCapacity(len(s.Attrs))
			for _, at := range s.Attrs {
				if at.IsInt {
					attrs.PutInt(at.Key, at.Int)
				} else {
					attrs.PutStr(at.Key, at.Str)
				}
			}
		}
		out[i] = assigned
	}
	return out
}
