package plugin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/spectral"
)

func ptr(v float64) *float64 { return &v }

// fakeAPI serves documents of the api package's types, the same structs the
// exporter encodes, so the tests follow the contract rather than hand-written JSON.
type fakeAPI struct {
	token string

	mu       sync.Mutex
	requests []*http.Request
	bodies   map[string][]byte
	// overrides answers a path with a status and body instead of its document.
	overrides map[string]func(w http.ResponseWriter)
}

func fixtureQuantiles(mean float64) *api.Quantiles {
	return &api.Quantiles{Mean: mean, P50: mean * 0.9, P90: mean * 1.5, P99: mean * 2}
}

// fixtureExperimentDetail is an experiment's result as the exporter stores
// it: a training plan of N = 8 bins of 0.5 s, injecting at k_d = 2.
func fixtureExperimentDetail() json.RawMessage {
	plan := &spectral.Plan{Transaction: "GET /checkout", N: 8, BinSeconds: 0.5, Kd: 2, FrequencyHz: 0.5,
		BaselineFFTMean: []spectral.Complex{{40, 0}, {3, 4}, {0, 1}, {1, 0}, {0.5, 0}},
		BaselineFFTStd:  []spectral.Complex{{0, 0}, {6, 8}, {0.3, 0.4}, {2, 0}, {1, 0}}}
	raw, err := json.Marshal(gradient.Result{Phase: "active", Plan: plan})
	if err != nil {
		panic(err)
	}
	return raw
}

