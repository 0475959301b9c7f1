// Package httpapi is the perfmodel exporter's HTTP layer: it routes the API
// (docs/formats.md, openapi.yaml), reads and checks each request's
// parameters, asks the read side (query) or the coordinator, and writes the
// answer as JSON, CSV or, for /metrics, the Prometheus text format.
package httpapi // import "github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/httpapi"

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/coordinator"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/query"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/timegrid"
	"github.com/tierscope/tierscope/internal/api"
)

// Deps are what the API answers from.
type Deps struct {
	Query       *query.Reader
	Coordinator *coordinator.Coordinator
	// Health is the health document, the exporter's own.
	Health func(ctx context.Context) api.Health
	// OpenAPI is the API's description, served as it is.
	OpenAPI []byte
	Logger  *zap.Logger
}

// server answers the API's requests.
type server struct {
	Deps
	q *query.Reader
}

// maxRange bounds one query's time range, so a query cannot scan years.
const maxRange = 31 * 24 * time.Hour

// badf is an error answered with 400 and its message.
func badf(format string, args ...any) error { return apierror.Badf(format, args...) }

// created marks a response answered with 201 Created.
type created struct{ v any }

// checkParams rejects a query parameter that is not allowed, naming it and
// the allowed ones.
func checkParams(q url.Values, allowed []string) error {
	for k := range q {
		if slices.Contains(allowed, k) {
			continue
		}
		if len(allowed) == 0 {
			return fmt.Errorf("unknown query parameter %q (this path takes none)", k)
		}
		return fmt.Errorf("unknown query parameter %q (allowed: %s)", k, strings.Join(allowed, ", "))
	}
	return nil
}

// Handler routes the API. The mux only matches methods and paths; each
// handler validates its query parameters and rejects unknown ones.
func Handler(d Deps) http.Handler {
	e := &server{Deps: d, q: d.Query}
	mux := http.NewServeMux()
	get := func(path string, allowed []string, fn func(*http.Request, url.Values) (any, error)) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			if err := checkParams(q, allowed); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			e.answer(w, r, q, fn)
		})
	}
	get(api.PathHealth, nil, func(r *http.Request, _ url.Values) (any, error) { return d.Health(r.Context()), nil })
	get(api.PathPaths, []string{"from", "to", "service", "top"}, e.paths)
	get(api.PathGraph, []string{"from", "to", "transaction"}, e.graph)
	get(api.PathCatalog, []string{"from", "to"}, e.catalog)
	get(api.PathLatency, []string{"from", "to", "service", "step"}, e.latency)
	get(api.PathWorkFactors, []string{"from", "to", "machine"}, e.workFactors)
	get(api.PathSignatures, []string{"from", "to", "service", "version"}, e.signatures)
	get(api.PathCompare, []string{"from", "to", "service", "base", "candidate"}, e.compare)
	get(api.PathExperiments, nil, func(r *http.Request, _ url.Values) (any, error) { return e.Coordinator.List(r.Context()) })
	get(api.PathExperiments+"/{id}", nil, func(r *http.Request, _ url.Values) (any, error) {
		return e.Coordinator.Get(r.Context(), r.PathValue("id"))
	})
	get(api.PathGradients, []string{"transaction", "element"}, e.gradients)
	get(api.PathPredict, []string{"change", "baseline"}, e.predictGet)
	mux.HandleFunc("POST "+api.PathExperiments, func(w http.ResponseWriter, r *http.Request) {
		e.answer(w, r, nil, e.startExperiment)
	})
	mux.HandleFunc("DELETE "+api.PathExperiments+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		e.answer(w, r, nil, func(r *http.Request, _ url.Values) (any, error) {
			return e.Coordinator.Abort(r.Context(), r.PathValue("id"))
		})
	})
	mux.HandleFunc("POST "+api.PathPredict, func(w http.ResponseWriter, r *http.Request) {
		e.answer(w, r, nil, e.predictPost)
	})
	mux.HandleFunc("GET "+api.PathWorkFactorSamples, e.workFactorSamples)
	mux.HandleFunc("GET "+api.PathOpenAPI, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(d.OpenAPI)
	})
	mux.Handle("GET "+api.PathMetrics, e.prometheusHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s; see %s", r.Method, r.URL.Path, api.PathOpenAPI))
	})
	return mux
}

func (e *server) answer(w http.ResponseWriter, r *http.Request, q url.Values, fn func(*http.Request, url.Values) (any, error)) {
	v, err := fn(r, q)
	if err != nil {
		if status, ok := apierror.Status(err); ok {
			writeError(w, status.Code, status.Msg)
			return
		}
		e.Logger.Warn("perfmodel API: " + err.Error())
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if c, ok := v.(created); ok {
		w.WriteHeader(http.StatusCreated)
		v = c.v
	}
	_ = json.NewEncoder(w).Encode(v)
}

// startExperiment decodes the request and starts the experiment: 201 with it.
func (e *server) startExperiment(r *http.Request, _ url.Values) (any, error) {
	var req api.ExperimentRequest
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badf("body: %v", err)
	}
	ex, err := e.Coordinator.Begin(r.Context(), req)
	if err != nil {
		return nil, err
	}
	return created{ex}, nil
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(api.ErrorResponse{Error: msg})
}

