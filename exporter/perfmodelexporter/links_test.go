package perfmodelexporter

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/ingest"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadatatest"
)

// What the link book refuses at its bounds reaches the exporter's overflow
// telemetry, once: a link with more addresses than it keeps, then one more.
func TestLinkBookOverflowIsReported(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	te := startEngineWith(t, metadatatest.NewSettings(tel), "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart, nil)
	inventory := func(first, n int) {
		md, dps := gaugeOf("h1", "tierscope.link.connections")
		for i := first; i < first+n; i++ {
			dp := dps.AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(loadStart))
			dp.SetIntValue(1)
			dp.Attributes().PutStr("tierscope.source.service", "app")
			dp.Attributes().PutStr("tierscope.destination.service", "db")
			dp.Attributes().PutStr("destination.address", fmt.Sprintf("10.0.0.%d", i))
			dp.Attributes().PutInt("destination.port", 5432)
		}
		require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	}
	inventory(1, ingest.MaxLinkAddresses+2)
	metadatatest.AssertEqualExporterPerfmodelOverflow(t, tel, []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
	inventory(1, ingest.MaxLinkAddresses+3) // the kept addresses again, and three refused
	metadatatest.AssertEqualExporterPerfmodelOverflow(t, tel, []metricdata.DataPoint[int64]{{Value: 5}}, metricdatatest.IgnoreTimestamp())
	addresses, _ := te.ingest.Links("app", "db")
	require.Len(t, addresses, ingest.MaxLinkAddresses)
}

// The connection inventory teaches the link book the links between named
// services, weighted by their open connections; links with an unnamed end
// or no port are not learned.
func TestInventoryTeachesLinkAddresses(t *testing.T) {
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart, nil)
	md, dps := gaugeOf("h1", "tierscope.link.connections")
	add := func(src, dst, addr string, port, n int64) {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(loadStart))
		dp.SetIntValue(n)
		a := dp.Attributes()
		if src != "" {
			a.PutStr("tierscope.source.service", src)
		}
		if dst != "" {
			a.PutStr("tierscope.destination.service", dst)
		}
		a.PutStr("destination.address", addr)
		a.PutInt("destination.port", port)
	}
	add("app", "db", "10.0.0.6", 5432, 2)
	add("app", "db", "10.0.0.7", 5432, 5)
	add("app", "cache", "fd00::7", 6379, 1)
	add("", "db", "10.0.0.6", 5432, 9)      // caller unknown
	add("app", "", "10.0.0.9", 8080, 9)     // callee unknown
	add("batch", "db", "10.0.0.6", 0, 3)    // no port
	add("batch", "db", "10.0.0.6", 5432, 0) // no open connection
	require.NoError(t, te.ConsumeMetrics(context.Background(), md))

	addresses, known := te.ingest.Links("app", "db")
	require.Equal(t, []string{"10.0.0.7:5432", "10.0.0.6:5432"}, addresses)
	addresses, _ = te.ingest.Links("app", "cache")
	require.Equal(t, []string{"[fd00::7]:6379"}, addresses)
	require.Equal(t, []string{"app->cache", "app->db"}, known)
}

