package netns

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/nfqdelay"
)

const childEnv = "TIERSCOPE_NETNS_CHILD"

func requireRoot(t *testing.T) { RequireRoot(t, "./testbed/netns/") }

func newLab(t *testing.T) *Lab {
	t.Helper()
	requireRoot(t)
	lab, err := New(t)
	if err != nil {
		t.Fatal(err)
	}
	return lab
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// pair is a client and a server host joined by one link, with an HTTP server
// on the server's end of the link, port 8080.
type pair struct {
	lab      *Lab
	cli, srv *Host
	link     *Link
	url      string
	client   *http.Client
}

const srvPort = 8080

func newPair(t *testing.T) *pair {
	t.Helper()
	requireRoot(t)
	c := NewChain(t, "client", "server")
	lab, cli, srv, lk := c.Lab, c.Hosts[0], c.Hosts[1], c.Links[0]
	ln := must[net.Listener](t)(srv.Listen("tcp4", netip.AddrPortFrom(lk.BAddr, srvPort).String()))
	hs := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") }),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return &pair{lab: lab, cli: cli, srv: srv, link: lk,
		url: "http://" + netip.AddrPortFrom(lk.BAddr, srvPort).String() + "/", client: cli.HTTPClient()}
}

type latency struct {
	n                      int
	min, median, p90, mean time.Duration
}

func (l latency) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	return fmt.Sprintf("n=%d min=%v median=%v p90=%v mean=%v", l.n, r(l.min), r(l.median), r(l.p90), r(l.mean))
}

// measure times n sequential GETs on a kept-alive connection, after a few
// warm-up requests.
func (p *pair) measure(t *testing.T, n int) latency {
	t.Helper()
	get := func() time.Duration {
		start := time.Now()
		resp, err := p.client.Get(p.url)
		if err != nil {
			t.Fatalf("GET %s: %v", p.url, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", p.url, resp.Status)
		}
		return time.Since(start)
	}
	for range 5 {
		get()
	}
	ds := make([]time.Duration, n)
	var sum time.Duration
	for i := range ds {
		ds[i] = get()
		sum += ds[i]
	}
	slices.Sort(ds)
	return latency{n: n, min: ds[0], median: ds[n/2], p90: ds[n*9/10], mean: sum / time.Duration(n)}
}

// savedRules lists the rules tagged exactly tag that `<bin>-save` shows in
// namespace ns ("" = this process's namespace), over every iptables backend.
func savedRules(t *testing.T, ns, tag string) []string {
	t.Helper()
	var out []string
	for _, bin := range iptablesCandidates() {
		args := []string{bin + "-save"}
		if ns != "" {
			args = append([]string{"ip", "netns", "exec", ns}, args...)
		}
		b, err := run(args[0], args[1:]...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, line := range strings.Split(b, "\n") {
			f := strings.Fields(line) // the harness's tags have no spaces or quotes
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "--comment" && f[i+1] == tag {
					out = append(out, bin+": "+line)
				}
			}
		}
	}
	return out
}

// labNamespaces lists the namespaces of lab id that still exist.
func labNamespaces(t *testing.T, id string) []string {
	t.Helper()
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), NamespacePrefix+id+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if alive, _ := procAlive(pid); !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHostsLinkCommand: the link carries traffic both ways, Command runs in
// the namespace, and the namespaces are isolated from the host's.
func TestHostsLinkCommand(t *testing.T) {
	p := newPair(t)
	t.Logf("lab %s: %s %s (%s) <-> %s %s (%s), %s", p.lab.ID(),
		p.cli.Namespace(), p.link.AAddr, p.link.AIface, p.srv.Namespace(), p.link.BAddr, p.link.BIface, p.link.Prefix)
	if !p.lab.Block().Contains(p.link.AAddr) || !p.link.Prefix.Contains(p.link.BAddr) || p.link.Prefix.Bits() != 30 {
		t.Fatalf("addresses %v %v not in %v / %v", p.link.AAddr, p.link.BAddr, p.link.Prefix, p.lab.Block())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := p.srv.Command(ctx, "ip", "-o", "-4", "addr", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr in %s: %v: %s", p.srv, err, out)
	}
	if !strings.Contains(string(out), p.link.BAddr.String()+"/30") || strings.Contains(string(out), p.link.AAddr.String()+"/") {
		t.Fatalf("server namespace addresses:\n%s", out)
	}
	// Run: Go code sees the namespace's interfaces, and the thread comes back.
	var ifs []string
	err = p.cli.Run(func() error {
		l, err := net.Interfaces()
		for _, i := range l {
			ifs = append(ifs, i.Name)
		}
		return err
	})
	if err != nil || !slices.Equal(ifs, []string{"lo", p.link.AIface}) {
		t.Fatalf("interfaces in %s: %v (%v)", p.cli, ifs, err)
	}
	// The reverse direction: a listener in the client, dialled from the server.
	ln := must[net.Listener](t)(p.cli.Listen("tcp4", netip.AddrPortFrom(p.link.AAddr, 0).String()))
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(c, c)
			_ = c.Close()
		}
	}()
	c := must[net.Conn](t)(p.srv.DialContext(ctx, "tcp4", ln.Addr().String()))
	defer c.Close()
	_, _ = c.Write([]byte("ping\n"))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("echo: %q %v", line, err)
	}
	// The host's namespace cannot reach the lab.
	hc, err := net.DialTimeout("tcp4", ln.Addr().String(), 300*time.Millisecond)
	if err == nil {
		_ = hc.Close()
		t.Fatalf("the host's namespace reached %v inside the lab", ln.Addr())
	}
}

