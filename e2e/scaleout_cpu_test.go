//go:build scaleout

package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// tierCPU reports, every second, the CPU the testbed's tiers use as the
// system.cpu.utilization of their hosts, over OTLP to each agent (which
// stamps its host.name on it), in hostmetrics' form: one idle and one busy
// point per logical CPU.
//
// Why not hostmetrics' own reading: host-1 and host-2 are two agents on one
// shared 2-core machine, whose /proc/stat counts every process on it (other
// work kept it at 99% in every window, above the signatures' 0.7 limit, so
// no transaction had a service time). The tiers (and their load generator)
// are this test process; its CPU time over the machine's logical CPUs is
// what hostmetrics would read on a host that ran only them, and what its
// process scraper reads as process.cpu.utilization. Both hosts get the
// same reading: their tiers share the process.
type tierCPU struct {
	conns   []*grpc.ClientConn
	clients []pmetricotlp.GRPCClient
	stop    chan struct{}
	done    sync.WaitGroup

	mu      sync.Mutex
	samples int
	sum     float64 // Σ tier utilization
	machine float64 // Σ the machine's, from /proc/stat, for the log
	lo, hi  float64
	sendErr error
}

func startTierCPU(t *testing.T, agents []string) *tierCPU {
	t.Helper()
	tc := &tierCPU{stop: make(chan struct{}), lo: 1}
	for _, a := range agents {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		tc.conns = append(tc.conns, conn)
		tc.clients = append(tc.clients, pmetricotlp.NewGRPCClient(conn))
	}
	tc.done.Add(1)
	go tc.loop()
	t.Cleanup(tc.close)
	return tc
}

func (tc *tierCPU) loop() {
	defer tc.done.Done()
	cpus := runtime.NumCPU()
	lastCPU, lastMachine, lastAt := processCPUSeconds(), machineBusySeconds(), time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tc.stop:
			return
		case now := <-tick.C:
			c, m := processCPUSeconds(), machineBusySeconds()
			avail := now.Sub(lastAt).Seconds() * float64(cpus)
			u := min(1, max(0, (c-lastCPU)/avail))
			mu := min(1, max(0, (m-lastMachine)/avail))
			lastCPU, lastMachine, lastAt = c, m, now
			err := tc.send(now, u, cpus)
			tc.mu.Lock()
			tc.samples++
			tc.sum += u
			tc.machine += mu
			tc.lo, tc.hi = min(tc.lo, u), max(tc.hi, u)
			if err != nil && tc.sendErr == nil {
				tc.sendErr = err
			}
			tc.mu.Unlock()
		}
	}
}

func (tc *tierCPU) send(now time.Time, u float64, cpus int) error {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("system.cpu.utilization")
	m.SetUnit("1")
	dps := m.SetEmptyGauge().DataPoints()
	ts := pcommon.NewTimestampFromTime(now)
	for i := 0; i < cpus; i++ {
		for _, p := range []struct {
			state string
			v     float64
		}{{"idle", 1 - u}, {"user", u}} {
			dp := dps.AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(p.v)
			dp.Attributes().PutStr("cpu", fmt.Sprintf("cpu%d", i))
			dp.Attributes().PutStr("state", p.state)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, c := range tc.clients {
		if _, err := c.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md)); err != nil {
			return err
		}
	}
	return nil
}

// close stops the reports (idempotent).
func (tc *tierCPU) close() {
	select {
	case <-tc.stop:
		return
	default:
	}
	close(tc.stop)
	tc.done.Wait()
	for _, c := range tc.conns {
		_ = c.Close()
	}
}

// summary is the tiers' mean utilization and range, beside the machine's.
func (tc *tierCPU) summary() (n int, mean, lo, hi, machine float64, err error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	k := float64(max(tc.samples, 1))
	return tc.samples, tc.sum / k, tc.lo, tc.hi, tc.machine / k, tc.sendErr
}

// processCPUSeconds is this process's user and system CPU time.
func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// machineBusySeconds is the machine's busy CPU time (everything but idle and
// iowait, all CPUs) from /proc/stat.
func machineBusySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal
	busy := 0.0
	for i, v := range f[1:min(len(f), 9)] {
		if i == 3 || i == 4 {
			continue
		}
		var x float64
		_, _ = fmt.Sscan(v, &x)
		busy += x
	}
	return busy / 100 // USER_HZ
}
