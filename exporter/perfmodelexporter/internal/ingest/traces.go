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
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := stitch.ResourceOf(rs.Resource().Attributes())
		machine := e.machineOf(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				if sp.TraceID().IsEmpty() || sp.SpanID().IsEmpty() {
					continue
				}
				n++
				kind := stitch.KindOf(sp.Kind())
				ms := model.Span{
					SpanID:      stitch.SpanID(sp.SpanID()),
					ParentID:    stitch.SpanID(sp.ParentSpanID()),
					Service:     res.Service,
					Kind:        kind,
					Start:       int64(sp.StartTimestamp()),
					End:         int64(sp.EndTimestamp()),
					Error:       sp.Status().Code() == ptrace.StatusCodeError,
					Version:     res.Version,
					Machine:     machine,
					Process:     res.Process,
					Transaction: stitch.Transaction(sp, kind),
				}
				attrs := sp.Attributes()
				switch kind {
				case span.KindProducer:
					ms.Peer, ms.Database = stitch.PeerNode(attrs)
					e.addOneWay(ms.Start, ms.Service, ms.Peer)
				case span.KindConsumer:
					if sp.ParentSpanID().IsEmpty() {
						if dest, _ := stitch.PeerNode(attrs); dest != "" {
							e.addOneWay(ms.Start, dest, ms.Service)
						}
					}
				case span.KindClient:
					ms.Peer, ms.PeerAddress, ms.Database = stitch.PeerOf(attrs)
				}
				if ms.End < ms.Start {
					ms.End = ms.Start
				}
				e.asm.Add(model.TraceID(sp.TraceID()), ms, now, e.emit)
			}
		}
	}
	e.countAssembler()
	e.mu.Unlock()
	e.tel.ExporterPerfmodelSpansReceived.Add(ctx, int64(n))
	return nil
}
