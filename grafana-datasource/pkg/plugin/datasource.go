// Package plugin is the backend of the tierscope-perfmodel-datasource Grafana
// plugin: it turns the perfmodel exporter's HTTP API documents into data frames.
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/backend/httpclient"
	"github.com/grafana/grafana-plugin-sdk-go/backend/instancemgmt"

	"github.com/tierscope/tierscope/internal/api"
)

// PluginID is the id in plugin.json.
const PluginID = "tierscope-perfmodel-datasource"

// tokenKey is the secureJsonData key the config editor stores the API token under.
const tokenKey = "apiToken"

var (
	_ backend.QueryDataHandler      = (*Datasource)(nil)
	_ backend.CheckHealthHandler    = (*Datasource)(nil)
	_ backend.CallResourceHandler   = (*Datasource)(nil)
	_ instancemgmt.InstanceDisposer = (*Datasource)(nil)
)

// Settings is the datasource's jsonData.
type Settings struct {
	// TimeoutSeconds bounds each API call; 30 s when 0.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// TracesDatasourceUID names a Tempo or Jaeger datasource the node graph links to.
	TracesDatasourceUID string `json:"tracesDatasourceUid,omitempty"`
	// TracesDatasourceType is tempo or jaeger: how its queries are written.
	TracesDatasourceType string `json:"tracesDatasourceType,omitempty"`
}

// Datasource is one configured instance of the plugin.
type Datasource struct {
	client *APIClient
	links  graphLinks
	// configErr is why client is nil; it is reported by every call.
	configErr error
}

// NewDatasource is the instance factory Grafana calls with each configuration.
// A bad configuration is not fatal: the error is shown on health checks and queries.
func NewDatasource(ctx context.Context, settings backend.DataSourceInstanceSettings) (instancemgmt.Instance, error) {
	var jsonData Settings
	if len(settings.JSONData) > 0 {
		if err := json.Unmarshal(settings.JSONData, &jsonData); err != nil {
			return &Datasource{configErr: fmt.Errorf("the datasource settings are not valid JSON: %w", err)}, nil
		}
	}
	if err := validTracesType(jsonData.TracesDatasourceType); err != nil {
		return &Datasource{configErr: err}, nil
	}
	// Grafana's HTTP client: the TLS (client certificate, CA, skip verify,
	// server name), custom header and proxy settings of the datasource.
	opts, err := settings.HTTPClientOptions(ctx)
	if err != nil {
		return &Datasource{configErr: fmt.Errorf("the datasource's HTTP settings: %w", err)}, nil
	}
	timeout := time.Duration(jsonData.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	if opts.Timeouts == nil {
		opts.Timeouts = &httpclient.TimeoutOptions{}
	}
	opts.Timeouts.Timeout = timeout
	httpClient, err := httpclient.New(opts)
	if err != nil {
		return &Datasource{configErr: fmt.Errorf("the datasource's HTTP client: %w", err)}, nil
	}
	client, err := newAPIClient(settings.URL, settings.DecryptedSecureJSONData[tokenKey], httpClient)
	links := graphLinks{selfUID: settings.UID, tracesUID: jsonData.TracesDatasourceUID, tracesType: jsonData.TracesDatasourceType}
	return &Datasource{client: client, links: links, configErr: err}, nil
}

// NewDatasourceForURL returns a datasource talking to baseURL, for tests and tools.
func NewDatasourceForURL(baseURL, token string) (*Datasource, error) {
	client, err := NewAPIClient(baseURL, token, 0)
	if err != nil {
		return nil, err
	}
	return &Datasource{client: client}, nil
}

// Dispose is called when the settings change; the client holds nothing to release
// beyond idle connections.
func (d *Datasource) Dispose() {
	if d.client != nil {
		d.client.http.CloseIdleConnections()
	}
}

// QueryData answers each query independently: one failing query never hides the others.
func (d *Datasource) QueryData(ctx context.Context, req *backend.QueryDataRequest) (*backend.QueryDataResponse, error) {
	response := backend.NewQueryDataResponse()
	for _, q := range req.Queries {
		if d.configErr != nil {
			response.Responses[q.RefID] = backend.ErrDataResponseWithSource(backend.StatusBadRequest,
				backend.ErrorSourceDownstream, d.configErr.Error())
			continue
		}
		model, err := parseQueryModel(q.JSON)
		if err != nil {
			response.Responses[q.RefID] = errorResponse(err)
			continue
		}
		model.interval = q.Interval
		response.Responses[q.RefID] = runQuery(ctx, d.client, d.links, q.QueryType, q.TimeRange, model)
	}
	return response, nil
}

// RunQuery runs one query of the given type against the API at baseURL, as
// QueryData would; tests against a real exporter call it for each query type.
func RunQuery(ctx context.Context, baseURL, token string, timeRange backend.TimeRange, model QueryModel) backend.DataResponse {
	client, err := NewAPIClient(baseURL, token, 0)
	if err != nil {
		return backend.ErrDataResponseWithSource(backend.StatusBadRequest, backend.ErrorSourceDownstream, err.Error())
	}
	return runQuery(ctx, client, graphLinks{}, model.QueryType, timeRange, model)
}

// RunEveryQueryType runs template once per query type (QueryTypes), returning
// the responses by query type.
func RunEveryQueryType(ctx context.Context, baseURL, token string, timeRange backend.TimeRange, template QueryModel) map[string]backend.DataResponse {
	responses := make(map[string]backend.DataResponse, len(QueryTypes))
	for _, queryType := range QueryTypes {
		model := template
		model.QueryType = queryType
		responses[queryType] = RunQuery(ctx, baseURL, token, timeRange, model)
	}
	return responses
}

// CheckHealth checks that the API answers and that the token is accepted: the
// health document may be open to all, so an authenticated endpoint is read too.
func (d *Datasource) CheckHealth(ctx context.Context, _ *backend.CheckHealthRequest) (*backend.CheckHealthResult, error) {
	if d.configErr != nil {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, Message: d.configErr.Error()}, nil
	}
	var health api.Health
	if err := d.client.get(ctx, api.PathHealth, nil, &health); err != nil {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, Message: err.Error()}, nil
	}
	var catalog api.Catalog
	if err := d.client.get(ctx, api.PathCatalog, nil, &catalog); err != nil {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError,
			Message: "the API answers its health check, but " + err.Error()}, nil
	}
	details, _ := json.Marshal(health)
	summary := fmt.Sprintf("Tierscope perfmodel exporter %s (%s store, %d services in the last hour)",
		orDefault(health.Version, "of unknown version"), orDefault(health.Store, "unknown"), len(catalog.Services))
	if health.Status != "ok" {
		problems := "no problem listed"
		if len(health.Problems) > 0 {
			problems = strings.Join(health.Problems, "; ")
		}
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, JSONDetails: details,
			Message: fmt.Sprintf("%s is reachable but %s: %s", summary, orDefault(health.Status, "in an unknown state"), problems)}, nil
	}
	return &backend.CheckHealthResult{Status: backend.HealthStatusOk, JSONDetails: details, Message: summary + " is reachable"}, nil
}

