package perfmodelexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/authtest"
	"github.com/tierscope/tierscope/internal/sharedcomponent"
	"github.com/tierscope/tierscope/internal/sim/loadgen"
)

var loadStart = time.Unix(1_700_000_000, 0)

type testEngine struct {
	*engine
	t   *testing.T
	url string
	hdr string
}

// startEngine runs an engine on a free loopback port whose clock reads `now`.
func startEngine(t *testing.T, dsn, shard string, now time.Time, mutate func(*Config)) *testEngine {
	t.Helper()
	return startEngineWith(t, exportertest.NewNopSettings(metadata.Type), dsn, shard, now, mutate)
}

// startEngineWith is startEngine with the given settings (e.g. a test
// telemetry's, to read the engine's own metrics).
func startEngineWith(t *testing.T, set exporter.Settings, dsn, shard string, now time.Time, mutate func(*Config)) *testEngine {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Storage.DSN = dsn
	cfg.Storage.Shard = shard
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	e, err := newEngine(set, cfg)
	require.NoError(t, err)
	e.setClock(func() time.Time { return now })
	host := authtest.Host{component.MustNewID("tokenauth"): authtest.Token{}}
	require.NoError(t, e.Start(context.Background(), host))
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	te := &testEngine{engine: e, t: t, url: "http://" + e.addr}
	if cfg.Auth.HasValue() {
		te.hdr = authtest.Header
	}
	return te
}

func (te *testEngine) get(path string, out any) int {
	te.t.Helper()
	req, err := http.NewRequest("GET", te.url+path, nil)
	require.NoError(te.t, err)
	if te.hdr != "" {
		req.Header.Set("Authorization", te.hdr)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(te.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(te.t, err)
	if out != nil {
		require.NoError(te.t, json.Unmarshal(b, out), string(b))
	}
	return resp.StatusCode
}

// feed sends traces in batches of 50 and completes and flushes them.
func (te *testEngine) feed(traces []loadgen.Trace, seed int64) {
	te.t.Helper()
	ids := loadgen.NewIDs(seed)
	for i := 0; i < len(traces); i += 50 {
		td := ptrace.NewTraces()
		loadgen.AppendOTLP(td, traces[i:min(i+50, len(traces))], ids)
		require.NoError(te.t, te.ConsumeTraces(context.Background(), td))
	}
	te.completeAll()
	require.NoError(te.t, te.flush(context.Background(), false))
	// The tests write history that the engine's clock already calls settled
	// (and may have cached, empty, while warming at start): forget it.
	te.query.ResetCache()
}

func generate(t *testing.T, n int) []loadgen.Trace {
	cfg := loadgen.DefaultConfig()
	cfg.DropFraction = 0
	cfg.Start = loadStart
	traces, err := loadgen.Generate(cfg, n)
	require.NoError(t, err)
	return traces
}

func TestGraphAndPathsFromSpans(t *testing.T) {
	traces := generate(t, 3000) // about 54 s of requests from loadStart
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart.Add(5*time.Minute), nil)
	te.feed(traces, 1)

	var g api.Graph
	require.Equal(t, 200, te.get(api.PathGraph, &g))
	nodes := map[string]api.GraphNode{}
	for _, n := range g.Nodes {
		nodes[n.ID] = n
	}
	require.Equal(t, int64(len(traces)), nodes["web"].Requests)
	require.Contains(t, nodes, "app")
	require.Contains(t, nodes, "postgresql/shop")
	kinds := map[string]string{}
	for _, e := range g.Edges {
		kinds[e.ID] = e.Kind
	}
	require.Equal(t, "sync", kinds["web->app"])
	require.Equal(t, "database", kinds["app->postgresql/shop"])

	var p api.PathsResponse
	require.Equal(t, 200, te.get(api.PathPaths+"?top=3", &p))
	require.Equal(t, int64(len(traces)), p.Traces)
	require.NotEmpty(t, p.Patterns)
	require.LessOrEqual(t, len(p.Patterns), 3)
	require.True(t, strings.HasPrefix(p.Patterns[0].Signature, "web(app"), p.Patterns[0].Signature)
	require.Equal(t, "web", p.Patterns[0].Root.Node)
	require.NotNil(t, p.Patterns[0].Root.LatencyMs)

	var c api.Catalog
	require.Equal(t, 200, te.get(api.PathCatalog, &c))
	require.NotEmpty(t, c.Links)
	var web *api.CatalogService
	for i := range c.Services {
		if c.Services[i].Name == "web" {
			web = &c.Services[i]
		}
	}
	require.NotNil(t, web)
	require.Equal(t, []string{"2.7.1"}, web.Versions)
	require.NotEmpty(t, web.Transactions)

	var h api.Health
	require.Equal(t, 200, te.get(api.PathHealth, &h))
	require.Equal(t, "ok", h.Status)
	require.Equal(t, "sqlite", h.Store)
	require.Positive(t, h.SchemaVersion)

	// Prometheus gauges of the last complete window (the clock is 5 min on,
	// so point the window at the data).
	te.setClock(func() time.Time { return loadStart.Add(90 * time.Second) })
	resp, err := http.Get(te.url + api.PathMetrics)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Written by client_golang: typed families, latencies as summaries in
	// seconds, edges under the servicegraph connector's label names.
	require.Contains(t, string(body), `tierscope_service_window_requests{service="web"}`)
	require.Contains(t, string(body), "# TYPE tierscope_edge_latency_seconds summary")
	require.Contains(t, string(body), `tierscope_edge_latency_seconds{client="web",connection_type="",server="app",quantile="0.99"}`)
	require.Contains(t, string(body), `tierscope_edge_latency_seconds_count{client="web",connection_type="",server="app"}`)
	require.Regexp(t, `(?m)^tierscope_service_latency_seconds\{service="web",quantile="0.5"\} 0\.\d+`, string(body),
		"web's median latency, in seconds")
}

func TestBadRequests(t *testing.T) {
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart, nil)
	for path, want := range map[string]string{
		api.PathGraph + "?from=yesterday":                "from:",
		api.PathGraph + "?from=1700000000&to=1600000000": "must be before",
		api.PathGraph + "?from=0&to=1700000000":          "exceeds the maximum",
		api.PathPaths + "?top=-2":                        "top: must be a positive integer",
		api.PathPaths + "?limit=3":                       `unknown query parameter "limit"`,
		api.PathCompare + "?service=web&base=1":          "candidate: required",
		api.PathGraph + "?to=" + strings.Repeat("9", 30): "to:",
	} {
		var er api.ErrorResponse
		require.Equal(t, 400, te.get(path, &er), path)
		require.Contains(t, er.Error, want, path)
	}
	var er api.ErrorResponse
	require.Equal(t, 404, te.get("/api/v1/nothing", &er))
	require.Contains(t, er.Error, "openapi")
}

