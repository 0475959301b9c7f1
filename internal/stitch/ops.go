package stitch

import (
	"strings"

	"github.com/tierscope/tierscope/internal/span"
)

// identityOf names the one message or request a span is an end of, in a form
// both ends record (span.Span.Identity); "" when the span does not say.
//   - PRODUCER, CONSUMER: the destination with messaging.message.id, or with
//     the Kafka partition and offset (current and legacy names).
//   - HTTP CLIENT, SERVER: the request target, path and query, from url.full
//     or http.url on the client and url.path with url.query or http.target on
//     the server, when it carries an identifier (a path segment needsMask
//     would mask) or a query: a target shared by every call of a route says
//     nothing the operation key does not.
func identityOf(a *spanAttrs, kind span.Kind) string {
	switch kind {
	case span.KindProducer, span.KindConsumer:
		dest := a.get(aMessagingDestinationName, aMessagingDestination)
		if id := a.v[aMessageID]; id != "" {
			return "msg " + dest + "\x00id " + id
		}
		offset := a.get(aKafkaOffset, aKafkaMessageOffset)
		partition := a.get(aPartitionID, aKafkaDestinationPartition, aKafkaPartition)
		if offset != "" && partition != "" {
			return "msg " + dest + "\x00" + partition + "@" + offset
		}
		return ""
	case span.KindClient:
		if u := a.get(aURLFull, aHTTPURL); u != "" {
			return distinctTarget(urlPath(u))
		}
	case span.KindServer:
		if t := a.v[aHTTPTarget]; t != "" {
			return distinctTarget(t)
		}
	default:
		return ""
	}
	path := a.v[aURLPath]
	if path == "" {
		return ""
	}
	if q := a.v[aURLQuery]; q != "" {
		return path + "?" + q
	}
	return distinctTarget(path)
}

// distinctTarget is target without its fragment when it names an identifier
// or carries a query, else "".
func distinctTarget(target string) string {
	if i := strings.IndexByte(target, '#'); i >= 0 {
		target = target[:i]
	}
	if strings.IndexByte(target, '?') >= 0 || needsMask(target) {
		return target
	}
	return ""
}

// operation returns the operation a span calls (CLIENT, PRODUCER) or serves
// (SERVER, CONSUMER), in a form both sides of a call share, so that a caller is
// matched down to the method: op the method, class a coarser key; "" when
// unknown. Both current and legacy semantic conventions are read.
//
//   - RPC: "rpc <Service>/<method>" and "rpc <Service>", from rpc.service and
//     rpc.method or from a span name or path of the form /pkg.Service/Method.
//     The service is its last dotted component and names are lower-cased, so
//     "grpc.pkg.Service", "pkg.Service" and "/pkg.Service/Method" agree.
//   - HTTP: "http <path>" with identifiers masked, and "http <METHOD>". A
//     server's path comes from url.path or http.target, never from its route
//     template, whose parameters need not look like identifiers.
//   - Messaging: "msg <destination>".
func operation(a *spanAttrs, name string, kind span.Kind, j *joiner) (op, class string) {
	if kind == span.KindProducer || kind == span.KindConsumer {
		if d := a.get(aMessagingDestinationName, aMessagingDestination); d != "" {
			return j.concat("msg ", d, ""), ""
		}
		return "", ""
	}
	if m := a.get(aRPCMethod); strings.Contains(m, "/") {
		// Newer conventions put the full method here.
		if svc, m, ok := splitRPC(m); ok {
			return rpcKeys(svc, m, j)
		}
	}
	if svc := a.get(aRPCService); svc != "" {
		m := a.get(aRPCMethod)
		if m == "" {
			// The name of an RPC span is its full method.
			_, m, _ = splitRPC(name)
		}
		return rpcKeys(svc, m, j)
	}
	if a.get(aRPCSystem) != "" {
		if svc, m, ok := splitRPC(name); ok {
			return rpcKeys(svc, m, j)
		}
	}
	var path string
	switch kind {
	case span.KindClient:
		if u := a.get(aURLFull, aHTTPURL); u != "" {
			path = urlPath(u)
		}
		if path == "" {
			path = a.get(aURLPath)
		}
	case span.KindServer:
		path = a.get(aURLPath, aHTTPTarget)
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	var ok bool
	if svc, m, ok := splitRPC(path); ok {
		return rpcKeys(svc, m, j)
	}
	if path != "" {
		op = j.httpOp(path)
	}
	if m := a.get(aHTTPRequestMethod, aHTTPMethod); m != "" {
		if class, ok = j.lookup([3]string{"http method", m}); !ok {
			class = j.store([3]string{"http method", m}, "http "+strings.ToUpper(m))
		}
	}
	return op, class
}

// splitRPC splits "/pkg.Service/Method" or "pkg.Service/Method".
func splitRPC(name string) (service, method string, ok bool) {
	name = strings.TrimPrefix(name, "/")
	i := strings.IndexByte(name, '/')
	if i <= 0 || i == len(name)-1 || strings.IndexByte(name[i+1:], '/') >= 0 || !strings.Contains(name[:i], ".") {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}

// needsMask reports whether some segment of path looks like an identifier.
func needsMask(path string) bool {
	seg := 0
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '/':
			seg = 0
			continue
		case c >= '0' && c <= '9':
			return true
		}
		if seg++; seg > 24 {
			return true
		}
	}
	return false
}

