package nezha

import (
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestServiceFromPod(t *testing.T) {
	for _, c := range []struct{ pod, svc, rule string }{
		{"ts-gateway-service-6f6cfc45b-h5m2n", "ts-gateway-service", "deployment"},
		{"ts-execute-service-775f544d9-zqvjb", "ts-execute-service", "deployment"},
		{"ts-station-food-service-dc4d75dd-fw6ft", "ts-station-food-service", "deployment"},
		{"ts-basic-service-5dc8d4f9fd-46997", "ts-basic-service", "deployment"},
		{"mysql-0", "mysql", "statefulset"},
		{"ts-ui-dashboard", "ts-ui-dashboard", ""},             // no hash: taken as is
		{"ts-auth-service-admin", "ts-auth-service-admin", ""}, // "service" has vowels, so it is no hash
		{"standalone", "standalone", ""},
	} {
		if svc, rule := ServiceFromPod(c.pod); svc != c.svc || rule != c.rule {
			t.Errorf("%s: got %q (%q), want %q (%q)", c.pod, svc, rule, c.svc, c.rule)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		op    string
		kind  ptrace.SpanKind
		attrs string
	}{
		{"HTTP GET", ptrace.SpanKindClient, "[[http.request.method GET]]"},
		{"HTTP PATCH", ptrace.SpanKindClient, "[[http.request.method PATCH]]"},
		{"HTTP FOO", ptrace.SpanKindClient, "[[http.request.method _OTHER] [http.request.method_original FOO]]"},
		{"/api/v1/orderservice/order/{orderId}", ptrace.SpanKindServer, "[[http.route /api/v1/orderservice/order/{orderId}]]"},
		{"/*", ptrace.SpanKindServer, "[[http.route /*]]"},
		{"SELECT ts.orders", ptrace.SpanKindClient, "[[db.system.name mysql] [db.namespace ts] [db.collection.name orders] [db.operation.name SELECT] [db.query.summary SELECT ts.orders]]"},
		{"UPDATE ts.orders_other", ptrace.SpanKindClient, "[[db.system.name mysql] [db.namespace ts] [db.collection.name orders_other] [db.operation.name UPDATE] [db.query.summary UPDATE ts.orders_other]]"},
		{"SELECT Order", ptrace.SpanKindInternal, "[]"},
		{"SELECT price_config", ptrace.SpanKindInternal, "[]"},
		{"Session.find order.entity.Order", ptrace.SpanKindInternal, "[]"},
		{"Transaction.commit", ptrace.SpanKindInternal, "[]"},
		{"<default> send", ptrace.SpanKindProducer, "[[messaging.system rabbitmq] [messaging.destination.name ] [messaging.operation.name send] [messaging.operation.type send]]"},
		{"food_delivery process", ptrace.SpanKindConsumer, "[[messaging.system rabbitmq] [messaging.destination.name food_delivery] [messaging.operation.name process] [messaging.operation.type process]]"},
		{"OrderController.getOrderById", ptrace.SpanKindInternal, "[]"},
		{"FilteringWebHandler.handle", ptrace.SpanKindInternal, "[]"},
	} {
		got := Classify(c.op)
		if got.Kind != c.kind || fmt.Sprint(got.Attrs) != c.attrs {
			t.Errorf("%q: %v %v, want %v %s", c.op, got.Kind, got.Attrs, c.kind, c.attrs)
		}
	}
}

// The gzipped captures read whole, and Traces keeps every span's context.
func TestReadFileGzipAndTraces(t *testing.T) {
	d, err := ReadFile("../../testdata/nezha/2023-01-29_08_50_trace.csv.gz")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spans) != 4890 || d.DurationMismatches != 0 {
		t.Fatalf("%d spans, %d mismatches; want 4890, 0", len(d.Spans), d.DurationMismatches)
	}
	td, err := d.Traces(1000)
	if err != nil {
		t.Fatal(err)
	}
	if td.SpanCount() != len(d.Spans) {
		t.Fatalf("%d spans out of %d", td.SpanCount(), len(d.Spans))
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		ss := rss.At(i).ScopeSpans().At(0).Spans()
		for k := 0; k < ss.Len(); k++ {
			sp := ss.At(k)
			s := d.Spans[d.Index[sp.SpanID()]]
			if sp.TraceID() != s.Trace || sp.ParentSpanID() != s.Parent || uint64(sp.EndTimestamp()) != s.End {
				t.Fatalf("span %s lost its context", sp.SpanID())
			}
		}
	}
	if _, err := d.Traces(0); err == nil || !strings.Contains(err.Error(), "batch") {
		t.Fatalf("batch 0: %v", err)
	}
}
