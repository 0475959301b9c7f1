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
//     t2−t1. Bins are exponential: log base 1.05, 340 bins from 1 ms as in the
//     paper, and 142 more below 1 ms down to 0.98 µs, so that sub-millisecond
//     delays are told apart (configurable).
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
//     parentheses (docs/formats.md §2).
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
//   - Sub-millisecond delays. The paper's bins start at 1 ms, so every shorter
//     nesting delay shares one bin and only the penalties choose among such
//     candidates. The default layout adds 142 bins of the same ratio below 1 ms,
//     down to 0.98 µs, and keeps every edge above 1 ms where the paper has it
//     (stats.LogBins.Below). On the multi-tier trace at 1/100 of its time scale
//     (testdata/multitier-subms.yaml: per-hop delays of 0.1–1 ms) the paper's
//     layout misses 2 of the top 10 patterns and 4.23% of instances; the default
//     misses none and 0.60%, as the ms-scale trace does (0.61%, unchanged). The
//     pattern histograms use the same edges (stats.LatencyBins).
//   - Speed. Call pairs are matched while the trace is parsed (msgtrace.
//     ReadCallPairs, CallPairer), which also gives their order by call time
//     (NestInCallOrder); bins are found from precomputed edges (stats.
//     LogIndexer); the candidate sweep, bin finding and pattern statistics run in
//     parallel. Every floating-point sum is still added in the order one
//     goroutine would add it, so results do not depend on the processors.
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
// The nesting algorithm repairs OpenTelemetry traces whose context was lost. A
// span is a call pair seen from one side, so the nodes become processes and the
// candidates follow the span's kind: an orphan SERVER (CONSUMER) span may nest
// in a CLIENT (PRODUCER) span of another process; any other orphan in a SERVER,
// CONSUMER or INTERNAL span of its own process during which it started. CLIENT
// and PRODUCER spans are leaves in their process. Unlike messages of one
// thread, the spans of a loaded process belong to several requests at once, so
// "innermost enclosing span" is no rule; instead (spanstitch.go, spanmodel.go,
// spanassign.go):
//
//   - Delay models. For every candidate link p → c a score is a density, the
//     count of a histogram over signed log bins (10% wide from 100 ns) at the
//     link's delay divided by the bin's width, or by 2·res when the timestamps
//     are coarser (res, each process's and span kind's resolution, read from
//     the timestamps), per span of p's kind. Widths are counted in a unit of
//     the data's own scale, the median span's duration / 3000, so that the
//     floor a delay never seen scores is the same share of a density for
//     microsecond and second-long calls. Each histogram is read through a
//     triangular kernel whose half-width follows Silverman's rule in bins,
//     h = 1.06·σ·n^(−1/5) (σ the spread of its bins, n its weight), so a model
//     learned from few spans is not spiky:
//     remote: s(p,c) = n_req(c.start − p.start − θ)·P_resp(p.end − c.end + θ)·
//     P_site(c's service and name | p's call site),
//     θ the clock offset of the two processes, fitted each round as NTP's
//     ((request delay) − (response delay))/2 at its densest cluster (in
//     round 0, over every candidate, the densest window of the data's scale
//     b = min(w/2, median span) where the densest fifth is wider than b: the
//     true callers may be fewer than a fifth). Callers are searched within
//     SkewWindow of the callee's start and end, so a skew beyond it would
//     hide the true caller: first, learnSkew (spanskew.go) measures each
//     process pair's offset up to MaxSkew, from callers whose duration
//     exceeds the callee's by at most max(w, d_callee) (the round trip,
//     whatever the clocks), as the densest b-wide window of midpoint
//     differences that stands 6σ above a uniform scatter, and moves the
//     pair's window there when it lies beyond w/2; a second peak within
//     1.2 times it (two calls in a row) ties the pair, whose links are then
//     not written (confidence ½). The pairs' offsets are differences of one
//     clock per process, θ(a→b) = c_b − c_a, so they must sum to 0 around
//     every cycle: the clocks are fitted by weighted least squares to the
//     untied pairs (a far offset weighing as the near peak it had to beat),
//     the worst pair beyond b dropped until all agree, far pairs on no cycle
//     left out, and a dropped pair, or one no sample measured, takes
//     c_b − c_a (consistentOffsets). A local parent out of order with its child
//     on one clock at one resolution (rounding is monotone) is not written
//     either;
//     local: s(p,c) = n(first or gap)·P(outlives | key), where first =
//     c.start − p.start for p's first child, gap = c.start − prev.end after a
//     finished previous sibling or c.start − prev.start beside a running one.
//     (Scoring each child also by the gap after it, to its next sibling, was
//     measured and dropped: it cost 1–1.5 points on the harness.)
//   - Rounds. Round 0 is the paper's scoreboard (§5.1.1): each orphan spreads
//     1/N over its candidates, known links count 1, and a parent already
//     running a child takes the overlap penalty (1+1)^−x; the models are then
//     refitted to the assignment, weighted by its confidence, up to
//     StitchConfig.Rounds times (an EM with hard assignments), stopping when a
//     round changes no parent.
//   - Joint assignment. A CLIENT span has one SERVER child: orphan SERVER spans
//     take callers by a maximum of Σ log s over one-to-one assignments (a
//     forward auction). Local orphans are placed in start order against what
//     their candidates hold; a candidate that is an ancestor, in the current
//     assignment, of another candidate still running at c.end is dropped
//     (innermost along each chain of parents, not across requests), and so is a
//     candidate c outlives while one of its ancestors encloses c.
//   - Callers. Those that called exactly the address a SERVER span answered on
//     come first (replicas share a name, not an address); among those that
//     started first, one enclosing another process's caller with a SERVER span
//     of that process between them is further up the chain and dropped; a
//     caller that started after its callee, θ corrected, only when none started
//     before. θ is NTP's ((request delay) − (response delay))/2, its densest
//     cluster over every candidate pair before any assignment, then over the
//     assigned calls; 0 when that cluster's run holds 0 (synchronised clocks
//     are the prior). Real delays are not symmetric (a server queues before
//     its span starts), so "in time" tolerates the estimates' median distance
//     from θ.
//   - Child counts (spancount.go). A handler makes the same calls each time, so
//     a second child of one key (service and name) under a parent is scored by
//     the learned hazard h(m) = (N(≥ m+1) + ½)/(N(≥ m) + 1), N(≥ m) the
//     parents of the operation with at least m such children: two concurrent
//     requests of one operation no longer take each other's children.
//   - Child sequences (spanseq.go). Which child follows which under a parent
//     of one operation is nearly fixed: each local score is multiplied by
//     P(c | p, prev) = (n(p, prev, c) + P(c | p))/(n(p, prev) + 1), learned
//     from the assignment, prev the previous sibling's service and name.
//   - Call sites (spansite.go). The k-th call a handler makes goes to the same
//     endpoint every time, although its span may say only "HTTP GET": the
//     probability that a caller's site (its service and name, its parent's
//     name and its ordinal among the parent's calls) reaches the callee's
//     service and operation is learned from the assignment with additive
//     back-off to coarser sites, P_l = (n(site_l, callee) + P_{l+1})/(n(site_l) + 1).
//   - Crossed tails (spantail.go). Two concurrent requests of one operation
//     make the same calls at nearly the same times; one child placed under the
//     wrong one takes every later sibling with it, each link sure on its own.
//     After each refit round every inferred local child c with a local runner-up
//     q compares the two ways of joining the tails of its parent p (from c on)
//     and of q (from c's start on): L = f(c | prev_p)·f(d | prev_q)·g(p.end −
//     end_p)·g(q.end − end_q), f the sibling models above, d q's first child
//     of the tail, end_x the latest end among x's children and g the learned
//     tail gap of p's operation, mixed 95/5 with a uniform density over p's
//     duration (a robust likelihood: a parent whose other children are still
//     misplaced must not outweigh the rest). It keeps the likelier, and caps
//     the confidence of every child in both tails at L/(L + L_swapped).
//   - Late starts. Work handed to another thread as a request finishes (a
//     publish, a background task) may start after its parent has ended. A
//     PRODUCER or INTERNAL orphan therefore also takes as candidates the local
//     SERVER and CONSUMER spans (the handlers, which may leave work behind as
//     they return; a span that ended inside a handler is an earlier sibling)
//     that ended before it started, no longer ago than they ran; such a
//     link scores n_after(c.start − p.end)·P(late | key), the probability
//     learned from the assignment (not from the scoreboard, which would teach
//     it from every candidate) with a prior of 1% until seen, and every
//     enclosing link takes 1 − P(late | key).
//   - Async work beside its handler. A child given to a span that outlives its
//     own parent, when that parent encloses the child too, gets a confidence
//     of at most ½ unless thread ids tell the two apart (asyncConfidence):
//     the work's calls and the handler's calls meanwhile have the same
//     timing, and models refitted to either side grow sure of it.
//   - Identity (span.Span's Identity). A CONSUMER span that names its
//     message (messaging.message.id, or Kafka's partition and offset) keeps
//     as candidates only the producers that name the same one, when any
//     does, and is sure of a lone one: the identity is the link. An HTTP
//     SERVER span whose target names an identifier or a query keeps the
//     callers that named the same target, when any does; a target may
//     repeat across requests, so the timing decides among those left.
//   - Sporadic orphans (spansporadic.go). A local orphan of a kind (service
//     and name) whose other spans mostly keep their known parent lost it with
//     the parent span (dropped), not by a thread hop, which loses context
//     every time: its true parent is an ancestor, often remote, not a
//     candidate here, and its confidence is capped at ½.
//   - Caller addresses (spancaller.go). A SERVER span that records where its
//     request came from (network.peer.*, client.*, legacy net.sock.peer.*)
//     names its caller's connection, which belongs to one process, and its
//     address, which belongs to one host or proxy. P(process | address) and
//     P(process | connection) are learned from the assignment with back-off,
//     P_conn(i) = (n_conn(i) + P_addr(i))/(N_conn + 1) with
//     P_addr(i) = (n_addr(i) + 1/M)/(N_addr + 1), the callee's own link left
//     out (M the processes that call); and the gaps from
//     the connection's previous request to the caller's start and from the
//     caller's end to the connection's next request (sequential on HTTP/1.1,
//     overlapping, hence uninformative, when multiplexed) are learned as link
//     models. Each caller's score is multiplied by both, relative to the best
//     of the callee's callers, so that a callee that records nothing keeps the
//     scale against which confidences weigh strangers.
//   - Queue order (spanqueue.go). A queue hands out messages in about the
//     order they came, whatever they waited: producers of a destination are
//     ranked by end, each service's consumers of it by start, and the rank
//     offset d = rank(p) − rank(c), constant for a FIFO queue, is learned per
//     destination from the known links and the confidence-weighted
//     assignment. A consumer's producers are ranked by their score times
//     (n(d) + 0.01)/(max n + 0.01), unsmoothed (the neighbouring offsets are
//     the wrong candidates); its confidence is the smaller of the confidences
//     with and without the order, since an order learned from the assignment
//     looks stricter than it is, and at most n(d)/(n(d) + max n) when d is not
//     the likeliest offset (a chain shifted by one message is sure of each link
//     given its neighbours).
//   - Exchanges (spanexchange.go). A local child's confidence also counts, as
//     alternatives, exchanging it with a child of its key held by another
//     candidate: r = s(p, c)·s(q, d) / (s(q, c)·s(p, d)) with the children
//     moved, conf′ = 1/(1/conf + Σ r). Concurrent handlers of one operation
//     each holding one child of a key no longer make a wrong one sure. The
//     exchange of whole batches (every child of the key either may take) is
//     one more alternative: parallel calls started together move together.
//     So is the move of a child with its k nearest running siblings of its
//     key to the other candidate, for k + 1 from 2 to maxCount, each its own
//     alternative: a batch under the wrong one of two concurrent parents is
//     otherwise sure of it member by member, each following its siblings.
//   - Threads (spanthread.go). A span's thread.id tells a synchronous child's
//     parent in a thread-per-request server and nearly nothing in a reactive
//     one. EM over the orphans' candidates, before any assignment, estimates
//     per process r, the chance that a non-parent candidate shares the child's
//     thread, and per kind of child q₁, the chance that its parent does, from
//     π_c = m·q₁/r / (m·q₁/r + (n − m)(1 − q₁)/(1 − r)) with m of the n
//     candidates on c's thread. Candidates are weighed by q₁/r on the thread
//     and (1 − q₁)/(1 − r) off it, and dropped off it when that is below 0.02.
//   - Guests. A process that serves nothing (database clients reported under
//     the back end's service.name) is placed in the process of its host that
//     encloses ≥ 90% of its spans when no other encloses > 60%; otherwise each
//     of its spans looks among all serving processes of its host.
//   - Confidence is the posterior of the chosen parent among the candidates,
//     given the others' parents; for a SERVER span a swap with the span holding
//     a candidate counts as an alternative: s(q,c)·s(p,c')/s(q,c'), or that
//     span moving to a caller no one holds; a local candidate ruled out by an
//     inferred chain counts with weight 1 − Π(confidences of the chain); and
//     every confidence counts the alternative that the true parent is not
//     among the spans, scored as the best of n strangers (the n/(n+1) quantile
//     of the scores of the candidates not chosen, given at least 32 of them).
//
// docs/causal-report.md measures it against concurrency, fan-out, time scale,
// skew, missing spans and attribute style (internal/stitcheval): on TrainTicket
// as captured 99.3–99.8% of lost parent links, falling with concurrency.
//
// # The convolution algorithm (§5.2, figure 6)
//
// Convolve infers paths from any messages, calls and one-way alike, from their
// times, senders and receivers only; ConvolveOneWay takes messages named by
// strings (the exporter's PRODUCER/CONSUMER spans). Neither does I/O.
//
//  1. Roots (FindPathsFromRoot). Each root's messages to each destination j make
//     one edge root→j. Default roots are the sources: nodes that send calls or
//     one-way messages but receive none (the client of an RPC system, the origins
//     of mail), failing those nodes that receive nothing, failing those every
//     sender.
//  2. Indicator functions (§5.2.1). Quantum t holds √(messages in
//     [t0+tμ, t0+(t+1)μ)), so a busy quantum matched by a busy one adds x, not x².
//  3. Cross-correlation (FindCorrelation). C(d) = Σ s1(t)·s2(t+d) of the incoming
//     messages V of a vertex with everything its node j sends, for lags
//     |d| ≤ L = MaxDelay/μ (default 1000 quanta), normalised by S/(S−|d|) for the
//     overlap. By FFT (gonum dsp/fourier) on sequences zero-padded to a 5-smooth
//     length N ≥ S+L, so no lag in range wraps; the spectrum of each node's sends
//     is cached. When V is sparse a direct sum is cheaper and gives the same
//     values: over V's occupied quanta against a dense copy of s2 (nnz·(2L+1)),
//     or against s2's occupied quanta within ±L (the pairs); CorrelateAuto picks
//     the cheapest by a cost model, and the email trace never needs the FFT.
//  4. Spikes (§5.2). Mean and σ of C over all 2L+1 lags, by sigma clipping at S σ
//     (a strong spike would otherwise raise σ: the email trace's zero-delay spike
//     hid its 10 s and 15 s spikes) and never below the null deviation of two
//     unrelated signals, √(S·Var(s1)·Var(s2)). A spike is a local maximum N σ
//     above the mean (N = 4); spikes are separated by a point below S σ (S = 3)
//     or by a dip below half the lower peak (the paper's rule merged the email
//     trace's 10 s spike into the shoulder of the zero-delay one, whose messages
//     0.2 s late spill into the next 5 s quantum). Spikes at negative lags are
//     dropped.
//  5. Message selection (§5.2.2). For a spike at lag d spanning lags Lo..Hi, j's
//     messages sent a delay in [min((Lo−1)μ, dμ−v), max((Hi+1)μ, dμ+v)] after an
//     incoming message, never before it, are selected (v = Tolerance, default μ).
//     Selection is a matching: per destination, each incoming message causes at
//     most one message per spike, the one whose delay is closest to the spike's.
//     Without it, stray messages of other paths through the same relays entered
//     at μ = 30 s, and their real continuations made a false 188-instance path.
//     Each destination k of the selection is a candidate edge j→k, whose delay
//     is the median delay of its messages (finer than dμ).
//  6. Depth-first path graph (ProcessNode). Each kept candidate becomes a vertex
//     (one per spike and destination) with its message count, followed
//     depth-first with its messages as the next V. Children are visited in order
//     of delay. A vertex's Ended counts its incoming messages that no kept edge
//     continues.
//  7. Patterns (§5.4, figure 9). Every vertex contributes its Ended messages, as
//     instances, to the chain of nodes that leads to it. Chains with the same
//     nodes merge into one pattern: each edge lists its delays (merged within a
//     quantum, ordered by declining message count) and its total message count;
//     the root's edge has no delay. Count is the pattern's instances,
//     TotalLatency that times the sum of the edges' mean delays. The signature
//     follows docs/formats.md §2, A(B(C)).
//
// # Filters (§5.2.3, §5.3.1)
//
// The paper names them without describing them. Each can be disabled
// (ConvolutionConfig.Disable) and counts what it removed (ConvolutionStats).
//
//   - Low frequency. An edge needs MinMessages (5) messages, and its destination
//     must be significant on exact timestamps: with [lo, hi] its selection
//     window, F counts the pairs (incoming a, message z to k) with z−a in
//     [lo, hi] and B the mirror image, a−z in [lo, hi] (same-instant pairs count
//     forward). Causation is one-sided, so F exceeds B by about the caused
//     messages; coincidence and load (a busy node both receives and sends more)
//     raise both; a return after its own call makes B win. D = (F−B)/√(F+B) must
//     reach S when the spike itself stands above zB, and zB otherwise, zB being N
//     σ corrected for the 2L+1 lags searched (Bonferroni, 5.7 σ at L = 1000): a
//     weak spike may be the best of many chance lags. Measured failures of
//     simpler tests: counting matches against chance has no power on dense
//     traffic (the multi-tier trace at μ = 100 ms has 9 calls a quantum); a
//     destination's own correlation, in quanta, counted a return's own call 10 ms
//     earlier as caused and grew DB→AP1→DB→… loops of a thousand vertices; a
//     plain 4σ test let a chance spike of 23 messages through at μ = 5 s. Patterns
//     with fewer than MinCount (1) instances are dropped too.
//   - Accidentally short paths. Where most messages of a vertex go on, the few
//     that end are taken for continuations the spikes missed (a delay outside
//     the window), not for a shorter path: a vertex contributes its ended
//     messages only if they are at least ShortFraction (10%) of its count, or all
//     of it.
//   - Cycles. A candidate edge whose messages are, for at least CycleOverlap
//     (half) of them, already on the path that leads to it is a cycle: the same
//     messages would be explained by themselves (zero-delay ping-pong). Paths
//     that revisit a node with other messages (hub→list→hub on the email trace,
//     every RPC chain) are kept. MaxDepth (64) and MaxVertices (20000) bound the
//     graph in any case.
//   - Negative delays. Spikes at negative lags are dropped, and a message is
//     never ascribed to one sent after it; SkewWindow relaxes both, for
//     unsynchronised clocks.
//   - RPC-derived paths (§5.3.1). Given A→B→C→B→A the correlation of A→B with
//     B→A also reports A→B→A, and every serial call after the first gives a
//     shortcut (WS→AP straight after the call into WS, beside WS→AUTH→…→WS→AP).
//     An edge u→k is derived when, for DerivedOverlap (half) of it, a sibling
//     chain explains it: either its messages were reached again at least two
//     edges below u (exact when selection is), or its causes also caused a
//     sibling edge whose subtree comes back to u's node and then sends to k (on
//     dense traffic the shortcut's window is full of other returns, so its
//     messages differ from the chain's, but its causes do not). Since delays add
//     up along a chain, a shortcut is longer than the first edge of the chain
//     that explains it, which is why children go in order of delay; ties
//     (zero-delay relays) are checked again once all siblings are explored.
//
// # Truth (--truth)
//
// ChainTruth turns the path column into chains: within one path instance, a
// message's predecessor is the latest earlier message of the instance received
// by its sender; every root-to-leaf chain of the resulting tree is one instance
// of the chain of its nodes (one per serial RPC path or email, one per branch of
// a fan-out or of parallel calls). Score compares patterns with true chains as
// §7.5.1 does with nesting patterns: top-N false negatives, false-positive
// patterns, false-negative and false-positive instances (Σ max(0, difference)
// per chain), and the message attribution error, the fraction of messages that
// no reported vertex carries with the message's true chain prefix. §7.5.7's view
// is added: with Frequent = 100, the false patterns with at least 100 instances
// and the true chains with at least 100 instances that no pattern reports.
//
// # Results (go test -run Convolution ./internal/causal/, and -tags long)
//
//   - Multi-tier, μ = 0.1 s (§7.2, figure 13): with 200 ms added at WS2, the
//     edges WS2→AP1 and WS2→AP2 after AUTH's return grow by 196 and 198 ms, and
//     none of the other 50-odd edges with 100 messages moves by more than 10 ms.
//   - Email-like relays (testdata/relay-email.yaml, 76,055 messages over
//     5.1·10^6 s; §7.4, §7.5.7): at μ = 5 s the secondary spikes at 10 s (spam
//     filters) and 15 s (virus scanner, list expander) sit on the right edges
//     and every primary spike at zero; at μ = 30 s all delays are zero. False
//     patterns: 16 of 29 at 5 s, 2 of 15 at 30 s (the paper: 21-29%), none with
//     100 instances; all 11 true chains with 100 instances found, at both.
//   - Costs (table 1, CPU time of one core): the 200,352-message multi-tier trace
//     at μ = 10 ms in 0.52 s (the paper: 6684 s); the email trace at μ = 5 s in
//     0.12 s (2106 s), at 30 s in 0.09 s (338 s).
//   - Figure 23: with the FFT forced, the time per correlation is 3.68 ns ×
//     S·log2(S) + 0.41 ms (R² = 0.993) for S from 7·10^3 to 10^6 on the email
//     trace, and a run is e such correlations (e the edges, §5.2.5); the default
//     method sums directly where that is cheaper and takes 0.07-0.11 s at every
//     quantum.
//   - Memory, O(m + S): about 44 bytes per message (a sorted copy, its index by
//     sender, two marks), the candidate edges on the current path (PeakHeld
//     indices), and a constant number of quantum-length vectors: with the FFT, a
//     plan (3N floats), a sequence and a spectrum, and at most 16 cached spectra
//     within 64 MB; with direct sums, one padded signal. Measured at S = 10^7
//     (multi-tier trace at μ = 50 µs, FFT): 510 MB of heap, 48.5 bytes per
//     further quantum; the email trace at S = 1.02·10^7 with the default method:
//     5.5 MB.
//
// On RPC traces the convolution reports calls and returns as separate edges and,
// where traffic is dense, ascribes some messages to the wrong branch (returns
// of AP1 to WS2 on chains that came through WS1): on the multi-tier trace at
// μ = 10 ms, 13 of 29 patterns are false and 8 of those have over 100
// instances. The nesting algorithm is the one for RPC systems (§5.3.1). And a
// strictly periodic source correlates with itself at its period: requests every
// 37.3 s gave spikes at 31 s and 37.8 s and a chain that looped until MaxDepth.
// The algorithm needs irregular arrivals, as real traffic has.
package causal
