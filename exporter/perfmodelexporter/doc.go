//go:generate go tool mdatagen metadata.yaml

// Package perfmodelexporter implements the `perfmodel` exporter, Tierscope's
// model engine. One instance sits in a traces and a metrics pipeline: it
// assembles traces into per-window path patterns and a service graph, keeps
// the inputs of the work-factor, signature and capacity models, persists them
// as mergeable statistics, serves them over HTTP (confighttp) and coordinates
// the gradient experiments that drive the injector (package internal/gradient;
// paper 000 §§2–5). Every map it keeps is bounded by configuration, and what a
// bound refuses is counted in otelcol_exporter_perfmodel_overflow.
//
// The package is the component's adapter (factory, config, lifecycle in
// exporter.go) over one package per job: internal/ingest (the write side),
// internal/query (the read side), internal/coordinator (the experiments) and
// internal/httpapi (the HTTP layer).
package perfmodelexporter // import "github.com/tierscope/tierscope/exporter/perfmodelexporter"
