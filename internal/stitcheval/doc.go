// Package stitcheval measures span stitching: it removes context from traces
// whose truth is known (Strip), makes real traces concurrent (Superimpose) or
// generates applications with ground truth (Generate), runs a stitcher over
// them and scores its output spans alone (Score), so that every stitching
// choice is judged on the same numbers and any algorithm that follows the
// output contract below can be compared, such as the naive baseline (Naive).
//
// # The contract
//
// Strip records the truth on every span it sees:
//
//   - tierscope.truth.parent_span_id: the hex id of the true parent, "" for a root;
//   - tierscope.truth.trace_id: the hex id of the true trace.
//
// A stitcher writes, on every orphan for which it found a best candidate,
// tierscope.inferred.parent_span_id (hex) and tierscope.inferred.confidence (a
// double in 0..1); in reparent mode it also sets parentSpanId when the
// confidence reaches its threshold. Score reads nothing else, so it is
// independent of the algorithm's internals.
//
// Generated resources carry tierscope.truth.process, the process a span really
// ran in, because some resources deliberately hide it (a database CLIENT span
// reported under the back end's service.name). Stitchers must not read
// tierscope.truth.* attributes.
//
// # Overlap
//
// Concurrency is measured as the overlap: in every process, the time-averaged
// number of OTHER requests in flight there while a request is in flight there,
// weighted by request time:
//
//	overlap = Σ_p ∫ n_p(t)·(n_p(t)−1) dt / Σ_p ∫ n_p(t) dt
//
// where n_p(t) counts the traces with a visit to process p covering t, a visit
// being the interval from the first start to the last end of the trace's spans
// in p. A sequential system has overlap 0; a server that always holds 4
// requests has 3. It is what makes stitching ambiguous: the candidates of an
// orphan come from the other requests in flight in the same processes.
package stitcheval
