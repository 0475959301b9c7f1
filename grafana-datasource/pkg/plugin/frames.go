package plugin

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"

	"github.com/tierscope/tierscope/internal/api"
)

// Frame names the node graph panel looks for.
const (
	nodesFrameName = "nodes"
	edgesFrameName = "edges"
)

func msConfig(displayName string) *data.FieldConfig {
	return &data.FieldConfig{DisplayName: displayName, Unit: "ms"}
}

func fixedColor(displayName, color string) *data.FieldConfig {
	return &data.FieldConfig{DisplayName: displayName, Color: map[string]any{"mode": "fixed", "fixedColor": color}}
}

func nodeGraphMeta(executed string, custom any) *data.FrameMeta {
	return &data.FrameMeta{PreferredVisualization: data.VisTypeNodeGraph, ExecutedQueryString: executed, Custom: custom}
}

func tableMeta(executed string) *data.FrameMeta {
	return &data.FrameMeta{PreferredVisualization: data.VisTypeTable, ExecutedQueryString: executed}
}

func executed(path string, params url.Values) string {
	if len(params) == 0 {
		return "GET " + path
	}
	return "GET " + path + "?" + params.Encode()
}

func quantile(q *api.Quantiles, pick func(api.Quantiles) float64) *float64 {
	if q == nil {
		return nil
	}
	v := pick(*q)
	return &v
}

func mean(q api.Quantiles) float64 { return q.Mean }
func p50(q api.Quantiles) float64  { return q.P50 }
func p90(q api.Quantiles) float64  { return q.P90 }
func p99(q api.Quantiles) float64  { return q.P99 }

// pathsCustomMeta travels in the frames' meta so a panel can show the totals.
type pathsCustomMeta struct {
	Traces int64 `json:"traces"`
	From   int64 `json:"from"`
	To     int64 `json:"to"`
}

// queryPaths returns the causal path patterns as a node graph (one subtree per
// pattern, so patterns that share services stay apart) and a table of patterns.
func queryPaths(ctx context.Context, client *APIClient, tr backend.TimeRange, model QueryModel) (data.Frames, error) {
	params := rangeParams(tr)
	setIfNotEmpty(params, "service", model.Service)
	if model.Top < 0 {
		return nil, invalidQuery("top must be positive, not %d", model.Top)
	}
	if model.Top > 0 {
		params.Set("top", strconv.Itoa(model.Top))
	}
	var doc api.PathsResponse
	if err := client.get(ctx, api.PathPaths, params, &doc); err != nil {
		return nil, err
	}
	return pathsFrames(doc, executed(api.PathPaths, params)), nil
}

