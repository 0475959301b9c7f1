package plugin

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"

	"github.com/tierscope/tierscope/internal/api"
)

var testRange = backend.TimeRange{From: time.Unix(1700000000, 0), To: time.Unix(1700003600, 0)}

func newTestDatasource(t *testing.T, baseURL, token string) *Datasource {
	t.Helper()
	settings := backend.DataSourceInstanceSettings{
		URL:                     baseURL,
		JSONData:                []byte(`{"timeoutSeconds": 5}`),
		DecryptedSecureJSONData: map[string]string{tokenKey: token},
	}
	instance, err := NewDatasource(context.Background(), settings)
	if err != nil {
		t.Fatal(err)
	}
	return instance.(*Datasource)
}

func runOne(t *testing.T, ds *Datasource, model QueryModel) backend.DataResponse {
	t.Helper()
	raw, err := json.Marshal(model)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ds.QueryData(context.Background(), &backend.QueryDataRequest{
		Queries: []backend.DataQuery{{RefID: "A", QueryType: model.QueryType, JSON: raw, TimeRange: testRange}},
	})
	if err != nil {
		t.Fatalf("QueryData returned an error instead of a frame error: %v", err)
	}
	return resp.Responses["A"]
}

func mustSucceed(t *testing.T, r backend.DataResponse) data.Frames {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("query failed: %v", r.Error)
	}
	// Grafana receives frames as Arrow: every frame must encode.
	for _, f := range r.Frames {
		if _, err := f.MarshalArrow(); err != nil {
			t.Fatalf("frame %q does not encode to Arrow: %v", f.Name, err)
		}
	}
	return r.Frames
}

func frameByName(t *testing.T, frames data.Frames, name string) *data.Frame {
	t.Helper()
	for _, f := range frames {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no frame %q", name)
	return nil
}

// wantFields checks the field names and types, in order.
func wantFields(t *testing.T, frame *data.Frame, want map[string]data.FieldType, order ...string) {
	t.Helper()
	if len(order) != len(want) {
		t.Fatalf("test bug: %d names for %d fields", len(order), len(want))
	}
	if len(frame.Fields) != len(order) {
		var got []string
		for _, f := range frame.Fields {
			got = append(got, f.Name)
		}
		t.Fatalf("frame %q has fields %v, want %v", frame.Name, got, order)
	}
	for i, name := range order {
		field := frame.Fields[i]
		if field.Name != name {
			t.Errorf("frame %q field %d is %q, want %q", frame.Name, i, field.Name, name)
		}
		if field.Type() != want[name] {
			t.Errorf("frame %q field %q is %s, want %s", frame.Name, name, field.Type(), want[name])
		}
	}
}

func stringColumn(t *testing.T, frame *data.Frame, name string) []string {
	t.Helper()
	field, _ := frame.FieldByName(name)
	if field == nil {
		t.Fatalf("frame %q has no field %q", frame.Name, name)
	}
	values := make([]string, field.Len())
	for i := range values {
		values[i] = field.At(i).(string)
	}
	return values
}

// wantNotice checks that r succeeded without rows and that a frame carries a
// notice with every fragment, which Grafana shows on the panel.
func wantNotice(t *testing.T, r backend.DataResponse, fragments ...string) {
	t.Helper()
	frames := mustSucceed(t, r)
	if hasRows(frames) {
		t.Fatalf("want no rows and a notice, got rows")
	}
	var notices []string
	for _, f := range frames {
		if f.Meta != nil {
			for _, n := range f.Meta.Notices {
				notices = append(notices, n.Text)
			}
		}
	}
	text := strings.Join(notices, "\n")
	for _, fragment := range fragments {
		if !strings.Contains(text, fragment) {
			t.Errorf("notices %q do not contain %q", text, fragment)
		}
	}
}

func wantErrorContaining(t *testing.T, r backend.DataResponse, fragments ...string) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("want an error containing %q, got %d frames", fragments, len(r.Frames))
	}
	for _, fragment := range fragments {
		if !strings.Contains(r.Error.Error(), fragment) {
			t.Errorf("error %q does not contain %q", r.Error.Error(), fragment)
		}
	}
}

