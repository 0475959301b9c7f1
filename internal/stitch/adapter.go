package stitch

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/span"
)

// The adapter from OTLP to the span model (internal/span): what a resource and
// a span's kind, ids and attributes mean, for the stitcher (the causalpath
// processor and `tierscope stitch`) and the perfmodel exporter alike. Peers
// and operations are read in resolve.go and ops.go.

// Resource is what a resource's attributes say of the spans under it.
type Resource struct {
	// Service is service.name, "unknown_service" when absent.
	Service string
	// Instance names the process (see ResourceOf); Host is host.name, else
	// host.id, "" when unknown.
	Instance, Host string
	// Version is service.version; Process is process.executable.name.
	Version, Process string
}

// ResourceOf reads a resource's attributes. A process is known by the
// attributes that name it whatever its service.name: the pid on its host or
// container, else its container; then its service instance, pod or host, each
// with the service; the service alone only when nothing else is given.
func ResourceOf(attrs pcommon.Map) Resource {
	str := func(k string) string {
		if v, ok := attrs.Get(k); ok {
			if s := v.AsString(); len(s) <= maxAttrLen {
				return s
			}
		}
		return ""
	}
	info := Resource{Service: str("service.name"), Version: str("service.version"), Process: str("process.executable.name")}
	if info.Service == "" {
		info.Service = "unknown_service"
	}
	info.Host = str("host.name")
	if info.Host == "" {
		info.Host = str("host.id")
	}
	container, pid := str("container.id"), str("process.pid")
	pod := str("k8s.pod.uid")
	if pod == "" {
		pod = str("k8s.pod.name")
	}
	switch instance := str("service.instance.id"); {
	case pid != "" && (info.Host != "" || container != "" || pod != ""):
		info.Instance = "pid:" + info.Host + "/" + container + "/" + pod + "/" + pid
	case container != "":
		info.Instance = "container:" + container
	case instance != "":
		info.Instance = "instance:" + info.Service + "/" + instance
	case pod != "":
		info.Instance = "pod:" + pod + "/" + info.Service
	case info.Host != "":
		info.Instance = "host:" + info.Host + "/" + info.Service
	default:
		info.Instance = "service:" + info.Service
	}
	return info
}

// KindOf maps an OTLP span kind to the span model's.
func KindOf(k ptrace.SpanKind) span.Kind {
	switch k {
	case ptrace.SpanKindInternal:
		return span.KindInternal
	case ptrace.SpanKindServer:
		return span.KindServer
	case ptrace.SpanKindClient:
		return span.KindClient
	case ptrace.SpanKindProducer:
		return span.KindProducer
	case ptrace.SpanKindConsumer:
		return span.KindConsumer
	}
	return span.KindUnspecified
}

// SpanID is a span id as an integer, 0 for the empty id.
func SpanID(id pcommon.SpanID) uint64 {
	var v uint64
	for _, b := range id {
		v = v<<8 | uint64(b)
	}
	return v
}

// Transaction names what a SERVER span serves (http.route, else its name) or
// what a CONSUMER span consumes (its name); "" for other kinds.
func Transaction(sp ptrace.Span, kind span.Kind) string {
	switch kind {
	case span.KindServer:
		if v, ok := sp.Attributes().Get("http.route"); ok {
			if route := v.AsString(); route != "" {
				return route
			}
		}
		return sp.Name()
	case span.KindConsumer:
		return sp.Name()
	}
	return ""
}
