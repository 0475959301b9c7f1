package nfqdelay_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tierscope/tierscope/internal/nfqdelay"
	"github.com/tierscope/tierscope/testbed/netns"
)

const childEnv = "TIERSCOPE_NFQDELAY_CHILD"

func requireRoot(t *testing.T) { netns.RequireRoot(t, "./internal/nfqdelay/") }

type testbed struct {
	lab      *netns.Lab
	cli, srv *netns.Host
	link     *netns.Link
	port     uint16
	rx       net.PacketConn
	tx       net.Conn
	runs     uint64 // tags each run's packets, so a late packet of an earlier run is not counted
}

func newTestbed(t *testing.T) *testbed {
	t.Helper()
	requireRoot(t)
	c := netns.NewChain(t, "client", "server")
	lab, cli, srv, lk := c.Lab, c.Hosts[0], c.Hosts[1], c.Links[0]
	rx, err := srv.ListenPacket("udp4", netip.AddrPortFrom(lk.BAddr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	_ = rx.(*net.UDPConn).SetReadBuffer(8 << 20)
	port := uint16(rx.LocalAddr().(*net.UDPAddr).Port)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := cli.DialContext(ctx, "udp4", netip.AddrPortFrom(lk.BAddr, port).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Close(); _ = rx.Close() })
	return &testbed{lab: lab, cli: cli, srv: srv, link: lk, port: port, rx: rx, tx: tx}
}

func (tb *testbed) start(t *testing.T, opt nfqdelay.Options) *nfqdelay.Delayer {
	t.Helper()
	opt.Match = nfqdelay.Match{Proto: "udp", Dst: netip.PrefixFrom(tb.link.BAddr, 32), DstPort: tb.port, Direction: "out"}
	if opt.Lease == 0 {
		opt.Lease = 30 * time.Second
	}
	var d *nfqdelay.Delayer
	if err := tb.cli.Run(func() error {
		var err error
		d, err = nfqdelay.Start(opt)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = d.Stop() })
	return d
}

type rec struct {
	seq  uint64
	sent time.Time
	owd  time.Duration // receive time − send time (same clock)
}

// run sends rate packets/s for dur from the client and returns the number sent
// and what the server received (in arrival order) until quiet for 300 ms.
func (tb *testbed) run(t *testing.T, rate int, dur time.Duration) (int, []rec) {
	t.Helper()
	tb.runs++
	runID := tb.runs
	stray := 0
	got := make(chan []rec, 1)
	go func() {
		var rs []rec
		buf := make([]byte, 64)
		for {
			_ = tb.rx.SetReadDeadline(time.Now().Add(dur + 300*time.Millisecond))
			if len(rs) > 0 {
				_ = tb.rx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			}
			n, _, err := tb.rx.ReadFrom(buf)
			if err != nil {
				got <- rs
				return
			}
			now := time.Now().UnixNano()
			if n < 24 || binary.BigEndian.Uint64(buf[16:]) != runID {
				stray++
				continue
			}
			sent := int64(binary.BigEndian.Uint64(buf[8:]))
			rs = append(rs, rec{seq: binary.BigEndian.Uint64(buf), sent: time.Unix(0, sent), owd: time.Duration(now - sent)})
		}
	}()
	total := int(float64(rate) * dur.Seconds())
	buf := make([]byte, 64)
	start := time.Now()
	sent := 0
	for sent < total {
		target := min(total, int(time.Since(start).Seconds()*float64(rate))+1)
		for ; sent < target; sent++ {
			binary.BigEndian.PutUint64(buf, uint64(sent))
			binary.BigEndian.PutUint64(buf[8:], uint64(time.Now().UnixNano()))
			binary.BigEndian.PutUint64(buf[16:], runID)
			if _, err := tb.tx.Write(buf); err != nil {
				t.Fatalf("send %d: %v", sent, err)
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
	rs := <-got
	if stray > 0 {
		t.Logf("run %d: ignored %d packets of earlier runs or of unknown form", runID, stray)
	}
	return sent, rs
}

func medianOWD(rs []rec) time.Duration {
	ds := make([]time.Duration, len(rs))
	for i, r := range rs {
		ds[i] = r.owd
	}
	slices.Sort(ds)
	if len(ds) == 0 {
		return 0
	}
	return ds[len(ds)/2]
}

func TestOrderingOnFallingEdge(t *testing.T) {
	tb := newTestbed(t)
	var edge time.Time
	d := tb.start(t, nfqdelay.Options{Delay: func(now time.Time) time.Duration {
		if edge.IsZero() {
			edge = now.Add(500 * time.Millisecond)
		}
		if now.Before(edge) {
			return 20 * time.Millisecond
		}
		return 0
	}})
	sent, rs := tb.run(t, 1000, time.Second)
	st, err := d.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ordering: sent %d received %d; delayer %v", sent, len(rs), st)
	if len(rs) != sent {
		t.Errorf("sent %d, received %d", sent, len(rs))
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].seq <= rs[i-1].seq {
			t.Fatalf("out of order at %d: seq %d after %d", i, rs[i].seq, rs[i-1].seq)
		}
	}
	if st.HeldForOrder == 0 {
		t.Errorf("no packet was held for order: the falling edge was not exercised")
	}
}

// TestFloorUnderSquareWave: with a floor both phases hold every packet; the
// receiver sees the floor in the off-phase and floor + amplitude in the
// on-phase, and Stats splits the phases by the wave alone, so on − off is the
// wave's amplitude.
func TestFloorUnderSquareWave(t *testing.T) {
	tb := newTestbed(t)
	baseSent, base := tb.run(t, 500, 300*time.Millisecond)
	if len(base) != baseSent {
		t.Fatalf("undelayed baseline: sent %d, received %d", baseSent, len(base))
	}
	b := medianOWD(base)
	const floor, amp, half = 2 * time.Millisecond, 5 * time.Millisecond, 250 * time.Millisecond
	var start time.Time
	d := tb.start(t, nfqdelay.Options{Floor: floor, Delay: func(now time.Time) time.Duration {
		if start.IsZero() {
			start = now
		}
		if now.Sub(start)/half%2 == 0 {
			return amp
		}
		return 0
	}})
	sent, rs := tb.run(t, 500, 2*time.Second)
	st, err := d.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("floor %v, wave %v: sent %d received %d; on %+v off %+v; delayer %v", floor, amp, sent, len(rs), st.On, st.Off, st)
	if len(rs) != sent || st.Errors != 0 {
		t.Fatalf("sent %d, received %d, %d errors", sent, len(rs), st.Errors)
	}
	if st.On.Count < sent/3 || st.Off.Count < sent/3 {
		t.Fatalf("phases not split by the wave: on %d, off %d packets of %d", st.On.Count, st.Off.Count, sent)
	}
	// How late the scheduler releases packets is the host's, not the
	// delayer's: the off-phase may exceed the floor by about the lateness the
	// delayer itself reports, never fall short of it.
	if got, late := st.Off.Mean, latenessSlack(st); got < floor || got > floor+late {
		t.Errorf("off-phase packets held %v, want the floor %v (+ < %v, the reported lateness)", got, floor, late)
	}
	// The phases may be late by different amounts (a host stall in one phase
	// only), which shifts on − off by up to the worse phase's lateness; the
	// delayer reports that bound, so the check allows it and no more.
	if got, tol := st.On.Mean-st.Off.Mean, waveTolerance(st.On, st.Off, 300*time.Microsecond)+phaseLatenessBound(st); got < amp-tol || got > amp+tol {
		t.Errorf("on − off = %v, want the wave's %v ± %v", got, amp, tol)
	}
	if got := st.Off.RequestedMean; got != floor {
		t.Errorf("off-phase requested %v, want %v", got, floor)
	}
	// The receiver: the quickest quarter of packets took the floor at least.
	owd := make([]time.Duration, len(rs))
	for i, r := range rs {
		owd[i] = r.owd - b
	}
	slices.Sort(owd)
	// The receiver agrees with the delayer's account: its quickest quarter
	// took the floor at least, and no more than the off-phase's held mean.
	if q := owd[len(owd)/4]; q < floor-200*time.Microsecond || q > st.Off.Mean+time.Millisecond {
		t.Errorf("the receiver's lower quartile of added delay is %v, want between the floor %v and the off-phase's %v (+ 1 ms)", q, floor, st.Off.Mean)
	}

	if _, err := nfqdelay.Start(nfqdelay.Options{Match: nfqdelay.Match{Proto: "udp", DstPort: 9}, Floor: time.Second, MaxDelay: time.Second}); err == nil {
		t.Errorf("a floor of max_delay was accepted")
	}
}

// latenessSlack is the slack an absolute timing check needs on a host whose
// scheduler is as busy as this run found it: twice the delayer's own mean
// |actual − requested|, plus 1 ms.
func latenessSlack(st nfqdelay.Stats) time.Duration {
	return 2*st.ErrMean + time.Millisecond
}

// phaseLatenessBound bounds either phase's mean lateness by the delayer's
// own account: Count·ErrMean is the total |actual − requested| over both
// phases, so the smaller phase's mean error is at most that over its count.
func phaseLatenessBound(st nfqdelay.Stats) time.Duration {
	fewer := min(st.On.Count, st.Off.Count)
	if fewer == 0 {
		return 0
	}
	return time.Duration(float64(st.ErrMean) * float64(st.Count) / float64(fewer))
}

// waveTolerance is the slack for an on − off difference of means: at least
// least, widened to three standard errors when the phases' spread is wide.
func waveTolerance(on, off nfqdelay.PhaseStats, least time.Duration) time.Duration {
	if on.Count == 0 || off.Count == 0 {
		return least
	}
	son, soff := float64(on.Std), float64(off.Std)
	se := math.Sqrt(son*son/float64(on.Count) + soff*soff/float64(off.Count))
	return max(least, time.Duration(3*se))
}

// TestProbeThroughTheQueue: the probe stream goes through the link's queue
// and wave, is measured apart from the link's packets, reads the wave's
// amplitude over the floor, and its rule goes with Stop.
func TestProbeThroughTheQueue(t *testing.T) {
	tb := newTestbed(t)
	const floor, amp, half = 2 * time.Millisecond, 5 * time.Millisecond, 250 * time.Millisecond
	start := time.Now()
	d := tb.start(t, nfqdelay.Options{Floor: floor, Probe: 2 * time.Millisecond, Delay: func(now time.Time) time.Duration {
		if now.Sub(start)/half%2 == 0 {
			return amp
		}
		return 0
	}})
	var rules []nfqdelay.Rule
	if err := tb.cli.Run(func() (err error) { rules, err = nfqdelay.Rules(d.Tag()); return err }); err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 {
		t.Fatalf("want the link's and the probe's rule, got %d: %+v", len(rules), rules)
	}
	sent, rs := tb.run(t, 500, 2*time.Second)
	st, err := d.Stop()
	if err != nil {
		t.Fatal(err)
	}
	p := st.Probe
	t.Logf("link: sent %d received %d, delayer %v; probe %+v", sent, len(rs), st, p)
	if len(rs) != sent || st.Errors != 0 {
		t.Fatalf("sent %d, received %d, %d errors", sent, len(rs), st.Errors)
	}
	if st.Count > sent {
		t.Errorf("the link's stats count %d packets, more than the %d it sent: probes counted as link packets", st.Count, sent)
	}
	if p == nil || p.Sent < 500 || p.Received < p.Sent-5 {
		t.Fatalf("probe stream: %+v, want ≥ 500 sent, all but the last few received", p)
	}
	if p.On.Count < 100 || p.Off.Count < 100 || p.On.Count+p.Off.Count > p.Received {
		t.Fatalf("probe phases: on %d, off %d of %d received", p.On.Count, p.Off.Count, p.Received)
	}
	// The probes wait on the same scheduler as the link's packets, so a phase's
	// lateness shifts them alike (see TestFloorUnderSquareWave).
	if got, tol := p.On.Mean-p.Off.Mean, waveTolerance(p.On, p.Off, 500*time.Microsecond)+phaseLatenessBound(st); got < amp-tol || got > amp+tol {
		t.Errorf("probe on − off = %v, want the wave's %v ± %v", got, amp, tol)
	}
	if p.Off.Mean < floor || p.Off.RequestedMean != floor || p.On.RequestedMean != floor+amp {
		t.Errorf("probe off-phase: %+v, want at least the floor %v, requested %v and %v", p.Off, floor, floor, floor+amp)
	}
	if err := tb.cli.Run(func() (err error) { rules, err = nfqdelay.Rules(d.Tag()); return err }); err != nil || len(rules) != 0 {
		t.Fatalf("after Stop: %d rules left (%v)", len(rules), err)
	}
	if _, err := nfqdelay.Start(nfqdelay.Options{Match: nfqdelay.Match{Proto: "udp", DstPort: 9}, Probe: -time.Millisecond}); err == nil {
		t.Errorf("a negative probe interval was accepted")
	}
}

// TestChildDelayer is the helper process of TestKill9FailOpen; it does
// nothing in a normal run.
func TestChildDelayer(t *testing.T) {
	v := os.Getenv(childEnv)
	if v == "" {
		return // helper-process pattern: only the child of TestKill9FailOpen runs it
	}
	var ns, id string
	var port uint16
	if _, err := fmt.Sscanf(strings.ReplaceAll(v, ":", " "), "%s %d %s", &ns, &port, &id); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
	fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	if _, err := nfqdelay.Start(nfqdelay.Options{ID: id, Queue: 7, Match: nfqdelay.Match{Proto: "udp", DstPort: port}, Delay: nfqdelay.Constant(5 * time.Millisecond), Lease: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("CHILD READY")
	time.Sleep(30 * time.Second)
}

func TestKill9FailOpen(t *testing.T) {
	tb := newTestbed(t)
	id := fmt.Sprintf("kill9-%d", os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChildDelayer$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d:%s", childEnv, tb.cli.Namespace(), tb.port, id))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "CHILD READY") && !ok {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("child exited before it was ready")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("child not ready after 15 s")
	}
	sent, rs := tb.run(t, 1000, 200*time.Millisecond)
	before := medianOWD(rs)
	t.Logf("child delaying: sent %d received %d, one-way median %v", sent, len(rs), before.Round(time.Microsecond))
	if before < 4*time.Millisecond {
		t.Fatalf("the child's delay is not in effect: one-way median %v", before)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	sent, rs = tb.run(t, 1000, 300*time.Millisecond)
	after := medianOWD(rs)
	t.Logf("after kill -9: sent %d received %d, one-way median %v", sent, len(rs), after.Round(time.Microsecond))
	if len(rs) != sent {
		t.Errorf("traffic does not fail open: sent %d, received %d", sent, len(rs))
	}
	if after > 2*time.Millisecond {
		t.Errorf("packets still delayed after the kill: median %v", after)
	}
	// A live Delayer of this process (another port) beside the dead child's
	// rule: SweepStale removes the child's only.
	live := tb.start(t, nfqdelay.Options{Queue: 8, Match: nfqdelay.Match{Proto: "udp", DstPort: tb.port + 1}})
	var left, removed, remain int
	if err := tb.cli.Run(func() error {
		rules, err := nfqdelay.Rules(nfqdelay.TagPrefix)
		if err != nil {
			return err
		}
		left = len(rules)
		if removed, err = nfqdelay.SweepStale(); err != nil {
			return err
		}
		rules, err = nfqdelay.Rules(nfqdelay.TagPrefix)
		remain = len(rules)
		for _, r := range rules {
			if r.Tag != live.Tag() {
				t.Errorf("rule %q survived the sweep", r.Tag)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("rules: %d before SweepStale, %d removed, %d remain (the live one)", left, removed, remain)
	if left != 2 || removed != 1 || remain != 1 {
		t.Errorf("want 2 rules, 1 stale removed, the live one remaining; got %d, %d, %d", left, removed, remain)
	}
}

// TestRuleGoneStops: a Delayer whose rule someone else deletes stops by
// itself with ErrRuleGone, within a couple of checks, and its Stop does not
// fail for the missing rule.
func TestRuleGoneStops(t *testing.T) {
	tb := newTestbed(t)
	d := tb.start(t, nfqdelay.Options{Delay: nfqdelay.Constant(3 * time.Millisecond), RuleCheck: 100 * time.Millisecond})
	if err := tb.cli.Run(func() error {
		if n, err := nfqdelay.SweepStale(); err != nil || n != 0 {
			return fmt.Errorf("SweepStale removed %d live rules (%v)", n, err)
		}
		_, err := nfqdelay.Sweep(d.Tag())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	select {
	case <-d.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the Delayer still runs 2 s after its rule was deleted")
	}
	t.Logf("stopped %v after its rule was deleted: %v", time.Since(deleted).Round(time.Millisecond), d.Cause())
	if !errors.Is(d.Cause(), nfqdelay.ErrRuleGone) {
		t.Errorf("Cause() = %v, want ErrRuleGone", d.Cause())
	}
	if _, err := d.Stop(); err != nil {
		t.Errorf("Stop after the rule went: %v", err)
	}
}
