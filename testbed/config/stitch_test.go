package config

import (
	"strings"
	"testing"
)

// The stitching configuration parses, uses every optional feature, and its
// ground truth shows the gRPC steps and the async publishes from app.
func TestStitchConfig(t *testing.T) {
	c := Stitch()
	if !c.UsesCache() || !c.UsesGRPC() || !c.PublishesFromApp() {
		t.Fatalf("stitch.yaml: cache %v, grpc %v, app publishes %v", c.UsesCache(), c.UsesGRPC(), c.PublishesFromApp())
	}
	if !c.Legacy(App) || c.Legacy(Web) {
		t.Errorf("semconv: app legacy %v, web legacy %v", c.Legacy(App), c.Legacy(Web))
	}
	if c.Clients[ClientCache].Resource != ShareProcess || c.Clients[ClientDB].Resource != ShareHost {
		t.Errorf("clients: %+v", c.Clients)
	}
	parallel3 := false
	for _, txn := range c.Transactions {
		for _, s := range txn.Steps {
			parallel3 = parallel3 || (s.Pattern == PatternParallel && s.Count >= 3)
		}
	}
	if !parallel3 {
		t.Error("no parallel step with count ≥ 3")
	}
	edges := map[string]Edge{}
	for _, txn := range c.Truth().Transactions {
		for _, e := range txn.Edges {
			edges[txn.Name+":"+e.From+"->"+e.To+":"+e.Name] = e
		}
	}
	if e := edges["Browse:web->app:item"]; e.Transport != TransportGRPC || e.Count != 4 || e.Pattern != PatternParallel {
		t.Errorf("Browse web->app: %+v", e)
	}
	if e := edges["Search:web->app:search"]; e.Transport != "" {
		t.Errorf("Search web->app over http: %+v", e)
	}
	if e := edges["PutBid:app->worker:audit"]; !e.Async || e.Count != 1 {
		t.Errorf("PutBid app->worker: %+v", e)
	}
	if e := edges["Browse:app->worker:viewed"]; !e.Async || e.Count != 4 {
		t.Errorf("Browse app->worker: %+v", e)
	}
	// The default configuration uses none of it.
	d := Default()
	if d.UsesCache() || d.UsesGRPC() || d.PublishesFromApp() || len(d.Clients) > 0 || len(d.Semconv) > 0 {
		t.Error("the default configuration uses a stitching feature")
	}
}

func TestBadStitchConfigs(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"transport", strings.Replace(minimal, "op: o}", "op: o, transport: quic}", 1), []string{"transactions[0].steps[0].transport", "quic"}},
		{"grpc new connection", strings.Replace(minimal, "op: o}", "op: o, transport: grpc, connection: new}", 1), []string{"steps[0].connection", "always pooled"}},
		{"semconv value", minimal + "semconv: {app: old}\n", []string{"m.yaml:10: semconv.app", "current or legacy"}},
		{"semconv service", minimal + "semconv: {cache: legacy}\n", []string{"semconv.cache", "unknown service"}},
		{"client name", minimal + "clients: {queue: {service_name: rabbitmq}}\n", []string{"clients.queue", "cache or db"}},
		{"client service", minimal + "clients: {db: {service_name: \"\"}}\n", []string{"clients.db.service_name"}},
		{"client resource", minimal + "clients: {db: {service_name: pg, resource: pod}}\n", []string{"clients.db.resource", "process or host"}},
		{"cache command", strings.Replace(minimal, "{query: q}]", "{query: q}], cache: [{command: INCR, key: k}]", 1), []string{"ops.o.cache[0].command", "INCR"}},
		{"cache key", strings.Replace(minimal, "{query: q}]", "{query: q}], cache: [{command: get}]", 1), []string{"ops.o.cache[0].key", "required"}},
		{"async both", strings.Replace(minimal, "{query: q}]", "{query: q}], async: [{task: a, publish: t}]", 1), []string{"ops.o.async[0]", "exactly one"}},
		{"async publish topic", strings.Replace(minimal, "{query: q}]", "{query: q}], async: [{publish: t}]", 1), []string{"ops.o.async[0].publish", "unknown topic"}},
		{"async start", strings.Replace(minimal, "{query: q}]", "{query: q}], async: [{task: a, start: later}]", 1), []string{"ops.o.async[0].start", "later"}},
		{"async wait", strings.Replace(minimal, "{query: q}]", "{query: q}], async: [{task: a, wait_ms: {mean: -1}}]", 1), []string{"ops.o.async[0].wait_ms"}},
		{"topic publishes", minimal + "topics: {t: {async: [{publish: t}]}}\n", []string{"topics.t.async[0].publish", "only an app op"}},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml), "m.yaml")
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tc.name, err, w)
			}
		}
	}
}
