package nfqdelay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	nfqueue "github.com/florianl/go-nfqueue/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/tierscope/tierscope/internal/owner"
	"github.com/tierscope/tierscope/internal/stats"
)

const (
	// TagPrefix starts the comment of every rule this package adds.
	TagPrefix = "tierscope-inj-"
	// DefaultMaxDelay caps the delay when Options.MaxDelay is 0.
	DefaultMaxDelay = time.Second
	// HardMaxDelay is the largest Options.MaxDelay accepted.
	HardMaxDelay = 10 * time.Second
	// DefaultLease is used when Options.Lease is 0.
	DefaultLease = 5 * time.Minute
	// MaxLease caps Options.Lease.
	MaxLease = time.Hour
	// DefaultMaxQueueLen is the kernel queue length when Options.MaxQueueLen is 0.
	DefaultMaxQueueLen = 4096
	// DefaultRealtimePriority is the SCHED_FIFO priority when
	// Options.RealtimePriority is 0: above every default kernel thread
	// except the migration and watchdog threads (99), below threaded IRQs (50).
	DefaultRealtimePriority = 20
	// DefaultSpinMargin is how long before a due time the scheduler stops
	// sleeping and spins, when Options.SpinMargin is 0.
	DefaultSpinMargin = 80 * time.Microsecond
	// IPTablesEnv, when set, names the iptables binary to use.
	IPTablesEnv = "TIERSCOPE_IPTABLES"

	stopGrace = 20 * time.Millisecond
	maxSleep  = 10 * time.Millisecond // the scheduler checks for Stop at least this often
	holdP     = 2 * time.Millisecond  // the last stretch before a due time is slept holding the P
)

// Match selects the packets of one link.
type Match struct {
	// Proto is "tcp" or "udp".
	Proto string
	// Src and Dst match -s and -d when valid (the zero Prefix matches all).
	Src, Dst netip.Prefix
	// SrcPort and DstPort match --sport and --dport when not 0.
	SrcPort, DstPort uint16
	// Direction is "out" (OUTPUT: packets this host sends, the default),
	// "in" (INPUT: packets it receives) or "fwd" (FORWARD: packets it routes).
	Direction string
	// OutIface matches -o (the interface a packet leaves by) when not empty.
	OutIface string
}

// Options configures a Delayer.
type Options struct {
	// ID names the rule: its comment is TagPrefix+<owner>-+ID, where the
	// owner (owner.Self) names this process, so that SweepStale leaves the
	// rules of live processes alone. Empty means a sequence number.
	ID    string
	Match Match
	// Queue is the NFQUEUE number.
	Queue uint16
	// Delay gives the delay for a packet arriving at now; it is called on
	// the receive goroutine, once per packet, and (with Probe) on the probe
	// sender's; it must be fast and safe for concurrent use. Results are
	// clamped to [0, MaxDelay]. Nil means no delay.
	Delay func(now time.Time) time.Duration
	// MaxDelay caps the delay; 0 means DefaultMaxDelay.
	MaxDelay time.Duration
	// Floor is added to every packet's delay (within MaxDelay). Under a
	// square wave it makes both phases hold every packet: without it the
	// off-phase passes packets at once and the on-phase sleeps and spins for
	// each, ~45 µs more scheduler CPU per packet, a load on the host that
	// rises and falls with the wave and reads as gradient. The on/off split
	// of Stats goes by Delay's own value, so on.Mean − off.Mean stays the
	// wave's part.
	Floor time.Duration
	// Lease is how long the Delayer runs before it stops itself; 0 means
	// DefaultLease, at most MaxLease.
	Lease time.Duration
	// MaxQueueLen is the kernel queue length; 0 means DefaultMaxQueueLen.
	MaxQueueLen uint32
	// SpinMargin: the scheduler sleeps until this long before a due time
	// and spins the rest; 0 means DefaultSpinMargin, negative never spins.
	SpinMargin time.Duration
	// IPTables is the iptables binary; empty means $TIERSCOPE_IPTABLES or
	// "iptables".
	IPTables string
	// RealtimePriority is the SCHED_FIFO priority (1–99) of the scheduler
	// thread and of the thread that receives packets; 0 means
	// DefaultRealtimePriority, negative keeps normal scheduling (nice −20).
	RealtimePriority int
	// Probe, when positive, sends a UDP probe through the same queue every
	// Probe (on 127.0.0.1, marked ProbeMark, by a second rule with the same
	// tag) and measures its one-way delay (Stats.Probe): the change a
	// receiver sees, which the hook-to-verdict times under-count on a busy
	// host. Each probe costs what a packet of the link does: ~1 ms of CPU
	// on the test VM, so 50 ms (20 packets/s) is 2% of a core (TestProbeCost).
	Probe time.Duration
	// ProbeMark is the probes' SO_MARK; 0 means DefaultProbeMark.
	ProbeMark uint32
	// RuleCheck, when positive, is how often the Delayer checks that its
	// rule is still in place (iptables -C); a rule deleted by anyone else
	// stops it with ErrRuleGone, so its lease cannot report a delay that no
	// longer applies. 0 never checks.
	RuleCheck time.Duration
}

