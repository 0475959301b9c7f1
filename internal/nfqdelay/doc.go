// Package nfqdelay is the production delay backend of the injector: it holds
// the packets of one link (an iptables match) in an NFQUEUE queue and
// reinjects them after a time-varying delay, measuring the delay it actually
// applied to every packet.
//
// It follows the delay daemon of paper 000 §3 (Figure 5(a)): an iptables rule
// sends the link's packets to an in-kernel queue, the daemon reads only their
// metadata (Copymode meta: no payload is copied), keeps them in a queue in
// order of their send times and reinjects them when due; and, "to correct for
// inaccuracies in the timer mechanism", it measures the amount of delay
// actually injected into each packet so that the coordinator can use the
// mean actually applied rather than the requested amplitude (Stats).
//
// # Rule
//
// Start opens queue N in the current network namespace, then appends one rule
//
//	-p tcp|udp [-o IF] [-s SRC] [-d DST] [--sport P] [--dport P] \
//	  -m comment --comment tierscope-inj-<id> -j NFQUEUE --queue-num N --queue-bypass
//
// to OUTPUT (Direction "out"), INPUT ("in") or FORWARD ("fwd"). Stop deletes
// the rule first and then releases every held packet at once.
//
// # Schedule
//
// One scheduler goroutine, locked to its own OS thread with a 1 ns timer
// slack, releases packets. A packet arriving at time a gets the requested
// delay r = min(max(Delay(a), 0) + Floor, MaxDelay) and is due at
//
//	due(p) = max(a + r, due(previous packet))
//
// so due times never decrease in arrival order: the queue is a FIFO that is
// also sorted by due time, no packet is ever reordered (a falling edge of a
// square wave holds later packets behind earlier ones), and a new arrival can
// never be due before the packet the scheduler is waiting for. The scheduler
// therefore sleeps with nanosleep(2) until SpinMargin before the head's due
// time (Go timers overshoot by 0.1–1 ms), spins the rest, and accepts every
// due packet with one batch verdict (NFQA verdict batch up to the newest due
// id).
//
// A Floor holds every packet, so that a square wave's off-phase costs the
// scheduler what its on-phase does (holding a packet costs ~45 µs more CPU
// than passing it); Stats still splits the phases by Delay alone.
//
// # Measurement
//
// For every packet released on schedule, the delay actually applied is the
// time between the packet's arrival in the program and its verdict; Stats
// gives count, mean, standard deviation, min, max and p50/p90/p99 (log-binned,
// base 1.01, so quantiles are within ±0.5%), the error |actual − requested|
// (mean, p99, max), the packets released unstamped when stopping (Flushed),
// and errors.
//
// # Probe
//
// Hook-to-verdict times miss a packet's wait before the queue reader wakes
// and after the verdict. On a busy host that wait is longer in a square
// wave's on-phase: a 1.5 ms wave reached a receiver 4–11% larger than
// On.Mean − Off.Mean (TestWaveAtReceiver, `make bench-hold-cost`). With
// Options.Probe the Delayer also sends a small UDP packet every Probe
// interval from and to 127.0.0.1, marked with ProbeMark, which a second rule
// (same tag, OUTPUT -o lo) puts in the same queue: it meets the same reader,
// scheduler, floor and wave, and an ordinary goroutine receives it. Its
// one-way delay, send(2) to recv(2) on one clock, split by the wave's value
// at send and skipping probes next to an edge, is Stats.Probe; its on − off
// tracked the receiver's within two standard errors in 11 of 12 cases, where
// the packets' own times fell short in all 12, by 0.07–0.76 ms. The hook knows probes by their mark, and
// they stay out of the link's statistics.
//
// # Safety
//
//   - --queue-bypass: if the process dies (even by SIGKILL) the kernel
//     unbinds the queue and the rule lets packets through undelayed.
//   - The queue's fail-open flag: when the kernel queue is full, packets pass.
//   - Every rule is tagged tierscope-inj-<owner>-<id>, the owner naming the
//     process (pid and start time); Stop removes it, a lease (Options.Lease,
//     at most MaxLease) stops the Delayer by itself, and SweepStale removes
//     the rules of owners that are gone, never a live process's (the next
//     start of the injector calls it before its first Start). With
//     Options.RuleCheck a Delayer whose rule someone else deleted stops with
//     ErrRuleGone; SweepOwned is the injector's hang watchdog's fail-open.
//   - Delays are capped by MaxDelay (default 1 s, at most HardMaxDelay).
package nfqdelay
