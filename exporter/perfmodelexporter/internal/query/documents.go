package query

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
)

// Paths are the range's path patterns, the most frequent first: those
// through service when it is not empty, the top ones when top > 0.
func (q *Reader) Paths(ctx context.Context, tr api.TimeRange, service string, top int) (api.PathsResponse, error) {
	pats, err := q.Query(ctx, model.KindPath, tr)
	if err != nil {
		return api.PathsResponse{}, err
	}
	traces, err := q.Query(ctx, model.KindTraces, tr)
	if err != nil {
		return api.PathsResponse{}, err
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

// Graph is the range's service graph, with the stored link gradients of
// transaction on the edges when it is not empty.
func (q *Reader) Graph(ctx context.Context, tr api.TimeRange, transaction string) (api.Graph, error) {
	nodes, err := q.Query(ctx, model.KindGraphNode, tr)
	if err != nil {
		return api.Graph{}, err
	}
	edges, err := q.Query(ctx, model.KindGraphEdge, tr)
	if err != nil {
		return api.Graph{}, err
	}
	var grads map[string]float64
	if transaction != "" {
		if grads, err = q.linkGradients(ctx, transaction); err != nil {
			return api.Graph{}, err
		}
	}
	g := api.Graph{TimeRange: tr, Nodes: []api.GraphNode{}, Edges: []api.GraphEdge{}}
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		cs := nodes[name].(*model.CallStats)
		g.Nodes = append(g.Nodes, api.GraphNode{ID: name, Requests: cs.Requests, Errors: cs.Errors, LatencyMs: cs.Latency.Quantiles()})
	}
	for _, key := range slices.Sorted(maps.Keys(edges)) {
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

// Catalog lists the range's services with their versions and
// transactions, the links between them and the machines.
func (q *Reader) Catalog(ctx context.Context, tr api.TimeRange) (api.Catalog, error) {
	c := api.Catalog{TimeRange: tr, Services: []api.CatalogService{}, Links: []api.Link{}, Machines: []string{}}
	keys := func(kind string) ([]string, error) {
		m, err := q.Query(ctx, kind, tr)
		if err != nil {
			return nil, err
		}
		return slices.Sorted(maps.Keys(m)), nil
	}
	sigKeys, err := keys(model.KindSigWindow)
	if err != nil {
		return api.Catalog{}, err
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
		return api.Catalog{}, err
	}
	for _, n := range nodeKeys {
		if services[n] == nil {
			services[n] = &api.CatalogService{Name: n, Versions: []string{}, Transactions: []string{}}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(services)) {
		s := services[name]
		slices.Sort(s.Versions)
		slices.Sort(s.Transactions)
		c.Services = append(c.Services, *s)
	}
	edgeKeys, err := keys(model.KindGraphEdge)
	if err != nil {
		return api.Catalog{}, err
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
		return api.Catalog{}, err
	}
	if c.Machines == nil {
		c.Machines = []string{}
	}
	return c, nil
}
