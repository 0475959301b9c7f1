package blackboxreceiver

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/processor/causalpathprocessor"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadata"
	"github.com/tierscope/tierscope/testbed/config"
	"github.com/tierscope/tierscope/testbed/netns"
	tbservices "github.com/tierscope/tierscope/testbed/services"
)

// TestCaptureUninstrumentedDB is the usual deployment: web and app are
// instrumented with the OpenTelemetry SDK (context propagated), the db tier
// exports nothing. The receiver captures the db port in app's namespace and
// emits only SERVER spans (the app's own CLIENT spans exist); causalpath
// hangs every captured db execution under the app's CLIENT span that made
// it, so the traces end in the db node as the testbed's truth says, instead
// of in an address.
func TestCaptureUninstrumentedDB(t *testing.T) {
	requireRoot(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tiers := netns.NewChain(t, "web", "app", "db")
	webH, appH, dbH := tiers.Hosts[0], tiers.Hosts[1], tiers.Hosts[2]
	webApp, appDB := tiers.Links[0], tiers.Links[1]
	cfg, err := config.Load("")
	must(err)
	cfg.CPUMHz = 20000

	recorders := map[string]*tracetest.SpanRecorder{}
	provider := func(service, instance string) trace.TracerProvider {
		rec := tracetest.NewSpanRecorder()
		recorders[service] = rec
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service), attribute.String("service.instance.id", instance))))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tp
	}
	listen := func(h *netns.Host, a netip.Addr) net.Listener {
		ln, err := h.Listen("tcp4", netip.AddrPortFrom(a, 0).String())
		must(err)
		return ln
	}
	serve := func(ln net.Listener, h http.Handler) {
		s := tbservices.Serve(ln, h)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		})
	}
	dbLn, appLn, webLn := listen(dbH, appDB.BAddr), listen(appH, webApp.BAddr), listen(webH, webApp.AAddr)
	db, err := tbservices.NewDB(tbservices.Tier{Config: cfg, Version: "v1", Instance: "db-primary", Dial: dbH.DialContext}, t.TempDir(), "")
	must(err)
	t.Cleanup(func() { _ = db.Close() })
	serve(dbLn, db.Handler())
	app, err := tbservices.NewApp(tbservices.Tier{Config: cfg, Version: "v1", Instance: "app-1", Dial: appH.DialContext,
		TracerProvider: provider(config.App, "app-1")}, "http://"+dbLn.Addr().String())
	must(err)
	t.Cleanup(app.Close)
	serve(appLn, app.Handler())
	web, err := tbservices.NewWeb(tbservices.Tier{Config: cfg, Version: "v1", Instance: "web-1", Dial: webH.DialContext,
		TracerProvider: provider(config.Web, "web-1")}, []string{"http://" + appLn.Addr().String()}, "")
	must(err)
	t.Cleanup(web.Close)
	serve(webLn, web.Handler())

	// The pipeline: the receiver and the SDK spans → causalpath → sink. The
	// processor holds everything until shutdown, so arrival order is moot.
	sink := new(consumertest.TracesSink)
	pf := causalpathprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig().(*causalpathprocessor.Config)
	pcfg.Wait = time.Minute
	// One machine, one clock: no skew to tolerate. (With the default 5 ms, a
	// web SERVER span, a true root, could nest in the previous request's app
	// CLIENT span to the db, whose peer nothing names yet.)
	pcfg.SkewWindow = 200 * time.Microsecond
	proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pcfg, sink)
	must(err)
	must(proc.Start(context.Background(), componenttest.NewNopHost()))
	rcfg := createDefaultConfig().(*Config)
	rcfg.Services = map[string]string{appDB.BAddr.String(): "db/db-primary"}
	c := defaultCapture()
	c.NetworkNamespace = "/run/netns/" + appH.Namespace()
	c.Ports = []uint16{uint16(port(dbLn))}
	c.Spans = []string{"server"}
	rcfg.Capture = configoptional.Some(c)
	rcv, err := newTracesReceiver(receivertest.NewNopSettings(metadata.Type), rcfg, proc)
	must(err)
	must(rcv.Start(context.Background(), componenttest.NewNopHost()))

	txns := []string{"Home", "ViewItem", "Search", "Login"}
	client := webH.HTTPClient()
	const perTxn = 10
	for i := range perTxn * len(txns) {
		resp, err := client.Get("http://" + webLn.Addr().String() + "/txn/" + txns[i%len(txns)])
		must(err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", txns[i%len(txns)], resp.Status)
		}
	}
	time.Sleep(100 * time.Millisecond)
	must(rcv.Shutdown(context.Background()))
	for _, svc := range []string{config.Web, config.App} {
		must(proc.ConsumeTraces(context.Background(), sdkToPdata(recorders[svc].Ended())))
	}
	must(proc.Shutdown(context.Background()))

	f := newForest(sink.AllTraces())
	got := map[string]map[string]int{}
	dbServers, rightCall := 0, 0
	for _, s := range f.spans {
		if s.service == "db" {
			dbServers++
			// The right call: the app's CLIENT span for the same query.
			if s.parent != nil && s.parent.service == config.App && s.parent.span.Kind() == ptrace.SpanKindClient && s.parent.span.Name() == s.span.Name() {
				rightCall++
			}
		}
	}
	for _, root := range f.roots() {
		if root.service != config.Web || root.span.Kind() != ptrace.SpanKindServer {
			t.Errorf("a tree is rooted at %s %s %q", root.service, root.span.Kind(), root.span.Name())
			continue
		}
		if got[root.span.Name()] == nil {
			got[root.span.Name()] = map[string]int{}
		}
		got[root.span.Name()][f.signature(root)]++
	}
	for _, name := range txns {
		txn, _ := cfg.Transaction(name)
		want := truthSignature(cfg.Tree(txn))
		t.Logf("%s: truth %s, reconstructed %v", name, want, got["GET /txn/"+name])
		if n := got["GET /txn/"+name][want]; n != perTxn {
			t.Errorf("%s: %d of %d requests got their true path %s", name, n, perTxn, want)
		}
	}
	wantDB := perTxn * (1 + 3 + 2 + 1)
	t.Logf("captured db executions %d (want %d), under the app call that made them %d", dbServers, wantDB, rightCall)
	if dbServers != wantDB || rightCall != wantDB {
		t.Errorf("db SERVER spans %d, under their own call %d; want %d", dbServers, rightCall, wantDB)
	}
}