func TestPathsNodeGraphContract(t *testing.T) {
	fake := &fakeAPI{}
	server := startFakeAPI(t, fake)
	frames := mustSucceed(t, runOne(t, newTestDatasource(t, server.URL, ""), QueryModel{QueryType: QueryTypePaths, Service: "frontend", Top: 5}))

	req := fake.lastRequest(t, api.PathPaths)
	for key, want := range map[string]string{"from": "1700000000", "to": "1700003600", "service": "frontend", "top": "5"} {
		if got := req.URL.Query().Get(key); got != want {
			t.Errorf("parameter %s = %q, want %q", key, got, want)
		}
	}

	nodes := frameByName(t, frames, "nodes")
	wantFields(t, nodes, map[string]data.FieldType{
		"id": data.FieldTypeString, "title": data.FieldTypeString, "subtitle": data.FieldTypeString,
		"mainstat": data.FieldTypeNullableFloat64, "secondarystat": data.FieldTypeNullableFloat64,
		"arc__self": data.FieldTypeFloat64, "arc__downstream": data.FieldTypeFloat64,
		"detail__pattern": data.FieldTypeString, "detail__count": data.FieldTypeInt64,
		"detail__p50": data.FieldTypeNullableFloat64, "detail__p90": data.FieldTypeNullableFloat64,
		"detail__call_delay": data.FieldTypeNullableFloat64, "detail__messages": data.FieldTypeInt64,
	}, "id", "title", "subtitle", "mainstat", "secondarystat", "arc__self", "arc__downstream",
		"detail__pattern", "detail__count", "detail__p50", "detail__p90", "detail__call_delay", "detail__messages")
	edges := frameByName(t, frames, "edges")
	wantFields(t, edges, map[string]data.FieldType{
		"id": data.FieldTypeString, "source": data.FieldTypeString, "target": data.FieldTypeString,
		"mainstat": data.FieldTypeNullableFloat64, "secondarystat": data.FieldTypeInt64,
	}, "id", "source", "target", "mainstat", "secondarystat")
	for _, f := range []*data.Frame{nodes, edges} {
		if f.Meta == nil || f.Meta.PreferredVisualization != data.VisTypeNodeGraph {
			t.Errorf("frame %q: preferredVisualisationType is not nodeGraph: %+v", f.Name, f.Meta)
		}
	}
	// The SDK must serialise the meta under the name Grafana reads.
	encoded, err := json.Marshal(nodes.Meta)
	if err != nil || !strings.Contains(string(encoded), `"preferredVisualisationType":"nodeGraph"`) {
		t.Errorf("nodes meta encodes as %s (%v)", encoded, err)
	}

	// 4 nodes for frontend(app(db)) under its root, 3 for frontend(cache).
	if nodes.Rows() != 7 || edges.Rows() != 5 {
		t.Fatalf("got %d nodes and %d edges, want 7 and 5", nodes.Rows(), edges.Rows())
	}
	ids := map[string]bool{}
	for _, id := range stringColumn(t, nodes, "id") {
		if ids[id] {
			t.Errorf("duplicate node id %q", id)
		}
		ids[id] = true
	}
	sources, targets := stringColumn(t, edges, "source"), stringColumn(t, edges, "target")
	for i := range sources {
		if !ids[sources[i]] || !ids[targets[i]] {
			t.Errorf("edge %s->%s refers to a missing node", sources[i], targets[i])
		}
	}
	titles := stringColumn(t, nodes, "title")
	if strings.Join(titles, ",") != "GET /checkout,frontend,app,db,GET /item,frontend,cache" {
		t.Errorf("titles %v", titles)
	}
	// Arcs are shares: each node's sum to 1, or 0 for a leaf without latency.
	self, _ := nodes.FieldByName("arc__self")
	down, _ := nodes.FieldByName("arc__downstream")
	for i := 0; i < nodes.Rows(); i++ {
		sum := self.At(i).(float64) + down.At(i).(float64)
		if sum != 0 && (sum < 0.999 || sum > 1.001) {
			t.Errorf("node %s arcs sum to %v", titles[i], sum)
		}
	}
	// frontend: 40 ms of which app takes 30 ms, so a quarter is its own.
	if got := self.At(1).(float64); got < 0.2499 || got > 0.2501 {
		t.Errorf("frontend's own share = %v, want 0.25", got)
	}
	// db's call delay comes from convolution's delays, mean 0.3 ms.
	delay, _ := nodes.FieldByName("detail__call_delay")
	if got := delay.At(3).(*float64); got == nil || *got < 0.2999 || *got > 0.3001 {
		t.Errorf("db call delay = %v, want 0.3", got)
	}

	table := frameByName(t, frames, "patterns")
	if table.Meta == nil || table.Meta.PreferredVisualization != data.VisTypeTable || table.Rows() != 2 {
		t.Fatalf("patterns table: %d rows, meta %+v", table.Rows(), table.Meta)
	}
	meanField, _ := table.FieldByName("mean_latency_ms")
	if got := meanField.At(0).(float64); got != 42 {
		t.Errorf("mean latency of the first pattern = %v, want 42", got)
	}
	size, _ := table.FieldByName("nodes")
	depth, _ := table.FieldByName("depth")
	if size.At(0).(int64) != 4 || depth.At(0).(int64) != 3 {
		t.Errorf("first pattern size/depth = %v/%v, want 4/3", size.At(0), depth.At(0))
	}
}

