package netns

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	nfqueue "github.com/florianl/go-nfqueue/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

const (
	// MaxDelay caps the delay a loop may add (amplitudes are capped).
	MaxDelay = time.Second
	// DefaultLease is how long a delay loop runs when DelayOptions.Lease is 0.
	DefaultLease = 5 * time.Minute
	// MaxLease caps DelayOptions.Lease: every loop stops by itself.
	MaxLease = time.Hour
	// DefaultMaxQueueLen is the kernel queue length when DelayOptions.MaxQueueLen is 0.
	DefaultMaxQueueLen = 4096

	stopGrace = 20 * time.Millisecond
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

// DelayStats is what a loop measured: for every packet released on schedule,
// the time between its arrival in the loop and its accept verdict.
type DelayStats struct {
	Count               int
	Mean, Std, Min, Max time.Duration
	// Flushed counts packets released early because the loop stopped.
	Flushed int
	// Errors counts failed verdicts and receive errors.
	Errors int
}

func (s DelayStats) String() string {
	return fmt.Sprintf("n=%d mean=%v std=%v min=%v max=%v flushed=%d errors=%d",
		s.Count, s.Mean.Round(time.Microsecond), s.Std.Round(time.Microsecond),
		s.Min.Round(time.Microsecond), s.Max.Round(time.Microsecond), s.Flushed, s.Errors)
}

type pending struct {
	id uint32
	at time.Time
}

// Delay is a running delay loop: one tagged NFQUEUE rule in one namespace and
// the queue it feeds. A single goroutine releases packets in arrival order
// when they are due (the delay is constant, so a FIFO is a correct schedule).
type Delay struct {
	host    *Host
	bin     string
	opt     DelayOptions
	chain   string
	spec    []string // rule, without -A/-D CHAIN
	nf      *nfqueue.Nfqueue
	ctx     context.Context
	cancel  context.CancelFunc
	lease   *time.Timer
	wake    chan struct{}
	stopCh  chan struct{}
	schedOK chan struct{} // closed when the scheduler has exited

	mu       sync.Mutex
	fifo     []pending
	head     int
	stopping bool
	n        int
	mean, m2 float64 // Welford, in ns
	min, max time.Duration
	flushed  int
	errs     int
	lastErr  error

	ruleMu    sync.Mutex // orders adding the rule against Stop
	ruleAdded bool
	ruleGone  bool // Stop has run: never add the rule
	stopOnce  sync.Once
	closeOnce sync.Once
	stopErr   error
}

// StartDelay starts a delay loop in h: it opens NFQUEUE queue opt.Queue from a
// thread inside h's namespace, then appends to opt.Chain, in h's namespace,
//
//	-p tcp [-o IF] [--sport P] [--dport P] -m comment --comment tierscope-<lab>
//	  -j NFQUEUE --queue-num N --queue-bypass
//
// Every matching packet is held for opt.Delay and then accepted. The loop
// fails open: --queue-bypass lets packets through if nothing listens on the
// queue (the program died), the fail-open queue flag lets them through when
// the queue is full, and Stop removes the rule before releasing what it holds.
// The first StartDelay of the process chooses the iptables backend (see
// IPTablesBackend).
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
	if opt.Lease == 0 {
		opt.Lease = DefaultLease
	}
	if opt.MaxQueueLen == 0 {
		opt.MaxQueueLen = DefaultMaxQueueLen
	}
	chain := opt.Chain
	if chain == "" {
		chain = "OUTPUT"
	}
	switch chain {
	case "OUTPUT", "FORWARD", "INPUT":
	default:
		return nil, fmt.Errorf("netns: chain %q: want OUTPUT, FORWARD or INPUT", opt.Chain)
	}
	proto := opt.Proto
	if proto == "" {
		proto = "tcp"
	}
	if proto != "tcp" && proto != "udp" {
		return nil, fmt.Errorf("netns: proto %q: want tcp or udp", opt.Proto)
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
	spec := []string{"-p", proto}
	if opt.OutIface != "" {
		spec = append(spec, "-o", opt.OutIface)
	}
	if opt.SrcPort > 0 {
		spec = append(spec, "--sport", strconv.Itoa(opt.SrcPort))
	}
	if opt.DstPort > 0 {
		spec = append(spec, "--dport", strconv.Itoa(opt.DstPort))
	}
	spec = append(spec, "-m", "comment", "--comment", l.Tag(),
		"-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(opt.Queue)), "--queue-bypass")

	d := &Delay{
		host: h, bin: bin, opt: opt, chain: chain, spec: spec,
		wake: make(chan struct{}, 1), stopCh: make(chan struct{}), schedOK: make(chan struct{}),
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())

	// The netlink socket must be created inside the namespace: queues are
	// per network namespace.
	err := h.Run(func() error {
		nf, err := nfqueue.Open(&nfqueue.Config{
			NfQueue:     opt.Queue,
			MaxQueueLen: opt.MaxQueueLen,
			Copymode:    nfqueue.NfQnlCopyMeta, // the loop needs ids, not payloads
			Flags:       nfqueue.NfQaCfgFlagFailOpen,
			AfFamily:    unix.AF_INET,
		})
		if err != nil {
			return fmt.Errorf("netns: open nfqueue %d in %s: %w", opt.Queue, h.ns, err)
		}
		d.nf = nf
		return nil
	})
	if err != nil {
		d.cancel()
		return nil, err
	}
	_ = d.nf.SetOption(netlink.NoENOBUFS, true)
	go d.schedule()
	if err := d.nf.RegisterWithErrorFunc(d.ctx, d.hook, d.onError); err != nil {
		_, _ = d.Stop()
		return nil, fmt.Errorf("netns: bind nfqueue %d in %s: %w", opt.Queue, h.ns, err)
	}

	// Registered before the rule exists, so Close always finds it.
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_, _ = d.Stop()
		return nil, ErrClosed
	}
	l.delays = append(l.delays, d)
	l.backends[bin] = true
	l.mu.Unlock()

	d.ruleMu.Lock()
	if d.ruleGone {
		d.ruleMu.Unlock()
		return nil, ErrClosed
	}
	if _, err := iptables(h.ns, bin, append([]string{"-t", "filter", "-A", chain}, spec...)...); err != nil {
		d.ruleMu.Unlock()
		_, _ = d.Stop()
		return nil, err
	}
	d.ruleAdded = true
	d.lease = time.AfterFunc(opt.Lease, func() { _, _ = d.Stop() })
	d.ruleMu.Unlock()
	return d, nil
}

// Rule is the rule specification (after -A CHAIN) the loop added.
func (d *Delay) Rule() []string { return append([]string{d.chain}, d.spec...) }

// Backend is the iptables binary that added the rule.
func (d *Delay) Backend() string { return d.bin }

// Queue is the NFQUEUE number.
func (d *Delay) Queue() uint16 { return d.opt.Queue }

// hook runs on go-nfqueue's receive goroutine, once per queued packet.
func (d *Delay) hook(a nfqueue.Attribute) int {
	if a.PacketID == nil {
		return 0
	}
	now := time.Now()
	d.mu.Lock()
	if d.stopping {
		d.flushed++
		d.mu.Unlock()
		if err := d.nf.SetVerdict(*a.PacketID, nfqueue.NfAccept); err != nil {
			d.noteErr(err)
		}
		return 0
	}
	wasEmpty := d.head == len(d.fifo)
	d.fifo = append(d.fifo, pending{id: *a.PacketID, at: now})
	d.mu.Unlock()
	if wasEmpty {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	return 0
}

func (d *Delay) onError(err error) int {
	if d.ctx.Err() != nil {
		return 1
	}
	var op *netlink.OpError
	if errors.As(err, &op) && (op.Timeout() || errors.Is(op.Err, unix.ENOBUFS)) {
		d.noteErr(err)
		return 0
	}
	d.noteErr(err)
	return 1 // stop receiving; go-nfqueue unbinds the queue and --queue-bypass lets packets through
}

func (d *Delay) noteErr(err error) {
	d.mu.Lock()
	d.errs++
	d.lastErr = err
	d.mu.Unlock()
}

// schedule is the loop's only timer: it sleeps until the oldest held packet
// is due, then accepts every due packet with one batch verdict (which also
// releases any earlier packet whose queue message was lost).
func (d *Delay) schedule() {
	defer close(d.schedOK)
	t := time.NewTimer(time.Hour)
	t.Stop()
	var batch []pending
	for {
		select {
		case <-d.stopCh:
			d.flush()
			return
		default:
		}
		d.mu.Lock()
		if d.head == len(d.fifo) {
			d.mu.Unlock()
			select {
			case <-d.wake:
			case <-d.stopCh:
			}
			continue
		}
		now := time.Now()
		if wait := d.fifo[d.head].at.Add(d.opt.Delay).Sub(now); wait > 0 {
			d.mu.Unlock()
			t.Reset(wait)
			select {
			case <-t.C:
			case <-d.stopCh:
				t.Stop()
			}
			continue
		}
		end := d.head + 1
		for end < len(d.fifo) && !d.fifo[end].at.Add(d.opt.Delay).After(now) {
			end++
		}
		batch = append(batch[:0], d.fifo[d.head:end]...)
		d.head = end
		if d.head == len(d.fifo) {
			d.fifo, d.head = d.fifo[:0], 0
		} else if d.head > 1024 && d.head > len(d.fifo)/2 {
			d.fifo = append(d.fifo[:0], d.fifo[d.head:]...)
			d.head = 0
		}
		d.mu.Unlock()

		err := d.nf.SetVerdictBatch(batch[len(batch)-1].id, nfqueue.NfAccept)
		done := time.Now()
		d.mu.Lock()
		if err != nil {
			d.errs++
			d.lastErr = err
		}
		for _, p := range batch {
			d.add(done.Sub(p.at))
		}
		d.mu.Unlock()
	}
}

// flush accepts everything held, at once, and makes later arrivals pass
// immediately.
func (d *Delay) flush() {
	d.mu.Lock()
	d.stopping = true
	n := len(d.fifo) - d.head
	var last uint32
	if n > 0 {
		last = d.fifo[len(d.fifo)-1].id
	}
	d.fifo, d.head = nil, 0
	d.flushed += n
	d.mu.Unlock()
	if n > 0 {
		if err := d.nf.SetVerdictBatch(last, nfqueue.NfAccept); err != nil {
			d.noteErr(err)
		}
	}
}

func (d *Delay) add(x time.Duration) { // d.mu held
	d.n++
	f := float64(x)
	delta := f - d.mean
	d.mean += delta / float64(d.n)
	d.m2 += delta * (f - d.mean)
	if d.n == 1 || x < d.min {
		d.min = x
	}
	if x > d.max {
		d.max = x
	}
}

// Stats returns the loop's measurements so far.
func (d *Delay) Stats() DelayStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := DelayStats{Count: d.n, Mean: time.Duration(d.mean), Min: d.min, Max: d.max, Flushed: d.flushed, Errors: d.errs}
	if d.n > 1 {
		s.Std = time.Duration(math.Sqrt(d.m2 / float64(d.n-1)))
	}
	return s
}

// Stop ends the loop: it deletes the rule (no new packets are queued),
// accepts every held packet at once, keeps accepting late arrivals for a
// moment, then closes the queue. It is idempotent and returns the final
// statistics. The lease timer and Lab.Close call it too.
func (d *Delay) Stop() (DelayStats, error) {
	d.stopOnce.Do(func() {
		var errs []error
		d.ruleMu.Lock()
		d.ruleGone = true
		if d.lease != nil {
			d.lease.Stop()
		}
		if d.ruleAdded {
			_, err := iptables(d.host.ns, d.bin, append([]string{"-t", "filter", "-D", d.chain}, d.spec...)...)
			if err != nil && namespaceExists(d.host.ns) {
				errs = append(errs, err)
			}
		}
		d.ruleMu.Unlock()
		close(d.stopCh)
		<-d.schedOK
		time.Sleep(stopGrace) // packets queued just before the rule went are accepted by hook
		d.closeQueue()
		d.stopErr = errors.Join(errs...)
	})
	return d.Stats(), d.stopErr
}

// closeQueue stops receiving and closes the netlink socket; the kernel then
// unbinds the queue (anything still in it is dropped; --queue-bypass lets
// new packets through).
func (d *Delay) closeQueue() {
	d.closeOnce.Do(func() {
		d.cancel()
		_ = d.nf.Close()
	})
}
