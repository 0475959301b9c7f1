package api

import "encoding/json"

// The perfmodel exporter's HTTP API, JSON under /api/v1 (openapi.yaml beside the
// exporter documents it). Every list endpoint takes `from` and `to` (RFC 3339 or
// unix seconds; default: the last hour) and answers with the time range it
// actually covered. Errors are ErrorResponse with a 4xx/5xx status.

// Paths of the HTTP API, relative to the server root.
const (
	PathHealth      = "/api/v1/health"
	PathPaths       = "/api/v1/paths"
	PathGraph       = "/api/v1/graph"
	PathLatency     = "/api/v1/latency"
	PathCatalog     = "/api/v1/catalog"
	PathWorkFactors = "/api/v1/workfactors"
	// PathWorkFactorSamples serves the work-factor regression's inputs as
	// docs/formats.md §5 CSV, for replaying a model offline.
	PathWorkFactorSamples = "/api/v1/workfactors/samples"
	PathSignatures        = "/api/v1/signatures"
	PathCompare           = "/api/v1/signatures/compare"
	PathExperiments       = "/api/v1/experiments"
	PathGradients         = "/api/v1/gradients"
	PathPredict           = "/api/v1/predict"
	PathOpenAPI           = "/api/v1/openapi.yaml"
	PathMetrics           = "/metrics"
)

// ErrorResponse is the body of every failed request.
type ErrorResponse struct {
	Error string `json:"error"`
}

// TimeRange is the range of windows a response covers, in unix seconds.
type TimeRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Health is GET /api/v1/health.
type Health struct {
	Status        string   `json:"status"` // "ok" or "degraded"
	Version       string   `json:"version"`
	UptimeSeconds float64  `json:"uptime_seconds"`
	Store         string   `json:"store"` // "sqlite" or "postgres"
	SchemaVersion int      `json:"schema_version"`
	Shard         string   `json:"shard"`
	WindowSeconds int64    `json:"window_seconds"`
	LastFlush     int64    `json:"last_flush,omitempty"`
	Problems      []string `json:"problems,omitempty"`
}

// PathsResponse is GET /api/v1/paths?from&to&service&top: the causal path
// patterns of trace trees, merged over the range (docs/formats.md §2 patterns).
type PathsResponse struct {
	TimeRange
	Traces   int64         `json:"traces"`
	Patterns []PathPattern `json:"patterns"`
}

// Graph is GET /api/v1/graph?from&to[&transaction]: the service graph. With a
// transaction, edges carry that transaction's link gradient when one was measured.
type Graph struct {
	TimeRange
	Nodes []GraphNode `json:"nodes"`
	Edges []GraphEdge `json:"edges"`
}

// GraphNode is one service.
type GraphNode struct {
	ID        string     `json:"id"` // the service name
	Requests  int64      `json:"requests"`
	Errors    int64      `json:"errors"`
	LatencyMs *Quantiles `json:"latency_ms,omitempty"` // SERVER span durations
}

// GraphEdge is one caller → callee edge.
type GraphEdge struct {
	ID        string     `json:"id"` // "source->target"
	Source    string     `json:"source"`
	Target    string     `json:"target"`
	Kind      string     `json:"kind"` // "sync", "async" (messaging, or found by convolution) or "database"
	Requests  int64      `json:"requests"`
	Errors    int64      `json:"errors"`
	LatencyMs *Quantiles `json:"latency_ms,omitempty"` // CLIENT span durations; for async edges the delay
	Gradient  *float64   `json:"gradient,omitempty"`   // d(response time of the chosen transaction)/d(link latency)
}

// Catalog is GET /api/v1/catalog?from&to: what the editors offer in dropdowns.
type Catalog struct {
	TimeRange
	Services []CatalogService `json:"services"`
	Links    []Link           `json:"links"`
	Machines []string         `json:"machines"`
}

// CatalogService is one service with its versions and transactions.
type CatalogService struct {
	Name         string   `json:"name"`
	Versions     []string `json:"versions"`
	Transactions []string `json:"transactions"`
}

// Link is one caller → callee link of the service graph, an experiment target.
type Link struct {
	Source  string `json:"source"`
	Target  string `json:"target"`
	Address string `json:"address,omitempty"` // host:port when known
}

// Latency is GET /api/v1/latency?from&to[&service][&step]: each service's
// SERVER latency and requests per step, oldest first; steps without requests
// are left out.
type Latency struct {
	TimeRange
	StepSeconds int64            `json:"step_seconds"`
	Series      []ServiceLatency `json:"series"`
}

// ServiceLatency is one service's latency over time; the slices are aligned.
type ServiceLatency struct {
	Service  string    `json:"service"`
	Times    []int64   `json:"times"` // start of each step, unix seconds
	Requests []int64   `json:"requests"`
	MeanMs   []float64 `json:"mean_ms"`
	P50Ms    []float64 `json:"p50_ms"`
	P99Ms    []float64 `json:"p99_ms"`
}

