// Package e2e holds end-to-end tests of the otelcol-tierscope distribution.
//
// They run the real collector binary (build/otelcol-tierscope/otelcol-tierscope,
// or the one named by $TIERSCOPE_OTELCOL) with a generated configuration, send it
// three-tier traces through the OpenTelemetry Go SDK with trace context dropped on
// the web → app hop, read what its file exporter wrote, and compare the span trees
// with the ground truth. A missing binary is a test failure, never a skip:
//
//	make build-otelcol && go test ./e2e/     # or: make e2e
package e2e