func pathsFrames(doc api.PathsResponse, executedQuery string) data.Frames {
	nodes := data.NewFrame(nodesFrameName,
		data.NewField("id", nil, []string{}),
		data.NewField("title", nil, []string{}),
		data.NewField("subtitle", nil, []string{}),
		data.NewField("mainstat", nil, []*float64{}).SetConfig(msConfig("mean latency")),
		data.NewField("secondarystat", nil, []*float64{}).SetConfig(msConfig("p99 latency")),
		data.NewField("arc__self", nil, []float64{}).SetConfig(fixedColor("own time", "green")),
		data.NewField("arc__downstream", nil, []float64{}).SetConfig(fixedColor("in callees", "blue")),
		data.NewField("detail__pattern", nil, []string{}).SetConfig(&data.FieldConfig{DisplayName: "pattern"}),
		data.NewField("detail__count", nil, []int64{}).SetConfig(&data.FieldConfig{DisplayName: "traces of the pattern"}),
		data.NewField("detail__p50", nil, []*float64{}).SetConfig(msConfig("p50 latency")),
		data.NewField("detail__p90", nil, []*float64{}).SetConfig(msConfig("p90 latency")),
		data.NewField("detail__call_delay", nil, []*float64{}).SetConfig(msConfig("mean call delay")),
		data.NewField("detail__messages", nil, []int64{}).SetConfig(&data.FieldConfig{DisplayName: "messages"}),
	)
	edges := data.NewFrame(edgesFrameName,
		data.NewField("id", nil, []string{}),
		data.NewField("source", nil, []string{}),
		data.NewField("target", nil, []string{}),
		data.NewField("mainstat", nil, []*float64{}).SetConfig(msConfig("mean call delay")),
		data.NewField("secondarystat", nil, []int64{}).SetConfig(&data.FieldConfig{DisplayName: "traces"}),
	)
	table := data.NewFrame("patterns",
		data.NewField("rank", nil, []int64{}),
		data.NewField("signature", nil, []string{}),
		data.NewField("root", nil, []string{}),
		data.NewField("count", nil, []int64{}),
		data.NewField("share", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "percentunit"}),
		data.NewField("mean_latency_ms", nil, []float64{}).SetConfig(msConfig("mean latency")),
		data.NewField("total_latency_ms", nil, []float64{}).SetConfig(msConfig("total latency")),
		data.NewField("nodes", nil, []int64{}),
		data.NewField("depth", nil, []int64{}),
	)

	var patternTraces int64
	for _, p := range doc.Patterns {
		patternTraces += int64(p.Count)
	}
	for i, pattern := range doc.Patterns {
		rootID := fmt.Sprintf("p%d", i)
		count := int64(pattern.Count)
		var addNode func(node api.PathNode, id string, depth int) (int64, int64)
		// addNode appends a node and its subtree; it returns the subtree's size and depth.
		addNode = func(node api.PathNode, id string, depth int) (int64, int64) {
			self, downstream := arcShares(node)
			var callDelay *float64
			if node.CallDelayMs != nil {
				callDelay = quantile(node.CallDelayMs, mean)
			} else if len(node.DelaysMs) > 0 {
				callDelay = meanOf(node.DelaysMs)
			}
			nodes.AppendRow(id, node.Node, fmt.Sprintf("pattern %d · %d traces", i+1, pattern.Count),
				quantile(node.LatencyMs, mean), quantile(node.LatencyMs, p99), self, downstream,
				pattern.Signature, count, quantile(node.LatencyMs, p50), quantile(node.LatencyMs, p90),
				callDelay, int64(node.Messages))
			size, deepest := int64(1), int64(depth)
			for c, child := range node.Children {
				childID := id + "." + strconv.Itoa(c)
				var edgeDelay *float64
				if child.CallDelayMs != nil {
					edgeDelay = quantile(child.CallDelayMs, mean)
				} else if len(child.DelaysMs) > 0 {
					edgeDelay = meanOf(child.DelaysMs)
				}
				edges.AppendRow(id+"->"+childID, id, childID, edgeDelay, count)
				childSize, childDepth := addNode(child, childID, depth+1)
				size += childSize
				deepest = max(deepest, childDepth)
			}
			return size, deepest
		}
		size, depth := addNode(pattern.Root, rootID, 0)
		share := 0.0
		if patternTraces > 0 {
			share = float64(pattern.Count) / float64(patternTraces)
		}
		meanLatency := 0.0
		if pattern.Count > 0 {
			meanLatency = pattern.TotalLatencyMs / float64(pattern.Count)
		}
		table.AppendRow(int64(i+1), pattern.Signature, pattern.Root.Node, count, share, meanLatency,
			pattern.TotalLatencyMs, size, depth)
	}

	custom := pathsCustomMeta{Traces: doc.Traces, From: doc.From, To: doc.To}
	nodes.Meta = nodeGraphMeta(executedQuery, custom)
	edges.Meta = nodeGraphMeta(executedQuery, custom)
	table.Meta = tableMeta(executedQuery)
	return data.Frames{nodes, edges, table}
}

// arcShares splits a node's mean latency into its own time and the time spent
// waiting for its callees (children run in parallel may exceed it: capped at 1).
func arcShares(node api.PathNode) (self, downstream float64) {
	if node.LatencyMs == nil || node.LatencyMs.Mean <= 0 {
		if len(node.Children) > 0 {
			return 0, 1
		}
		return 0, 0
	}
	var children float64
	for _, child := range node.Children {
		if child.LatencyMs != nil {
			children += child.LatencyMs.Mean
		}
	}
	downstream = min(children/node.LatencyMs.Mean, 1)
	return 1 - downstream, downstream
}

