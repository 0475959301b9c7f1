//go:build long

package e2e

// Issue 11's frequency gradient through the real collector. This kernel has
// no cpufreq, so DVFS is emulated at its two ends:
//   - the injector's cpufreq backend drives a fake sysfs tree (the userspace
//     governor, scaling_setspeed, P-states 25 MHz apart), exactly as it
//     would drive /sys/devices/system/cpu;
//   - the testbed db tier reads that tree's scaling_setspeed as its CPU
//     speed (cpu_speed_file), so a query of 9 megacycles burns 9/f seconds
//     of real CPU, as CPU-bound work does on a slower clock.
//
// The tier is pinned to CPU 0 by a cgroup v1 cpuset, so its requests share
// one real core (processor sharing), the queue paper 003 §III-B's basis
// b(f) = 1/(f − α·w) describes. The coordinator builds α·w from the tier's
// hostmetrics CPU readings, trains on its SERVER spans, square-waves the
// speed through the injector's lease, and the spectral estimate is the
// gradient. Then the speed is held at several values: the response time must
// be linear in b (R² ≥ 0.95), and /api/v1/predict must give it at speeds the
// experiment never saw within 10%.
//
// Run it with scripts/e2e-frequency.sh (root, /sys/fs/cgroup/cpuset mounted).

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
)

const (
	cpusetRoot  = "/sys/fs/cgroup/cpuset"
	freqBaseMHz = 1000.0 // the emulated CPU's speed, also the testbed's cpu_mhz
	freqBusyMc  = 9.0    // megacycles per query: 9 ms at the base speed
	freqRate    = 50.0   // queries per second: α·w = 450 MHz, ρ = 0.45 at the base
)

// fakeCPUFreq writes a one-CPU cpufreq tree at the base speed under the
// userspace governor, with P-states from 500 MHz to the base, 25 MHz apart.
func fakeCPUFreq(t *testing.T, root string) (setspeed string) {
	t.Helper()
	dir := filepath.Join(root, "cpu0", "cpufreq")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var states []string
	for khz := int(freqBaseMHz * 1000); khz >= 500000; khz -= 25000 {
		states = append(states, strconv.Itoa(khz))
	}
	base := strconv.Itoa(int(freqBaseMHz * 1000))
	for name, v := range map[string]string{
		"scaling_available_governors":   "performance powersave userspace",
		"scaling_available_frequencies": strings.Join(states, " "),
		"scaling_governor":              "userspace",
		"cpuinfo_min_freq":              "500000",
		"cpuinfo_max_freq":              base,
		"scaling_cur_freq":              base,
		"scaling_setspeed":              base,
	} {
		writeFile(t, filepath.Join(dir, name), v+"\n")
	}
	return filepath.Join(dir, "scaling_setspeed")
}

