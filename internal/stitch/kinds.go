package stitch

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/span"
)

// roleOf is the role a span plays in a call when its kind does not say
// (INTERNAL, the default of a manual tracer, or UNSPECIFIED, as spans without
// a span.kind tag convert), read from attributes that only one side of a
// call records:
//   - a messaging operation on a destination: publish, send or create is the
//     producer's, process or deliver the consumer's (receive, a poll whose
//     parent is local in current conventions, says neither);
//   - a request method with the full URL is an HTTP caller's, with only a
//     path or target the server's;
//   - legacy RPC spans name the peer on the client and the host on the server.
//
// Anything less certain keeps the span's own kind: an INTERNAL span is a
// local one, a handler span of a web framework carries http.route without a
// method, and a span that names a database system may be a wrapper whose
// children are the driver's calls (a database tier's own execution spans).
func roleOf(kind span.Kind, a *spanAttrs) span.Kind {
	if kind != span.KindInternal && kind != span.KindUnspecified {
		return kind
	}
	if a.get(aMessagingDestinationName, aMessagingDestination) != "" {
		switch a.get(aMessagingOperationType, aMessagingOperation) {
		case "publish", "send", "create":
			return span.KindProducer
		case "process", "deliver":
			return span.KindConsumer
		}
	}
	if a.get(aHTTPRequestMethod, aHTTPMethod) != "" {
		switch {
		case a.get(aURLFull, aHTTPURL) != "":
			return span.KindClient
		case a.get(aURLPath, aHTTPTarget) != "":
			return span.KindServer
		}
		return kind
	}
	if a.v[aRPCSystem] != "" && a.v[aServerAddress] == "" {
		switch host, peer := a.v[aNetHostName] != "", a.v[aNetPeerName] != ""; {
		case host && !peer:
			return span.KindServer
		case peer && !host:
			return span.KindClient
		}
	}
	return kind
}

// sideOf is how stitching reads a span that roleOf left without a call kind:
// UNSPECIFIED when it still records a call (an RPC system, an HTTP request
// method) whose side its attributes do not tell, as current-convention RPC
// spans, which name server.address on both sides; INTERNAL, a local span,
// otherwise. An UNSPECIFIED span may be a server, whose parent is in
// another process and no local span (causal.StitchResult's confidence).
func sideOf(kind span.Kind, a *spanAttrs) span.Kind {
	if kind != span.KindInternal && kind != span.KindUnspecified {
		return kind
	}
	if a.v[aRPCSystem] != "" || a.get(aHTTPRequestMethod, aHTTPMethod) != "" {
		return span.KindUnspecified
	}
	return span.KindInternal
}

// RoleOf is the kind a span plays in its call, as stitching sees it: its own
// kind, or for a span without a call kind the side its attributes show
// (roleOf). The exporter reads spans with it too, so that the path the
// processor tags and the pattern the exporter stores name the same nodes.
func RoleOf(sp ptrace.Span) span.Kind {
	kind := KindOf(sp.Kind())
	if kind != span.KindInternal && kind != span.KindUnspecified {
		return kind
	}
	attrs := sp.Attributes()
	// Most INTERNAL spans record no call: one pass over their attributes
	// says so, and nothing more is read.
	records := false
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case "http.request.method", "http.method", "rpc.system", "messaging.operation.type", "messaging.operation":
			records = v.AsString() != ""
		}
		return !records
	})
	if !records {
		return kind
	}
	var a spanAttrs
	readAttrs(attrs, &a, nil)
	return roleOf(kind, &a)
}