// ErrRuleGone is why a Delayer whose rule was deleted by someone else stopped.
var ErrRuleGone = errors.New("nfqdelay: the rule was deleted by another process")

// Constant returns a Delay function that always returns d.
func Constant(d time.Duration) func(time.Time) time.Duration {
	return func(time.Time) time.Duration { return d }
}

// PhaseStats is the delay applied to one class of packets.
type PhaseStats struct {
	Count int
	// Mean and Std are of the delay actually applied; RequestedMean of the
	// delay requested.
	Mean, Std, RequestedMean time.Duration
}

// phaseAcc accumulates a PhaseStats (Welford, ns).
type phaseAcc struct {
	n            int
	mean, m2     float64
	requestedSum float64
}

func (a *phaseAcc) add(x, req time.Duration) {
	a.n++
	f := float64(x)
	delta := f - a.mean
	a.mean += delta / float64(a.n)
	a.m2 += delta * (f - a.mean)
	a.requestedSum += float64(req)
}

func (a *phaseAcc) stats() PhaseStats {
	s := PhaseStats{Count: a.n, Mean: time.Duration(a.mean)}
	if a.n > 0 {
		s.RequestedMean = time.Duration(a.requestedSum / float64(a.n))
	}
	if a.n > 1 {
		s.Std = time.Duration(math.Sqrt(a.m2 / float64(a.n-1)))
	}
	return s
}

// Stats is what a Delayer measured.
type Stats struct {
	// Count is the number of packets released on schedule (measured).
	Count int
	// Delay actually applied: verdict time − arrival time.
	Mean, Std, Min, Max time.Duration
	P50, P90, P99       time.Duration
	// RequestedMean is the mean requested delay of the measured packets.
	RequestedMean time.Duration
	// On and Off split the measured packets by whether a delay was requested
	// (a square wave's on- and off-phases): On.Mean − Off.Mean is the delay the
	// wave actually added, free of the pass-through time every packet pays.
	On, Off PhaseStats
	// Error is |actual − requested|.
	ErrMean, ErrP99, ErrMax time.Duration
	// HeldForOrder counts packets held beyond their requested delay so as
	// not to overtake an earlier packet.
	HeldForOrder int
	// Flushed counts packets released unstamped (early) because of Stop.
	Flushed int
	// Batches is the number of batch verdicts.
	Batches int
	// Errors counts failed verdicts and receive errors; LastError is the last.
	Errors    int
	LastError error
	// SchedulerCPU is the CPU time used by the scheduler's thread.
	SchedulerCPU time.Duration
	// Probe is the probe stream's measurement; nil without Options.Probe.
	Probe *ProbeStats
}

func (s Stats) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	return fmt.Sprintf("n=%d mean=%v std=%v min=%v p50=%v p90=%v p99=%v max=%v req=%v err(mean=%v p99=%v max=%v) heldForOrder=%d flushed=%d batches=%d errors=%d schedCPU=%v",
		s.Count, r(s.Mean), r(s.Std), r(s.Min), r(s.P50), r(s.P90), r(s.P99), r(s.Max), r(s.RequestedMean),
		r(s.ErrMean), r(s.ErrP99), r(s.ErrMax), s.HeldForOrder, s.Flushed, s.Batches, s.Errors, r(s.SchedulerCPU))
}

