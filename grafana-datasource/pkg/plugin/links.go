package plugin

import (
	"fmt"

	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// Traces datasource types the node graph links to.
const (
	tracesTempo  = "tempo"
	tracesJaeger = "jaeger"
)

// graphLinks builds the data links of the service graph's nodes and edges:
// to the causal paths through them (this datasource) and, when one is
// configured, to their traces in a Tempo or Jaeger datasource.
type graphLinks struct {
	// selfUID is this datasource's UID; empty outside Grafana (no path links).
	selfUID string
	// tracesUID and tracesType name the traces datasource; empty for none.
	tracesUID, tracesType string
}

func (l graphLinks) pathsLink(title, service string) data.DataLink {
	return data.DataLink{Title: title, Internal: &data.InternalDataLink{DatasourceUID: l.selfUID,
		Query: map[string]any{"queryType": QueryTypePaths, "service": service, "top": 10}}}
}

func (l graphLinks) tracesLink(title, tempoQuery, jaegerService string) (data.DataLink, bool) {
	switch l.tracesType {
	case tracesTempo:
		return data.DataLink{Title: title, Internal: &data.InternalDataLink{DatasourceUID: l.tracesUID,
			Query: map[string]any{"queryType": "traceql", "query": tempoQuery}}}, true
	case tracesJaeger:
		return data.DataLink{Title: title, Internal: &data.InternalDataLink{DatasourceUID: l.tracesUID,
			Query: map[string]any{"queryType": "search", "service": jaegerService}}}, true
	}
	return data.DataLink{}, false
}

// node is the links of a node, by its id (the service).
func (l graphLinks) node() []data.DataLink {
	var out []data.DataLink
	if l.selfUID != "" {
		out = append(out, l.pathsLink("Causal paths through ${__data.fields.id}", "${__data.fields.id}"))
	}
	if t, ok := l.tracesLink("Traces of ${__data.fields.id}",
		`{ resource.service.name = "${__data.fields.id}" }`, "${__data.fields.id}"); ok && l.tracesUID != "" {
		out = append(out, t)
	}
	return out
}

// edge is the links of an edge: the paths through its caller, and the traces
// in which the caller's span has a child span of the callee.
func (l graphLinks) edge() []data.DataLink {
	var out []data.DataLink
	if l.selfUID != "" {
		out = append(out, l.pathsLink("Causal paths through ${__data.fields.source}", "${__data.fields.source}"))
	}
	if t, ok := l.tracesLink("Traces of ${__data.fields.source} → ${__data.fields.target}",
		`{ resource.service.name = "${__data.fields.source}" } > { resource.service.name = "${__data.fields.target}" }`,
		"${__data.fields.source}"); ok && l.tracesUID != "" {
		out = append(out, t)
	}
	return out
}

// validTracesType checks the configured traces datasource type.
func validTracesType(t string) error {
	switch t {
	case "", tracesTempo, tracesJaeger:
		return nil
	}
	return fmt.Errorf("the traces datasource type %q is not supported: use tempo or jaeger", t)
}
