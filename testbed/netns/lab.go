package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tierscope/tierscope/internal/nfqdelay"
	"github.com/tierscope/tierscope/internal/owner"
)

const (
	// NamespacePrefix starts the name of every namespace the harness creates.
	NamespacePrefix = "ts-"

	netnsDir = "/run/netns"

	// MaxHosts and MaxLinks bound one lab.
	MaxHosts = 32
	MaxLinks = 64 // a /24 holds 64 /30s

	cmdTimeout = 15 * time.Second
)

// ErrClosed is returned by a Lab (and its hosts) after Close.
var ErrClosed = errors.New("netns: lab is closed")

// Owner names what a lab belongs to; a testing.TB is an Owner, and so is Named.
// When the owner also has Cleanup(func()) (testing.TB does), New registers
// lab.Close with it, so the lab is removed even when the test fails or panics.
type Owner interface{ Name() string }

// Named is an Owner that is just a name, for labs used outside tests.
type Named string

// Name returns the name.
func (n Named) Name() string { return string(n) }

var labSeq atomic.Uint32

// Lab is a set of network namespaces, veth links, processes and tagged iptables
// rules that are created together and removed together by Close.
type Lab struct {
	id    string // "<pid>x<seq>"
	owner string
	block netip.Prefix // private /24 the links' /30s are taken from

	mu        sync.Mutex
	closed    bool
	closeErr  error
	hosts     []*Host
	byName    map[string]*Host
	links     []*Link
	cmds      []*exec.Cmd
	delays    []*Delay
	closers   []interface{ Close() error }
	nextQueue uint16
}

// New creates an empty lab after sweeping stale labs left by crashed runs (see
// Sweep). It needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and the `ip` command.
// owner may be a testing.TB (Close is then registered with t.Cleanup), a
// Named, or nil.
func New(owner Owner) (*Lab, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("netns: the namespace harness needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); run the tests as root, e.g. `sudo -E go test ./testbed/netns/`")
	}
	if _, err := lookPath("ip"); err != nil {
		return nil, errors.New("netns: the `ip` command (iproute2) is not installed: apt-get install -y iproute2")
	}
	if _, err := Sweep(); err != nil {
		// A failed sweep of someone else's leftovers must not stop this lab.
		logf(owner, "netns: sweeping stale labs: %v", err)
	}
	seq := labSeq.Add(1)
	l := &Lab{
		id:        fmt.Sprintf("%dx%d", os.Getpid(), seq),
		owner:     "lab",
		block:     netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, byte(seq), 0}), 24),
		byName:    map[string]*Host{},
		nextQueue: 100,
	}
	if owner != nil {
		l.owner = owner.Name()
		if c, ok := owner.(interface{ Cleanup(func()) }); ok {
			c.Cleanup(func() {
				if err := l.Close(); err != nil {
					if e, ok := owner.(interface{ Errorf(string, ...any) }); ok {
						e.Errorf("netns: closing lab %s: %v", l.id, err)
					}
				}
			})
		}
	}
	return l, nil
}

func logf(owner Owner, format string, args ...any) {
	if l, ok := owner.(interface{ Logf(string, ...any) }); ok {
		l.Logf(format, args...)
	}
}

// ID is the lab's unique id, "<pid>x<seq>"; namespaces are named
// ts-<id>-<host> and rules are tagged tierscope-<id>.
func (l *Lab) ID() string { return l.id }

// Tag is the iptables comment carried by every rule of this lab: the delay
// engine's tag, naming this process and the lab.
func (l *Lab) Tag() string { return nfqdelay.TagPrefix + owner.Self() + "-" + l.ruleID() }

// ruleID is the delay engine's rule id of this lab's loops.
func (l *Lab) ruleID() string { return "lab" + l.id }

// Block is the private /24 that this lab's links are numbered from.
func (l *Lab) Block() netip.Prefix { return l.block }

func (l *Lab) String() string { return fmt.Sprintf("lab %s (%s)", l.id, l.owner) }

var hostNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)