func TestAuthRequired(t *testing.T) {
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart, func(c *Config) {
		c.Auth = configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: component.MustNewID("tokenauth")}})
	})
	require.Equal(t, 200, te.get(api.PathHealth, nil))
	te.hdr = ""
	require.Equal(t, 401, te.get(api.PathHealth, nil))
	require.Equal(t, 401, te.get(api.PathGraph, nil))
	te.hdr = "Bearer wrong"
	require.Equal(t, 401, te.get(api.PathPaths, nil))
}

func TestOpenAPIListsEveryEndpoint(t *testing.T) {
	for _, p := range []string{api.PathHealth, api.PathPaths, api.PathGraph, api.PathLatency, api.PathCatalog, api.PathWorkFactors,
		api.PathSignatures, api.PathCompare, api.PathExperiments, api.PathGradients, api.PathPredict, api.PathOpenAPI, api.PathMetrics} {
		require.Contains(t, string(openapiDoc), "\n  "+p+":", p)
	}
}

// One engine serves the traces and metrics pipelines of a component id.
func TestSharedAcrossPipelines(t *testing.T) {
	reg := sharedcomponent.NewRegistry[component.ID, *engine]()
	f := newFactory(reg)
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Storage.DSN = "sqlite://" + filepath.Join(t.TempDir(), "m.db")
	set := exportertest.NewNopSettings(metadata.Type)
	tr, err := f.CreateTraces(context.Background(), set, cfg)
	require.NoError(t, err)
	me, err := f.CreateMetrics(context.Background(), set, cfg)
	require.NoError(t, err)
	host := componenttest.NewNopHost()
	require.NoError(t, tr.Start(context.Background(), host))
	require.NoError(t, me.Start(context.Background(), host))
	require.Equal(t, 1, reg.Len())
	s, err := engineFor(reg, set, cfg)
	require.NoError(t, err)
	eng := s.Unwrap()

	md, dps := gaugeOf("h1", "system.cpu.utilization")
	for cpu, idle := range []float64{0.6, 0.8} {
		for state, v := range map[string]float64{"idle": idle, "user": 1 - idle} {
			dp := dps.AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
			dp.Attributes().PutStr("cpu", fmt.Sprintf("cpu%d", cpu))
			dp.Attributes().PutStr("state", state)
			dp.SetDoubleValue(v)
		}
	}
	require.NoError(t, me.ConsumeMetrics(context.Background(), md))
	_, h1 := eng.ingest.CPU("h1", "")
	util := h1.Mean()
	require.InDelta(t, 0.3, util, 1e-9, "1 − mean idle over two CPUs")

	require.NoError(t, tr.Shutdown(context.Background()))
	require.Equal(t, 1, reg.Len(), "the metrics pipeline still runs")
	require.NoError(t, me.Shutdown(context.Background()))
	require.Zero(t, reg.Len())
}

// gaugeOf returns metrics with one gauge named name on a resource of
// host.name host, and the gauge's data points to fill.
func gaugeOf(host, name string) (pmetric.Metrics, pmetric.NumberDataPointSlice) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", host)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	return md, m.SetEmptyGauge().DataPoints()
}