func meanOf(values []float64) *float64 {
	var sum float64
	for _, v := range values {
		sum += v
	}
	m := sum / float64(len(values))
	return &m
}

// queryGraph returns the service graph; with a transaction, each edge's main
// stat is that transaction's link gradient (null where none was measured).
func queryGraph(ctx context.Context, client *APIClient, links graphLinks, tr backend.TimeRange, model QueryModel) (data.Frames, error) {
	params := rangeParams(tr)
	setIfNotEmpty(params, "transaction", model.Transaction)
	var doc api.Graph
	if err := client.get(ctx, api.PathGraph, params, &doc); err != nil {
		return nil, err
	}
	return graphFrames(doc, strings.TrimSpace(model.Transaction), executed(api.PathGraph, params), links), nil
}

// graphFrames draws the service graph as Tempo's service graph does: nodes
// and edges with request rates and error percentages over the range; edge
// latency is the caller's (CLIENT span durations); asynchronous edges dashed;
// links from nodes and edges to their causal paths and, when a traces
// datasource is configured, to their traces.
func graphFrames(doc api.Graph, transaction, executedQuery string, links graphLinks) data.Frames {
	st := graphStats{seconds: float64(doc.To - doc.From)}
	nodes := st.nodesFrame(doc, links)
	edges := st.edgesFrame(doc, transaction, links)
	nodes.Meta = nodeGraphMeta(executedQuery, doc.TimeRange)
	edges.Meta = nodeGraphMeta(executedQuery, doc.TimeRange)
	return data.Frames{nodes, edges}
}

// graphStats turns counts over the graph's range into rates and percentages.
type graphStats struct{ seconds float64 }

func (g graphStats) rate(n int64) *float64 {
	if g.seconds <= 0 {
		return nil
	}
	r := float64(n) / g.seconds
	return &r
}

func errorPct(errors, requests int64) *float64 {
	if requests <= 0 {
		return nil
	}
	p := 100 * float64(errors) / float64(requests)
	return &p
}

func rateConfig(name string) *data.FieldConfig {
	return &data.FieldConfig{DisplayName: name, Unit: "reqps"}
}
func pctConfig(name string) *data.FieldConfig {
	return &data.FieldConfig{DisplayName: name, Unit: "percent"}
}

// nodesFrame is the node graph's nodes: a node only ever called over database
// edges is a database; one that serves no SERVER span but is called is an
// uninstrumented back end.
func (g graphStats) nodesFrame(doc api.Graph, links graphLinks) *data.Frame {
	databases, called := map[string]bool{}, map[string]bool{}
	for _, e := range doc.Edges {
		called[e.Target] = true
		if e.Kind == "database" {
			databases[e.Target] = true
		}
	}
	for _, e := range doc.Edges {
		if e.Kind != "database" {
			delete(databases, e.Target)
		}
	}
	nodeID := data.NewField("id", nil, []string{}).SetConfig(&data.FieldConfig{Links: links.node()})
	nodes := data.NewFrame(nodesFrameName,
		nodeID,
		data.NewField("title", nil, []string{}),
		data.NewField("subtitle", nil, []string{}),
		data.NewField("mainstat", nil, []*float64{}).SetConfig(rateConfig("requests/s")),
		data.NewField("secondarystat", nil, []*float64{}).SetConfig(pctConfig("errors")),
		data.NewField("arc__ok", nil, []float64{}).SetConfig(fixedColor("ok", "green")),
		data.NewField("arc__errors", nil, []float64{}).SetConfig(fixedColor("errors", "red")),
		data.NewField("detail__requests", nil, []int64{}).SetConfig(&data.FieldConfig{DisplayName: "requests"}),
		data.NewField("detail__errors", nil, []int64{}).SetConfig(&data.FieldConfig{DisplayName: "errors"}),
		data.NewField("detail__mean", nil, []*float64{}).SetConfig(msConfig("mean latency (served)")),
		data.NewField("detail__p50", nil, []*float64{}).SetConfig(msConfig("p50 latency")),
		data.NewField("detail__p90", nil, []*float64{}).SetConfig(msConfig("p90 latency")),
		data.NewField("detail__p99", nil, []*float64{}).SetConfig(msConfig("p99 latency")),
	)
	for _, n := range doc.Nodes {
		okShare, errShare := 0.0, 0.0
		if n.Requests > 0 {
			errShare = min(float64(n.Errors)/float64(n.Requests), 1)
			okShare = 1 - errShare
		}
		subtitle := "service"
		switch {
		case databases[n.ID]:
			subtitle = "database"
		case n.Requests == 0 && called[n.ID]:
			subtitle = "uninstrumented"
		}
		nodes.AppendRow(n.ID, n.ID, subtitle, g.rate(n.Requests), errorPct(n.Errors, n.Requests), okShare, errShare,
			n.Requests, n.Errors, quantile(n.LatencyMs, mean), quantile(n.LatencyMs, p50), quantile(n.LatencyMs, p90),
			quantile(n.LatencyMs, p99))
	}
	return nodes
}

