// Package model is the perfmodel exporter's engine state: per time window, the
// service graph and the causal path patterns of complete traces, and the inputs
// of the work-factor and signature models, all as mergeable sufficient
// statistics (docs/design.md, principles).
//
// Exactness. Every statistic merges by integer addition (counts, log-bin counts,
// nanosecond sums, min/max), so splitting a stream over shards or windows and
// merging gives bit-identical results in any order; only the CPU utilization
// sums are floating point.
//
// Spans. A window reads assembled traces of span.Span (internal/span, the one
// span model) with their names from a span.Names table; its keys are the names
// as strings, so windows built from different tables merge.
//
// Patterns. A trace's spans form a tree through their parent ids. SERVER and
// CONSUMER spans, and roots, are nodes named by their service; a CLIENT or
// PRODUCER span that no SERVER/CONSUMER span of the trace answers is a node
// named by its peer (a database or an uninstrumented back end); other spans are
// transparent. The signature is docs/formats.md §2's canonical form. A node's latency
// is its span's duration; its call delay is its start minus its parent node's
// start (paper 001 §5.1.1.4). Node statistics are kept in canonical pre-order
// (children by signature, equal siblings by start), so equal signatures align.
//
// The graph. Every node counts its spans (requests, errors with status ERROR,
// durations); every node with a node ancestor adds one call to the edge from it,
// of kind database (db.system), async (PRODUCER/CONSUMER) or sync. An edge's
// latency is the callee node's span duration: the SERVER span when the callee is
// instrumented, else the caller's CLIENT span.
package model
