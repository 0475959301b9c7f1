package ingest

import (
	"context"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/stitch"
)

// The pdata → span conversion of the traces pipeline, through internal/stitch's
// adapter (the one the causalpath processor and the CLI read spans with).

// ConsumeTraces adds spans to the traces being assembled.
func (e *Engine) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	now := e.now().UnixNano()
	n := 0
	e.mu.Lock()
	names := e.names
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := stitch.ResourceOf(rs.Resource().Attributes())
		// The resource's names, interned once for all its spans.
		proto := span.Span{
			Service: names.ID(res.Service), Instance: names.ID(res.Instance), Host: names.Optional(res.Host),
			Version: names.Optional(res.Version), Machine: names.Optional(e.machineOf(rs.Resource().Attributes())),
			Process: names.Optional(res.Process),
			// The span name, operations, threads and callers are stitching's.
			Name: -1, Op: -1, OpClass: -1, Thread: -1, Identity: -1, Caller: -1, CallerAddress: -1, Parent: -1,
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				if sp.TraceID().IsEmpty() || sp.SpanID().IsEmpty() {
					continue
				}
				n++
				s := proto
				s.Kind = stitch.RoleOf(sp)
				s.ID, s.ParentID = stitch.SpanID(sp.SpanID()), stitch.SpanID(sp.ParentSpanID())
				s.Start, s.End = int64(sp.StartTimestamp()), int64(sp.EndTimestamp())
				s.Error = sp.Status().Code() == ptrace.StatusCodeError
				s.Transaction = names.Optional(stitch.Transaction(sp, s.Kind))
				s.Peer, s.Endpoint = -1, -1
				attrs := sp.Attributes()
				switch s.Kind {
				case span.KindProducer:
					var peer string
					peer, s.Database = stitch.PeerNode(attrs)
					s.Peer = names.Optional(peer)
					e.addOneWay(s.Start, res.Service, peer)
				case span.KindConsumer:
					if sp.ParentSpanID().IsEmpty() {
						if dest, _ := stitch.PeerNode(attrs); dest != "" {
							e.addOneWay(s.Start, dest, res.Service)
						}
					}
				case span.KindClient:
					peer, address, database := stitch.PeerOf(attrs)
					s.Peer, s.Endpoint, s.Database = names.Optional(peer), names.Optional(address), database
				}
				if s.End < s.Start {
					s.End = s.Start
				}
				e.asm.Add(model.TraceID(sp.TraceID()), s, now, e.emit)
			}
		}
	}
	e.compactNames()
	e.countAssembler()
	e.mu.Unlock()
	e.tel.ExporterPerfmodelSpansReceived.Add(ctx, int64(n))
	return nil
}

// compactNames bounds the names table: past MaxNames, the names of the spans
// still being assembled move to a fresh table and the rest are dropped. The
// next compaction waits until the table has doubled from what the open traces
// hold, so that many open traces do not compact on every batch (e.mu held).
func (e *Engine) compactNames() {
	if e.names.Len() <= e.compactAt {
		return
	}
	// A new table: a cleared map would keep the storage of the old one.
	names := span.NewNames()
	e.asm.Reintern(e.names, names)
	e.names = names
	e.compactAt = max(e.set.MaxNames, 2*e.names.Len())
	e.tel.ExporterPerfmodelNameCompactions.Add(context.Background(), 1)
}
