package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/sim/loadgen"
	"github.com/tierscope/tierscope/internal/store"
)

// The CPU cost (megacycles per request) of each flow of the generated shop, and
// every machine's capacity: the CPU metrics fed to the exporter are derived from
// them, so the work-factor regression has a known answer.
var (
	trueWorkFactors = map[string]float64{
		"web /products/{id}":     20,
		"web /cart":              45,
		"web /orders":            30,
		"app /api/products/{id}": 60,
		"app /api/cart/items":    150,
		"app /api/orders":        90,
	}
	machineMHz = 1000.0
)

const (
	window      = time.Minute
	loadWindows = 50 // windows of generated traffic: periods of the models
	oldVersion  = "2.7.1"
	newVersion  = "2.8.0" // web's version in the second half of the load
	// v2 of web keeps each request 15 ms longer before answering, so the
	// comparison has something to find.
	v2ExtraLatency = 15 * time.Millisecond
	dbNode         = "postgresql/shop"
	seededTx       = "/products/{id}"
)

// liveExporter is a perfmodel exporter, built by its factory as the collector
// builds it, serving its API on a loopback port.
type liveExporter struct {
	baseURL string
	traces  exporter.Traces
	metrics exporter.Metrics
}

// startExporter starts the real exporter on the SQLite store dsn.
func startExporter(t *testing.T, dsn string) *liveExporter {
	t.Helper()
	factory := perfmodelexporter.NewFactory()
	cfg := factory.CreateDefaultConfig().(*perfmodelexporter.Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Storage.DSN = dsn
	cfg.Storage.Shard = "plugin-test"
	// Windows of a minute, as deployed. Not shorter: the exporter's version
	// check walks the last day window by window on its first tick, which at
	// 1 s windows holds up its loop and Shutdown for about a minute.
	cfg.Window = window
	// Every generated window must stay open until its traces completed, and
	// unsettled, so that no query caches it before the data lands.
	cfg.OpenWindows = loadWindows + 20
	cfg.FlushInterval = 200 * time.Millisecond
	cfg.TraceWait = 200 * time.Millisecond
	cfg.CapacityMHz = machineMHz
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	// The API address (port 0) is only logged: read it from the log.
	core, logs := observer.New(zapcore.InfoLevel)
	set := exportertest.NewNopSettings(factory.Type())
	set.ID = component.NewIDWithName(factory.Type(), "plugin")
	set.Logger = zap.New(core)

	ctx := context.Background()
	traces, err := factory.CreateTraces(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := factory.CreateMetrics(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	host := componenttest.NewNopHost()
	if err := traces.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := metrics.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := metrics.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := traces.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})

	listening := logs.FilterMessage("perfmodel API listening").All()
	if len(listening) != 1 {
		t.Fatalf("the exporter logged its API address %d times", len(listening))
	}
	graphURL, _ := listening[0].ContextMap()["url"].(string)
	baseURL, ok := strings.CutSuffix(graphURL, api.PathGraph)
	if !ok {
		t.Fatalf("unexpected API address %q", graphURL)
	}
	return &liveExporter{baseURL: baseURL, traces: traces, metrics: metrics}
}

// generatedLoad is what the test sent, to compare the answers with.
type generatedLoad struct {
	from, to time.Time
	traces   int
	// flows counts the SERVER spans per window start, machine and flow.
	flows map[int64]map[string]map[string]int
}

// generateLoad plans loadWindows windows of shop traffic from start, web
// being version oldVersion for the first half and newVersion after. The
// request rate changes from window to window (1.5 to 7 a second), as the CPU
// utilization must for both the work-factor regression and the signatures'
// utilization buckets.
func generateLoad(t *testing.T, start time.Time) ([]ptrace.Traces, generatedLoad) {
	t.Helper()
	var before, after []loadgen.Trace
	for i := range loadWindows {
		cfg := loadgen.DefaultConfig()
		cfg.Seed = int64(i + 1)
		cfg.Start = start.Add(time.Duration(i) * window)
		cfg.DropFraction = 0 // whole traces: the exporter models, it does not stitch
		cfg.MinGap = 100*time.Millisecond + time.Duration(i*7%10)*35*time.Millisecond
		cfg.MaxGap = 2 * cfg.MinGap
		gen, err := loadgen.NewGenerator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for {
			tr := gen.Next(1)[0]
			if !tr.Spans[loadgen.WebServer].Start.Before(cfg.Start.Add(window)) {
				break
			}
			if i < loadWindows/2 {
				before = append(before, tr)
			} else {
				web := &tr.Spans[loadgen.WebServer]
				web.End = web.End.Add(v2ExtraLatency)
				after = append(after, tr)
			}
		}
	}
	end := start.Add(loadWindows * window)

	load := generatedLoad{from: start, to: end, traces: len(before) + len(after), flows: map[int64]map[string]map[string]int{}}
	for _, tr := range append(slices.Clone(before), after...) {
		// The exporter files a trace under the window of its root's start.
		w := tr.Spans[loadgen.WebServer].Start.Truncate(window).Unix()
		for _, s := range tr.Spans {
			if s.Kind != loadgen.KindServer {
				continue
			}
			if load.flows[w] == nil {
				load.flows[w] = map[string]map[string]int{}
			}
			if load.flows[w][s.Instance] == nil {
				load.flows[w][s.Instance] = map[string]int{}
			}
			load.flows[w][s.Instance][s.Service+" "+routeOf(s)]++
		}
	}

	ids := loadgen.NewIDs(7)
	var batches []ptrace.Traces
	for i, part := range [][]loadgen.Trace{before, after} {
		for j := 0; j < len(part); j += 200 {
			td := ptrace.NewTraces()
			loadgen.AppendOTLP(td, part[j:min(j+200, len(part))], ids)
			if i == 1 {
				setVersion(td, "web", newVersion)
			}
			batches = append(batches, td)
		}
	}
	return batches, load
}

func routeOf(s loadgen.PlannedSpan) string {
	for _, a := range s.Attrs {
		if a.Key == "http.route" {
			return a.Str
		}
	}
	return s.Name
}

func setVersion(td ptrace.Traces, service, version string) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		attrs := td.ResourceSpans().At(i).Resource().Attributes()
		if name, _ := attrs.Get("service.name"); name.Str() == service {
			attrs.PutStr("service.version", version)
		}
	}
}