// resourceOption is one dropdown entry of the query editor.
type resourceOption struct {
	Label string `json:"label"`
	Value string `json:"value"`
	// Description is shown under the label (the address of a link).
	Description string `json:"description,omitempty"`
}

// CallResource serves the query editor's dropdowns and the dashboard's
// variables from /api/v1/catalog: services[?versioned=true] (only those with
// two versions or more), transactions[?service], versions[?service], links
// and machines.
// `from` and `to` pass through to the catalog.
func (d *Datasource) CallResource(ctx context.Context, req *backend.CallResourceRequest, sender backend.CallResourceResponseSender) error {
	if d.configErr != nil {
		return sendJSON(sender, http.StatusBadRequest, api.ErrorResponse{Error: d.configErr.Error()})
	}
	if req.Method != http.MethodGet {
		return sendJSON(sender, http.StatusMethodNotAllowed, api.ErrorResponse{Error: "only GET is supported"})
	}
	resourceURL, err := url.Parse(req.URL)
	if err != nil {
		return sendJSON(sender, http.StatusBadRequest, api.ErrorResponse{Error: "invalid resource URL: " + err.Error()})
	}
	query := resourceURL.Query()
	params := url.Values{}
	setIfNotEmpty(params, "from", query.Get("from"))
	setIfNotEmpty(params, "to", query.Get("to"))

	resource := strings.Trim(req.Path, "/")
	switch resource {
	case "services", "transactions", "versions", "links", "machines":
	default:
		return sendJSON(sender, http.StatusNotFound, api.ErrorResponse{
			Error: fmt.Sprintf("unknown resource %q; use services, transactions, versions, links or machines", resource)})
	}
	var catalog api.Catalog
	if err := d.client.get(ctx, api.PathCatalog, params, &catalog); err != nil {
		status := http.StatusBadGateway
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Status != 0 {
			status = apiErr.Status
		}
		return sendJSON(sender, status, api.ErrorResponse{Error: err.Error()})
	}
	service := strings.TrimSpace(query.Get("service"))
	if service == allValue {
		service = ""
	}
	if resource == "services" && query.Get("versioned") == "true" {
		// The services a comparison can be made on: two versions or more.
		kept := catalog.Services[:0]
		for _, s := range catalog.Services {
			if len(s.Versions) >= 2 {
				kept = append(kept, s)
			}
		}
		catalog.Services = kept
	}
	return sendJSON(sender, http.StatusOK, catalogOptions(catalog, resource, service))
}

// catalogOptions lists one resource of the catalog as sorted, distinct options;
// service narrows transactions and versions to that service.
func catalogOptions(catalog api.Catalog, resource, service string) []resourceOption {
	seen := map[string]resourceOption{}
	add := func(option resourceOption) {
		if option.Value != "" {
			if _, ok := seen[option.Value]; !ok {
				seen[option.Value] = option
			}
		}
	}
	switch resource {
	case "services":
		for _, s := range catalog.Services {
			add(resourceOption{Label: s.Name, Value: s.Name})
		}
	case "transactions", "versions":
		for _, s := range catalog.Services {
			if service != "" && s.Name != service {
				continue
			}
			values := s.Transactions
			if resource == "versions" {
				values = s.Versions
			}
			for _, v := range values {
				add(resourceOption{Label: v, Value: v})
			}
		}
	case "links":
		for _, l := range catalog.Links {
			add(resourceOption{Label: l.Source + " → " + l.Target, Value: "link:" + l.Source + "->" + l.Target, Description: l.Address})
		}
	case "machines":
		for _, m := range catalog.Machines {
			add(resourceOption{Label: m, Value: m})
		}
	}
	options := make([]resourceOption, 0, len(seen))
	for _, o := range seen {
		options = append(options, o)
	}
	sort.Slice(options, func(i, j int) bool { return options[i].Value < options[j].Value })
	return options
}

func sendJSON(sender backend.CallResourceResponseSender, status int, body any) error {
	encoded, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return sender.Send(&backend.CallResourceResponse{
		Status:  status,
		Headers: map[string][]string{"Content-Type": {"application/json"}},
		Body:    encoded,
	})
}
