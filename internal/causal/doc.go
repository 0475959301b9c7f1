// Package causal infers causal path patterns from black-box message traces, after
// Aguilera et al., "Performance debugging for distributed systems of black boxes"
// (paper 001). It holds no I/O and no global state; the same input and
// configuration always give the same output.
//
// # The nesting algorithm (§5.1, figure 4)
//
//  1. FindCallPairs (§5.1.1.1) matches each RET_SENT to the earliest open CALL_SENT
//     of the same (caller, callee, call id); without ids ("-"), to the earliest
//     open call of the pair. Unmatched messages are discarded and counted by reason
//     (Discards), so noise does not reach the later steps.
//  2. Nest collects, for every call B→C [t2,t3], the candidate parents X→B [t1,t4]
//     with t1 ≤ t2+w and t4 ≥ t3−w, where w is the skew window (§7.5.6). The
//     collection is a per-node sweep over calls in time order, O(messages × mean
//     parallelism) as §5.1.2 states; the mean number of candidates per nested
//     call is the "mean per-node parallelism" of table 1.
//  3. ScoreNestings (§5.1.1.2) adds 1/|parents| to scoreboard[A,B,C] at the bin of
//     t2−t1. Bins are exponential: log base 1.05, 340 bins from 1 ms (configurable).
//     Histograms may then be convolved with a Gaussian (NestingConfig.SmoothSigma, in
//     bins), which widens peaks so skewed delays still hit them.
//  4. FindNestedPairs (§5.1.1.3) gives each call the candidate with the highest
//     score scoreboard[A,B,C,t2−t1] · (1+c_overlap)^−x · (1+c_same)^−y · (1+c_any)^−z,
//     counting the children already assigned to that candidate that overlap the call
//     in time, that call the same node, or all of them; x=2, y=z=0 by default. Ties
//     go to the earliest candidate.
//  5. Patterns (§5.1.1.4, CreatePathNode) turns every call without a parent into a
//     path and aggregates identical paths: per node, the latency t4−t1 and the call
//     delay t1−t_parent as log-binned histograms (mean exact; p50, p90 and p99
//     within 2.5%). A pattern's signature is canonical: a node's name followed,
//     when it has children, by their signatures sorted as byte strings in
//     parentheses (FORMATS.md §2).
//
// Compare scores an inference against the truth (§7.5.1): the nesting computed with
// UsePathIDs, which only admits candidates from the child's own path instance (the
// paper's "cheat" mode).
//
// # Choices where the paper is silent or loose
//
//   - Penalties are multiplicative as in the text, not subtracted as in figure 4
//     line 22, and use (1+c)^−p: the text's c^−p is infinite for c=0, and for c=1
//     it would not penalise the first overlapping child at all, which the figure 5
//     example relies on.
//   - Order of parent choice. Figure 4 visits "each child in call pairs" without
//     an order, but the penalties count the children already assigned, so the order
//     matters. By default (OrderByCertainty) children with the most decisive raw
//     scores choose first: a parent whose own later child is certain is then
//     penalised before it can take a stranger's child. On the multi-tier trace
//     (testdata/multitier.yaml, seed 1) this lowers false-negative instances from
//     1.16% (call order, OrderByCall) to 0.61%, and false-positive patterns from 89
//     to 70.
//   - A call with candidates always gets one (figure 4 starts maxscore at 0, which
//     could leave it parentless). A candidate that would close a cycle, possible with
//     a skew window or equal timestamps, is skipped.
//   - Skew. Under clock skew a nested call can appear to start before its parent
//     (t2 < t1). Such negative delays get mirrored bins (a symmetric log axis) rather
//     than falling into bin 0 with every short delay. And a return stamped before its
//     call by a skewed clock is matched if the call follows within the window.
//   - Scores are the bin weights as in the paper. Reading them as densities (weight
//     over bin width) was measured and rejected: it raised false-negative instances
//     on the multi-tier trace from 0.61% to 1.04% and under 20 ms of skew from
//     1.06% to 4.24%.
//   - Accuracy counts instances per pattern as in the §7.5.1 example (false
//     negatives are Σ max(0, true − inferred)). The message attribution error is
//     stricter: a message counts as attributed only if its whole inferred path
//     instance is identical to its true one (same calls, same parents).
//
// # Span stitching (Stitch)
//
// The same algorithm repairs OpenTelemetry traces whose context was lost. A span is
// a call pair seen from one side, so the nodes become processes and the candidate
// rule follows the span's kind: an orphan SERVER/CONSUMER span may nest in a
// CLIENT/PRODUCER span of another process; any other orphan in a span of its own
// process. The scoreboard is keyed by (parent service, parent name, child service,
// child name) and spans whose parent is known add weight 1, so intact traces teach
// the delays that decide the broken ones. Choices, each measured on the two
// TrainTicket files of the Nezha dataset (every trace and parent id removed;
// accuracy of parent links):
//
//   - Innermost enclosure. Within a thread spans form a stack, so all ancestors of
//     a span enclose it; only local candidates that enclose no other candidate are
//     kept. Without it the scoreboard chose grandparents: 57% → 96%. For remote
//     callers the same holds along a chain of processes (a gateway's call encloses
//     the call its callee made), but not among one process's parallel calls,
//     which may nest in time: there a caller is dropped only if it encloses a
//     caller of another process. Dropping nested parallel calls too cost the
//     testbed (20 users, Search's two parallel calls) 10% of its web→app links:
//     89.65% → 99.87%.
//   - Address. When a CLIENT span's peer address equals the address the SERVER
//     span answered on (server.address:server.port on both sides), the callers
//     that match are preferred; behind a proxy the two differ, so it is not a rule.
//   - One clock within a process, several across. Local candidates must enclose
//     strictly, with LocalWindow (1 ms, some SDKs stamp server spans in whole
//     milliseconds) only when none does. Remote candidates may end up to
//     SkewWindow (5 ms) before the orphan, but must start before it, the window
//     applying to the start only when no caller started first; and when some
//     candidates enclose the orphan outright, the others (a previous sibling call
//     admitted by the window) are dropped: 96% → 99.4–99.7%.
//   - A CLIENT span of the orphan's own process, or one calling a database, is never
//     the parent of a SERVER span.
//   - ExclusivePenalty: a CLIENT span that already reached a server is penalised as
//     an overlapping child is, but with exponent 10, since one call reaches one
//     server.
//   - Confidence is the chosen parent's share of the penalised scores. Calibration
//     on those files: 99.5% of inferences with confidence ≥ 0.9 are right, about
//     60% of those near 0.5.
package causal