// WorkFactors is GET /api/v1/workfactors?from&to[&machine]: per machine, the
// latest model and, per flow, the series of estimates (docs/formats.md §5 fields).
type WorkFactors struct {
	TimeRange
	Machines []MachineWorkFactors `json:"machines"`
}

// MachineWorkFactors is the regression of one machine (or process).
type MachineWorkFactors struct {
	Machine string             `json:"machine"`
	R2      float64            `json:"r2"`
	MSE     float64            `json:"mse"`
	Flows   []FlowWorkFactor   `json:"flows"`
	Series  []WorkFactorSeries `json:"series,omitempty"`
	// HalfLifeWindows is the regression's memory at the end of the range, in
	// windows: it grows while the work factors hold and is shortened by a
	// detected change.
	HalfLifeWindows float64 `json:"half_life_windows,omitempty"`
	// Groups are flows whose rates cannot be told apart, solved as one.
	Groups []WorkFactorGroup `json:"groups,omitempty"`
	// BackgroundMHz is the CPU no flow explains, when the data identify it.
	BackgroundMHz *float64 `json:"background_mhz,omitempty"`
	// Agreement is the cross-check per service of the work factors with the
	// signatures' service times (needs core_mhz).
	Agreement []ServiceAgreement `json:"agreement,omitempty"`
}

// WorkFactorGroup is a collinear group of flows and why.
type WorkFactorGroup struct {
	Flows  []string `json:"flows"`
	Reason string   `json:"reason"`
}

// ServiceAgreement compares a service's mean work factor, as milliseconds on
// one core of core_mhz, with its signature's mean service time.
type ServiceAgreement struct {
	Service       string  `json:"service"`
	ImpliedMs     float64 `json:"implied_ms"`
	ServiceTimeMs float64 `json:"service_time_ms"`
	Ratio         float64 `json:"ratio"`
	Disagrees     bool    `json:"disagrees"`
}

// FlowWorkFactor is one flow's estimate (docs/formats.md §5).
type FlowWorkFactor struct {
	Flow          string  `json:"flow"`
	WorkFactor    float64 `json:"work_factor"` // standard megacycles per request
	Goodness      float64 `json:"goodness"`
	Combined      bool    `json:"combined"`
	AlphaRaw      float64 `json:"alpha_raw"`
	AlphaSmoothed float64 `json:"alpha_smoothed"`
	// ServiceTimeMs is the signature's service time of the same flow, when one
	// exists; Disagrees flags when the two estimates of demand differ by > 25%.
	ServiceTimeMs *float64 `json:"service_time_ms,omitempty"`
	Disagrees     bool     `json:"disagrees,omitempty"`
}

// WorkFactorSeries is one flow's work factor over time.
type WorkFactorSeries struct {
	Flow   string    `json:"flow"`
	Times  []int64   `json:"times"` // unix seconds
	Values []float64 `json:"values"`
}

// Signatures is GET /api/v1/signatures?from&to[&service][&version]
// (docs/formats.md §6, one entry per service and version).
type Signatures struct {
	TimeRange
	Signatures []Signature `json:"signatures"`
}

// Signature is the application signature of one service version.
type Signature struct {
	Service      string                 `json:"service"`
	Version      string                 `json:"version"`
	Transactions []TransactionSignature `json:"transactions"`
}

// TransactionSignature is one transaction's load-independent service time.
type TransactionSignature struct {
	Transaction   string       `json:"transaction"`
	ServiceTimeMs *float64     `json:"service_time_ms"` // null with Status "insufficient data"
	Status        string       `json:"status"`          // "ok" or "insufficient data"
	BucketsUsed   int          `json:"buckets_used"`
	Spread        float64      `json:"spread"`
	Shape         string       `json:"shape"`   // "tight" or "spread"
	Profile       [][3]float64 `json:"profile"` // [utilization_bucket, count, mean_front_latency_ms]
}

// Comparison is GET /api/v1/signatures/compare?service&base&candidate.
type Comparison struct {
	Service      string                  `json:"service"`
	Base         string                  `json:"base"`
	Candidate    string                  `json:"candidate"`
	Transactions []TransactionComparison `json:"transactions"`
}

// TransactionComparison is the verdict for one transaction (docs/formats.md §6).
type TransactionComparison struct {
	Transaction string   `json:"transaction"`
	BaseMs      *float64 `json:"base_ms"`
	CandidateMs *float64 `json:"candidate_ms"`
	DeltaMs     *float64 `json:"delta_ms"`
	DeltaPct    *float64 `json:"delta_pct"`
	Changed     bool     `json:"changed"`
	Verdict     string   `json:"verdict"` // "changed", "unchanged", "spread" or "insufficient data"
	Basis       string   `json:"basis"`   // the statistical test and its statistic
	Confidence  float64  `json:"confidence"`
}

// Experiments is GET /api/v1/experiments.
type Experiments struct {
	Experiments []Experiment `json:"experiments"`
}

