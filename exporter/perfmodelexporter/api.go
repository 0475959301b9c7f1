package perfmodelexporter

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
)

//go:embed openapi.yaml
var openapiDoc []byte

// version is reported by the health endpoint.
const version = "0.1.0-dev"

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

// handler routes the API. The mux only matches methods and paths; each
// handler validates its query parameters and rejects unknown ones.
func (e *engine) handler() http.Handler {
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
	get(api.PathHealth, nil, e.health)
	get(api.PathPaths, []string{"from", "to", "service", "top"}, e.paths)
	get(api.PathGraph, []string{"from", "to", "transaction"}, e.graph)
	get(api.PathCatalog, []string{"from", "to"}, e.catalog)
	get(api.PathLatency, []string{"from", "to", "service", "step"}, e.latency)
	get(api.PathWorkFactors, []string{"from", "to", "machine"}, e.workFactors)
	get(api.PathSignatures, []string{"from", "to", "service", "version"}, e.signatures)
	get(api.PathCompare, []string{"from", "to", "service", "base", "candidate"}, e.compare)
	get(api.PathExperiments, nil, func(r *http.Request, _ url.Values) (any, error) { return e.coord.List(r.Context()) })
	get(api.PathExperiments+"/{id}", nil, func(r *http.Request, _ url.Values) (any, error) {
		return e.coord.Get(r.Context(), r.PathValue("id"))
	})
	get(api.PathGradients, []string{"transaction", "element"}, e.gradients)
	get(api.PathPredict, []string{"change", "baseline"}, e.predictGet)
	mux.HandleFunc("POST "+api.PathExperiments, func(w http.ResponseWriter, r *http.Request) {
		e.answer(w, r, nil, e.startExperiment)
	})
	mux.HandleFunc("DELETE "+api.PathExperiments+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		e.answer(w, r, nil, func(r *http.Request, _ url.Values) (any, error) {
			return e.coord.Abort(r.Context(), r.PathValue("id"))
		})
	})
	mux.HandleFunc("POST "+api.PathPredict, func(w http.ResponseWriter, r *http.Request) {
		e.answer(w, r, nil, e.predictPost)
	})
	mux.HandleFunc("GET "+api.PathWorkFactorSamples, e.workFactorSamples)
	mux.HandleFunc("GET "+api.PathOpenAPI, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openapiDoc)
	})
	mux.Handle("GET "+api.PathMetrics, e.prometheusHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s; see %s", r.Method, r.URL.Path, api.PathOpenAPI))
	})
	return mux
}