// edgesFrame is the node graph's edges: the caller's latency, the rate, and
// with a transaction its gradient first.
func (g graphStats) edgesFrame(doc api.Graph, transaction string, links graphLinks) *data.Frame {
	edgeID := data.NewField("id", nil, []string{}).SetConfig(&data.FieldConfig{Links: links.edge()})
	var mainstat, secondary *data.Field
	if transaction != "" {
		mainstat = data.NewField("mainstat", nil, []*float64{}).SetConfig(&data.FieldConfig{DisplayName: "gradient of " + transaction, Unit: "ms/ms"})
		secondary = data.NewField("secondarystat", nil, []*float64{}).SetConfig(msConfig("mean latency (caller)"))
	} else {
		mainstat = data.NewField("mainstat", nil, []*float64{}).SetConfig(msConfig("mean latency (caller)"))
		secondary = data.NewField("secondarystat", nil, []*float64{}).SetConfig(rateConfig("requests/s"))
	}
	edges := data.NewFrame(edgesFrameName,
		edgeID,
		data.NewField("source", nil, []string{}),
		data.NewField("target", nil, []string{}),
		mainstat, secondary,
		data.NewField("detail__kind", nil, []string{}).SetConfig(&data.FieldConfig{DisplayName: "kind"}),
		data.NewField("detail__rate", nil, []*float64{}).SetConfig(rateConfig("requests/s")),
		data.NewField("detail__requests", nil, []int64{}).SetConfig(&data.FieldConfig{DisplayName: "requests"}),
		data.NewField("detail__errors", nil, []int64{}).SetConfig(&data.FieldConfig{DisplayName: "errors"}),
		data.NewField("detail__error_pct", nil, []*float64{}).SetConfig(pctConfig("errors")),
		data.NewField("detail__p99", nil, []*float64{}).SetConfig(msConfig("p99 latency (caller)")),
		// Grafana's node graph draws an edge with a dash array dashed: async
		// edges (messaging, or found by convolution) are told apart from calls.
		data.NewField("strokeDasharray", nil, []string{}),
	)
	for _, e := range doc.Edges {
		dash := ""
		if e.Kind == "async" {
			dash = "6 4"
		}
		first := quantile(e.LatencyMs, mean)
		second := g.rate(e.Requests)
		if transaction != "" {
			first, second = e.Gradient, quantile(e.LatencyMs, mean)
		}
		edges.AppendRow(e.ID, e.Source, e.Target, first, second, e.Kind, g.rate(e.Requests), e.Requests, e.Errors,
			errorPct(e.Errors, e.Requests), quantile(e.LatencyMs, p99), dash)
	}
	return edges
}

// queryWorkFactors returns one time series per machine and flow, labelled so a
// panel can split them, and a table of each machine's latest model.
func queryWorkFactors(ctx context.Context, client *APIClient, tr backend.TimeRange, model QueryModel) (data.Frames, error) {
	params := rangeParams(tr)
	setIfNotEmpty(params, "machine", model.Machine)
	var doc api.WorkFactors
	if err := client.get(ctx, api.PathWorkFactors, params, &doc); err != nil {
		return nil, err
	}
	return workFactorFrames(doc, executed(api.PathWorkFactors, params))
}