// Host creates a namespace ts-<id>-<name> with the loopback interface up.
// name: lower-case letters, digits and '-', at most 31 characters, unique in
// the lab.
func (l *Lab) Host(name string) (*Host, error) {
	if !hostNameRE.MatchString(name) {
		return nil, fmt.Errorf("netns: host name %q: want [a-z0-9][a-z0-9-]{0,30}", name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if l.byName[name] != nil {
		return nil, fmt.Errorf("netns: host %q already exists in %s", name, l)
	}
	if len(l.hosts) >= MaxHosts {
		return nil, fmt.Errorf("netns: %s already has %d hosts (the maximum)", l, MaxHosts)
	}
	h := &Host{lab: l, name: name, ns: NamespacePrefix + l.id + "-" + name, fd: -1}
	if _, err := run("ip", "netns", "add", h.ns); err != nil {
		return nil, err
	}
	// From here on the namespace exists: record it so Close removes it.
	l.hosts = append(l.hosts, h)
	l.byName[name] = h
	if _, err := run("ip", "-n", h.ns, "link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	fd, err := unix.Open(netnsDir+"/"+h.ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netns: open %s: %w", h.ns, err)
	}
	h.fd = fd
	return h, nil
}

// Link is a veth pair between two hosts, numbered with a /30 of the lab's block.
type Link struct {
	A, B           *Host
	AIface, BIface string     // interface names inside A and B
	AAddr, BAddr   netip.Addr // A's and B's addresses
	Prefix         netip.Prefix
}

// Link creates a veth pair between a and b (created directly inside the two
// namespaces; it never appears in the host's namespace), gives it the next /30
// of the lab's block, brings both ends up and waits until both are running.
func (l *Lab) Link(a, b *Host) (*Link, error) {
	lk, err := l.addLink(a, b)
	if err != nil {
		return nil, err
	}
	// Until linkwatch marks a new veth running it has no active qdisc, and
	// an ARP request sent then is dropped: the packets behind it wait a whole
	// ARP retry (1 s) in the neighbour queue and arrive late, in a burst.
	for _, end := range []struct {
		h     *Host
		iface string
	}{{a, lk.AIface}, {b, lk.BIface}} {
		if err := waitCarrier(end.h, end.iface, carrierWait); err != nil {
			return nil, err
		}
	}
	return lk, nil
}

func (l *Lab) addLink(a, b *Host) (*Link, error) {
	if a == nil || b == nil || a.lab != l || b.lab != l {
		return nil, errors.New("netns: Link needs two hosts of this lab")
	}
	if a == b {
		return nil, errors.New("netns: cannot link a host to itself")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	k := len(l.links)
	if k >= MaxLinks {
		return nil, fmt.Errorf("netns: %s already has %d links (the maximum)", l, MaxLinks)
	}
	base := l.block.Addr().As4()
	base[3] = byte(4 * k)
	net4 := netip.AddrFrom4(base)
	lk := &Link{
		A: a, B: b,
		AIface: fmt.Sprintf("tsv%d", k), BIface: fmt.Sprintf("tsv%d", k),
		AAddr: net4.Next(), BAddr: net4.Next().Next(),
		Prefix: netip.PrefixFrom(net4, 30),
	}
	if _, err := run("ip", "-n", a.ns, "link", "add", lk.AIface, "type", "veth", "peer", "name", lk.BIface, "netns", b.ns); err != nil {
		return nil, err
	}
	l.links = append(l.links, lk)
	for _, end := range []struct {
		h     *Host
		iface string
		addr  netip.Addr
	}{{a, lk.AIface, lk.AAddr}, {b, lk.BIface, lk.BAddr}} {
		batch := fmt.Sprintf("addr add %s/30 dev %s\nlink set %s up\n", end.addr, end.iface, end.iface)
		if _, err := runInput(batch, "ip", "-n", end.h.ns, "-batch", "-"); err != nil {
			return nil, err
		}
	}
	return lk, nil
}

// carrierWait bounds how long Link waits for a new veth to run.
const carrierWait = 5 * time.Second

// waitCarrier polls iface in h until it is running (IFF_RUNNING: up, with
// carrier) or timeout passes.
func waitCarrier(h *Host, iface string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var running bool
		if err := h.Run(func() error {
			ifc, err := net.InterfaceByName(iface)
			if err != nil {
				return err
			}
			running = ifc.Flags&net.FlagRunning != 0
			return nil
		}); err != nil {
			return fmt.Errorf("netns: %s in %s: %w", iface, h.ns, err)
		}
		if running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: %s in %s has no carrier after %v", iface, h.ns, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (l *Lab) track(c interface{ Close() error }) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closers = append(l.closers, c)
	return nil
}

func (l *Lab) allocQueue() uint16 {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.nextQueue
	l.nextQueue++
	return q
}

// Close removes everything the lab created, in this order: delay loops (their
// rules first, then pending packets are accepted), listeners opened through
// Host.Listen, the process groups of commands from Host.Command, any other
// process left inside the lab's namespaces, tagged rules, veths, namespaces.
// It carries on past errors and returns them joined. It is idempotent and safe
// to call from t.Cleanup.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return l.closeErr
	}
	l.closed = true
	delays, closers, cmds := l.delays, l.closers, l.cmds
	hosts, links := l.hosts, l.links
	l.mu.Unlock()

	var errs []error
	for _, d := range delays {
		if _, err := d.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range closers {
		_ = c.Close() // listeners the caller may have closed already
	}
	for _, c := range cmds {
		killGroup(c)
	}
	for _, h := range hosts {
		if err := killNamespacePids(h.ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, lk := range links {
		if out, err := run("ip", "-n", lk.A.ns, "link", "del", lk.AIface); err != nil && !strings.Contains(out, "Cannot find device") {
			errs = append(errs, err)
		}
	}
	l.mu.Lock()
	for _, h := range hosts {
		if h.fd >= 0 {
			_ = unix.Close(h.fd)
			h.fd = -1
		}
	}
	l.mu.Unlock()
	for _, h := range hosts {
		if err := deleteNamespace(h.ns); err != nil {
			errs = append(errs, err)
		}
	}
	err := errors.Join(errs...)
	l.mu.Lock()
	l.closeErr = err
	l.mu.Unlock()
	return err
}

// killGroup kills the process group of a command started through
// Host.Command, unless its leader has already been waited for (then the pid
// may have been reused; stragglers are found by killNamespacePids instead).
func killGroup(c *exec.Cmd) {
	p := c.Process
	if p == nil {
		return
	}
	if err := p.Signal(syscall.Signal(0)); errors.Is(err, os.ErrProcessDone) {
		return
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
}

// killNamespacePids SIGKILLs every process whose network namespace is ns
// (never this process, whose threads may visit ns through Host.Run).
func killNamespacePids(ns string) error {
	out, err := run("ip", "netns", "pids", ns)
	if err != nil {
		if !namespaceExists(ns) {
			return nil
		}
		return err
	}
	self := os.Getpid()
	for _, f := range strings.Fields(out) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

func namespaceExists(ns string) bool {
	_, err := os.Stat(netnsDir + "/" + ns)
	return err == nil
}

func deleteNamespace(ns string) error {
	var err error
	for i := 0; i < 5; i++ {
		if !namespaceExists(ns) {
			return nil
		}
		if _, err = run("ip", "netns", "del", ns); err == nil || !namespaceExists(ns) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// run runs a command in the host's namespace with a timeout and returns its
// combined output; the error carries the output.
func run(name string, args ...string) (string, error) {
	return runInput("", name, args...)
}

func runInput(input, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	if p, err := lookPath(name); err == nil {
		name = p
	}
	cmd := exec.CommandContext(ctx, name, args...)
	if input != "" {
		cmd.Stdin = strings.NewReader(input)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// lookPath is exec.LookPath that also looks in the sbin directories, which a
// non-login PATH may lack (ip and iptables live there).
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil || strings.Contains(name, "/") {
		return p, err
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin", "/bin"} {
		if q, err2 := exec.LookPath(dir + "/" + name); err2 == nil {
			return q, nil
		}
	}
	return "", err
}

// TB is what NewChain needs of a test (testing.TB has it).
type TB interface {
	Owner
	Helper()
	Fatalf(format string, args ...any)
}

// Chain is a lab whose hosts are joined in a line: Hosts[i] and Hosts[i+1]
// by Links[i].
type Chain struct {
	Lab   *Lab
	Hosts []*Host
	Links []*Link
}

// NewChain creates, for test t, a lab with the named hosts joined in a line
// ("client", "server": two hosts and a link). It fails t on any error, and
// the lab closes when t ends.
func NewChain(t TB, names ...string) *Chain {
	t.Helper()
	lab, err := New(t)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c := &Chain{Lab: lab}
	for i, name := range names {
		h, err := lab.Host(name)
		if err != nil {
			t.Fatalf("%v", err)
		}
		c.Hosts = append(c.Hosts, h)
		if i > 0 {
			lk, err := lab.Link(c.Hosts[i-1], h)
			if err != nil {
				t.Fatalf("%v", err)
			}
			c.Links = append(c.Links, lk)
		}
	}
	return c
}

// RequireRoot fails t (never skips: CI runs as root, and a skipped namespace
// test would hide that nothing was exercised) unless this process is root
// and has `ip` and an iptables binary. pkg names the package for the message.
func RequireRoot(t TB, pkg string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the %s tests need root (network namespaces, veth pairs, iptables rules, NFQUEUE); run them as root, e.g. `sudo -E env PATH=$PATH go test %s` (CI runs as root)", pkg, pkg)
	}
	if _, err := lookPath("ip"); err != nil {
		t.Fatalf("the %s tests need iproute2 (`ip`): apt-get install -y iproute2", pkg)
	}
	if len(iptablesCandidates()) == 0 {
		t.Fatalf("the %s tests need iptables: apt-get install -y iptables", pkg)
	}
}
