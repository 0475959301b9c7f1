package stitcheval

import (
	"crypto/sha256"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Attribute names of the contract (see the package comment).
const (
	AttrTruthParent        = "tierscope.truth.parent_span_id"
	AttrTruthTrace         = "tierscope.truth.trace_id"
	AttrTruthProcess       = "tierscope.truth.process"
	AttrInferredParent     = "tierscope.inferred.parent_span_id"
	AttrInferredConfidence = "tierscope.inferred.confidence"
	// AttrTruthAsync marks a generated span that may outlive its true parent
	// (fire-and-forget work, a consumer), so that enclosure is not expected.
	AttrTruthAsync = "tierscope.truth.async"
)

// spanRec is a span with what the evaluation needs of its resource.
type spanRec struct {
	span     ptrace.Span
	process  string // processKey of its resource
	resource int    // index of its ResourceSpans among all the batches'
	rs       ptrace.ResourceSpans
	scope    pcommon.InstrumentationScope
}

// collect returns every span of the batches in order, with its process.
func collect(batches ...ptrace.Traces) []spanRec {
	var out []spanRec
	resource := 0
	for _, td := range batches {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			proc := processKey(rs.Resource().Attributes())
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					out = append(out, spanRec{spans.At(k), proc, resource, rs, sss.At(j).Scope()})
				}
			}
			resource++
		}
	}
	return out
}

// processKey names the process a resource's spans ran in: the generator's truth
// when present, else the most specific identity the resource gives (for the
// TrainTicket captures, service.instance.id is the pod).
func processKey(attrs pcommon.Map) string {
	str := func(k string) string {
		if v, ok := attrs.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	if p := str(AttrTruthProcess); p != "" {
		return p
	}
	svc := str("service.name")
	if id := str("service.instance.id"); id != "" {
		return svc + "|" + id
	}
	for _, k := range []string{"k8s.pod.uid", "k8s.pod.name", "container.id"} {
		if v := str(k); v != "" {
			return svc + "|" + k + "=" + v
		}
	}
	if h := str("host.name"); h != "" {
		return svc + "|" + h + "|" + str("process.pid")
	}
	return svc
}

// traceKey is the request a span belongs to: its true trace once stripped.
func traceKey(sp ptrace.Span) string {
	if v, ok := sp.Attributes().Get(AttrTruthTrace); ok && v.Str() != "" {
		return v.Str()
	}
	return sp.TraceID().String()
}

// derivedTraceID is the fresh trace id of a span cut from its parent: a hash of
// its span id, so that a run is reproducible.
func derivedTraceID(span pcommon.SpanID) pcommon.TraceID {
	sum := sha256.Sum256(append([]byte("tierscope/stitcheval/strip\x00"), span[:]...))
	var t pcommon.TraceID
	copy(t[:], sum[:16])
	return t
}

func strAttr(m pcommon.Map, k string) (string, bool) {
	v, ok := m.Get(k)
	if !ok {
		return "", false
	}
	return v.AsString(), true
}

// floatAttr reads a double (or a number written as a string or an int).
func floatAttr(m pcommon.Map, k string) (float64, bool) {
	v, ok := m.Get(k)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		return v.Double(), true
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v.AsString()), 64)
	return f, err == nil
}

// kindName is the category label of a span kind.
func kindName(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindServer:
		return "server"
	case ptrace.SpanKindClient:
		return "client"
	case ptrace.SpanKindProducer:
		return "producer"
	case ptrace.SpanKindConsumer:
		return "consumer"
	case ptrace.SpanKindInternal:
		return "internal"
	}
	return "unspecified"
}