func workFactorFrames(doc api.WorkFactors, executedQuery string) (data.Frames, error) {
	var frames data.Frames
	for _, m := range doc.Machines {
		for _, s := range m.Series {
			if len(s.Times) != len(s.Values) {
				return nil, fmt.Errorf("the work factor series of %s/%s has %d times but %d values", m.Machine, s.Flow, len(s.Times), len(s.Values))
			}
			times := make([]time.Time, len(s.Times))
			for i, t := range s.Times {
				times[i] = unixTime(t)
			}
			labels := data.Labels{"machine": m.Machine, "flow": s.Flow}
			frame := data.NewFrame("work factor",
				data.NewField("time", nil, times),
				data.NewField("work_factor", labels, append([]float64(nil), s.Values...)).SetConfig(&data.FieldConfig{
					DisplayNameFromDS: m.Machine + " " + s.Flow, Unit: "megacycles/req",
				}),
			)
			frame.Meta = &data.FrameMeta{Type: data.FrameTypeTimeSeriesMulti, TypeVersion: data.FrameTypeVersion{0, 1},
				PreferredVisualization: data.VisTypeGraph, ExecutedQueryString: executedQuery}
			frames = append(frames, frame)
		}
	}
	if len(frames) == 0 {
		// An empty frame with the right shape keeps panels from erroring on "no data".
		empty := data.NewFrame("work factor",
			data.NewField("time", nil, []time.Time{}),
			data.NewField("work_factor", nil, []float64{}))
		empty.Meta = &data.FrameMeta{Type: data.FrameTypeTimeSeriesMulti, TypeVersion: data.FrameTypeVersion{0, 1},
			ExecutedQueryString: executedQuery}
		frames = append(frames, empty)
	}
	return frames, nil
}

// querySignatures returns one row per service version and transaction.
func querySignatures(ctx context.Context, client *APIClient, tr backend.TimeRange, model QueryModel) (data.Frames, error) {
	params := rangeParams(tr)
	setIfNotEmpty(params, "service", model.Service)
	setIfNotEmpty(params, "version", model.Version)
	var doc api.Signatures
	if err := client.get(ctx, api.PathSignatures, params, &doc); err != nil {
		return nil, err
	}
	return data.Frames{signaturesFrame(doc, executed(api.PathSignatures, params))}, nil
}

func signaturesFrame(doc api.Signatures, executedQuery string) *data.Frame {
	frame := data.NewFrame("signatures",
		data.NewField("service", nil, []string{}),
		data.NewField("version", nil, []string{}),
		data.NewField("transaction", nil, []string{}),
		data.NewField("service_time_ms", nil, []*float64{}).SetConfig(msConfig("service time")),
		data.NewField("status", nil, []string{}),
		data.NewField("buckets_used", nil, []int64{}),
		data.NewField("spread", nil, []float64{}),
		data.NewField("shape", nil, []string{}),
	)
	for _, s := range doc.Signatures {
		for _, t := range s.Transactions {
			frame.AppendRow(s.Service, s.Version, t.Transaction, t.ServiceTimeMs, t.Status,
				int64(t.BucketsUsed), t.Spread, t.Shape)
		}
	}
	frame.Meta = tableMeta(executedQuery)
	return frame
}

// queryCompare sets a candidate version's signature against a base version's.
func queryCompare(ctx context.Context, client *APIClient, model QueryModel) (data.Frames, error) {
	params := url.Values{}
	setIfNotEmpty(params, "service", model.Service)
	setIfNotEmpty(params, "base", model.BaseVersion)
	setIfNotEmpty(params, "candidate", model.CandidateVersion)
	if notice := compareNotice(ctx, client, model); notice != "" {
		return noticeFrame("comparison", executed(api.PathCompare, params), notice), nil
	}
	var doc api.Comparison
	if err := client.get(ctx, api.PathCompare, params, &doc); err != nil {
		if reason, ok := modelNotYetAvailable(err); ok {
			return noticeFrame("comparison", executed(api.PathCompare, params), reason+
				"; a version's signature needs several windows of its requests over enough CPU utilization buckets"), nil
		}
		return nil, err
	}
	return data.Frames{comparisonFrame(doc, executed(api.PathCompare, params))}, nil
}