func TestGraphEdgesCarryTheTransactionGradient(t *testing.T) {
	fake := &fakeAPI{}
	server := startFakeAPI(t, fake)
	ds := newTestDatasource(t, server.URL, "")

	frames := mustSucceed(t, runOne(t, ds, QueryModel{QueryType: QueryTypeGraph, Transaction: "GET /checkout"}))
	if got := fake.lastRequest(t, api.PathGraph).URL.Query().Get("transaction"); got != "GET /checkout" {
		t.Errorf("transaction parameter = %q", got)
	}
	nodes, edges := frameByName(t, frames, "nodes"), frameByName(t, frames, "edges")
	for _, name := range []string{"id", "title", "subtitle", "mainstat", "secondarystat", "arc__ok", "arc__errors"} {
		if f, _ := nodes.FieldByName(name); f == nil {
			t.Errorf("nodes lack %q", name)
		}
	}
	mainstat, _ := edges.FieldByName("mainstat")
	if mainstat.Type() != data.FieldTypeNullableFloat64 {
		t.Fatalf("edge mainstat is %s", mainstat.Type())
	}
	if !strings.Contains(mainstat.Config.DisplayName, "gradient of GET /checkout") {
		t.Errorf("edge mainstat is labelled %q", mainstat.Config.DisplayName)
	}
	if g := mainstat.At(0).(*float64); g == nil || *g != 1.02 {
		t.Errorf("frontend->app gradient = %v, want 1.02", g)
	}
	if g := mainstat.At(1).(*float64); g != nil {
		t.Errorf("app->db has no measured gradient, got %v", *g)
	}
	errorsArc, _ := nodes.FieldByName("arc__errors")
	if got := errorsArc.At(0).(float64); got != 0.01 {
		t.Errorf("frontend error share = %v, want 0.01", got)
	}
	if edges.Meta.PreferredVisualization != data.VisTypeNodeGraph || nodes.Meta.PreferredVisualization != data.VisTypeNodeGraph {
		t.Error("graph frames are not marked nodeGraph")
	}

	// Without a transaction the edges show latency and requests.
	frames = mustSucceed(t, runOne(t, ds, QueryModel{QueryType: QueryTypeGraph}))
	edges = frameByName(t, frames, "edges")
	mainstat, _ = edges.FieldByName("mainstat")
	if mainstat.Config.DisplayName != "mean latency (caller)" || *mainstat.At(0).(*float64) != 31 {
		t.Errorf("edge mainstat without transaction: %q %v", mainstat.Config.DisplayName, mainstat.At(0))
	}
}

// The service graph reads as Tempo's: rates and error percentages over the
// range, the caller's latency on edges, databases and async edges told apart,
// and links to the paths and, when configured, to the traces.
func TestServiceGraphRatesKindsAndLinks(t *testing.T) {
	server := startFakeAPI(t, &fakeAPI{})
	settings := backend.DataSourceInstanceSettings{
		UID: "tierscope-ds", URL: server.URL,
		JSONData: []byte(`{"tracesDatasourceUid": "tempo-1", "tracesDatasourceType": "tempo"}`),
	}
	instance, err := NewDatasource(context.Background(), settings)
	if err != nil {
		t.Fatal(err)
	}
	frames := mustSucceed(t, runOne(t, instance.(*Datasource), QueryModel{QueryType: QueryTypeGraph}))
	nodes, edges := frameByName(t, frames, nodesFrameName), frameByName(t, frames, edgesFrameName)

	// The fixture's range is an hour: 1000 requests are 0.278/s, 10 errors 1%.
	rate := floatAt(t, nodes, "mainstat", 0)
	if rate < 0.2777 || rate > 0.2778 {
		t.Errorf("frontend rate %v/s, want 1000/3600", rate)
	}
	if pct := floatAt(t, nodes, "secondarystat", 0); pct != 1 {
		t.Errorf("frontend errors %v%%, want 1", pct)
	}
	if got := stringColumn(t, nodes, "subtitle"); !slices.Equal(got, []string{"service", "service", "database", "service"}) {
		t.Errorf("subtitles %v", got)
	}
	// Edges: the caller's mean latency, the rate, async edges dashed.
	if got := floatAt(t, edges, "mainstat", 0); got != 31 {
		t.Errorf("frontend->app latency %v, want the CLIENT spans' 31 ms", got)
	}
	if pct := floatAt(t, edges, "detail__error_pct", 1); pct != 0.15 {
		t.Errorf("app->db errors %v%%, want 0.15", pct)
	}
	if got := stringColumn(t, edges, "strokeDasharray"); !slices.Equal(got, []string{"", "", "6 4"}) {
		t.Errorf("dash arrays %v: only the async edge is dashed", got)
	}
	// Links: paths through this datasource, traces in Tempo.
	id, _ := nodes.FieldByName("id")
	if id.Config == nil || len(id.Config.Links) != 2 {
		t.Fatalf("node links %+v", id.Config)
	}
	paths, traces := id.Config.Links[0], id.Config.Links[1]
	if paths.Internal.DatasourceUID != "tierscope-ds" || paths.Internal.Query.(map[string]any)["queryType"] != QueryTypePaths {
		t.Errorf("paths link %+v", paths.Internal)
	}
	if traces.Internal.DatasourceUID != "tempo-1" || !strings.Contains(traces.Internal.Query.(map[string]any)["query"].(string), "resource.service.name") {
		t.Errorf("traces link %+v", traces.Internal)
	}
	edgeID, _ := edges.FieldByName("id")
	if edgeID.Config == nil || len(edgeID.Config.Links) != 2 || !strings.Contains(edgeID.Config.Links[1].Internal.Query.(map[string]any)["query"].(string), "} > {") {
		t.Errorf("edge links %+v", edgeID.Config)
	}

	// Without a traces datasource only the paths link remains; a wrong type is a configuration error.
	instance, _ = NewDatasource(context.Background(), backend.DataSourceInstanceSettings{UID: "x", URL: server.URL})
	frames = mustSucceed(t, runOne(t, instance.(*Datasource), QueryModel{QueryType: QueryTypeGraph}))
	if id, _ := frameByName(t, frames, nodesFrameName).FieldByName("id"); len(id.Config.Links) != 1 {
		t.Errorf("links without a traces datasource: %+v", id.Config.Links)
	}
	instance, _ = NewDatasource(context.Background(), backend.DataSourceInstanceSettings{URL: server.URL, JSONData: []byte(`{"tracesDatasourceType": "zipkin"}`)})
	wantErrorContaining(t, runOne(t, instance.(*Datasource), QueryModel{QueryType: QueryTypeGraph}), "zipkin", "tempo or jaeger")
}

