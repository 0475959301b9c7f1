package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/backend/log"
	"github.com/grafana/grafana-plugin-sdk-go/data"

	"github.com/tierscope/tierscope/internal/api"
)

// Query types, one per model of the exporter. The frontend's types.ts lists the same.
const (
	QueryTypePaths       = "paths"
	QueryTypeGraph       = "graph"
	QueryTypeWorkFactors = "workfactors"
	QueryTypeSignatures  = "signatures"
	QueryTypeCompare     = "compare"
	QueryTypeGradients   = "gradients"
	QueryTypeExperiments = "experiments"
	QueryTypePredict     = "predict"
	QueryTypeProfile     = "profile"
	QueryTypeSpectrum    = "spectrum"
	QueryTypeLatency     = "latency"
)

// QueryTypes lists every query type in the order the editor shows them.
var QueryTypes = []string{
	QueryTypePaths, QueryTypeGraph, QueryTypeWorkFactors, QueryTypeSignatures,
	QueryTypeCompare, QueryTypeGradients, QueryTypeExperiments, QueryTypePredict,
	QueryTypeProfile, QueryTypeSpectrum, QueryTypeLatency,
}

// QueryModel is the JSON the query editor saves; which fields matter depends on QueryType.
type QueryModel struct {
	QueryType string `json:"queryType"`
	// Service filters paths and signatures; compare needs it.
	Service string `json:"service,omitempty"`
	// Top caps the number of path patterns (the API's default when 0).
	Top int `json:"top,omitempty"`
	// Transaction selects the link gradients on the service graph and filters gradients.
	Transaction string `json:"transaction,omitempty"`
	// Machine filters work factors.
	Machine string `json:"machine,omitempty"`
	// Version filters signatures.
	Version string `json:"version,omitempty"`
	// BaseVersion and CandidateVersion are the two versions compare sets against each other.
	BaseVersion      string `json:"baseVersion,omitempty"`
	CandidateVersion string `json:"candidateVersion,omitempty"`
	// Element filters gradients ("link:a->b", "frequency:m", "capacity:m").
	Element string `json:"element,omitempty"`
	// Changes are the what-if changes of predict.
	Changes []api.Change `json:"changes,omitempty"`
	// Experiment is the id whose spectrum is shown; the newest when empty.
	Experiment string `json:"experiment,omitempty"`

	// interval is the panel's resolution, the step of a latency series
	// (Grafana sends it beside the query, not in it).
	interval time.Duration
}

// allValue is what a dashboard variable set to "All" stands for (its allValue):
// no filter.
const allValue = "*"

// withoutAll clears the filters a dashboard variable set to "All".
func (m QueryModel) withoutAll() QueryModel {
	for _, f := range []*string{&m.Service, &m.Transaction, &m.Machine, &m.Version, &m.BaseVersion, &m.CandidateVersion, &m.Element, &m.Experiment} {
		if strings.TrimSpace(*f) == allValue {
			*f = ""
		}
	}
	return m
}