// sdkToPdata converts recorded SDK spans to pdata, one resource per span.
func sdkToPdata(spans []sdktrace.ReadOnlySpan) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, s := range spans {
		rs := td.ResourceSpans().AppendEmpty()
		putAttrs(rs.Resource().Attributes(), s.Resource().Attributes())
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID(s.SpanContext().TraceID()))
		sp.SetSpanID(pcommon.SpanID(s.SpanContext().SpanID()))
		if s.Parent().IsValid() {
			sp.SetParentSpanID(pcommon.SpanID(s.Parent().SpanID()))
		}
		sp.SetName(s.Name())
		sp.SetKind(ptrace.SpanKind(s.SpanKind()))
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(s.StartTime()))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(s.EndTime()))
		putAttrs(sp.Attributes(), s.Attributes())
		if s.Status().Code == codes.Error {
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	return td
}

func putAttrs(m pcommon.Map, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		switch kv.Value.Type() {
		case attribute.INT64:
			m.PutInt(string(kv.Key), kv.Value.AsInt64())
		case attribute.FLOAT64:
			m.PutDouble(string(kv.Key), kv.Value.AsFloat64())
		case attribute.BOOL:
			m.PutBool(string(kv.Key), kv.Value.AsBool())
		default:
			m.PutStr(string(kv.Key), kv.Value.Emit())
		}
	}
}