func TestFrequencyGradientOnEmulatedDVFS(t *testing.T) {
	if _, err := os.Stat(filepath.Join(cpusetRoot, "cpuset.cpus")); err != nil {
		t.Fatalf("the cgroup v1 cpuset controller must be mounted at %s (as root): %v", cpusetRoot, err)
	}
	group := fmt.Sprintf("tierscope-e2e-frequency-%d", os.Getpid())
	dir := filepath.Join(cpusetRoot, group)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the tier has exited (cleanups run in reverse)
		for range 100 {
			if err := syscall.Rmdir(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("could not remove cpuset %s", dir)
	})
	writeFile(t, filepath.Join(dir, "cpuset.cpus"), "0")
	writeFile(t, filepath.Join(dir, "cpuset.mems"), "0")

	work := t.TempDir()
	sysfs := filepath.Join(work, "sysfs")
	setspeed := fakeCPUFreq(t, sysfs)
	setSpeed := func(mhz float64) { writeFile(t, setspeed, strconv.Itoa(int(mhz*1000))+"\n") }
	cfgPath := filepath.Join(work, "frequency.yaml")
	writeFile(t, cfgPath, fmt.Sprintf(`cpu_mhz: %g
cpu_speed_file: %s
versions: {web: {v1: {}}}
transactions: [{name: Work, class: browsing, steps: [{call: app, op: work}]}]
ops: {work: {cpu_mc: 0, db: [{query: work}]}}
queries: {work: {sql: "SELECT 1", cpu_mc: %g}}
replication: none
`, freqBaseMHz, setspeed, freqBusyMc))

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	const exe = "tbfreqdb"
	otlpPort, injPort, apiPort := freePort(t), freePort(t), freePort(t)
	inj := fmt.Sprintf("http://127.0.0.1:%d", injPort)
	apiBase := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	pm := perfmodelExporter(fmt.Sprintf("127.0.0.1:%d", apiPort), work, host, 10*time.Second, float64(runtime.NumCPU())*freqBaseMHz)
	pm["core_mhz"] = freqBaseMHz
	pm["experiments"] = map[string]any{
		"injector": inj, "front_services": []string{"db"}, "k": 8, "n": 128, "chunks": 3, "scale": 60,
		"frequencies": map[string]any{"db": map[string]any{
			"cpus": []int{0}, "frequency_mhz": freqBaseMHz, "machine": host, "process": exe,
			"initial_fraction": 0.1,
		}},
	}
	startCPUElementCollector(t, map[string]any{
		"endpoint": fmt.Sprintf("127.0.0.1:%d", injPort), "insecure": true, "sysfs_root": sysfs,
		"allowlist": map[string]any{"cpus": []int{0}}, "max_freq_step_khz": 400000, "max_lease": "10m",
	}, otlpPort, exe, pm, fmt.Sprintf("127.0.0.1:%d", apiPort))
	hc := &http.Client{Timeout: 10 * time.Second}
	waitHTTP(t, hc, inj+"/v1/health", 30*time.Second)

	dbPort := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", dbPort)
	// Every request its own thread on the one CPU, so the kernel shares the
	// CPU among them (processor sharing) inside their spans. With
	// GOMAXPROCS 2 only two burn at once and the rest wait in Go's run queue
	// before their handler, and so their span, starts: the spans then
	// measured little more than the service time (9.7 ms at 1000 MHz against
	// the client's 15.4 ms).
	t.Setenv("GOMAXPROCS", "256")
	pid := tierProcess(t, work, exe, "", "db", "--config", cfgPath, "--listen", fmt.Sprintf("127.0.0.1:%d", dbPort),
		"--data", work, "--otlp", fmt.Sprintf("127.0.0.1:%d", otlpPort), "--instance", "frequency")
	writeFile(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	waitHTTP(t, hc, base+"/healthz", 30*time.Second)

	ctx, stop := context.WithCancel(context.Background())
	var load capLoad
	wg := load.run(ctx, base+"/query/work", freqRate)
	t.Cleanup(func() { stop(); wg.Wait() })

	time.Sleep(5 * time.Second)
	c0, t0 := processCPU(t, pid), time.Now()
	time.Sleep(15 * time.Second)
	used := (processCPU(t, pid) - c0) / time.Since(t0).Seconds()
	t.Logf("demand from /proc: %.3f of CPU 0 = %.0f MHz at %.1f req/s (%.1f ms of CPU per request; %.0f configured)",
		used, used*freqBaseMHz, freqRate, 1000*used/freqRate, freqBusyMc)

	ex := runExperiment(t, hc, apiBase, "frequency:db", 15*time.Minute)
	speed, _ := os.ReadFile(setspeed)
	if got := strings.TrimSpace(string(speed)); got != strconv.Itoa(int(freqBaseMHz*1000)) {
		t.Errorf("after the experiment cpu0 runs at %s kHz, want %d restored", got, int(freqBaseMHz*1000))
	}
	if ex.Phase != "done" || len(ex.Gradients) == 0 {
		t.Fatalf("experiment ended %s (%s) with %d gradients", ex.Phase, ex.Reason, len(ex.Gradients))
	}
	var res gradient.Result
	if err := json.Unmarshal(ex.Detail, &res); err == nil && len(res.Elements) > 0 {
		el := res.Elements[0]
		td := math.NaN()
		for _, v := range el.TimeDomain {
			td = v.Gradient
		}
		t.Logf("plan: bins %.3f s, k_d %d of N %d, A_d %.2f ms; adaptive A⁰ %.0f kHz (rough %v), active amplitude %.0f kHz, injected %.0f kHz (assumed %v); on/off comparator %.0f; notes %v",
			res.Plan.BinSeconds, res.Plan.Kd, res.Plan.N, res.Plan.AmplitudeMs, el.AdaptiveAmplitude, el.Rough != nil && el.Rough.Significant,
			el.Amplitude, el.Injected, el.InjectedAssumed, td, el.Notes)
	}
	g := ex.Gradients[0]
	if g.Basis == nil || g.Basis.Kind != string(gradient.KindCPUFreq) {
		t.Fatalf("gradient %+v has no cpufreq basis", g)
	}
	basis := gradient.Basis{Kind: gradient.KindCPUFreq, Operating: g.Basis.Operating, Alpha: g.Basis.Alpha, Workload: g.Basis.Workload}
	// M/G/1-PS: rt = 1000·mc/(f − α·w) ms, a slope of 1000·mc in b.
	t.Logf("frequency gradient of %s: %.0f ms·MHz, ci95 [%.0f, %.0f], snr %.1f, perturbation %.2f ms; basis α·w %.0f MHz (utilization %.2f); processor sharing's slope %.0f",
		g.Transaction, g.Gradient, g.CI95[0], g.CI95[1], g.SNR, g.PerturbationMs, basis.Alpha*basis.Workload, basis.Utilization(), 1000*freqBusyMc)

	// The coordinator measures the db's SERVER spans. On one shared CPU part
	// of the queueing happens before a handler (and its span) starts, so the
	// load generator's response times grow faster than the spans'. Each
	// level's response time is therefore the spans' mean over the 10 s
	// windows inside it, from the exporter's graph; the client's is logged.
	type level struct{ mhz, b, ms, clientMs, n float64 }
	var levels []level
	unseen := map[float64]bool{650: true, 800: true, 900: true}
	type span struct{ from, to time.Time }
	var spans []span
	for _, f := range []float64{600, 650, 700, 800, 900, 1000} {
		setSpeed(f)
		from := time.Now().Add(3 * time.Second)
		time.Sleep(43 * time.Second)
		spans = append(spans, span{from, time.Now()})
		s := load.between(from, time.Now())
		b, err := basis.Value(f)
		if err != nil {
			t.Fatal(err)
		}
		levels = append(levels, level{mhz: f, b: b, clientMs: meanMs(s), n: float64(len(s))})
	}
	setSpeed(freqBaseMHz)
	time.Sleep(8 * time.Second) // trace_wait and a flush, for the last windows
	for i := range levels {
		from := (spans[i].from.Unix() + 9) / 10 * 10
		to := spans[i].to.Unix() / 10 * 10
		var g api.Graph
		if _, err := sendJSON(hc, "GET", fmt.Sprintf("%s%s?from=%d&to=%d", apiBase, api.PathGraph, from, to), nil, &g); err != nil {
			t.Fatal(err)
		}
		for _, node := range g.Nodes {
			if node.ID == "db" && node.LatencyMs != nil {
				levels[i].ms = node.LatencyMs.Mean
			}
		}
		if levels[i].ms == 0 {
			t.Fatalf("%.0f MHz: no db SERVER spans in [%d, %d): %+v", levels[i].mhz, from, to, g.Nodes)
		}
	}
	var sx, sy, sxx, sxy, syy, n float64
	for _, l := range levels {
		sx, sy, sxx, sxy, syy, n = sx+l.b, sy+l.ms, sxx+l.b*l.b, sxy+l.b*l.ms, syy+l.ms*l.ms, n+1
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	r := (n*sxy - sx*sy) / math.Sqrt((n*sxx-sx*sx)*(n*syy-sy*sy))
	t.Logf("response time against b(f) over %d speeds: slope %.1f ms per basis unit, R² %.4f", len(levels), slope, r*r)
	if r*r < 0.95 {
		t.Errorf("R² %.4f of the response time against 1/(f − α·w), want ≥ 0.95", r*r)
	}
	var baseline level
	for _, l := range levels {
		if l.mhz == freqBaseMHz {
			baseline = l
		}
	}
	for _, l := range levels {
		if !unseen[l.mhz] {
			t.Logf("%.0f MHz: b %.6f, measured %.2f ms (client %.2f ms, n=%.0f)", l.mhz, l.b, l.ms, l.clientMs, l.n)
			continue
		}
		var pred api.Prediction
		req := api.PredictRequest{BaselineMs: map[string]float64{g.Transaction: baseline.ms},
			Changes: []api.Change{{Element: "frequency:db", Delta: l.mhz - freqBaseMHz}}}
		if _, err := sendJSON(hc, "POST", apiBase+api.PathPredict, req, &pred); err != nil || len(pred.Transactions) != 1 {
			t.Fatalf("predict at %.0f MHz: %v (%+v)", l.mhz, err, pred)
		}
		p := pred.Transactions[0]
		rel := (p.PredictedMs - l.ms) / l.ms
		t.Logf("%.0f MHz (unseen): b %.6f, predicted %.2f ms [%.2f, %.2f], measured %.2f ms (client %.2f ms, n=%.0f): %+.1f%%",
			l.mhz, l.b, p.PredictedMs, p.CI95[0], p.CI95[1], l.ms, l.clientMs, l.n, 100*rel)
		if math.Abs(rel) > 0.10 {
			t.Errorf("%.0f MHz: predicted %.2f ms, measured %.2f ms (%+.1f%%), want within 10%%", l.mhz, p.PredictedMs, l.ms, 100*rel)
		}
	}
	load.mu.Lock()
	t.Logf("load: %d requests, %d errors (last %v)", len(load.samples), load.errs, load.lastErr)
	if load.errs > len(load.samples)/100 {
		t.Errorf("%d of %d requests failed (last %v)", load.errs, len(load.samples), load.lastErr)
	}
	load.mu.Unlock()
}