func comparisonFrame(doc api.Comparison, executedQuery string) *data.Frame {
	frame := data.NewFrame("comparison",
		data.NewField("transaction", nil, []string{}),
		data.NewField("base_ms", nil, []*float64{}).SetConfig(msConfig(orDefault(doc.Base, "base"))),
		data.NewField("candidate_ms", nil, []*float64{}).SetConfig(msConfig(orDefault(doc.Candidate, "candidate"))),
		data.NewField("delta_ms", nil, []*float64{}).SetConfig(msConfig("delta")),
		data.NewField("delta_pct", nil, []*float64{}).SetConfig(&data.FieldConfig{DisplayName: "delta %", Unit: "percent"}),
		data.NewField("changed", nil, []bool{}),
		data.NewField("verdict", nil, []string{}),
		data.NewField("basis", nil, []string{}),
		data.NewField("confidence", nil, []float64{}).SetConfig(&data.FieldConfig{Unit: "percentunit"}),
	)
	for _, t := range doc.Transactions {
		frame.AppendRow(t.Transaction, t.BaseMs, t.CandidateMs, t.DeltaMs, t.DeltaPct, t.Changed,
			t.Verdict, t.Basis, t.Confidence)
	}
	frame.Meta = tableMeta(executedQuery)
	frame.Meta.Custom = map[string]string{"service": doc.Service, "base": doc.Base, "candidate": doc.Candidate}
	return frame
}

func orDefault(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}

// queryGradients returns the measured gradients with their confidence intervals.
func queryGradients(ctx context.Context, client *APIClient, model QueryModel) (data.Frames, error) {
	params := url.Values{}
	setIfNotEmpty(params, "transaction", model.Transaction)
	setIfNotEmpty(params, "element", model.Element)
	var doc api.Gradients
	if err := client.get(ctx, api.PathGradients, params, &doc); err != nil {
		return nil, err
	}
	return data.Frames{gradientsFrame("gradients", doc.Gradients, executed(api.PathGradients, params))}, nil
}

func gradientsFrame(name string, gradients []api.Gradient, executedQuery string) *data.Frame {
	frame := data.NewFrame(name,
		data.NewField("element", nil, []string{}),
		data.NewField("transaction", nil, []string{}),
		data.NewField("gradient", nil, []float64{}),
		data.NewField("ci95_low", nil, []float64{}),
		data.NewField("ci95_high", nil, []float64{}),
		data.NewField("snr", nil, []float64{}),
		data.NewField("bins", nil, []int64{}),
		data.NewField("perturbation_ms", nil, []float64{}).SetConfig(msConfig("perturbation")),
		data.NewField("experiment", nil, []string{}),
		data.NewField("measured", nil, []time.Time{}),
	)
	for _, g := range gradients {
		frame.AppendRow(g.Element, g.Transaction, g.Gradient, g.CI95[0], g.CI95[1], g.SNR, int64(g.Bins),
			g.PerturbationMs, g.Experiment, unixTime(g.Measured))
	}
	frame.Meta = tableMeta(executedQuery)
	return frame
}

// queryExperiments returns every experiment with its phase and progress.
func queryExperiments(ctx context.Context, client *APIClient) (data.Frames, error) {
	var doc api.Experiments
	if err := client.get(ctx, api.PathExperiments, nil, &doc); err != nil {
		return nil, err
	}
	return data.Frames{experimentsFrame(doc, executed(api.PathExperiments, nil))}, nil
}