// The link book counts, per front transaction, the synchronous calls per
// request on each link: the prior gradients that bound an experiment's
// first pulse. Calls behind a queue are not on the request's path, and a
// trace that lacks a callee's spans does not lower the callee's calls.
func TestLinkCallsPerRequest(t *testing.T) {
	base := time.Unix(alignDown(loadStart.Unix(), 60), 0)
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", base.Add(10*time.Minute), func(c *Config) {
		c.Experiments.Injector = "http://127.0.0.1:1" // the counts are kept for link experiments only
	})
	td := ptrace.NewTraces()
	var trace byte
	span := func(service, name string, kind ptrace.SpanKind, id, parent byte, peer string) {
		appendTestSpan(td, service, name, kind, trace, id, parent, base.Add(time.Duration(trace)*100*time.Millisecond), peer)
	}
	// Four ViewItem requests: web calls app-1 or app-2 in turn, which
	// queries the database three times; web also publishes a message whose
	// consumer queries the database behind the queue.
	for i := range 4 {
		trace++
		app, addr := "app-1", "10.0.0.5:8081"
		if i%2 == 1 {
			app, addr = "app-2", "10.0.0.6:8081"
		}
		span("web", "GET /txn/ViewItem", ptrace.SpanKindServer, 1, 0, "")
		span("web", "POST /op/view", ptrace.SpanKindClient, 2, 1, addr)
		span(app, "POST /op/view", ptrace.SpanKindServer, 3, 2, "")
		for q := range byte(3) {
			span(app, "SELECT", ptrace.SpanKindClient, 4+q, 3, "10.0.0.9:5432")
		}
		span("web", "publish notify", ptrace.SpanKindProducer, 10, 1, "")
		span("worker", "process notify", ptrace.SpanKindConsumer, 11, 10, "")
		span("worker", "SELECT", ptrace.SpanKindClient, 12, 11, "10.0.0.9:5432")
	}
	// One Home request that calls app-1 once and nothing else.
	trace++
	span("web", "GET /txn/Home", ptrace.SpanKindServer, 1, 0, "")
	span("web", "POST /op/home", ptrace.SpanKindClient, 2, 1, "10.0.0.5:8081")
	span("app-1", "POST /op/home", ptrace.SpanKindServer, 3, 2, "")
	require.NoError(t, te.ConsumeTraces(context.Background(), td))
	te.completeAll()
	// Two more ViewItem requests whose app spans came too late for their
	// traces: web's calls are there, named by the learned addresses, but
	// not the apps' queries. Counted per hop, they change nothing below web.
	td = ptrace.NewTraces()
	for _, addr := range []string{"10.0.0.5:8081", "10.0.0.6:8081"} {
		trace++
		span("web", "GET /txn/ViewItem", ptrace.SpanKindServer, 1, 0, "")
		span("web", "POST /op/view", ptrace.SpanKindClient, 2, 1, addr)
	}
	require.NoError(t, te.ConsumeTraces(context.Background(), td))
	te.completeAll()

	got := map[string]map[string]float64{}
	for _, l := range [][2]string{{"web", "app-1"}, {"web", "app-2"}, {"web", "worker"}, {"worker", "10.0.0.9:5432"}} {
		got[l[0]+"->"+l[1]] = te.ingest.CallsPerRequest(l[0], l[1], "")
	}
	for _, app := range []string{"app-1", "app-2"} {
		for _, k := range [][2]string{{app, "10.0.0.9:5432"}} {
			for tx, n := range te.ingest.CallsPerRequest(k[0], k[1], "") {
				if got["app->db"] == nil {
					got["app->db"] = map[string]float64{}
				}
				got["app->db"][app+" "+tx] = n
			}
		}
	}
	toDB := te.ingest.CallsPerRequest("", "", "10.0.0.9:5432")
	t.Logf("calls per request: %v; to the database's address %v", got, toDB)
	require.Equal(t, map[string]float64{"GET /txn/ViewItem": 3}, toDB, "the partial traces would make it 2 counted per request")
	require.Equal(t, map[string]float64{"GET /txn/ViewItem": 0.5, "GET /txn/Home": 1}, got["web->app-1"])
	require.Equal(t, map[string]float64{"GET /txn/ViewItem": 0.5}, got["web->app-2"])
	require.Equal(t, map[string]float64{"app-1 GET /txn/ViewItem": 1.5, "app-2 GET /txn/ViewItem": 1.5}, got["app->db"])
	require.Empty(t, got["web->worker"], "a PRODUCER span is not a call on the request's path")
	require.Empty(t, got["worker->10.0.0.9:5432"], "the consumer's query is behind the queue")

	// The coordinator takes them as a link element's priors
	// (internal/coordinator's TestLinkElementPriors): the calls to the
	// address it delays, whichever replica's service answers, else the
	// link's own.
	require.Equal(t, map[string]float64{"GET /txn/ViewItem": 0.5, "GET /txn/Home": 1}, te.ingest.CallsPerRequest("web", "app-1", "10.0.0.5:8081"))
	require.Equal(t, map[string]float64{"GET /txn/ViewItem": 0.5}, te.ingest.CallsPerRequest("web", "replica-2", "10.0.0.6:8081"))
	require.Equal(t, map[string]float64{"GET /txn/ViewItem": 0.5, "GET /txn/Home": 1}, te.ingest.CallsPerRequest("web", "app-1", "10.0.0.1:1"))
	addresses, known := te.ingest.Links("web", "app-1")
	require.Equal(t, []string{"10.0.0.5:8081"}, addresses)
	require.Contains(t, known, "web->app-2")

	// Without an injector for links nothing is counted.
	bare := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "b.db"), "a", base.Add(10*time.Minute), nil)
	require.NoError(t, bare.ConsumeTraces(context.Background(), td))
	bare.completeAll()
	for _, l := range [][3]string{{"web", "app-1", "10.0.0.5:8081"}, {"web", "app-2", "10.0.0.6:8081"}, {"", "", "10.0.0.9:5432"}} {
		require.Empty(t, bare.ingest.CallsPerRequest(l[0], l[1], l[2]), l)
	}

}
