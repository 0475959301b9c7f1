// Package span is the one span model of Tierscope: the span record that span
// stitching (package causal), the path tagging of the causalpath processor, the
// `tierscope stitch` command and the perfmodel exporter's windows all read, and
// the canonical signature of a causal path (docs/formats.md §2).
//
// Names are interned: a Span holds small integers into a string table owned by
// whoever built it (internal/stitch builds both from OTLP spans), so the
// algorithms that compare names by the million compare integers.
package span