// timeRange reads from and to (RFC 3339 or unix seconds); the default is the
// last hour. The range is widened to whole windows.
func (e *server) timeRange(q url.Values) (api.TimeRange, error) {
	now := e.q.Now()
	to, from := now, now.Add(-time.Hour)
	var err error
	if s := q.Get("to"); s != "" {
		if to, err = parseTime(s); err != nil {
			return api.TimeRange{}, badf("to: %v", err)
		}
		if q.Get("from") == "" {
			from = to.Add(-time.Hour)
		}
	}
	if s := q.Get("from"); s != "" {
		if from, err = parseTime(s); err != nil {
			return api.TimeRange{}, badf("from: %v", err)
		}
	}
	if !from.Before(to) {
		return api.TimeRange{}, badf("from (%s) must be before to (%s)", from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	if to.Sub(from) > maxRange {
		return api.TimeRange{}, badf("the range %v exceeds the maximum %v", to.Sub(from), maxRange)
	}
	window := e.q.Window()
	f := timegrid.AlignDown(from.Unix(), window)
	t := timegrid.AlignDown(to.Unix()+window-1, window)
	return api.TimeRange{From: f, To: t}, nil
}

// maxUnixSeconds is the last second a time.Time holds as int64 nanoseconds
// (2262-04-11); later times would wrap round to 1677.
const maxUnixSeconds = math.MaxInt64 / int64(time.Second)

func parseTime(s string) (time.Time, error) {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if !(secs >= 0 && secs < float64(maxUnixSeconds)) {
			return time.Time{}, fmt.Errorf("%q is out of range: unix seconds must be in [0, %d)", s, maxUnixSeconds)
		}
		whole := math.Floor(secs)
		return time.Unix(int64(whole), int64((secs-whole)*1e9)), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor unix seconds", s)
	}
	if t.Unix() < 0 || t.Unix() >= maxUnixSeconds {
		return time.Time{}, fmt.Errorf("%q is out of range: it must fall in 1970-01-01 .. 2262-04-11", s)
	}
	return t, nil
}

// The handlers of the read side: parameters in, query's documents out.

func (e *server) paths(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	top := 0
	if s := q.Get("top"); s != "" {
		if top, err = strconv.Atoi(s); err != nil || top < 1 {
			return nil, badf("top: must be a positive integer, got %q", s)
		}
	}
	return e.q.Paths(r.Context(), tr, q.Get("service"), top)
}

func (e *server) graph(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	return e.q.Graph(r.Context(), tr, q.Get("transaction"))
}

func (e *server) catalog(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	return e.q.Catalog(r.Context(), tr)
}

// latency answers GET /api/v1/latency: each service's SERVER latency per step.
func (e *server) latency(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	return e.q.Latency(r.Context(), tr, q.Get("step"), q.Get("service"))
}

// workFactors runs paper 002's estimator over the range's windows.
func (e *server) workFactors(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	return e.q.WorkFactors(r.Context(), tr, q.Get("machine"), nil)
}

func (e *server) signatures(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	return e.q.Signatures(r.Context(), tr, q.Get("service"), q.Get("version"))
}

func (e *server) compare(r *http.Request, q url.Values) (any, error) {
	for _, p := range []string{"service", "base", "candidate"} {
		if q.Get(p) == "" {
			return nil, badf("%s: required", p)
		}
	}
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	return e.q.Compare(r.Context(), tr, q.Get("service"), q.Get("base"), q.Get("candidate"))
}

func (e *server) gradients(r *http.Request, q url.Values) (any, error) {
	return e.q.Gradients(r.Context(), q.Get("transaction"), q.Get("element"))
}

// predictGet reads change=element=delta (repeatable) and baseline=T1=120,T2=80.
func (e *server) predictGet(r *http.Request, q url.Values) (any, error) {
	var req api.PredictRequest
	for _, c := range q["change"] {
		el, d, ok := strings.Cut(c, "=")
		if !ok || el == "" {
			return nil, badf("change: want element=delta (e.g. link:app->db=+20), got %q", c)
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(d, "ms"), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, badf("change %q: delta %q is not a number", c, d)
		}
		req.Changes = append(req.Changes, api.Change{Element: el, Delta: v})
	}
	if b := q.Get("baseline"); b != "" {
		req.BaselineMs = map[string]float64{}
		for _, kv := range strings.Split(b, ",") {
			tx, v, ok := strings.Cut(kv, "=")
			ms, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil || !(ms >= 0) {
				return nil, badf("baseline: want T1=120,T2=80 (ms), got %q", kv)
			}
			req.BaselineMs[tx] = ms
		}
	}
	return e.q.Predict(r.Context(), req)
}

func (e *server) predictPost(r *http.Request, _ url.Values) (any, error) {
	var req api.PredictRequest
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badf("body: %v", err)
	}
	return e.q.Predict(r.Context(), req)
}

// workFactorSamples answers GET /api/v1/workfactors/samples: the regression's
// inputs over the range as docs/formats.md §5 CSV, so that a model can be replayed
// and tuned offline with tierscope workfactor. period is the window's number
// in the range, from 1, as the API's model numbers it: the estimator ages
// its data over the gaps of windows without readings.
func (e *server) workFactorSamples(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := checkParams(q, []string{"from", "to", "machine"}); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	tr, err := e.timeRange(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	perProcess, periods, err := e.q.WorkFactorPeriods(r.Context(), tr, q.Get("machine"))
	if err != nil {
		e.Logger.Warn("perfmodel API: " + err.Error())
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	cw := csv.NewWriter(w)
	header := []string{"period", "machine", "capacity_mhz", "cpu_utilization", "flow", "rate"}
	if perProcess {
		header = append(header, "process")
	}
	_ = cw.Write(header)
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, p := range periods {
		period := strconv.FormatInt(p.Number, 10)
		for _, o := range p.Obs {
			for _, flow := range slices.Sorted(maps.Keys(o.Rates)) {
				row := []string{period, o.Machine, num(o.CapacityMHz), num(o.Utilization), flow, num(o.Rates[flow])}
				if perProcess {
					row = append(row, o.Process)
				}
				_ = cw.Write(row)
			}
		}
	}
	cw.Flush()
}