// histogram layout in microseconds: base 1.01 from 1 µs, up to ~1.1e6 µs·e.
var histBins = stats.LogBins{Base: 1.01, Min: 1, Count: 1500}

type pending struct {
	id       uint32
	at, due  time.Time
	req      time.Duration // requested delay, floor included
	on       bool          // Delay asked for more than the floor
	heldOver bool
	probe    bool // a probe packet: measured by the probe's receiver, not in Stats
}

// Delayer is a running delay: one tagged NFQUEUE rule and the queue it feeds.
type Delayer struct {
	opt   Options
	bin   string
	chain string
	spec  []string
	tag   string
	nsFD  int // the network namespace Start ran in
	nf    *nfqueue.Nfqueue

	ctx     context.Context
	cancel  context.CancelFunc
	lease   *time.Timer
	wake    chan struct{}
	stopCh  chan struct{}
	schedOK chan struct{}

	mu       sync.Mutex
	fifo     []pending
	head     int
	lastDue  time.Time
	stopping bool
	// measurements
	n                 int
	mean, m2          float64 // Welford, ns
	min, max          time.Duration
	reqSum            float64
	on, off           phaseAcc
	errSum            float64
	actual, errs      *stats.LogHistogram
	errMax            time.Duration
	heldForOrder      int
	flushed, batches  int
	nerr              int
	lastErr           error
	schedCPU          atomic.Int64
	receiverRaised    bool         // only the receive goroutine reads and writes it
	realtime          atomic.Int32 // threads running SCHED_FIFO
	ruleMu            sync.Mutex
	ruleAdded, ruleGo bool // ruleGo: Stop has run, never add
	stopOnce          sync.Once
	closeOnce         sync.Once
	stopErr           error
	stopCause         error // why it stopped by itself: nil for Stop

	probe *probeStream // nil without Options.Probe
}

var seq atomic.Uint64

// Start starts a Delayer in the calling thread's network namespace (call it
// inside the namespace, e.g. from a thread that setns(2)ed). It opens the
// queue, starts the scheduler and only then adds the rule, so no packet is
// queued without a reader.
func Start(opt Options) (*Delayer, error) {
	opt, chain, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	tag := TagPrefix + owner.Self() + "-" + opt.ID
	if len(tag) > 255 {
		return nil, errors.New("nfqdelay: id too long")
	}
	spec, err := ruleSpec(opt.Match, tag, opt.Queue)
	if err != nil {
		return nil, err
	}

	bin := opt.IPTables
	if bin == "" {
		bin = os.Getenv(IPTablesEnv)
	}
	if bin == "" {
		bin = "iptables"
	}
	nsFD, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("nfqdelay: open own network namespace: %w", err)
	}
	d := &Delayer{
		opt: opt, bin: bin, chain: chain, spec: spec, tag: tag, nsFD: nsFD,
		wake: make(chan struct{}, 1), stopCh: make(chan struct{}), schedOK: make(chan struct{}),
		actual: stats.NewLogHistogram(histBins), errs: stats.NewLogHistogram(histBins),
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	nf, err := nfqueue.Open(&nfqueue.Config{
		NfQueue:      opt.Queue,
		MaxQueueLen:  opt.MaxQueueLen,
		Copymode:     nfqueue.NfQnlCopyMeta,
		Flags:        nfqueue.NfQaCfgFlagFailOpen,
		AfFamily:     unix.AF_INET,
		WriteTimeout: time.Second,
	})
	if err != nil {
		d.cancel()
		_ = unix.Close(nsFD)
		return nil, fmt.Errorf("nfqdelay: open queue %d: %w", opt.Queue, err)
	}
	d.nf = nf
	_ = nf.SetOption(netlink.NoENOBUFS, true)
	if opt.Probe > 0 {
		if d.probe, err = d.startProbe(); err != nil {
			d.cancel()
			_ = nf.Close()
			_ = unix.Close(nsFD)
			return nil, err
		}
		go d.receiveProbes()
	}
	go d.schedule()
	if err := nf.RegisterWithErrorFunc(d.ctx, d.hook, d.onError); err != nil {
		_, _ = d.Stop()
		return nil, fmt.Errorf("nfqdelay: bind queue %d: %w", opt.Queue, err)
	}
	d.ruleMu.Lock()
	if _, err := d.iptables(append([]string{"-t", "filter", "-A", chain}, spec...)...); err != nil {
		d.ruleMu.Unlock()
		_, _ = d.Stop()
		return nil, err
	}
	d.ruleAdded = true
	if d.probe != nil {
		if _, err := d.iptables(append([]string{"-t", "filter", "-A", "OUTPUT"}, d.probe.spec...)...); err != nil {
			d.ruleMu.Unlock()
			_, _ = d.Stop()
			return nil, err
		}
		d.probe.added = true
		d.probe.sender.Add(1)
		go d.sendProbes()
	}
	d.lease = time.AfterFunc(opt.Lease, func() { d.stopBecause(errLeaseOver) })
	d.ruleMu.Unlock()
	if opt.RuleCheck > 0 {
		go d.checkRule()
	}
	return d, nil
}

