// Package maketrace generates synthetic black-box message traces with known ground truth.
// It reimplements "maketrace" and "skewer" of Aguilera et al., "Performance debugging for
// distributed systems of black boxes" (paper 001): the tracelet generator of §7.1.1, the
// lossy sniffer of §7.5.5 and the per-node clock skew of §7.5.6.
//
// # Model
//
// A tracelet is a template of one causal path: a tree of RPCs between named nodes, each
// with Gaussian delays (§7.1.1). Each tracelet has a number of instances, closed-loop
// clients that run in parallel, and a think time drawn uniformly from [min, max] before
// every run, including the first, so that instances start staggered. An instance loops:
// t += think; run the tracelet with its root call sent at t; t = the root's return time.
// It stops when the next run would start at or after the duration; a run that starts
// before it is emitted whole, so the trace may extend a little past the duration.
//
// A call handled at callee B, arriving at t_in (its CALL_SENT time; the network adds no
// delay), proceeds as follows:
//
//   - serial (the default): cursor = t_in; for each child in order, cursor += its delay
//     (its delay_by_caller[B] if set), the child is called at cursor, and its return time
//     becomes the new cursor. B returns at cursor + reply.
//   - parallel: each child is called at t_in + its delay; B returns at the latest child
//     return + reply.
//   - one-way (`oneway: true`): the call is a single MSG_SENT message (no call id, no
//     return), as in a queue, pub/sub or mail relay. Its children are what the
//     callee sends on because of it, serial or parallel as above, from its arrival;
//     to its caller it takes no time (a serial cursor stays at its send time). A
//     run whose root is one-way ends with its last message.
//
// Every delay is max(0, Normal(mean, std)). Where `to` lists several nodes, one is
// chosen for each execution of that call, independently, with the given weights: this
// is load balancing, which multiplies the path patterns (§7.2, figures 10 and 11).
//
// Each run carries a fresh ground-truth path id p1, p2, ... in order of start time. With
// call_ids (the default) each call gets a unique id c1, c2, ..., numbered depth-first
// within a run; without them the trace has no ids and a reader falls back to matching a
// return with the earliest open call.
//
// # Configuration
//
// ParseConfig reads YAML; unknown fields are errors, and errors name the file, line and
// field. Durations are Go duration strings; a missing delay or reply is zero.
//
//	duration: 500s              # default trace length (Options.Duration overrides)
//	start: 1700000000           # Unix seconds of t=0 (default 1700000000)
//	call_ids: true              # default true
//	tracelets:
//	  - name: login             # default tracelet<N>; must be unique
//	    instances: 3            # default 1
//	    think: {min: 1s, max: 3s}
//	    root:
//	      from: client          # the caller; on the root only
//	      to: [WS1, WS2]        # a node or a list of alternatives
//	      weights: [0.6, 0.4]   # optional, positive, one per `to`; default uniform
//	      reply: {mean: 5ms, std: 1ms}
//	      parallel: false
//	      calls:
//	        - to: AUTH
//	          delay: {mean: 15ms, std: 3ms}
//	          delay_by_caller: {WS2: {mean: 215ms, std: 3ms}}
//	          reply: {mean: 5ms, std: 1ms}
//	          calls: []
//
// The root has no delay (the think time precedes it). A delay_by_caller key must be one
// of the parent's `to` nodes. YAML anchors and aliases may be used to share delays.
//
// For message-based systems (the convolution algorithm, paper §5.2 and §7.4), a delay
// may be multi-modal, and relays may have a forwarding delay of their own:
//
//	forwarding:                 # per node: the delay of the one-way messages it sends
//	  spam1:                    # without a `delay` of their own
//	    modes:                  # a mixture: each sample picks a mode by weight
//	      - {weight: 0.9, mean: 0s, std: 300ms}
//	      - {weight: 0.1, mean: 10s, std: 300ms}
//	  hub: {mean: 0s, std: 200ms}
//	tracelets:
//	  - root:
//	      from: inet-a
//	      to: gw1
//	      oneway: true
//	      calls:
//	        - {to: spam1, oneway: true, delay: {modes: [{weight: 3, mean: 0s}, {mean: 5s}]}}
//
// Precedence: delay_by_caller, then the call's `delay`, then (one-way calls only) the
// caller's forwarding delay. A forwarding entry for a node that sends no one-way message
// is an error. Configs without these features draw exactly the random numbers they
// always did, so their traces are unchanged for a seed. testdata/relay-email.yaml is the
// email-like relay trace of §7.4.
//
// # Sniffer and skew
//
// §7.5.5 models a sniffer "with a peak capture rate and a finite queue" that "discards
// packets that would overflow this queue", which gives bursty losses. Here it is a
// single FIFO server with a deterministic service time 1/R and room for Q messages
// (default 64, as in the paper), counting the one in service; a message that arrives
// while Q are in the system is dropped (ApplySniffer). The paper raised R until drops
// vanished; CaptureRateForDropRate instead searches for the R that gives a target drop
// fraction, so loss can be set directly.
//
// §7.5.6's skewer adds a per-node clock offset. A message's one timestamp is taken by
// its sender's clock, so a node's skew shifts the messages it sends (ApplySkew); a
// negative offset models a slow clock or de-skews.
//
// Generate applies these in the order in which they happen: runs in true time, then the
// sniffer (which sees true time), then skew, then a stable sort by timestamp.
//
// # Choices where the paper is silent
//
//   - Tracelets are trees of RPCs and one-way messages; interleavings of paths arise
//     from parallel instances rather than from hand-written message orders.
//   - Determinism: each (tracelet, instance) pair has its own PCG stream seeded from the
//     seed through SplitMix64, and instances are interleaved in start-time order by a
//     heap, so the trace is a function of the config and options only, and editing one
//     tracelet does not change the random draws of the others.
//   - Ties in time keep generation order (call before callee's calls before returns),
//     so zero delays still give causally ordered traces.
package maketrace