// cpuMetrics is one system.cpu.utilization sample per machine and window, the
// utilization the true work factors imply for the window's request rates.
func cpuMetrics(load generatedLoad) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for w, machines := range load.flows {
		for machine, flows := range machines {
			u := 0.0
			for flow, n := range flows {
				u += float64(n) / window.Seconds() * trueWorkFactors[flow] / machineMHz
			}
			rm := md.ResourceMetrics().AppendEmpty()
			rm.Resource().Attributes().PutStr("host.name", machine)
			m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
			m.SetName("system.cpu.utilization")
			dps := m.SetEmptyGauge().DataPoints()
			for state, v := range map[string]float64{"idle": 1 - u, "user": u} {
				dp := dps.AppendEmpty()
				dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Unix(w, 0).Add(window / 2)))
				dp.Attributes().PutStr("cpu", "cpu0")
				dp.Attributes().PutStr("state", state)
				dp.SetDoubleValue(v)
			}
		}
	}
	return md
}

// seedGradientStore writes what gradient experiments leave in the store: a
// real one needs a delay injector on the link and minutes of perturbed
// traffic. The gradient, experiment, predict and graph endpoints read these
// records through their own code.
func seedGradientStore(t *testing.T, dsn string, now time.Time) api.Gradient {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := api.Gradient{Element: "link:app->" + dbNode, Transaction: seededTx, Gradient: 1.5, CI95: [2]float64{1.3, 1.7},
		SNR: 9, Bins: 12, PerturbationMs: 5, Experiment: "exp-1", Measured: now.Unix()}
	ex := api.Experiment{ID: "exp-1", Element: g.Element, Phase: "done", Percent: 100, Started: now.Add(-10 * time.Minute).Unix(),
		Finished: now.Unix(), Gradients: []api.Gradient{g}}
	running := api.Experiment{ID: "exp-2", Element: "link:web->app", Phase: "active", Percent: 40, ETASeconds: 90,
		Started: now.Add(-time.Minute).Unix()}
	var recs []store.Record
	for _, r := range []struct {
		kind, key string
		v         any
	}{
		{model.KindGradient, g.Element + "\x1f" + g.Transaction, g},
		{model.KindExperimnt, ex.ID, ex},
		{model.KindExperimnt, running.ID, running},
	} {
		payload, err := json.Marshal(r.v)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, store.Record{Kind: r.kind, Key: r.key, Shard: "plugin-test",
			WindowStart: now.Unix() - now.Unix()%60, Resolution: 60, Payload: payload})
	}
	if err := st.Put(ctx, recs); err != nil {
		t.Fatal(err)
	}
	return g
}