func (f *fakeAPI) documents() map[string]any {
	return map[string]any{
		api.PathExperiments + "/exp-1": api.Experiment{ID: "exp-1", Element: "link:app->db", Phase: "active", Percent: 42.5,
			Started: 1700000100, Detail: fixtureExperimentDetail()},
		api.PathHealth: api.Health{Status: "ok", Version: "0.3.0", Store: "sqlite", SchemaVersion: 2, WindowSeconds: 10},
		api.PathPaths: api.PathsResponse{
			TimeRange: api.TimeRange{From: 1700000000, To: 1700003600},
			Traces:    130,
			Patterns: []api.PathPattern{
				{Signature: "frontend(app(db))", Count: 100, TotalLatencyMs: 4200, Root: api.PathNode{
					Node: "GET /checkout",
					Children: []api.PathNode{{
						Node: "frontend", LatencyMs: fixtureQuantiles(40), CallDelayMs: fixtureQuantiles(0.5),
						Children: []api.PathNode{{
							Node: "app", LatencyMs: fixtureQuantiles(30), CallDelayMs: fixtureQuantiles(1),
							Children: []api.PathNode{{Node: "db", LatencyMs: fixtureQuantiles(10), DelaysMs: []float64{0.2, 0.4}, Messages: 4}},
						}},
					}},
				}},
				{Signature: "frontend(cache)", Count: 30, TotalLatencyMs: 300, Root: api.PathNode{
					Node: "GET /item",
					Children: []api.PathNode{{
						Node: "frontend", LatencyMs: fixtureQuantiles(10),
						Children: []api.PathNode{{Node: "cache", LatencyMs: fixtureQuantiles(2)}},
					}},
				}},
			},
		},
		api.PathGraph: api.Graph{
			TimeRange: api.TimeRange{From: 1700000000, To: 1700003600},
			Nodes: []api.GraphNode{
				{ID: "frontend", Requests: 1000, Errors: 10, LatencyMs: fixtureQuantiles(40)},
				{ID: "app", Requests: 900, Errors: 0, LatencyMs: fixtureQuantiles(30)},
				{ID: "db", Requests: 2000},
				{ID: "worker", Requests: 360, LatencyMs: fixtureQuantiles(8)},
			},
			Edges: []api.GraphEdge{
				{ID: "frontend->app", Source: "frontend", Target: "app", Kind: "sync", Requests: 900, LatencyMs: fixtureQuantiles(31), Gradient: ptr(1.02)},
				{ID: "app->db", Source: "app", Target: "db", Kind: "database", Requests: 2000, Errors: 3, LatencyMs: fixtureQuantiles(5)},
				{ID: "app->worker", Source: "app", Target: "worker", Kind: "async", Requests: 360, LatencyMs: fixtureQuantiles(12)},
			},
		},
		api.PathCatalog: api.Catalog{
			TimeRange: api.TimeRange{From: 1700000000, To: 1700003600},
			Services: []api.CatalogService{
				{Name: "frontend", Versions: []string{"v1", "v2"}, Transactions: []string{"GET /checkout", "GET /item"}},
				{Name: "app", Versions: []string{"v7"}, Transactions: []string{"GET /checkout"}},
			},
			Links:    []api.Link{{Source: "frontend", Target: "app", Address: "app:8080"}, {Source: "app", Target: "db"}},
			Machines: []string{"host-a", "host-b"},
		},
		api.PathLatency: api.Latency{StepSeconds: 60, Series: []api.ServiceLatency{{Service: "frontend",
			Times: []int64{1700000000, 1700000060}, Requests: []int64{120, 90}, MeanMs: []float64{12, 15},
			P50Ms: []float64{10, 12}, P99Ms: []float64{40, 55}}}},
		api.PathWorkFactors: api.WorkFactors{
			TimeRange: api.TimeRange{From: 1700000000, To: 1700003600},
			Machines: []api.MachineWorkFactors{{
				Machine: "host-a", R2: 0.97, MSE: 0.01,
				Flows: []api.FlowWorkFactor{{Flow: "GET /checkout", WorkFactor: 12.5, Goodness: 0.9, AlphaRaw: 12, AlphaSmoothed: 12.5}},
				Series: []api.WorkFactorSeries{
					{Flow: "GET /checkout", Times: []int64{1700000000, 1700000060, 1700000120}, Values: []float64{12, 12.4, 12.5}},
					{Flow: "GET /item", Times: []int64{1700000000, 1700000060}, Values: []float64{3, 3.1}},
				},
			}},
		},
		api.PathSignatures: api.Signatures{
			TimeRange: api.TimeRange{From: 1700000000, To: 1700003600},
			Signatures: []api.Signature{{Service: "frontend", Version: "v2", Transactions: []api.TransactionSignature{
				{Transaction: "GET /checkout", ServiceTimeMs: ptr(12.5), Status: "ok", BucketsUsed: 6, Spread: 0.1, Shape: "tight", Profile: [][3]float64{{0.3, 50, 17}, {0.1, 40, 13}, {0.2, 45, 15}}},
				{Transaction: "GET /item", Status: "insufficient data", BucketsUsed: 1},
			}}},
		},
		api.PathCompare: api.Comparison{Service: "frontend", Base: "v1", Candidate: "v2", Transactions: []api.TransactionComparison{
			{Transaction: "GET /checkout", BaseMs: ptr(10), CandidateMs: ptr(12.5), DeltaMs: ptr(2.5), DeltaPct: ptr(25), Changed: true, Verdict: "changed", Basis: "welch t=5.1", Confidence: 0.99},
			{Transaction: "GET /item", Changed: false, Verdict: "insufficient data"},
		}},
		api.PathExperiments: api.Experiments{Experiments: []api.Experiment{
			{ID: "exp-1", Element: "link:web->app,link:app->db", Elements: []string{"link:web->app", "link:app->db"}, CurrentElement: "link:app->db",
				Phase: "active", Percent: 42.5, ETASeconds: 120, Started: 1700000100},
			{ID: "exp-0", Element: "frequency:host-a", Phase: "done", Percent: 100, Started: 1699990000, Finished: 1699993600,
				Gradients: []api.Gradient{{Element: "frequency:host-a", Transaction: "GET /checkout", Gradient: -0.01}}},
		}},
		api.PathGradients: api.Gradients{Gradients: []api.Gradient{
			{Element: "link:app->db", Transaction: "GET /checkout", Gradient: 1.8, CI95: [2]float64{1.6, 2.0}, SNR: 9, Bins: 64, PerturbationMs: 5, Experiment: "exp-1", Measured: 1700000500},
		}},
		api.PathPredict: api.Prediction{Transactions: []api.TransactionPrediction{
			{Transaction: "GET /checkout", BaselineMs: 40, PredictedMs: 76, CI95: [2]float64{70, 82}},
			{Transaction: "GET /item", BaselineMs: 0, PredictedMs: 0},
		}},
	}
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r)
	if r.Body != nil {
		var body json.RawMessage
		if json.NewDecoder(r.Body).Decode(&body) == nil {
			if f.bodies == nil {
				f.bodies = map[string][]byte{}
			}
			f.bodies[r.URL.Path] = body
		}
	}
	override := f.overrides[r.URL.Path]
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	if override != nil {
		override(w)
		return
	}
	if f.token != "" && r.URL.Path != api.PathHealth && r.Header.Get("Authorization") != "Bearer "+f.token {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: "missing or invalid bearer token"})
		return
	}
	doc, ok := f.documents()[r.URL.Path]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: "no such endpoint " + r.URL.Path})
		return
	}
	if r.URL.Path == api.PathPredict && r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	_ = json.NewEncoder(w).Encode(doc)
}

func (f *fakeAPI) lastRequest(t *testing.T, path string) *http.Request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.requests) - 1; i >= 0; i-- {
		if f.requests[i].URL.Path == path {
			return f.requests[i]
		}
	}
	t.Fatalf("no request to %s", path)
	return nil
}

func startFakeAPI(t *testing.T, f *fakeAPI) *httptest.Server {
	t.Helper()
	server := httptest.NewServer(f)
	t.Cleanup(server.Close)
	return server
}