// A transaction's signature profile is latency against utilization, ascending;
// an experiment's spectrum is its baseline noise by frequency, the injection
// frequency marked.
func TestProfilesAndSpectrum(t *testing.T) {
	fake := &fakeAPI{}
	ds := newTestDatasource(t, startFakeAPI(t, fake).URL, "")

	frames := mustSucceed(t, runOne(t, ds, QueryModel{QueryType: QueryTypeProfile, Service: "frontend"}))
	if len(frames) != 1 {
		t.Fatalf("%d profile frames: one transaction of the fixture has a profile", len(frames))
	}
	util, _ := frames[0].FieldByName("utilization")
	lat, _ := frames[0].FieldByName("front_latency_ms")
	if util.Len() != 3 || util.At(0).(float64) != 0.1 || util.At(2).(float64) != 0.3 || lat.At(0).(float64) != 13 || lat.At(2).(float64) != 17 {
		t.Errorf("profile %v / %v", util, lat)
	}
	if lat.Labels["transaction"] != "GET /checkout" || lat.Labels["version"] != "v2" {
		t.Errorf("labels %v", lat.Labels)
	}
	wantNotice(t, runOne(t, ds, QueryModel{QueryType: QueryTypeProfile, Transaction: "GET /none"}), "no signature profile")

	frames = mustSucceed(t, runOne(t, ds, QueryModel{QueryType: QueryTypeSpectrum}))
	if got := fake.lastRequest(t, api.PathExperiments+"/exp-1"); got == nil {
		t.Fatal("the newest experiment was not read")
	}
	spectrum := frameByName(t, frames, "spectrum")
	if spectrum.Rows() != 4 {
		t.Fatalf("spectrum of N = 8: want k = 1..4, got %d rows", spectrum.Rows())
	}
	if f := floatAt(t, spectrum, "frequency_hz", 1); f != 0.5 {
		t.Errorf("k = 2 at %v Hz, want 2/(8·0.5 s) = 0.5", f)
	}
	if n := floatAt(t, spectrum, "noise_ms", 0); n != 10 {
		t.Errorf("noise at k = 1: %v, want |6+8i| = 10", n)
	}
	chosen, _ := spectrum.FieldByName("chosen_ms")
	if chosen.At(0).(*float64) != nil || chosen.At(1).(*float64) == nil || *chosen.At(1).(*float64) != 0.5 {
		t.Errorf("the injection frequency is not marked at k_d = 2: %v %v", chosen.At(0), chosen.At(1))
	}
	if n := spectrum.Meta.Notices; len(n) != 1 || !strings.Contains(n[0].Text, "42%") && !strings.Contains(n[0].Text, "43%") {
		t.Errorf("progress notice %v", n)
	}
}

func TestWorkFactorsAreTimeSeries(t *testing.T) {
	server := startFakeAPI(t, &fakeAPI{})
	frames := mustSucceed(t, runOne(t, newTestDatasource(t, server.URL, ""), QueryModel{QueryType: QueryTypeWorkFactors, Machine: "host-a"}))
	if len(frames) != 2 {
		t.Fatalf("want one frame per flow, got %d", len(frames))
	}
	for _, f := range frames {
		if f.Meta == nil || f.Meta.Type != data.FrameTypeTimeSeriesMulti {
			t.Errorf("frame meta %+v is not timeseries-multi", f.Meta)
		}
		if f.Fields[0].Type() != data.FieldTypeTime || f.Fields[1].Type() != data.FieldTypeFloat64 {
			t.Errorf("fields are %s, %s", f.Fields[0].Type(), f.Fields[1].Type())
		}
		if f.Fields[1].Labels["machine"] != "host-a" || f.Fields[1].Labels["flow"] == "" {
			t.Errorf("labels %v", f.Fields[1].Labels)
		}
		if ts := f.TimeSeriesSchema(); ts.Type != data.TimeSeriesTypeWide {
			t.Errorf("not a wide time series: %v", ts.Type)
		}
	}
	if got := frames[0].Fields[0].At(2).(time.Time); !got.Equal(time.Unix(1700000120, 0)) {
		t.Errorf("third time = %v", got)
	}
}