// TestDelayLoop: base RTT, then 10 ms added to the server's outgoing packets
// by the NFQUEUE loop, then the rule removed.
func TestDelayLoop(t *testing.T) {
	p := newPair(t)
	base := p.measure(t, 50)
	t.Logf("base request latency (client -> server HTTP over veth): %v", base)

	const delay = 10 * time.Millisecond
	d, err := p.srv.StartDelay(DelayOptions{Chain: "OUTPUT", SrcPort: srvPort, Delay: delay, Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("iptables backend %s; rule in %s: -A %s", d.Backend(), p.srv, strings.Join(d.Rule(), " "))
	if r := savedRules(t, p.srv.Namespace(), p.lab.Tag()); len(r) != 1 {
		t.Fatalf("want 1 tagged rule in %s, got %q", p.srv, r)
	}
	delayed := p.measure(t, 50)
	st, err := d.Stop()
	if err != nil {
		t.Fatal(err)
	}
	added := delayed.median - base.median
	t.Logf("with %v on server->client: %v; added median %v", delay, delayed, added.Round(time.Microsecond))
	t.Logf("loop's own measurement per packet: %v", st)
	if added < 8*time.Millisecond || added > 20*time.Millisecond {
		t.Errorf("added median latency %v, want 8-20 ms", added)
	}
	if st.Count < 50 {
		t.Errorf("loop held %d packets, want ≥ 50 (one response per request)", st.Count)
	}
	if st.Mean < delay || st.Mean > delay+6*time.Millisecond {
		t.Errorf("loop's mean applied delay %v, want ≈ %v", st.Mean, delay)
	}
	if st.Errors != 0 {
		t.Errorf("loop errors: %d", st.Errors)
	}
	if r := savedRules(t, p.srv.Namespace(), p.lab.Tag()); len(r) != 0 {
		t.Fatalf("rules left after Stop: %q", r)
	}
	after := p.measure(t, 20)
	t.Logf("after Stop: %v", after)
	if after.median > base.median+5*time.Millisecond {
		t.Errorf("latency after Stop %v, base %v: the delay is still applied", after.median, base.median)
	}
}

// TestDelayFailOpen: when the program holding the queue dies (its socket is
// closed but the rule stays), --queue-bypass lets traffic through undelayed.
func TestDelayFailOpen(t *testing.T) {
	p := newPair(t)
	d, err := p.srv.StartDelay(DelayOptions{SrcPort: srvPort, Delay: 50 * time.Millisecond, Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	held := p.measure(t, 5)
	if held.median < 50*time.Millisecond {
		t.Fatalf("delay not applied before the simulated death: %v", held)
	}
	d.abandon() // what the kernel sees when the process dies
	if r := savedRules(t, p.srv.Namespace(), p.lab.Tag()); len(r) != 1 {
		t.Fatalf("the rule should still be there: %q", r)
	}
	open := p.measure(t, 20)
	t.Logf("held: %v; after the queue's owner died, rule still present: %v", held, open)
	if open.median > 20*time.Millisecond {
		t.Fatalf("traffic does not fail open: %v", open)
	}
	if err := p.lab.Close(); err != nil {
		t.Fatal(err)
	}
	if r := savedRules(t, "", p.lab.Tag()); len(r) != 0 {
		t.Fatalf("tagged rules in the host's namespace: %q", r)
	}
}

// TestCleanup: Close removes namespaces, veths, processes and rules, and the
// lab refuses further use.
func TestCleanup(t *testing.T) {
	p := newPair(t)
	lab := p.lab
	if _, err := p.srv.StartDelay(DelayOptions{SrcPort: srvPort, Delay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	sleeper := p.srv.Command(context.Background(), "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	// A grandchild in the same process group, and a process that left it.
	sh := p.cli.Command(context.Background(), "sh", "-c", "sleep 300 & setsid sleep 300 & wait")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	pids := []int{sleeper.Process.Pid, sh.Process.Pid}
	for _, h := range []*Host{p.cli, p.srv} {
		out, err := run("ip", "netns", "pids", h.Namespace())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(out) {
			if pid, _ := strconv.Atoi(f); pid != 0 && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	if len(pids) < 4 {
		t.Fatalf("expected ≥ 4 processes in the lab, got %v", pids)
	}
	if len(labNamespaces(t, lab.ID())) != 2 || len(savedRules(t, p.srv.Namespace(), lab.Tag())) != 1 {
		t.Fatal("lab not set up")
	}

	if err := lab.Close(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = sleeper.Wait() }()
	go func() { _ = sh.Wait() }()
	if ns := labNamespaces(t, lab.ID()); len(ns) != 0 {
		t.Fatalf("namespaces left: %v", ns)
	}
	for _, pid := range pids {
		waitDead(t, pid)
	}
	if r := savedRules(t, "", lab.Tag()); len(r) != 0 {
		t.Fatalf("tagged rules in the host's namespace: %q", r)
	}
	out, _ := run("ip", "-o", "link", "show")
	if strings.Contains(out, p.link.AIface+"@") {
		t.Fatalf("a lab veth is visible in the host's namespace:\n%s", out)
	}
	if _, err := lab.Host("late"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Host after Close: %v", err)
	}
	if err := p.srv.Command(context.Background(), "true").Run(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Command after Close: %v", err)
	}
	if err := p.srv.Run(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	if err := lab.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// hostRulesOfLab lists the rules in this process's namespace that carry the
// tag of lab id (whichever process owned it).
func hostRulesOfLab(t *testing.T, id string) []nfqdelay.Rule {
	t.Helper()
	rules, err := nfqdelay.Rules(nfqdelay.TagPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []nfqdelay.Rule
	for _, r := range rules {
		if strings.HasSuffix(r.Tag, "-lab"+id) {
			out = append(out, r)
		}
	}
	return out
}

// child runs this test binary as a child process in the given mode and
// returns its lab id, the pid of a process it started in the lab, and its
// output.
func child(t *testing.T, mode string) (id string, pid int, out string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChildProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	out = buf.String()
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "CHILD LAB "); ok {
			id = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "CHILD PID "); ok {
			pid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if id == "" || pid == 0 {
		t.Fatalf("child %s did not set up its lab (%v):\n%s", mode, err, out)
	}
	return id, pid, out, err
}

// TestChildProcess is the child of TestCleanupAfterFailure and
// TestSweepAfterCrash; it does nothing in a normal run.
func TestChildProcess(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return // only the child processes of those tests run it, as os/exec's helper process pattern
	}
	p := newPair(t)
	if _, err := p.srv.StartDelay(DelayOptions{SrcPort: srvPort, Delay: 5 * time.Millisecond, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	p.measure(t, 3)
	cmd := p.srv.Command(context.Background(), "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("CHILD LAB %s\nCHILD PID %d\n", p.lab.ID(), cmd.Process.Pid)
	switch mode {
	case "fatal":
		t.Fatal("simulated failure")
	case "panic":
		panic("simulated panic")
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	}
}

// TestCleanupAfterFailure: a test that fails or panics still removes its lab
// (t.Cleanup).
func TestCleanupAfterFailure(t *testing.T) {
	requireRoot(t)
	for _, mode := range []string{"fatal", "panic"} {
		t.Run(mode, func(t *testing.T) {
			id, pid, out, err := child(t, mode)
			if err == nil || !strings.Contains(out, "simulated") {
				t.Fatalf("child should have failed with a simulated %s (%v):\n%s", mode, err, out)
			}
			if strings.Contains(out, "closing lab") {
				t.Fatalf("cleanup reported errors:\n%s", out)
			}
			if ns := labNamespaces(t, id); len(ns) != 0 {
				t.Fatalf("namespaces left after a %s: %v\n%s", mode, ns, out)
			}
			waitDead(t, pid)
			if r := hostRulesOfLab(t, id); len(r) != 0 {
				t.Fatalf("tagged rules in the host's namespace: %q", r)
			}
			t.Logf("child lab %s removed after a %s", id, mode)
		})
	}
}

// TestSweepAfterCrash: a SIGKILLed run leaves its lab; the next New sweeps it
// (processes included) and leaves live labs alone.
func TestSweepAfterCrash(t *testing.T) {
	live := newLab(t)
	liveHost := must[*Host](t)(live.Host("live"))
	id, pid, out, _ := child(t, "kill")
	left := labNamespaces(t, id)
	if len(left) == 2 {
		for _, ns := range left {
			if stale, why := staleNamespace(ns); !stale {
				t.Fatalf("%s not judged stale: %s", ns, why)
			}
		}
	} else {
		// Another test process running in parallel may have swept it first.
		t.Logf("the killed child's namespaces are already partly gone (%v): a concurrent sweep?\n%s", left, out)
	}
	if stale, why := staleNamespace(liveHost.Namespace()); stale {
		t.Fatalf("live namespace judged stale: %s", why)
	}
	lab2 := newLab(t) // New sweeps
	_ = lab2
	if ns := labNamespaces(t, id); len(ns) != 0 {
		t.Fatalf("namespaces left after the sweep: %v", ns)
	}
	waitDead(t, pid)
	if !namespaceExists(liveHost.Namespace()) {
		t.Fatalf("the sweep removed the live namespace %s", liveHost.Namespace())
	}
	t.Logf("swept crashed lab %s (%v) and its process %d; live lab %s kept", id, left, pid, live.ID())
}

// TestProbeRejectsSilentBackend: a backend that accepts the rule but queues
// nothing (here /bin/true) is not chosen.
func TestProbeRejectsSilentBackend(t *testing.T) {
	lab := newLab(t)
	h := must[*Host](t)(lab.Host("probe"))
	tr, err := lookPath("true")
	if err != nil {
		t.Fatalf("true(1) is needed to probe the backend: %v", err)
	}
	err = probeBackend(h, tr)
	if err == nil || !strings.Contains(err.Error(), "no packet reached the queue") {
		t.Fatalf("probe of %s: %v", tr, err)
	}
	t.Logf("probe of %s: %v", tr, err)
}
