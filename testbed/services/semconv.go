package services

import (
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
)

// conv names the attributes of CLIENT and SERVER spans in one generation of the
// semantic conventions: current (1.21 and later: server.address, url.full,
// http.request.method, ...) or legacy (net.peer.name, http.url, http.method, ...),
// because instrumentations of both generations report side by side in real
// deployments (config semconv).
type conv struct{ legacy bool }

func (c conv) pick(current, legacy string) string {
	if c.legacy {
		return legacy
	}
	return current
}

// serverAddr is the address a client calls.
func (c conv) serverAddr(host string, port int) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(c.pick("server.address", "net.peer.name"), host),
		attribute.Int(c.pick("server.port", "net.peer.port"), port),
	}
}

// localAddr is the address a server was called on.
func (c conv) localAddr(host string, port int) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(c.pick("server.address", "net.host.name"), host),
		attribute.Int(c.pick("server.port", "net.host.port"), port),
	}
}

// peer is the socket's other end.
func (c conv) peer(addr net.Addr) []attribute.KeyValue {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	return []attribute.KeyValue{
		attribute.String(c.pick("network.peer.address", "net.sock.peer.addr"), tcp.IP.String()),
		attribute.Int(c.pick("network.peer.port", "net.sock.peer.port"), tcp.Port),
	}
}

// clientHTTP is what an HTTP CLIENT (or PRODUCER over HTTP) span starts with.
func (c conv) clientHTTP(method, url, host string, port int) []attribute.KeyValue {
	return append(c.serverAddr(host, port),
		attribute.String(c.pick("url.full", "http.url"), url),
		attribute.String(c.pick("http.request.method", "http.method"), method))
}

// serverHTTP is what an HTTP SERVER span starts with.
func (c conv) serverHTTP(method, route, path string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(c.pick("http.request.method", "http.method"), method),
		attribute.String("http.route", route),
		attribute.String(c.pick("url.path", "http.target"), path),
		attribute.String(c.pick("url.scheme", "http.scheme"), "http"),
	}
}

func (c conv) status(code int) attribute.KeyValue {
	return attribute.Int(c.pick("http.response.status_code", "http.status_code"), code)
}

// db is a database client's span: system (postgresql, redis), the statement
// and its summary.
func (c conv) db(system, namespace, op, table, text string) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		attribute.String(c.pick("db.system.name", "db.system"), system),
		attribute.String(c.pick("db.operation.name", "db.operation"), op),
		attribute.String(c.pick("db.query.text", "db.statement"), text),
	}
	if namespace != "" {
		kv = append(kv, attribute.String(c.pick("db.namespace", "db.name"), namespace))
	}
	if table != "" {
		kv = append(kv, attribute.String(c.pick("db.collection.name", "db.sql.table"), table))
	}
	return kv
}

// splitHostPort splits "host:port"; ok is false for anything else.
func splitHostPort(addr string) (host string, port int, ok bool) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	n, err := strconv.Atoi(p)
	return h, n, err == nil
}