// withDefaults checks opt and fills in its defaults; chain is the iptables
// chain of the match's direction.
func (opt Options) withDefaults() (Options, string, error) {
	m := opt.Match
	if m.Proto != "tcp" && m.Proto != "udp" {
		return opt, "", fmt.Errorf("nfqdelay: proto %q: want tcp or udp", m.Proto)
	}
	chain := ""
	switch m.Direction {
	case "", "out":
		chain = "OUTPUT"
	case "in":
		chain = "INPUT"
	case "fwd":
		chain = "FORWARD"
	default:
		return opt, "", fmt.Errorf("nfqdelay: direction %q: want out, in or fwd", m.Direction)
	}
	if opt.MaxDelay == 0 {
		opt.MaxDelay = DefaultMaxDelay
	}
	if opt.MaxDelay < 0 || opt.MaxDelay > HardMaxDelay {
		return opt, "", fmt.Errorf("nfqdelay: max delay %v outside (0, %v]", opt.MaxDelay, HardMaxDelay)
	}
	if opt.Floor < 0 || opt.Floor >= opt.MaxDelay {
		return opt, "", fmt.Errorf("nfqdelay: floor %v outside [0, max delay %v)", opt.Floor, opt.MaxDelay)
	}
	if opt.Lease == 0 {
		opt.Lease = DefaultLease
	}
	if opt.Lease < 0 || opt.Lease > MaxLease {
		return opt, "", fmt.Errorf("nfqdelay: lease %v outside (0, %v]", opt.Lease, MaxLease)
	}
	if opt.MaxQueueLen == 0 {
		opt.MaxQueueLen = DefaultMaxQueueLen
	}
	if opt.SpinMargin == 0 {
		opt.SpinMargin = DefaultSpinMargin
	}
	if opt.RealtimePriority == 0 {
		opt.RealtimePriority = DefaultRealtimePriority
	}
	if opt.RealtimePriority > 99 {
		opt.RealtimePriority = 99
	}
	if opt.Delay == nil {
		opt.Delay = Constant(0)
	}
	if opt.Probe < 0 {
		return opt, "", fmt.Errorf("nfqdelay: probe interval %v must be ≥ 0", opt.Probe)
	}
	if opt.ProbeMark == 0 {
		opt.ProbeMark = DefaultProbeMark
	}
	if opt.ID == "" {
		opt.ID = strconv.FormatUint(seq.Add(1), 10)
	}
	for _, c := range opt.ID {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return opt, "", fmt.Errorf("nfqdelay: id %q: only letters, digits, '-', '_' and '.'", opt.ID)
		}
	}
	return opt, chain, nil
}

