package stitch

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tierscope/tierscope/internal/span"
)

func TestRoleOfUnkindedSpans(t *testing.T) {
	for name, c := range map[string]struct {
		kind  span.Kind
		attrs map[string]any
		want  span.Kind
	}{
		"current HTTP client":                      {span.KindInternal, map[string]any{"http.request.method": "GET", "url.full": "http://cart:8080/api/cart/1"}, span.KindClient},
		"legacy HTTP client":                       {span.KindUnspecified, map[string]any{"http.method": "GET", "http.url": "http://cart:8080/api/cart/1"}, span.KindClient},
		"current HTTP server":                      {span.KindInternal, map[string]any{"http.request.method": "GET", "url.path": "/api/cart/1", "http.route": "/api/cart/{id}"}, span.KindServer},
		"legacy HTTP server":                       {span.KindUnspecified, map[string]any{"http.method": "POST", "http.target": "/pay"}, span.KindServer},
		"legacy RPC server":                        {span.KindInternal, map[string]any{"rpc.system": "grpc", "net.host.name": "auth", "net.host.port": 50051}, span.KindServer},
		"legacy RPC client":                        {span.KindInternal, map[string]any{"rpc.system": "grpc", "net.peer.name": "auth", "net.peer.port": 50051}, span.KindClient},
		"framework handler (a route)":              {span.KindInternal, map[string]any{"http.route": "/api/cart/{id}", "express.type": "request_handler"}, span.KindInternal},
		"current RPC: either side":                 {span.KindInternal, map[string]any{"rpc.system": "grpc", "server.address": "auth", "server.port": 50051}, span.KindInternal},
		"a method alone":                           {span.KindInternal, map[string]any{"http.request.method": "GET"}, span.KindInternal},
		"a kind is kept":                           {span.KindServer, map[string]any{"http.request.method": "GET", "url.full": "http://x/"}, span.KindServer},
		"a database statement":                     {span.KindInternal, map[string]any{"db.system.name": "postgresql"}, span.KindInternal},
		"a legacy database statement, unspecified": {span.KindUnspecified, map[string]any{"db.system": "redis", "db.statement": "GET k"}, span.KindUnspecified},
		"current messaging send":                   {span.KindInternal, map[string]any{"messaging.destination.name": "orders", "messaging.operation.type": "send"}, span.KindProducer},
		"legacy messaging publish":                 {span.KindInternal, map[string]any{"messaging.destination": "orders", "messaging.operation": "publish"}, span.KindProducer},
		"messaging process":                        {span.KindUnspecified, map[string]any{"messaging.destination.name": "orders", "messaging.operation.type": "process"}, span.KindConsumer},
		"messaging receive (a poll)":               {span.KindInternal, map[string]any{"messaging.destination.name": "orders", "messaging.operation.type": "receive"}, span.KindInternal},
		"an operation, no destination":             {span.KindInternal, map[string]any{"messaging.operation": "process"}, span.KindInternal},
	} {
		m := pcommon.NewMap()
		if err := m.FromRaw(c.attrs); err != nil {
			t.Fatal(err)
		}
		var a spanAttrs
		readAttrs(m, &a, nil)
		if got := roleOf(c.kind, &a); got != c.want {
			t.Errorf("%s: role %v, want %v", name, got, c.want)
		}
	}
}

// Stitching reads a span left without a call kind as UNSPECIFIED when it
// records a call whose side is unknown, and as a local INTERNAL span when it
// records none.
func TestSideOf(t *testing.T) {
	for name, c := range map[string]struct {
		kind  span.Kind
		attrs map[string]any
		want  span.Kind
	}{
		"current RPC":             {span.KindInternal, map[string]any{"rpc.system": "grpc", "server.address": "auth"}, span.KindUnspecified},
		"an HTTP method alone":    {span.KindUnspecified, map[string]any{"http.request.method": "GET"}, span.KindUnspecified},
		"no call":                 {span.KindUnspecified, map[string]any{"code.function": "save"}, span.KindInternal},
		"a framework handler":     {span.KindInternal, map[string]any{"http.route": "/api/cart/{id}"}, span.KindInternal},
		"a kind is kept":          {span.KindServer, map[string]any{"rpc.system": "grpc"}, span.KindServer},
		"a resolved role is kept": {span.KindClient, map[string]any{"http.request.method": "GET", "url.full": "http://x/1"}, span.KindClient},
	} {
		m := pcommon.NewMap()
		if err := m.FromRaw(c.attrs); err != nil {
			t.Fatal(err)
		}
		var a spanAttrs
		readAttrs(m, &a, nil)
		if got := sideOf(c.kind, &a); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}
