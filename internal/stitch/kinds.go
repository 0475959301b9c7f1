package stitch

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/span"
)

// roleOf is the role a span plays in a call when its kind does not say
// (INTERNAL, the default of a manual tracer, or UNSPECIFIED, as spans without
// a span.kind tag convert), read from attributes that only one side of an
// HTTP call or a legacy RPC records: a request method with the full URL is
// the caller's, with only a path or target the server's; legacy RPC spans
// name the peer on the client and the host on the server. Anything less
// certain keeps the span's own kind: an INTERNAL span is a local one, and a
// handler span of a web framework carries http.route without a method.
func roleOf(kind span.Kind, a *spanAttrs) span.Kind {
	if kind != span.KindInternal && kind != span.KindUnspecified {
		return kind
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
	set := func(k string) bool { v, ok := attrs.Get(k); return ok && v.AsString() != "" }
	if !set("http.request.method") && !set("http.method") && !set("rpc.system") {
		return kind // most INTERNAL spans: two or three lookups, nothing read
	}
	var a spanAttrs
	readAttrs(attrs, &a, nil)
	return roleOf(kind, &a)
}