func (e *engine) answer(w http.ResponseWriter, r *http.Request, q url.Values, fn func(*http.Request, url.Values) (any, error)) {
	v, err := fn(r, q)
	if err != nil {
		if status, ok := apierror.Status(err); ok {
			writeError(w, status.Code, status.Msg)
			return
		}
		e.set.Logger.Warn("perfmodel API: " + err.Error())
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
func (e *engine) startExperiment(r *http.Request, _ url.Values) (any, error) {
	var req api.ExperimentRequest
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badf("body: %v", err)
	}
	ex, err := e.coord.Begin(r.Context(), req)
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
func (e *engine) timeRange(q url.Values) (api.TimeRange, error) {
	now := e.now()
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
	f := alignDown(from.Unix(), e.window)
	t := alignDown(to.Unix()+e.window-1, e.window)
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

func (e *engine) health(r *http.Request, _ url.Values) (any, error) {
	h := api.Health{
		Status: "ok", Version: version, UptimeSeconds: e.now().Sub(e.started).Seconds(),
		Shard: e.shard, WindowSeconds: e.window, LastFlush: e.lastFlush.Load(),
	}
	h.Store = "sqlite"
	if strings.HasPrefix(e.cfg.Storage.DSN, "postgres") {
		h.Store = "postgres"
	}
	v, err := e.st.SchemaVersion(r.Context())
	if err != nil {
		h.Status = "degraded"
		h.Problems = append(h.Problems, "store: "+err.Error())
	}
	h.SchemaVersion = v
	if e.flushFailed.Load() {
		h.Status = "degraded"
		h.Problems = append(h.Problems, "the last flush to the store failed")
	}
	return h, nil
}

func (e *engine) paths(r *http.Request, q url.Values) (any, error) {
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
	service := q.Get("service")
	pats, err := e.query(r.Context(), model.KindPath, tr)
	if err != nil {
		return nil, err
	}
	traces, err := e.query(r.Context(), model.KindTraces, tr)
	if err != nil {
		return nil, err
	}
	out := api.PathsResponse{TimeRange: tr, Patterns: []api.PathPattern{}}
	if tc, ok := traces[""]; ok {
		out.Traces = tc.(*model.TraceCount).Traces
	}
	for sig, v := range pats {
		ps := v.(*model.PatternStats)
		if service != "" && !slices.ContainsFunc(ps.Nodes, func(n model.PatternNode) bool { return n.Node == service }) {
			continue
		}
		out.Patterns = append(out.Patterns, model.PathPattern(sig, ps))
	}
	model.SortPatterns(out.Patterns)
	if top > 0 && len(out.Patterns) > top {
		out.Patterns = out.Patterns[:top]
	}
	return out, nil
}

func (e *engine) graph(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	nodes, err := e.query(r.Context(), model.KindGraphNode, tr)
	if err != nil {
		return nil, err
	}
	edges, err := e.query(r.Context(), model.KindGraphEdge, tr)
	if err != nil {
		return nil, err
	}
	var grads map[string]float64
	if tx := q.Get("transaction"); tx != "" {
		if grads, err = e.linkGradients(r, tx); err != nil {
			return nil, err
		}
	}
	g := api.Graph{TimeRange: tr, Nodes: []api.GraphNode{}, Edges: []api.GraphEdge{}}
	for _, name := range sortedKeys(nodes) {
		cs := nodes[name].(*model.CallStats)
		g.Nodes = append(g.Nodes, api.GraphNode{ID: name, Requests: cs.Requests, Errors: cs.Errors, LatencyMs: cs.Latency.Quantiles()})
	}
	for _, key := range sortedKeys(edges) {
		k, ok := model.ParseEdgeKey(key)
		if !ok {
			continue
		}
		cs := edges[key].(*model.CallStats)
		id := k.Source + "->" + k.Target
		ge := api.GraphEdge{ID: id, Source: k.Source, Target: k.Target, Kind: k.Kind, Requests: cs.Requests, Errors: cs.Errors, LatencyMs: cs.Latency.Quantiles()}
		if v, ok := grads[id]; ok {
			ge.Gradient = &v
		}
		g.Edges = append(g.Edges, ge)
	}
	return g, nil
}

func (e *engine) catalog(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	c := api.Catalog{TimeRange: tr, Services: []api.CatalogService{}, Links: []api.Link{}, Machines: []string{}}
	keys := func(kind string) ([]string, error) {
		m, err := e.query(r.Context(), kind, tr)
		if err != nil {
			return nil, err
		}
		return sortedKeys(m), nil
	}
	sigKeys, err := keys(model.KindSigWindow)
	if err != nil {
		return nil, err
	}
	services := map[string]*api.CatalogService{}
	for _, k := range sigKeys {
		parts := strings.Split(k, "\x1f")
		if len(parts) != 3 {
			continue
		}
		s := services[parts[0]]
		if s == nil {
			s = &api.CatalogService{Name: parts[0], Versions: []string{}, Transactions: []string{}}
			services[parts[0]] = s
		}
		if !slices.Contains(s.Versions, parts[1]) {
			s.Versions = append(s.Versions, parts[1])
		}
		if !slices.Contains(s.Transactions, parts[2]) {
			s.Transactions = append(s.Transactions, parts[2])
		}
	}
	nodeKeys, err := keys(model.KindGraphNode)
	if err != nil {
		return nil, err
	}
	for _, n := range nodeKeys {
		if services[n] == nil {
			services[n] = &api.CatalogService{Name: n, Versions: []string{}, Transactions: []string{}}
		}
	}
	for _, name := range sortedKeys(services) {
		s := services[name]
		slices.Sort(s.Versions)
		slices.Sort(s.Transactions)
		c.Services = append(c.Services, *s)
	}
	edgeKeys, err := keys(model.KindGraphEdge)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, k := range edgeKeys {
		ek, ok := model.ParseEdgeKey(k)
		if !ok || seen[ek.Source+"->"+ek.Target] {
			continue
		}
		seen[ek.Source+"->"+ek.Target] = true
		c.Links = append(c.Links, api.Link{Source: ek.Source, Target: ek.Target})
	}
	if c.Machines, err = keys(model.KindCPU); err != nil {
		return nil, err
	}
	if c.Machines == nil {
		c.Machines = []string{}
	}
	return c, nil
}