// waitForTraces polls the paths document until the exporter counts every
// generated trace in the range (completed after trace_wait, then flushed).
func waitForTraces(t *testing.T, baseURL string, load generatedLoad) {
	t.Helper()
	u := fmt.Sprintf("%s%s?from=%d&to=%d", baseURL, api.PathPaths, load.from.Unix(), load.to.Unix())
	deadline := time.Now().Add(30 * time.Second)
	var got int64
	for time.Now().Before(deadline) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var doc api.PathsResponse
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got = doc.Traces; got == int64(load.traces) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the exporter counted %d of the %d generated traces", got, load.traces)
}

func floatAt(t *testing.T, frame *data.Frame, name string, row int) float64 {
	t.Helper()
	field, _ := frame.FieldByName(name)
	if field == nil {
		t.Fatalf("frame %q has no field %q", frame.Name, name)
	}
	v, ok := field.ConcreteAt(row)
	if !ok {
		t.Fatalf("frame %q field %q row %d is null", frame.Name, name, row)
	}
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	}
	t.Fatalf("frame %q field %q is %T", frame.Name, name, v)
	return 0
}

func TestAgainstTheRealExporter(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "m.db")
	now := time.Now()
	seeded := seedGradientStore(t, dsn, now)
	live := startExporter(t, dsn)

	// Traffic of the last hour, as the API's default range (used by compare
	// and predict) is the last hour. Aligned to windows, each window holds
	// the same requests in every run.
	start := now.Truncate(window).Add(-(loadWindows + 2) * window)
	batches, load := generateLoad(t, start)
	ctx := context.Background()
	for _, td := range batches {
		if err := live.traces.ConsumeTraces(ctx, td); err != nil {
			t.Fatal(err)
		}
	}
	if err := live.metrics.ConsumeMetrics(ctx, cpuMetrics(load)); err != nil {
		t.Fatal(err)
	}
	waitForTraces(t, live.baseURL, load)
	t.Logf("fed %d traces over %d windows to %s", load.traces, loadWindows, live.baseURL)

	tr := backend.TimeRange{From: load.from, To: load.to}
	template := QueryModel{Service: "web", BaseVersion: oldVersion, CandidateVersion: newVersion, Transaction: seededTx,
		Changes: []api.Change{{Element: seeded.Element, Delta: 20}}}
	responses := RunEveryQueryType(ctx, live.baseURL, "", tr, template)
	framesOf := func(queryType string) data.Frames {
		t.Helper()
		return mustSucceed(t, responses[queryType])
	}

	t.Run("paths", func(t *testing.T) {
		frames := framesOf(QueryTypePaths)
		nodes, edges, table := frameByName(t, frames, nodesFrameName), frameByName(t, frames, edgesFrameName), frameByName(t, frames, "patterns")
		if nodes.Meta.PreferredVisualization != data.VisTypeNodeGraph || edges.Meta.PreferredVisualization != data.VisTypeNodeGraph {
			t.Errorf("paths frames are not for the node graph: %v %v", nodes.Meta.PreferredVisualization, edges.Meta.PreferredVisualization)
		}
		titles := stringColumn(t, nodes, "title")
		for _, want := range []string{"web", "app", dbNode} {
			if !slices.Contains(titles, want) {
				t.Errorf("no path node %q among %v", want, titles)
			}
		}
		var total int64
		count, _ := table.FieldByName("count")
		for i := 0; i < count.Len(); i++ {
			total += count.At(i).(int64)
		}
		if total == 0 || total > int64(load.traces) {
			t.Errorf("patterns count %d traces of %d", total, load.traces)
		}
		if !strings.HasPrefix(stringColumn(t, table, "signature")[0], "web(app") {
			t.Errorf("top pattern %q", stringColumn(t, table, "signature")[0])
		}
		t.Logf("paths: %d nodes, %d edges, %d patterns", nodes.Rows(), edges.Rows(), table.Rows())
	})

	t.Run("graph", func(t *testing.T) {
		frames := framesOf(QueryTypeGraph)
		nodes, edges := frameByName(t, frames, nodesFrameName), frameByName(t, frames, edgesFrameName)
		ids := stringColumn(t, nodes, "id")
		for _, want := range []string{"web", "app", dbNode} {
			if !slices.Contains(ids, want) {
				t.Errorf("no service node %q among %v", want, ids)
			}
		}
		requests, _ := nodes.FieldByName("detail__requests")
		if web := slices.Index(ids, "web"); requests.At(web).(int64) != int64(load.traces) {
			t.Errorf("web served %v requests, %d were sent", requests.At(web), load.traces)
		}
		// The transaction was chosen, so each edge's mainstat is its link
		// gradient: the seeded one on app->db, none elsewhere.
		edgeIDs := stringColumn(t, edges, "id")
		for _, want := range []string{"web->app", "app->" + dbNode} {
			if !slices.Contains(edgeIDs, want) {
				t.Fatalf("no edge %q among %v", want, edgeIDs)
			}
		}
		mainstat, _ := edges.FieldByName("mainstat")
		if got := floatAt(t, edges, "mainstat", slices.Index(edgeIDs, "app->"+dbNode)); got != seeded.Gradient {
			t.Errorf("app->db mainstat %v, want the gradient %v", got, seeded.Gradient)
		}
		if v := mainstat.At(slices.Index(edgeIDs, "web->app")).(*float64); v != nil {
			t.Errorf("web->app has gradient %v but none was measured", *v)
		}
		if latency := floatAt(t, edges, "secondarystat", slices.Index(edgeIDs, "web->app")); !(latency >= 40 && latency <= 125) {
			t.Errorf("web->app mean latency %v ms, the generator makes 40–120 ms calls", latency)
		}
	})

	t.Run("latency", func(t *testing.T) {
		frames := framesOf(QueryTypeLatency)
		var web int64
		for _, f := range frames {
			if f.Meta == nil || f.Meta.Type != data.FrameTypeTimeSeriesMulti || f.Fields[0].Type() != data.FieldTypeTime || f.Rows() == 0 {
				t.Fatalf("frame %q is not a time series with rows", f.Name)
			}
			if f.Name != "web" {
				continue
			}
			requests, _ := f.FieldByName("requests")
			for i := 0; i < f.Rows(); i++ {
				web += requests.At(i).(int64)
				if p50, p99 := floatAt(t, f, "p50_ms", i), floatAt(t, f, "p99_ms", i); !(p50 > 0 && p50 <= p99) {
					t.Errorf("web at row %d: p50 %v, p99 %v", i, p50, p99)
				}
			}
		}
		if web != int64(load.traces) {
			t.Errorf("web's latency series counts %d requests, %d were sent", web, load.traces)
		}
		t.Logf("latency: %d services, web %d requests", len(frames), web)
	})

	t.Run("workfactors", func(t *testing.T) {
		frames := framesOf(QueryTypeWorkFactors)
		got := map[string]float64{}
		for _, f := range frames {
			if f.Meta == nil || f.Meta.Type != data.FrameTypeTimeSeriesMulti || len(f.Fields) != 2 || f.Fields[0].Type() != data.FieldTypeTime {
				t.Fatalf("frame %q is not a time series", f.Name)
			}
			if f.Rows() == 0 {
				t.Fatalf("empty work factor series %v", f.Fields[1].Labels)
			}
			got[f.Fields[1].Labels["flow"]] = floatAt(t, f, "work_factor", f.Rows()-1)
		}
		t.Logf("work factors (last period) %v, true %v", got, trueWorkFactors)
		for flow, want := range trueWorkFactors {
			if v, ok := got[flow]; !ok || math.Abs(v-want) > 0.2*want {
				t.Errorf("flow %q: work factor %v, true %v", flow, v, want)
			}
		}
	})

	t.Run("signatures", func(t *testing.T) {
		frame := frameByName(t, framesOf(QueryTypeSignatures), "signatures")
		versions := stringColumn(t, frame, "version")
		for _, want := range []string{oldVersion, newVersion} {
			if !slices.Contains(versions, want) {
				t.Errorf("no signature of web %s among %v", want, versions)
			}
		}
		for i, s := range stringColumn(t, frame, "service") {
			if s != "web" {
				t.Errorf("row %d is of service %q, the query asked for web", i, s)
			}
		}
		t.Logf("signatures: %d rows", frame.Rows())
	})

	t.Run("compare", func(t *testing.T) {
		frame := frameByName(t, framesOf(QueryTypeCompare), "comparison")
		txs := stringColumn(t, frame, "transaction")
		if !slices.Equal(txs, []string{"/cart", "/orders", "/products/{id}"}) {
			t.Fatalf("compared transactions %v", txs)
		}
		changed, _ := frame.FieldByName("changed")
		verdicts := stringColumn(t, frame, "verdict")
		for i, tx := range txs {
			delta := floatAt(t, frame, "delta_ms", i)
			t.Logf("compare %s: changed=%v verdict=%s delta=%.2f ms", tx, changed.At(i), verdicts[i], delta)
			// Web's own latency grew by v2ExtraLatency in every transaction.
			if changed.At(i) != true || verdicts[i] != "changed" || math.Abs(delta-15) > 5 {
				t.Errorf("%s: changed=%v verdict %q delta %.2f ms, want a change of about +15 ms", tx, changed.At(i), verdicts[i], delta)
			}
		}
	})

	t.Run("gradients", func(t *testing.T) {
		frame := frameByName(t, framesOf(QueryTypeGradients), "gradients")
		if frame.Rows() != 1 || stringColumn(t, frame, "element")[0] != seeded.Element || floatAt(t, frame, "gradient", 0) != seeded.Gradient {
			t.Errorf("gradients frame %v", frame.Rows())
		}
	})

	t.Run("experiments", func(t *testing.T) {
		frame := frameByName(t, framesOf(QueryTypeExperiments), "experiments")
		if ids := stringColumn(t, frame, "id"); !slices.Equal(ids, []string{"exp-1", "exp-2"}) {
			t.Fatalf("experiments %v", ids)
		}
		if p := floatAt(t, frame, "percent", 1); p != 40 {
			t.Errorf("progress of the running experiment %v", p)
		}
	})

	t.Run("predict", func(t *testing.T) {
		frame := frameByName(t, framesOf(QueryTypePredict), "prediction")
		if frame.Rows() != 1 || stringColumn(t, frame, "transaction")[0] != seededTx {
			t.Fatalf("prediction rows %d", frame.Rows())
		}
		baseline, predicted := floatAt(t, frame, "baseline_ms", 0), floatAt(t, frame, "predicted_ms", 0)
		if !(baseline > 40) || math.Abs(predicted-baseline-seeded.Gradient*20) > 1e-9 {
			t.Errorf("predicted %v from baseline %v, want baseline + 1.5·20", predicted, baseline)
		}
	})

	// What Grafana does: a configured instance, a health check, the editor's
	// dropdowns and a QueryData request with the editor's JSON.
	ds := newTestDatasource(t, live.baseURL, "")
	t.Run("health", func(t *testing.T) {
		res, err := ds.CheckHealth(ctx, &backend.CheckHealthRequest{})
		if err != nil || res.Status != backend.HealthStatusOk {
			t.Fatalf("health %v %v", res, err)
		}
		t.Logf("health: %s", res.Message)
	})

	t.Run("resources", func(t *testing.T) {
		window := fmt.Sprintf("?from=%d&to=%d", load.from.Unix(), load.to.Unix())
		for _, tc := range []struct{ path, url, want string }{
			// The catalog lists the graph nodes too, the database among them.
			{"services", "services" + window, "app," + dbNode + ",web"},
			{"versions", "versions" + window + "&service=web", oldVersion + "," + newVersion},
			{"transactions", "transactions" + window + "&service=web", "/cart,/orders,/products/{id}"},
			{"machines", "machines" + window, "app-1,app-2,web-1,web-2"},
		} {
			status, options, body := callResource(t, ds, tc.path, tc.url)
			if status != http.StatusOK || values(options) != tc.want {
				t.Errorf("%s: %d %s, want %s", tc.url, status, body, tc.want)
			}
		}
		if _, links, body := callResource(t, ds, "links", "links"+window); !strings.Contains(values(links), "link:app->"+dbNode) {
			t.Errorf("links %s", body)
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		outcome := checkDashboard(t, ds, tr)
		for title, o := range outcome {
			t.Logf("%s: %s", title, o)
		}
		for _, title := range []string{"Causal paths", "Path patterns", "Latency over time · $service", "Work factors", "Signatures", "Gradients", "Experiments",
			"Signature comparison · $compared $base → $candidate", "Signature profiles · latency against CPU utilization",
			"Experiment progress"} {
			if outcome[title] != "data" {
				t.Errorf("panel %q: %s", title, outcome[title])
			}
		}
	})

	t.Run("querydata", func(t *testing.T) {
		resp, err := ds.QueryData(ctx, &backend.QueryDataRequest{Queries: []backend.DataQuery{
			{RefID: "A", QueryType: QueryTypeGraph, TimeRange: tr, JSON: []byte(`{"queryType":"graph"}`)},
			{RefID: "B", QueryType: QueryTypeCompare, TimeRange: tr, JSON: []byte(`{"service":"web","baseVersion":"2.7.1","candidateVersion":"9.9.9"}`)},
			{RefID: "C", QueryType: QueryTypePredict, TimeRange: tr, JSON: []byte(`{"changes":[{"element":"link:web->app","delta":5}]}`)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		frames := mustSucceed(t, resp.Responses["A"])
		if edges := frameByName(t, frames, edgesFrameName); edges.Rows() == 0 {
			t.Error("no edges")
		}
		// The exporter's "not yet" answers (no signature of a version, no
		// gradient on the link) reach the panel as notices saying what to do.
		wantNotice(t, resp.Responses["B"], "9.9.9")
		wantNotice(t, resp.Responses["C"], "run an experiment first", "tierscope experiment start --element 'link:web->app'")
	})
}