// ruleSpec is the iptables rule that queues m's packets to queue, tagged.
func ruleSpec(m Match, tag string, queue uint16) ([]string, error) {
	spec := []string{"-p", m.Proto}
	if m.OutIface != "" {
		spec = append(spec, "-o", m.OutIface)
	}
	for _, p := range []struct {
		flag string
		pfx  netip.Prefix
	}{{"-s", m.Src}, {"-d", m.Dst}} {
		if p.pfx.IsValid() {
			if !p.pfx.Addr().Is4() {
				return nil, fmt.Errorf("nfqdelay: %s %v: only IPv4 (iptables)", p.flag, p.pfx)
			}
			spec = append(spec, p.flag, p.pfx.Masked().String())
		}
	}
	if m.SrcPort != 0 {
		spec = append(spec, "--sport", strconv.Itoa(int(m.SrcPort)))
	}
	if m.DstPort != 0 {
		spec = append(spec, "--dport", strconv.Itoa(int(m.DstPort)))
	}
	spec = append(spec, "-m", "comment", "--comment", tag,
		"-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(queue)), "--queue-bypass")
	return spec, nil
}

var errLeaseOver = errors.New("nfqdelay: its own lease ran out")

// stopBecause stops the Delayer by itself, recording why (see Cause).
func (d *Delayer) stopBecause(cause error) {
	d.mu.Lock()
	if d.stopCause == nil {
		d.stopCause = cause
	}
	d.mu.Unlock()
	_, _ = d.Stop()
}

// Cause is why the Delayer stopped by itself (its lease ran out, or
// ErrRuleGone); nil while it runs or when Stop stopped it.
func (d *Delayer) Cause() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopCause
}

// checkRule stops the Delayer with ErrRuleGone once its rule is missing.
func (d *Delayer) checkRule() {
	t := time.NewTicker(d.opt.RuleCheck)
	defer t.Stop()
	args := append([]string{"-t", "filter", "-C", d.chain}, d.spec...)
	for {
		select {
		case <-d.stopCh:
			return
		case <-t.C:
		}
		d.ruleMu.Lock()
		if d.ruleGo {
			d.ruleMu.Unlock()
			return
		}
		_, err := d.iptables(args...)
		// Exit status 1 is "no such rule"; others (a lock timeout) are
		// retried at the next tick.
		gone := noSuchRule(err)
		if gone {
			d.ruleAdded = false // nothing for Stop to delete
		}
		d.ruleMu.Unlock()
		if gone {
			d.stopBecause(ErrRuleGone)
			return
		}
	}
}

// noSuchRule reports an iptables exit status 1: the rule to check or
// delete does not exist.
func noSuchRule(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 1
}

// Overdue is how long the oldest held packet is past its due time: a
// scheduler that stopped releasing (a hang) shows here; 0 when it keeps up.
func (d *Delayer) Overdue(now time.Time) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopping || d.head == len(d.fifo) {
		return 0
	}
	return max(0, now.Sub(d.fifo[d.head].due))
}

// Tag is the comment of the Delayer's rule.
func (d *Delayer) Tag() string { return d.tag }

// Rule is the rule the Delayer added (chain, then specification).
func (d *Delayer) Rule() []string { return append([]string{d.chain}, d.spec...) }

// Backend is the iptables binary used.
func (d *Delayer) Backend() string { return d.bin }

// Done is closed when the Delayer has stopped releasing on schedule (Stop or
// lease expiry).
func (d *Delayer) Done() <-chan struct{} { return d.stopCh }

// iptables runs the Delayer's iptables binary in its namespace.
func (d *Delayer) iptables(args ...string) (string, error) {
	var out string
	err := inNS(d.nsFD, func() error {
		var err error
		out, err = runIPT(d.bin, args...)
		return err
	})
	return out, err
}