func TestSignaturesAndComparisonTables(t *testing.T) {
	fake := &fakeAPI{}
	server := startFakeAPI(t, fake)
	ds := newTestDatasource(t, server.URL, "")

	sig := frameByName(t, mustSucceed(t, runOne(t, ds, QueryModel{QueryType: QueryTypeSignatures, Service: "frontend", Version: "v2"})), "signatures")
	if sig.Rows() != 2 || sig.Meta.PreferredVisualization != data.VisTypeTable {
		t.Fatalf("signatures: %d rows", sig.Rows())
	}
	if q := fake.lastRequest(t, api.PathSignatures).URL.Query(); q.Get("service") != "frontend" || q.Get("version") != "v2" {
		t.Errorf("signature parameters %v", q)
	}
	serviceTime, _ := sig.FieldByName("service_time_ms")
	if serviceTime.At(1).(*float64) != nil {
		t.Error("insufficient data must be null, not 0")
	}

	cmp := frameByName(t, mustSucceed(t, runOne(t, ds, QueryModel{QueryType: QueryTypeCompare, Service: "frontend", BaseVersion: "v1", CandidateVersion: "v2"})), "comparison")
	if q := fake.lastRequest(t, api.PathCompare).URL.Query(); q.Get("base") != "v1" || q.Get("candidate") != "v2" || q.Get("service") != "frontend" {
		t.Errorf("compare parameters %v", q)
	}
	changed, _ := cmp.FieldByName("changed")
	if changed == nil || changed.Type() != data.FieldTypeBool || changed.At(0) != true || changed.At(1) != false {
		t.Fatalf("changed flags wrong: %v", changed)
	}
	verdict, _ := cmp.FieldByName("verdict")
	if verdict.At(1) != "insufficient data" {
		t.Errorf("verdict %v", verdict.At(1))
	}

	// Without versions there is nothing to ask the API: a notice lists the versions seen.
	wantNotice(t, runOne(t, ds, QueryModel{QueryType: QueryTypeCompare, Service: "frontend"}), "choose a base and a candidate version of frontend")
	wantNotice(t, runOne(t, ds, QueryModel{QueryType: QueryTypeCompare}), "choose a service")
}

func TestGradientsExperimentsAndPredict(t *testing.T) {
	fake := &fakeAPI{}
	server := startFakeAPI(t, fake)
	ds := newTestDatasource(t, server.URL, "")

	grad := frameByName(t, mustSucceed(t, runOne(t, ds, QueryModel{QueryType: QueryTypeGradients, Transaction: "GET /checkout", Element: "link:app->db"})), "gradients")
	if q := fake.lastRequest(t, api.PathGradients).URL.Query(); q.Get("element") != "link:app->db" || q.Get("transaction") != "GET /checkout" {
		t.Errorf("gradient parameters %v", q)
	}
	low, _ := grad.FieldByName("ci95_low")
	high, _ := grad.FieldByName("ci95_high")
	if low.At(0) != 1.6 || high.At(0) != 2.0 {
		t.Errorf("ci95 %v..%v", low.At(0), high.At(0))
	}

	exp := frameByName(t, mustSucceed(t, runOne(t, ds, QueryModel{QueryType: QueryTypeExperiments})), "experiments")
	percent, _ := exp.FieldByName("percent")
	finished, _ := exp.FieldByName("finished")
	count, _ := exp.FieldByName("gradients")
	if percent.At(0) != 42.5 || finished.At(0).(*time.Time) != nil || finished.At(1).(*time.Time) == nil || count.At(1) != int64(1) {
		t.Errorf("experiments: percent %v finished %v/%v gradients %v", percent.At(0), finished.At(0), finished.At(1), count.At(1))
	}
	if *percent.Config.Max != 100 {
		t.Error("progress should be bounded to 100")
	}
	if current, _ := exp.FieldByName("current_element"); current.At(0) != "link:app->db" || current.At(1) != "" {
		t.Errorf("the element under way: %v / %v", current.At(0), current.At(1))
	}

	pred := frameByName(t, mustSucceed(t, runOne(t, ds, QueryModel{QueryType: QueryTypePredict,
		Changes: []api.Change{{Element: "link:app->db", Delta: 20}, {Element: " frequency:host-a ", Delta: -400}}})), "prediction")
	var sent api.PredictRequest
	fake.mu.Lock()
	err := json.Unmarshal(fake.bodies[api.PathPredict], &sent)
	fake.mu.Unlock()
	if err != nil || len(sent.Changes) != 2 || sent.Changes[1] != (api.Change{Element: "frequency:host-a", Delta: -400}) {
		t.Errorf("predict request %+v (%v)", sent, err)
	}
	if fake.lastRequest(t, api.PathPredict).Method != http.MethodPost {
		t.Error("predict must POST")
	}
	delta, _ := pred.FieldByName("delta_ms")
	pct, _ := pred.FieldByName("delta_pct")
	if delta.At(0) != 36.0 || *pct.At(0).(*float64) != 90 || pct.At(1).(*float64) != nil {
		t.Errorf("prediction delta %v pct %v / %v", delta.At(0), pct.At(0), pct.At(1))
	}
	if !strings.Contains(pred.Meta.ExecutedQueryString, "link:app->db +20") {
		t.Errorf("executed query %q", pred.Meta.ExecutedQueryString)
	}

	wantErrorContaining(t, runOne(t, ds, QueryModel{QueryType: QueryTypePredict}), "at least one change")
	wantErrorContaining(t, runOne(t, ds, QueryModel{QueryType: QueryTypePredict, Changes: []api.Change{{Element: "app->db", Delta: 1}}}), "must start with link:")
}

