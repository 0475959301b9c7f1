package stitch

import "github.com/tierscope/tierscope/internal/span"

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