func (d *Delayer) hook(a nfqueue.Attribute) int {
	if a.PacketID == nil {
		return 0
	}
	if !d.receiverRaised {
		// go-nfqueue calls the hook from its one receive goroutine. Pinning
		// that goroutine to its thread (for the rest of its life; the thread
		// exits with it) lets the thread be woken ahead of busy neighbours,
		// so a packet's time in the kernel queue, which the measurement below
		// cannot see, stays short.
		d.receiverRaised = true
		runtime.LockOSThread()
		d.raisePriority()
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
	wave := d.opt.Delay(now)
	req := d.requested(wave)
	due := now.Add(req)
	held := false
	if due.Before(d.lastDue) {
		due, held = d.lastDue, true
		d.heldForOrder++
	}
	d.lastDue = due
	wasEmpty := d.head == len(d.fifo)
	probe := d.probe != nil && a.Mark != nil && *a.Mark == d.opt.ProbeMark
	d.fifo = append(d.fifo, pending{id: *a.PacketID, at: now, due: due, req: req, on: wave > 0, heldOver: held, probe: probe})
	d.mu.Unlock()
	if wasEmpty {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	return 0
}

// requested is the delay a packet gets for the wave's value w.
func (d *Delayer) requested(w time.Duration) time.Duration {
	return min(max(w, 0)+d.opt.Floor, d.opt.MaxDelay)
}

func (d *Delayer) onError(err error) int {
	if d.ctx.Err() != nil {
		return 1
	}
	d.noteErr(err)
	var op *netlink.OpError
	if errors.As(err, &op) && (op.Timeout() || errors.Is(op.Err, unix.ENOBUFS)) {
		return 0
	}
	return 1 // go-nfqueue stops receiving; --queue-bypass and fail-open let packets through
}

func (d *Delayer) noteErr(err error) {
	d.mu.Lock()
	d.nerr++
	d.lastErr = err
	d.mu.Unlock()
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// schedule is the only releasing goroutine. It runs on its own locked thread
// with a 1 ns timer slack and sleeps with nanosleep(2): since due times are
// non-decreasing in arrival order, nothing that arrives while it sleeps can
// be due earlier than the head it sleeps for.
func (d *Delayer) schedule() {
	defer close(d.schedOK)
	// The thread stays locked to the end, so it exits with this goroutine rather
	// than going back to the Go scheduler with its raised priority.
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	d.raisePriority()
	cpu0 := threadCPU()
	defer func() { d.schedCPU.Store(int64(threadCPU() - cpu0)) }()
	var batch []pending
	spin := d.opt.SpinMargin
	for {
		d.schedCPU.Store(int64(threadCPU() - cpu0))
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
		due := d.fifo[d.head].due
		now := time.Now()
		if wait := due.Sub(now); wait > 0 {
			d.mu.Unlock()
			if spin >= 0 && wait <= spin {
				for time.Now().Before(due) {
				}
				continue
			}
			s := wait
			if spin > 0 {
				s -= spin
			}
			if wait > holdP {
				// Far from due: a blocking-aware sleep that lets the Go
				// runtime use this P, waking holdP early so that getting a
				// P back does not make the verdict late.
				ts := unix.NsecToTimespec(int64(min(wait-holdP, maxSleep)))
				_ = unix.Nanosleep(&ts, nil)
			} else {
				// Close to due: sleep without giving up the P (a raw
				// syscall), so no runnable goroutine can delay the verdict.
				ts := unix.NsecToTimespec(int64(s))
				_, _, _ = unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
			}
			continue
		}
		end := d.head + 1
		for end < len(d.fifo) && !d.fifo[end].due.After(now) {
			end++
		}
		batch = append(batch[:0], d.fifo[d.head:end]...)
		d.head = end
		if d.head == len(d.fifo) {
			d.fifo, d.head = d.fifo[:0], 0
		} else if d.head > 1024 && d.head > len(d.fifo)/2 {
			n := copy(d.fifo, d.fifo[d.head:])
			d.fifo, d.head = d.fifo[:n], 0
		}
		d.mu.Unlock()

		err := d.nf.SetVerdictBatch(batch[len(batch)-1].id, nfqueue.NfAccept)
		done := time.Now()
		d.mu.Lock()
		d.batches++
		if err != nil {
			d.nerr++
			d.lastErr = err
		}
		for _, p := range batch {
			if !p.probe {
				d.add(done.Sub(p.at), p.req, p.on)
			}
		}
		d.mu.Unlock()
	}
}

// flush releases everything held at once; later arrivals pass immediately.
func (d *Delayer) flush() {
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

func (d *Delayer) add(x, req time.Duration, on bool) { // d.mu held
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
	d.reqSum += float64(req)
	if on {
		d.on.add(x, req)
	} else {
		d.off.add(x, req)
	}
	e := x - req
	if e < 0 {
		e = -e
	}
	d.errSum += float64(e)
	if e > d.errMax {
		d.errMax = e
	}
	d.actual.Add(float64(x) / 1e3)
	d.errs.Add(float64(e) / 1e3)
}

// Stats returns the measurements so far.
func (d *Delayer) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	us := func(v float64) time.Duration { return time.Duration(v * 1e3) }
	s := Stats{
		Count: d.n, Mean: time.Duration(d.mean), Min: d.min, Max: d.max,
		P50: us(d.actual.Quantile(0.5)), P90: us(d.actual.Quantile(0.9)), P99: us(d.actual.Quantile(0.99)),
		ErrP99: us(d.errs.Quantile(0.99)), ErrMax: d.errMax,
		HeldForOrder: d.heldForOrder, Flushed: d.flushed, Batches: d.batches,
		Errors: d.nerr, LastError: d.lastErr, SchedulerCPU: time.Duration(d.schedCPU.Load()),
		On: d.on.stats(), Off: d.off.stats(),
	}
	if p := d.probe; p != nil {
		s.Probe = &ProbeStats{Sent: p.sent, Received: p.received, On: p.on.stats(), Off: p.off.stats()}
	}
	if d.n > 0 {
		s.RequestedMean = time.Duration(d.reqSum / float64(d.n))
		s.ErrMean = time.Duration(d.errSum / float64(d.n))
	}
	if d.n > 1 {
		s.Std = time.Duration(math.Sqrt(d.m2 / float64(d.n-1)))
	}
	return s
}

// Stop deletes the rule (no new packets are queued), releases every held
// packet at once, accepts late arrivals for a moment, then closes the queue.
// It is idempotent, safe from any goroutine or thread, and returns the final
// statistics.
func (d *Delayer) Stop() (Stats, error) {
	d.stopOnce.Do(func() {
		var errs []error
		d.ruleMu.Lock()
		d.ruleGo = true
		if d.lease != nil {
			d.lease.Stop()
		}
		if d.ruleAdded {
			if _, err := d.iptables(append([]string{"-t", "filter", "-D", d.chain}, d.spec...)...); err != nil {
				errs = append(errs, err)
			}
		}
		if d.probe != nil && d.probe.added {
			// Whoever deleted the link's rule (the hang watchdog) took the
			// probe's, which carries the same tag, with it.
			if _, err := d.iptables(append([]string{"-t", "filter", "-D", "OUTPUT"}, d.probe.spec...)...); err != nil &&
				!(noSuchRule(err) && errors.Is(d.Cause(), ErrRuleGone)) {
				errs = append(errs, err)
			}
		}
		d.ruleMu.Unlock()
		close(d.stopCh)
		<-d.schedOK
		time.Sleep(stopGrace) // packets queued just before the rule went are accepted by hook
		if d.probe != nil {
			d.probe.stop()
		}
		if err := d.closeQueue(); err != nil {
			errs = append(errs, err)
		}
		_ = unix.Close(d.nsFD)
		d.stopErr = errors.Join(errs...)
	})
	return d.Stats(), d.stopErr
}

// Abandon closes the queue but leaves the rule, which is what the kernel
// sees when the process holding the queue dies: --queue-bypass then lets the
// link's packets through undelayed. It is for fail-open tests; Stop still
// removes the rule.
func (d *Delayer) Abandon() { _ = d.closeQueue() }

// closeQueue stops receiving and closes the netlink socket, once.
func (d *Delayer) closeQueue() error {
	var err error
	d.closeOnce.Do(func() {
		d.cancel()
		err = d.nf.Close()
	})
	return err
}

// raisePriority gives the calling (locked) thread real-time scheduling: a
// release that is due must not wait behind whatever else the host runs (on a
// loaded 2-core machine, nice −20 alone left p99 errors of 7–17 ms). The
// threads sleep between packets, and the kernel's RT throttling
// (sched_rt_runtime_us) keeps them from starving the host if a flood keeps them
// busy. Without the privilege it falls back to nice −20, then to nothing: the
// delays are only less precise.
func (d *Delayer) raisePriority() {
	if raiseThreadPriority(d.opt.RealtimePriority) {
		d.realtime.Add(1)
	}
}

// raiseThreadPriority makes the calling thread SCHED_FIFO at priority p
// (p > 0), else nice −20; it reports whether it got real time.
func raiseThreadPriority(p int) bool {
	if p > 0 {
		attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: uint32(p)}
		if unix.SchedSetAttr(0, &attr, 0) == nil {
			return true
		}
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -20)
	return false
}