func experimentsFrame(doc api.Experiments, executedQuery string) *data.Frame {
	zero, hundred := data.ConfFloat64(0), data.ConfFloat64(100)
	frame := data.NewFrame("experiments",
		data.NewField("id", nil, []string{}),
		data.NewField("element", nil, []string{}),
		data.NewField("current_element", nil, []string{}).SetConfig(&data.FieldConfig{DisplayName: "measuring"}),
		data.NewField("phase", nil, []string{}),
		data.NewField("percent", nil, []float64{}).SetConfig(&data.FieldConfig{DisplayName: "progress", Unit: "percent", Min: &zero, Max: &hundred}),
		data.NewField("eta_seconds", nil, []float64{}).SetConfig(&data.FieldConfig{DisplayName: "ETA", Unit: "s"}),
		data.NewField("started", nil, []time.Time{}),
		data.NewField("finished", nil, []*time.Time{}),
		data.NewField("reason", nil, []string{}),
		data.NewField("gradients", nil, []int64{}),
	)
	for _, e := range doc.Experiments {
		frame.AppendRow(e.ID, e.Element, e.CurrentElement, e.Phase, e.Percent, e.ETASeconds, unixTime(e.Started),
			optionalUnixTime(e.Finished), e.Reason, int64(len(e.Gradients)))
	}
	frame.Meta = tableMeta(executedQuery)
	return frame
}

// queryPredict asks the API what the response times would be after the what-if changes.
func queryPredict(ctx context.Context, client *APIClient, model QueryModel) (data.Frames, error) {
	req := api.PredictRequest{}
	for i, change := range model.Changes {
		element := strings.TrimSpace(change.Element)
		if element == "" {
			// A dashboard's link variable is empty while the service graph has no link.
			return noticeFrame("prediction", "POST "+api.PathPredict, fmt.Sprintf("what-if change %d has no element: choose a link:<source>-><target>, "+
				"frequency:<machine> or capacity:<machine> (the service graph has links once spans of calls between services arrive)", i+1)), nil
		}
		if !strings.HasPrefix(element, "link:") && !strings.HasPrefix(element, "frequency:") && !strings.HasPrefix(element, "capacity:") {
			return nil, invalidQuery("what-if change %d: element %q must start with link:, frequency: or capacity:", i+1, element)
		}
		req.Changes = append(req.Changes, api.Change{Element: element, Delta: change.Delta})
	}
	if len(req.Changes) == 0 {
		return nil, invalidQuery("the what-if prediction needs at least one change, e.g. link:app->db +20 ms")
	}
	var described []string
	for _, c := range req.Changes {
		described = append(described, fmt.Sprintf("%s %+g", c.Element, c.Delta))
	}
	executedQuery := "POST " + api.PathPredict + " " + strings.Join(described, ", ")
	var doc api.Prediction
	if err := client.post(ctx, api.PathPredict, req, &doc); err != nil {
		if reason, ok := modelNotYetAvailable(err); ok {
			return noticeFrame("prediction", executedQuery, fmt.Sprintf("%s: no gradient measured on %s yet; start an experiment with "+
				"`tierscope experiment start --element '%s' --wait` (or POST /api/v1/experiments); the Experiments panel follows its progress",
				reason, req.Changes[0].Element, req.Changes[0].Element)), nil
		}
		return nil, err
	}
	return data.Frames{predictionFrame(doc, executedQuery)}, nil
}

func predictionFrame(doc api.Prediction, executedQuery string) *data.Frame {
	frame := data.NewFrame("prediction",
		data.NewField("transaction", nil, []string{}),
		data.NewField("baseline_ms", nil, []float64{}).SetConfig(msConfig("baseline")),
		data.NewField("predicted_ms", nil, []float64{}).SetConfig(msConfig("predicted")),
		data.NewField("delta_ms", nil, []float64{}).SetConfig(msConfig("delta")),
		data.NewField("delta_pct", nil, []*float64{}).SetConfig(&data.FieldConfig{DisplayName: "delta %", Unit: "percent"}),
		data.NewField("ci95_low", nil, []float64{}).SetConfig(msConfig("95% CI low")),
		data.NewField("ci95_high", nil, []float64{}).SetConfig(msConfig("95% CI high")),
	)
	for _, t := range doc.Transactions {
		var pct *float64
		if t.BaselineMs != 0 {
			v := 100 * (t.PredictedMs - t.BaselineMs) / t.BaselineMs
			pct = &v
		}
		frame.AppendRow(t.Transaction, t.BaselineMs, t.PredictedMs, t.PredictedMs-t.BaselineMs, pct, t.CI95[0], t.CI95[1])
	}
	frame.Meta = tableMeta(executedQuery)
	return frame
}
