package stitch

import (
	"testing"

	"github.com/tierscope/tierscope/internal/span"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// A message, or a request's target, is named the same by both ends in every
// form the conventions give it, and by nothing else.
func TestIdentityOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  span.Kind
		attrs map[string]any
		want  string
	}{
		{"message id", span.KindConsumer, map[string]any{"messaging.destination.name": "orders", "messaging.message.id": "m-7"}, "msg orders\x00id m-7"},
		{"kafka, current names", span.KindProducer, map[string]any{"messaging.destination.name": "orders", "messaging.destination.partition.id": "3", "messaging.kafka.offset": int64(42)}, "msg orders\x003@42"},
		{"kafka, legacy names", span.KindConsumer, map[string]any{"messaging.destination": "orders", "messaging.kafka.partition": int64(3), "messaging.kafka.message.offset": int64(42)}, "msg orders\x003@42"},
		{"kafka, 1.21 names", span.KindConsumer, map[string]any{"messaging.destination.name": "orders", "messaging.kafka.destination.partition": int64(3), "messaging.kafka.message.offset": int64(42)}, "msg orders\x003@42"},
		{"an offset alone", span.KindConsumer, map[string]any{"messaging.destination.name": "orders", "messaging.kafka.offset": int64(42)}, ""},
		{"not a messaging span", span.KindClient, map[string]any{"messaging.message.id": "m-7"}, ""},
		{"client, url.full", span.KindClient, map[string]any{"url.full": "http://cart:8080/api/carts/4711?items=2#top"}, "/api/carts/4711?items=2"},
		{"client, http.url", span.KindClient, map[string]any{"http.url": "https://cart/api/carts/4711"}, "/api/carts/4711"},
		{"server, url.path and url.query", span.KindServer, map[string]any{"url.path": "/api/carts/4711", "url.query": "items=2"}, "/api/carts/4711?items=2"},
		{"server, url.path", span.KindServer, map[string]any{"url.path": "/api/carts/4711"}, "/api/carts/4711"},
		{"server, http.target", span.KindServer, map[string]any{"http.target": "/api/carts/4711?items=2"}, "/api/carts/4711?items=2"},
		{"server, a query alone", span.KindServer, map[string]any{"url.path": "/search", "url.query": "q=shoes"}, "/search?q=shoes"},
		{"a route shared by every call", span.KindClient, map[string]any{"url.full": "http://cart:8080/api/carts"}, ""},
		{"server, no identifier", span.KindServer, map[string]any{"http.target": "/api/carts"}, ""},
		{"internal span", span.KindInternal, map[string]any{"url.path": "/api/carts/4711"}, ""},
	} {
		m := pcommon.NewMap()
		if err := m.FromRaw(tc.attrs); err != nil {
			t.Fatal(err)
		}
		var a spanAttrs
		readAttrs(m, &a, nil)
		if got := identityOf(&a, tc.kind); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