func rpcKeys(service, method string, j *joiner) (op, class string) {
	k := [3]string{"rpc", service, method}
	if op, ok := j.lookup(k); ok {
		class, _ = j.lookup([3]string{"rpc class", service})
		return op, class
	}
	short := service
	if i := strings.LastIndexByte(short, '.'); i >= 0 {
		short = short[i+1:]
	}
	class = j.store([3]string{"rpc class", service}, "rpc "+strings.ToLower(short))
	if method != "" {
		op = class + "/" + strings.ToLower(method)
	}
	return j.store(k, op), class
}

// urlPath is the path of an absolute URL ("" when it has none), without
// parsing the rest: it runs for every CLIENT span.
func urlPath(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	i := strings.IndexByte(u, '/')
	if i < 0 {
		return ""
	}
	return u[i:]
}

// maskPath replaces the segments of a path that look like identifiers (any
// digit, or longer than 24 characters) with "*", so that calls of one route
// share a key on both sides.
func maskPath(path string) string {
	if !needsMask(path) {
		return path
	}
	var b strings.Builder
	b.Grow(len(path))
	for i, seg := range strings.Split(path, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if len(seg) > 24 || strings.ContainsAny(seg, "0123456789") {
			b.WriteByte('*')
			continue
		}
		b.WriteString(seg)
	}
	return b.String()
}

// appendMasked appends path to b masked as maskPath masks it, in one pass.
func appendMasked(b []byte, path string) []byte {
	for {
		seg, rest, more := strings.Cut(path, "/")
		if len(seg) > 24 || strings.ContainsAny(seg, "0123456789") {
			b = append(b, '*')
		} else {
			b = append(b, seg...)
		}
		if !more {
			return b
		}
		b = append(b, '/')
		path = rest
	}
}

// httpOp is "http " + maskPath(path). Paths that carry ids differ from span to
// span while their masked forms repeat, so the key is masked into a reused
// buffer and looked up without building a string.
func (j *joiner) httpOp(path string) string {
	if j == nil {
		return "http " + maskPath(path)
	}
	if !needsMask(path) {
		return j.concat("http ", path, "")
	}
	j.buf = appendMasked(append(j.buf[:0], "http "...), path)
	if op, ok := j.masked[string(j.buf)]; ok {
		return op
	}
	if j.masked == nil || len(j.masked) >= maxJoined {
		j.masked = make(map[string]string)
	}
	op := string(j.buf)
	j.masked[op] = op
	return op
}

// ownAddress is the address a SERVER span answered on (server.address and
// server.port on the server side, net.host.name and net.host.port in the legacy
// conventions), in the form a CLIENT span's peer address takes.
func ownAddress(a *spanAttrs, j *joiner) string {
	return hostPort(a.get(aServerAddress, aNetHostName), a.get(aServerPort, aNetHostPort), j)
}

// callerAddress is where a SERVER span's request came from: the socket's peer
// (network.peer.*, legacy net.sock.peer.*), else client.* (which a proxy may
// have rewritten to the original client), else the legacy net.peer.ip and
// net.peer.port. It returns the address and the address with its port (the
// connection), "" when unknown.
func callerAddress(a *spanAttrs, j *joiner) (address, connection string) {
	switch {
	case a.v[aNetworkPeerAddress] != "":
		address = a.v[aNetworkPeerAddress]
		connection = hostPort(address, a.v[aNetworkPeerPort], j)
	case a.v[aNetSockPeerAddr] != "":
		address = a.v[aNetSockPeerAddr]
		connection = hostPort(address, a.v[aNetSockPeerPort], j)
	case a.v[aClientAddress] != "":
		address = a.v[aClientAddress]
		connection = hostPort(address, a.v[aClientPort], j)
	case a.v[aNetPeerIP] != "":
		address = a.v[aNetPeerIP]
		connection = hostPort(address, a.v[aNetPeerPort], j)
	}
	if connection == address {
		connection = "" // no port: the address says all it can
	}
	return address, connection
}