// runQuery answers one query. It never panics: a failure, even a bug, becomes
// the response's error with a message meant for the operator.
func runQuery(ctx context.Context, client *APIClient, links graphLinks, queryType string, timeRange backend.TimeRange, model QueryModel) (resp backend.DataResponse) {
	defer func() {
		if r := recover(); r != nil {
			log.DefaultLogger.Error("query panicked", "queryType", queryType, "panic", r, "stack", string(debug.Stack()))
			resp = backend.ErrDataResponseWithSource(backend.StatusInternal, backend.ErrorSourcePlugin,
				fmt.Sprintf("internal error while running the %s query: %v", queryType, r))
		}
	}()

	if queryType == "" {
		queryType = model.QueryType
	}
	if queryType == "" {
		queryType = QueryTypePaths
	}
	model = model.withoutAll()
	if client == nil {
		return backend.ErrDataResponseWithSource(backend.StatusBadRequest, backend.ErrorSourceDownstream,
			"the datasource is not configured: set the Tierscope API URL in its settings")
	}

	var frames data.Frames
	var err error
	switch queryType {
	case QueryTypePaths:
		frames, err = queryPaths(ctx, client, timeRange, model)
	case QueryTypeGraph:
		frames, err = queryGraph(ctx, client, links, timeRange, model)
	case QueryTypeWorkFactors:
		frames, err = queryWorkFactors(ctx, client, timeRange, model)
	case QueryTypeSignatures:
		frames, err = querySignatures(ctx, client, timeRange, model)
	case QueryTypeCompare:
		frames, err = queryCompare(ctx, client, model)
	case QueryTypeGradients:
		frames, err = queryGradients(ctx, client, model)
	case QueryTypeExperiments:
		frames, err = queryExperiments(ctx, client)
	case QueryTypePredict:
		frames, err = queryPredict(ctx, client, model)
	case QueryTypeProfile:
		frames, err = queryProfiles(ctx, client, timeRange, model)
	case QueryTypeSpectrum:
		frames, err = querySpectrum(ctx, client, model)
	case QueryTypeLatency:
		frames, err = queryLatency(ctx, client, timeRange, model.interval, model)
	default:
		return backend.ErrDataResponseWithSource(backend.StatusBadRequest, backend.ErrorSourceDownstream,
			fmt.Sprintf("unknown query type %q; choose one of %s", queryType, strings.Join(QueryTypes, ", ")))
	}
	if err != nil {
		return errorResponse(err)
	}
	return backend.DataResponse{Frames: explainEmpty(queryType, frames)}
}

// errorResponse maps an error to a response, keeping API errors' HTTP status.
func errorResponse(err error) backend.DataResponse {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		status := backend.StatusBadGateway
		if apiErr.Status != 0 {
			status = backend.Status(apiErr.Status)
		}
		return backend.ErrDataResponseWithSource(status, apiErr.errorSource(), apiErr.Message)
	}
	var invalid *invalidQueryError
	if errors.As(err, &invalid) {
		return backend.ErrDataResponseWithSource(backend.StatusBadRequest, backend.ErrorSourceDownstream, invalid.Error())
	}
	return backend.ErrDataResponseWithSource(backend.StatusInternal, backend.ErrorSourcePlugin, err.Error())
}

// invalidQueryError is a query that lacks what its type needs.
type invalidQueryError struct{ msg string }

func (e *invalidQueryError) Error() string { return e.msg }

func invalidQuery(format string, args ...any) error {
	return &invalidQueryError{msg: fmt.Sprintf(format, args...)}
}

// rangeParams returns the API's from/to parameters in unix seconds; an empty
// range leaves them out so the API uses its default (the last hour).
func rangeParams(tr backend.TimeRange) url.Values {
	params := url.Values{}
	if !tr.From.IsZero() {
		params.Set("from", strconv.FormatInt(tr.From.Unix(), 10))
	}
	if !tr.To.IsZero() {
		params.Set("to", strconv.FormatInt(tr.To.Unix(), 10))
	}
	return params
}

func setIfNotEmpty(params url.Values, key, value string) {
	if value = strings.TrimSpace(value); value != "" {
		params.Set(key, value)
	}
}

// parseQueryModel decodes the editor's JSON; an empty body is the default query.
func parseQueryModel(raw json.RawMessage) (QueryModel, error) {
	var model QueryModel
	if len(raw) == 0 {
		return model, nil
	}
	if err := json.Unmarshal(raw, &model); err != nil {
		return model, invalidQuery("the query is not valid JSON for this datasource: %v", err)
	}
	return model, nil
}

func unixTime(seconds int64) time.Time { return time.Unix(seconds, 0).UTC() }

// optionalUnixTime is nil for 0, which the API uses for "not yet".
func optionalUnixTime(seconds int64) *time.Time {
	if seconds == 0 {
		return nil
	}
	t := unixTime(seconds)
	return &t
}
