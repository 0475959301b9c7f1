package ingest

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/stitch"
)

// The pdata → span conversion of the traces pipeline.

// ConsumeTraces adds spans to the traces being assembled.
func (e *Engine) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	now := e.now().UnixNano()
	n := 0
	e.mu.Lock()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := rs.Resource().Attributes()
		service := attrString(res, "service.name")
		version := attrString(res, "service.version")
		machine := e.machineOf(res)
		process := attrString(res, "process.executable.name")
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				if sp.TraceID().IsEmpty() || sp.SpanID().IsEmpty() {
					continue
				}
				n++
				ms := model.Span{
					SpanID:   spanID(sp.SpanID()),
					ParentID: spanID(sp.ParentSpanID()),
					Service:  service,
					Kind:     kindOf(sp.Kind()),
					Start:    int64(sp.StartTimestamp()),
					End:      int64(sp.EndTimestamp()),
					Error:    sp.Status().Code() == ptrace.StatusCodeError,
					Version:  version,
					Machine:  machine,
					Process:  process,
				}
				attrs := sp.Attributes()
				switch ms.Kind {
				case model.KindProducer:
					ms.Peer, ms.Database = stitch.PeerNode(attrs)
					e.addOneWay(ms.Start, service, ms.Peer)
				case model.KindConsumer:
					if sp.ParentSpanID().IsEmpty() {
						if dest, _ := stitch.PeerNode(attrs); dest != "" {
							e.addOneWay(ms.Start, dest, service)
						}
					}
					ms.Transaction = sp.Name()
				case model.KindClient:
					ms.Peer, ms.PeerAddress, ms.Database = stitch.PeerOf(attrs)
				case model.KindServer:
					ms.Transaction = attrString(attrs, "http.route")
					if ms.Transaction == "" {
						ms.Transaction = sp.Name()
					}
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

func spanID(id pcommon.SpanID) uint64 {
	var v uint64
	for _, b := range id {
		v = v<<8 | uint64(b)
	}
	return v
}

func kindOf(k ptrace.SpanKind) model.Kind {
	switch k {
	case ptrace.SpanKindServer:
		return model.KindServer
	case ptrace.SpanKindClient:
		return model.KindClient
	case ptrace.SpanKindProducer:
		return model.KindProducer
	case ptrace.SpanKindConsumer:
		return model.KindConsumer
	}
	return model.KindInternal
}