func TestErrorsAreReadableFrameErrors(t *testing.T) {
	fake := &fakeAPI{token: "s3cret", overrides: map[string]func(http.ResponseWriter){
		api.PathSignatures: func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: "store: database is locked"})
		},
		api.PathGradients: func(w http.ResponseWriter) { _, _ = w.Write([]byte("<html>not the API</html>")) },
		api.PathWorkFactors: func(w http.ResponseWriter) {
			_ = json.NewEncoder(w).Encode(api.WorkFactors{Machines: []api.MachineWorkFactors{{
				Machine: "m", Series: []api.WorkFactorSeries{{Flow: "f", Times: []int64{1, 2}, Values: []float64{1}}}}}})
		},
	}}
	server := startFakeAPI(t, fake)

	wrongToken := newTestDatasource(t, server.URL, "wrong")
	r := runOne(t, wrongToken, QueryModel{QueryType: QueryTypePaths})
	wantErrorContaining(t, r, "401", "API token")
	if r.Status != backend.StatusUnauthorized || r.ErrorSource != backend.ErrorSourceDownstream {
		t.Errorf("status %v source %v", r.Status, r.ErrorSource)
	}

	ds := newTestDatasource(t, server.URL, "s3cret")
	r = runOne(t, ds, QueryModel{QueryType: QueryTypeSignatures})
	wantErrorContaining(t, r, "500", "store: database is locked")
	wantErrorContaining(t, runOne(t, ds, QueryModel{QueryType: QueryTypeGradients}), "not the expected JSON")
	wantErrorContaining(t, runOne(t, ds, QueryModel{QueryType: QueryTypeWorkFactors}), "2 times but 1 values")
	wantErrorContaining(t, runOne(t, ds, QueryModel{QueryType: "bogus"}), `unknown query type "bogus"`)
	wantErrorContaining(t, runOne(t, ds, QueryModel{QueryType: QueryTypePaths, Top: -1}), "top must be positive")

	// Unparseable query JSON, and one failing query next to a good one.
	resp, err := ds.QueryData(context.Background(), &backend.QueryDataRequest{Queries: []backend.DataQuery{
		{RefID: "bad", JSON: []byte(`{"top": "ten"}`), TimeRange: testRange},
		{RefID: "good", QueryType: QueryTypeExperiments, JSON: []byte(`{}`), TimeRange: testRange},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantErrorContaining(t, resp.Responses["bad"], "not valid JSON")
	mustSucceed(t, resp.Responses["good"])

	// A stopped server: unreachable, not a panic.
	server.Close()
	wantErrorContaining(t, runOne(t, ds, QueryModel{QueryType: QueryTypeGraph}), "cannot be reached")

	// No URL configured.
	unconfigured := newTestDatasource(t, "", "")
	wantErrorContaining(t, runOne(t, unconfigured, QueryModel{QueryType: QueryTypePaths}), "URL is not set")
	wantErrorContaining(t, runOne(t, newTestDatasource(t, "ftp://x", ""), QueryModel{}), "not an http(s) URL")
}

func TestEmptyDocumentsGiveEmptyFramesNotPanics(t *testing.T) {
	empty := map[string]any{
		api.PathPaths: api.PathsResponse{}, api.PathGraph: api.Graph{}, api.PathWorkFactors: api.WorkFactors{},
		api.PathSignatures: api.Signatures{}, api.PathCompare: api.Comparison{}, api.PathGradients: api.Gradients{},
		api.PathExperiments: api.Experiments{}, api.PathPredict: api.Prediction{}, api.PathLatency: api.Latency{},
	}
	overrides := map[string]func(http.ResponseWriter){}
	for path, doc := range empty {
		overrides[path] = func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(doc) }
	}
	// A literal null body decodes to zero documents too.
	overrides[api.PathGraph] = func(w http.ResponseWriter) { _, _ = w.Write([]byte("null")) }
	server := startFakeAPI(t, &fakeAPI{overrides: overrides})
	template := QueryModel{Service: "s", BaseVersion: "a", CandidateVersion: "b", Changes: []api.Change{{Element: "link:a->b", Delta: 1}}}
	for queryType, r := range RunEveryQueryType(context.Background(), server.URL, "", testRange, template) {
		frames := mustSucceed(t, r)
		if len(frames) == 0 {
			t.Errorf("%s: no frame at all", queryType)
		}
	}
}

func TestRunEveryQueryTypeAgainstTheAPI(t *testing.T) {
	server := startFakeAPI(t, &fakeAPI{token: "tok"})
	template := QueryModel{Service: "frontend", BaseVersion: "v1", CandidateVersion: "v2", Transaction: "GET /checkout",
		Changes: []api.Change{{Element: "link:app->db", Delta: 20}}}
	responses := RunEveryQueryType(context.Background(), server.URL, "tok", testRange, template)
	if len(responses) != len(QueryTypes) {
		t.Fatalf("%d responses for %d query types", len(responses), len(QueryTypes))
	}
	for queryType, r := range responses {
		if len(mustSucceed(t, r)) == 0 {
			t.Errorf("%s returned no frame", queryType)
		}
	}
}

func TestCheckHealth(t *testing.T) {
	fake := &fakeAPI{token: "tok"}
	server := startFakeAPI(t, fake)

	res, _ := newTestDatasource(t, server.URL, "tok").CheckHealth(context.Background(), &backend.CheckHealthRequest{})
	if res.Status != backend.HealthStatusOk || !strings.Contains(res.Message, "0.3.0") || !strings.Contains(res.Message, "2 services") {
		t.Errorf("healthy: %v %q", res.Status, res.Message)
	}
	if got := fake.lastRequest(t, api.PathCatalog).Header.Get("Authorization"); got != "Bearer tok" {
		t.Errorf("Authorization header %q", got)
	}

	res, _ = newTestDatasource(t, server.URL, "nope").CheckHealth(context.Background(), &backend.CheckHealthRequest{})
	if res.Status != backend.HealthStatusError || !strings.Contains(res.Message, "authentication failed (HTTP 401)") {
		t.Errorf("bad token: %v %q", res.Status, res.Message)
	}

	degraded := startFakeAPI(t, &fakeAPI{overrides: map[string]func(http.ResponseWriter){
		api.PathHealth: func(w http.ResponseWriter) {
			_ = json.NewEncoder(w).Encode(api.Health{Status: "degraded", Version: "0.3.0", Problems: []string{"store is read-only"}})
		},
	}})
	res, _ = newTestDatasource(t, degraded.URL, "").CheckHealth(context.Background(), &backend.CheckHealthRequest{})
	if res.Status != backend.HealthStatusError || !strings.Contains(res.Message, "store is read-only") {
		t.Errorf("degraded: %v %q", res.Status, res.Message)
	}

	server.Close()
	res, _ = newTestDatasource(t, server.URL, "tok").CheckHealth(context.Background(), &backend.CheckHealthRequest{})
	if res.Status != backend.HealthStatusError || !strings.Contains(res.Message, "cannot be reached") {
		t.Errorf("unreachable: %v %q", res.Status, res.Message)
	}
	res, _ = newTestDatasource(t, "", "").CheckHealth(context.Background(), &backend.CheckHealthRequest{})
	if res.Status != backend.HealthStatusError || !strings.Contains(res.Message, "URL is not set") {
		t.Errorf("unconfigured: %v %q", res.Status, res.Message)
	}
}

type capturedResponse struct {
	responses []*backend.CallResourceResponse
}

func (c *capturedResponse) Send(r *backend.CallResourceResponse) error {
	c.responses = append(c.responses, r)
	return nil
}

func callResource(t *testing.T, ds *Datasource, path, rawURL string) (int, []resourceOption, string) {
	t.Helper()
	sender := &capturedResponse{}
	if err := ds.CallResource(context.Background(), &backend.CallResourceRequest{Method: http.MethodGet, Path: path, URL: rawURL}, sender); err != nil {
		t.Fatal(err)
	}
	if len(sender.responses) != 1 {
		t.Fatalf("%d responses", len(sender.responses))
	}
	r := sender.responses[0]
	var options []resourceOption
	if r.Status == http.StatusOK {
		if err := json.Unmarshal(r.Body, &options); err != nil {
			t.Fatal(err)
		}
	}
	return r.Status, options, string(r.Body)
}

func values(options []resourceOption) string {
	var v []string
	for _, o := range options {
		v = append(v, o.Value)
	}
	return strings.Join(v, ",")
}

func TestCallResourceServesTheCatalog(t *testing.T) {
	fake := &fakeAPI{token: "tok"}
	server := startFakeAPI(t, fake)
	ds := newTestDatasource(t, server.URL, "tok")

	for _, tc := range []struct{ path, url, want string }{
		{"services", "services", "app,frontend"},
		{"transactions", "transactions", "GET /checkout,GET /item"},
		{"transactions", "transactions?service=app", "GET /checkout"},
		{"versions", "versions?service=frontend", "v1,v2"},
		{"versions", "versions", "v1,v2,v7"},
		{"links", "links", "link:app->db,link:frontend->app"},
		{"machines", "machines?from=1700000000&to=1700003600", "host-a,host-b"},
	} {
		status, options, body := callResource(t, ds, tc.path, tc.url)
		if status != http.StatusOK || values(options) != tc.want {
			t.Errorf("%s: %d %s, want %s", tc.url, status, body, tc.want)
		}
	}
	if q := fake.lastRequest(t, api.PathCatalog).URL.Query(); q.Get("from") != "1700000000" || q.Get("to") != "1700003600" {
		t.Errorf("time range not passed on: %v", q)
	}
	_, links, _ := callResource(t, ds, "links", "links")
	if links[1].Label != "frontend → app" || links[1].Description != "app:8080" {
		t.Errorf("link option %+v", links[1])
	}

	if status, _, body := callResource(t, ds, "nothing", "nothing"); status != http.StatusNotFound || !strings.Contains(body, "unknown resource") {
		t.Errorf("unknown resource: %d %s", status, body)
	}
	if status, _, body := callResource(t, newTestDatasource(t, server.URL, "bad"), "services", "services"); status != http.StatusUnauthorized || !strings.Contains(body, "API token") {
		t.Errorf("bad token: %d %s", status, body)
	}
}

func TestAPanicBecomesAFrameError(t *testing.T) {
	base, _ := url.Parse("http://127.0.0.1:1")
	// A client without an HTTP client dereferences nil: the guard must turn that into an error.
	broken := &APIClient{baseURL: base}
	r := runQuery(context.Background(), broken, graphLinks{}, QueryTypeExperiments, testRange, QueryModel{})
	wantErrorContaining(t, r, "internal error while running the experiments query")
	if r.ErrorSource != backend.ErrorSourcePlugin {
		t.Errorf("error source %v", r.ErrorSource)
	}
}

// The exporter's README prints the API as http://host:8790/api/v1/; a URL
// entered that way, or without /api/v1, or with trailing slashes, must reach the
// same endpoints rather than /api/v1/api/v1/health.
func TestURLWithOrWithoutTheAPIVersion(t *testing.T) {
	fake := &fakeAPI{}
	server := startFakeAPI(t, fake)
	for _, base := range []string{server.URL, server.URL + "/", server.URL + "/api/v1", server.URL + "/api/v1/", server.URL + "/api/v1//"} {
		res, _ := newTestDatasource(t, base, "").CheckHealth(context.Background(), &backend.CheckHealthRequest{})
		if res.Status != backend.HealthStatusOk {
			t.Errorf("URL %q: %v %q", base, res.Status, res.Message)
		}
	}
	if got := fake.lastRequest(t, api.PathHealth).URL.Path; got != api.PathHealth {
		t.Errorf("health requested at %q, want %q", got, api.PathHealth)
	}
}

// The datasource's HTTP client is Grafana's: an HTTPS exporter whose CA is
// given in the settings is trusted, and custom headers are sent.
func TestTLSCAAndHeadersFromTheSettings(t *testing.T) {
	fake := &fakeAPI{}
	server := httptest.NewTLSServer(fake)
	t.Cleanup(server.Close)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw}))

	check := func(jsonData string, secure map[string]string) *backend.CheckHealthResult {
		t.Helper()
		instance, err := NewDatasource(context.Background(), backend.DataSourceInstanceSettings{
			URL: server.URL + "/api/v1/", JSONData: []byte(jsonData), DecryptedSecureJSONData: secure,
		})
		if err != nil {
			t.Fatal(err)
		}
		res, _ := instance.(*Datasource).CheckHealth(context.Background(), &backend.CheckHealthRequest{})
		return res
	}
	if res := check(`{}`, nil); res.Status != backend.HealthStatusError || !strings.Contains(res.Message, "certificate") {
		t.Errorf("without the CA: %v %q", res.Status, res.Message)
	}
	res := check(`{"tlsAuthWithCACert": true, "httpHeaderName1": "X-Scope-OrgID", "timeoutSeconds": 5}`,
		map[string]string{"tlsCACert": caPEM, "httpHeaderValue1": "tenant-7"})
	if res.Status != backend.HealthStatusOk {
		t.Fatalf("with the CA: %v %q", res.Status, res.Message)
	}
	if got := fake.lastRequest(t, api.PathHealth).Header.Get("X-Scope-OrgID"); got != "tenant-7" {
		t.Errorf("custom header %q", got)
	}
}