// ExperimentRequest is POST /api/v1/experiments: measure the gradients of every
// front transaction with respect to one element, or to several in turn after
// a single training phase (paper 000 §3).
type ExperimentRequest struct {
	// Element is "link:<source>-><target>", "frequency:<machine>" or "capacity:<machine>".
	Element string `json:"element,omitempty"`
	// Elements, instead of Element, are measured one after the other; the
	// passive training phase is shared.
	Elements []string `json:"elements,omitempty"`
	Injector string   `json:"injector,omitempty"` // one of the configured injector URLs; default from config
	K        int      `json:"k,omitempty"`
	N        int      `json:"n,omitempty"`
	Scale    float64  `json:"scale,omitempty"`
	MaxP99Ms float64  `json:"max_p99_ms,omitempty"` // SLO guard
}

// Experiment is one gradient experiment and its progress.
type Experiment struct {
	ID string `json:"id"`
	// Element is the element measured; for several, their comma-separated list.
	Element  string   `json:"element"`
	Elements []string `json:"elements,omitempty"`
	// CurrentElement is the element being measured while the experiment runs.
	CurrentElement string     `json:"current_element,omitempty"`
	Phase          string     `json:"phase"` // training, adaptive, active, done, aborted, failed
	Percent        float64    `json:"percent"`
	ETASeconds     float64    `json:"eta_seconds"`
	Started        int64      `json:"started"`
	Finished       int64      `json:"finished,omitempty"`
	Reason         string     `json:"reason,omitempty"` // why it aborted or failed
	Gradients      []Gradient `json:"gradients,omitempty"`
	// Detail is the experiment's full result (internal/gradient.Result): the
	// training plan (bin width, k_d, N, baselines), and per element the
	// measurement window, the amplitudes requested and actually injected,
	// and the time-domain comparator beside each spectral estimate.
	Detail json.RawMessage `json:"detail,omitempty"`
}

// Gradients is GET /api/v1/gradients?[transaction][&element].
type Gradients struct {
	Gradients []Gradient `json:"gradients"`
}

// Gradient is d(response time of Transaction)/d(Element) (docs/formats.md §7).
type Gradient struct {
	Element        string     `json:"element"`
	Transaction    string     `json:"transaction"`
	Gradient       float64    `json:"gradient"`
	CI95           [2]float64 `json:"ci95"`
	SNR            float64    `json:"snr"`
	Bins           int        `json:"bins"`
	PerturbationMs float64    `json:"perturbation_ms"`
	Experiment     string     `json:"experiment,omitempty"`
	Measured       int64      `json:"measured"` // unix seconds
	// Basis is what the gradient is with respect to: absent for a link (ms
	// of latency); for capacity, 1/(c·f − α·w) at the operating point c.
	Basis *Basis `json:"basis,omitempty"`
	// Interval is the range of the attribute the wave swept, low to high
	// (cores for a capacity): the secant the gradient is. Absent for a link.
	Interval *[2]float64 `json:"interval,omitempty"`
}

// Basis is a gradient's basis function and its operating point (paper 003
// §III): kind cpufreq is 1/(f − α·w), kind capacity 1/(c·f − α·w), with
// α·w = alpha·workload the demand in MHz.
type Basis struct {
	Kind         string  `json:"kind"`
	Operating    float64 `json:"operating"`
	FrequencyMHz float64 `json:"frequency_mhz,omitempty"`
	Alpha        float64 `json:"alpha"`
	Workload     float64 `json:"workload"`
	// Side is which side of the operating point a capacity's wave swept:
	// below, centered or above.
	Side string `json:"side,omitempty"`
}

// PredictRequest is POST /api/v1/predict (also GET with repeated `change`
// parameters): what-if changes of link latency, frequency or capacity.
type PredictRequest struct {
	BaselineMs map[string]float64 `json:"baseline_ms,omitempty"` // default: the measured mean per transaction
	Changes    []Change           `json:"changes"`
}

// Change is one what-if, e.g. {"element": "link:app->db", "delta": 20} (+20 ms).
type Change struct {
	Element string  `json:"element"`
	Delta   float64 `json:"delta"` // ms for links, MHz for frequency, fraction of a core for capacity
}

// Prediction is the answer of /api/v1/predict (paper 000 §5.3).
type Prediction struct {
	Transactions []TransactionPrediction `json:"transactions"`
}

// TransactionPrediction is one transaction's predicted response time.
type TransactionPrediction struct {
	Transaction string     `json:"transaction"`
	BaselineMs  float64    `json:"baseline_ms"`
	PredictedMs float64    `json:"predicted_ms"`
	CI95        [2]float64 `json:"ci95"`
	// Terms is each change's contribution and the gradient it used.
	Terms []PredictionTerm `json:"terms,omitempty"`
}

// PredictionTerm is one change's part in a prediction.
type PredictionTerm struct {
	Element        string  `json:"element"`
	BasisChange    float64 `json:"basis_change"`
	Gradient       float64 `json:"gradient"`
	ContributionMs float64 `json:"contribution_ms"`
	// Side is the side of the operating point the capacity gradient used
	// was measured on, or two sides joined by "+" when interpolated
	// between them.
	Side string `json:"side,omitempty"`
}
