// Package perfmodelreceiver scrapes the perfmodel exporter's API and emits its
// models as metrics into a metrics pipeline: each flow's work factor (paper
// 002), each transaction's signature service time (paper 004) and each
// measured gradient (paper 000), with semantic-convention attributes, so that
// a Prometheus or OTLP exporter publishes them beside the servicegraph
// connector's service graph.
//
//go:generate mdatagen metadata.yaml
package perfmodelreceiver
