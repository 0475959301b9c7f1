package netns

import (
	"errors"
	"fmt"
	"time"

	"github.com/tierscope/tierscope/internal/nfqdelay"
)

const (
	// MaxDelay caps the delay a loop may add.
	MaxDelay = time.Second
	// DefaultLease is how long a delay loop runs when DelayOptions.Lease is 0.
	DefaultLease = nfqdelay.DefaultLease
	// MaxLease caps DelayOptions.Lease: every loop stops by itself.
	MaxLease = nfqdelay.MaxLease
	// DefaultMaxQueueLen is the kernel queue length when DelayOptions.MaxQueueLen is 0.
	DefaultMaxQueueLen = nfqdelay.DefaultMaxQueueLen
)

// DelayOptions selects the packets a delay loop holds and for how long.
type DelayOptions struct {
	// Chain of the filter table: OUTPUT (default; packets this host sends),
	// FORWARD (packets it routes) or INPUT (packets it receives).
	Chain string
	// Proto is "tcp" (default) or "udp".
	Proto string
	// SrcPort and DstPort match --sport and --dport when not 0. A server's
	// replies are matched on OUTPUT with SrcPort = the server's port.
	SrcPort, DstPort int
	// OutIface matches -o when not empty.
	OutIface string
	// Delay is added to every matching packet; 0 ≤ Delay ≤ MaxDelay.
	Delay time.Duration
	// Queue is the NFQUEUE number; 0 takes the next free one of the lab.
	Queue uint16
	// MaxQueueLen is the kernel's queue length; when it is full, further
	// packets pass undelayed (fail-open flag). 0 means DefaultMaxQueueLen.
	MaxQueueLen uint32
	// Lease is how long the loop runs before it stops itself (rule removed,
	// packets released). 0 means DefaultLease; at most MaxLease.
	Lease time.Duration
}

// DelayStats is what a loop measured (the injector's delay engine's
// statistics): per packet released on schedule, the time from its arrival in
// user space to its accept verdict.
type DelayStats = nfqdelay.Stats

// Delay is a running delay loop: the injector's delay engine (nfqdelay) with
// a constant delay, started inside one of the lab's namespaces.
type Delay struct {
	host  *Host
	queue uint16
	d     *nfqdelay.Delayer
}

// StartDelay starts a delay loop in h: the injector's NFQUEUE engine, opened
// from a thread inside h's namespace, appends to opt.Chain, in h's namespace,
//
//	-p tcp [-o IF] [--sport P] [--dport P] -m comment --comment <lab tag>
//	  -j NFQUEUE --queue-num N --queue-bypass
//
// and holds every matching packet for opt.Delay. The loop fails open
// (--queue-bypass, the queue's fail-open flag) and Stop removes the rule
// before releasing what it holds. The first StartDelay of the process chooses
// the iptables backend (see IPTablesBackend).
func (h *Host) StartDelay(opt DelayOptions) (*Delay, error) {
	bin, err := chooseBackend(h)
	if err != nil {
		return nil, err
	}
	return h.startDelay(bin, opt)
}

func (h *Host) startDelay(bin string, opt DelayOptions) (*Delay, error) {
	if opt.Delay < 0 || opt.Delay > MaxDelay {
		return nil, fmt.Errorf("netns: delay %v outside [0, %v]", opt.Delay, MaxDelay)
	}
	if opt.Lease < 0 || opt.Lease > MaxLease {
		return nil, fmt.Errorf("netns: lease %v outside [0, %v]", opt.Lease, MaxLease)
	}
	direction := map[string]string{"": "out", "OUTPUT": "out", "INPUT": "in", "FORWARD": "fwd"}[opt.Chain]
	if direction == "" {
		return nil, fmt.Errorf("netns: chain %q: want OUTPUT, FORWARD or INPUT", opt.Chain)
	}
	if opt.Proto == "" {
		opt.Proto = "tcp"
	}
	for _, p := range []int{opt.SrcPort, opt.DstPort} {
		if p < 0 || p > 65535 {
			return nil, fmt.Errorf("netns: port %d out of range", p)
		}
	}
	l := h.lab
	if opt.Queue == 0 {
		opt.Queue = l.allocQueue()
	}
	dl := &Delay{host: h, queue: opt.Queue}
	// The queue's netlink socket and the rule belong to the namespace of the
	// thread that starts the engine.
	err := h.Run(func() error {
		var err error
		dl.d, err = nfqdelay.Start(nfqdelay.Options{
			ID: l.ruleID(),
			Match: nfqdelay.Match{Proto: opt.Proto, SrcPort: uint16(opt.SrcPort), DstPort: uint16(opt.DstPort),
				Direction: direction, OutIface: opt.OutIface},
			Queue: opt.Queue, Delay: nfqdelay.Constant(opt.Delay), MaxDelay: MaxDelay,
			Lease: opt.Lease, MaxQueueLen: opt.MaxQueueLen, IPTables: bin,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns: delay in %s: %w", h.ns, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_, _ = dl.d.Stop()
		return nil, ErrClosed
	}
	l.delays = append(l.delays, dl)
	return dl, nil
}

// Rule is the rule specification (after -A CHAIN) the loop added.
func (d *Delay) Rule() []string { return d.d.Rule() }

// Backend is the iptables binary that added the rule.
func (d *Delay) Backend() string { return d.d.Backend() }

// Queue is the NFQUEUE number.
func (d *Delay) Queue() uint16 { return d.queue }

// Stats returns the loop's measurements so far.
func (d *Delay) Stats() DelayStats { return d.d.Stats() }

// Stop ends the loop: it deletes the rule (no new packets are queued),
// accepts every held packet at once, then closes the queue. It is idempotent
// and returns the final statistics. The lease timer and Lab.Close call it too.
func (d *Delay) Stop() (DelayStats, error) {
	st, err := d.d.Stop()
	if err != nil && !namespaceExists(d.host.ns) {
		err = nil // the rule went with its namespace
	}
	return st, err
}

// abandon closes the queue but leaves the rule, as when the process holding
// the queue dies.
func (d *Delay) abandon() { d.d.Abandon() }

var errNoBackend = errors.New("netns: no iptables binary found: apt-get install -y iptables")
