// Package span is the span model of Tierscope, the one span type every reader
// of spans shares: span stitching (package causal), the causalpath
// processor's path tags, `tierscope stitch`, and the perfmodel exporter's
// assembler and windows (internal/model) all hold Span values and read their
// kind (Kind). It also holds the rule that says which spans are the nodes of a
// causal path (NodeOf), and the canonical signature of a path (Signer,
// Signature; docs/formats.md §2, the patterns of paper 001 §5.1.1.4,
// FindCallPaths), so the path tag the processor writes and the pattern the
// exporter stores are one string.
//
// Names are interned: a Span holds small integers into a Names table owned by
// whoever built it (internal/stitch builds one per stitching round, the
// exporter one per engine, compacted to a bound), so the algorithms that
// compare names by the million compare integers, and a span holds no pointer
// for the garbage collector to follow.
package span
