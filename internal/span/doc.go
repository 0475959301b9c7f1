// Package span is the span model of Tierscope: the span record that span
// stitching (package causal), the causalpath processor's path tags and
// `tierscope stitch` read (Span, Kind), the rule that says which spans are the
// nodes of a causal path (NodeOf), and the canonical signature of a path
// (Signer, Signature; docs/formats.md §2, the patterns of paper 001 §5.1.1.4,
// FindCallPaths). The perfmodel exporter's windows (internal/model) take their
// kind, node rule and signatures from here, so the path tag the processor
// writes and the pattern the exporter stores are one string.
//
// Names are interned: a Span holds small integers into a string table owned by
// whoever built it (internal/stitch builds them from OTLP spans), so the
// algorithms that compare names by the million compare integers.
package span
