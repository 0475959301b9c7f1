//go:build long

package e2e

// Issue 11's capacity gradient on a real cgroup: a testbed db tier whose one
// query burns 4 ms of CPU runs in a cgroup v1 cpu group of its own, under an
// open-loop Poisson load. Through the real collector's injector, a capacity
// lease square-waves the group's CFS quota; the spectral estimate gives the
// gradient of the response time with respect to paper 003 §III-C's basis
// b(c) = 1/(c·f − α·w). Then the quota is set to several fixed values: the
// response time must be linear in b (R² ≥ 0.95), and the gradient must
// predict the response time at quotas it never saw within 10%.
//
// Run it with scripts/e2e-capacity.sh (root, /sys/fs/cgroup/cpu mounted).

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/spectral"
)

const (
	capV1Root    = "/sys/fs/cgroup/cpu"
	capPeriodUs  = 10000 // a 10 ms CFS period keeps throttling finer than a request
	capBusyMs    = 4.0   // CPU per request at full speed (cpu_mc 4 at cpu_mhz 1000)
	capStdMHz    = 1000.0
	capOperating = 0.5 // cores allotted while the gradient is measured
	capRate      = 40.0
)

// capLoad is an open-loop Poisson load: each request in its own goroutine,
// so a slower server does not slow the arrivals (α·w stays put).
type capLoad struct {
	mu      sync.Mutex
	samples []spectral.Sample
	errs    int
	lastErr error
}

func (l *capLoad) run(ctx context.Context, url string, rate float64) *sync.WaitGroup {
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxIdleConns: 512}}
	rng := rand.New(rand.NewPCG(42, 7))
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := time.Now()
		for ctx.Err() == nil {
			next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				resp, err := hc.Post(url, "application/json", nil)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %s", resp.Status)
					}
				}
				ms := float64(time.Since(t0)) / 1e6
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					if ctx.Err() == nil {
						l.errs++
						l.lastErr = err
					}
					return
				}
				l.samples = append(l.samples, spectral.Sample{Time: float64(t0.UnixNano()) / 1e9, Transaction: "work", Ms: ms})
			}()
		}
	}()
	return &wg
}

// between returns the samples of requests started in [from, to), by start.
func (l *capLoad) between(from, to time.Time) []spectral.Sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, b := float64(from.UnixNano())/1e9, float64(to.UnixNano())/1e9
	var out []spectral.Sample
	for _, s := range l.samples {
		if s.Time >= a && s.Time < b {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out
}

func meanMs(s []spectral.Sample) float64 {
	var sum float64
	for _, x := range s {
		sum += x.Ms
	}
	return sum / float64(len(s))
}

func writeFile(t *testing.T, path, v string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// setCores sets the group's quota to c cores of the fixed period.
func setCores(t *testing.T, dir string, c float64) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "cpu.cfs_quota_us"), strconv.Itoa(int(math.Round(c*capPeriodUs))))
}

func TestCapacityGradientOnRealCgroup(t *testing.T) {
	if _, err := os.Stat(filepath.Join(capV1Root, "cpu.cfs_quota_us")); err != nil {
		t.Fatalf("the cgroup v1 cpu controller must be mounted at %s (as root): %v", capV1Root, err)
	}
	group := fmt.Sprintf("tierscope-e2e-capacity-%d", os.Getpid())
	dir := filepath.Join(capV1Root, group)
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
		t.Errorf("could not remove cgroup %s", dir)
	})
	writeFile(t, filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(capPeriodUs))
	setCores(t, dir, capOperating)

	work := t.TempDir()
	cfgPath := filepath.Join(work, "capacity.yaml")
	writeFile(t, cfgPath, fmt.Sprintf(`cpu_mhz: %g
versions: {web: {v1: {}}}
transactions: [{name: Work, class: browsing, steps: [{call: app, op: work}]}]
ops: {work: {cpu_mc: 0, db: [{query: work}]}}
queries: {work: {sql: "SELECT 1", cpu_mc: %g}}
replication: none
`, capStdMHz, capBusyMs*capStdMHz/1000))

	// The collector: the injector (capacity leases on our group only) and an
	// OTLP receiver for the tier's spans.
	otlpPort, injPort, apiPort := freePort(t), freePort(t), freePort(t)
	inj := fmt.Sprintf("http://127.0.0.1:%d", injPort)
	startModelsCollector(t, collectorBinary(t), map[string]any{
		"extensions": map[string]any{"injector": map[string]any{
			"endpoint": fmt.Sprintf("127.0.0.1:%d", injPort), "cgroup_root": capV1Root,
			"allowlist": map[string]any{"cgroups": []string{group}}, "max_lease": "10m",
		}},
		"receivers": map[string]any{"otlp": otlpReceiver(otlpPort)},
		"exporters": map[string]any{"perfmodel": perfmodelExporter(fmt.Sprintf("127.0.0.1:%d", apiPort), work, "caphost", 10*time.Second, 0)},
		"service": map[string]any{
			"extensions": []string{"injector"},
			"telemetry":  map[string]any{"metrics": map[string]any{"level": "none"}},
			"pipelines":  map[string]any{"traces": map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"perfmodel"}}},
		},
	}, fmt.Sprintf("127.0.0.1:%d", apiPort))
	hc := &http.Client{Timeout: 10 * time.Second}
	waitHTTP(t, hc, inj+"/v1/health", 30*time.Second)

	dbPort := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", dbPort)
	pid := tierProcess(t, work, "db", "", "db", "--config", cfgPath, "--listen", fmt.Sprintf("127.0.0.1:%d", dbPort),
		"--data", work, "--otlp", fmt.Sprintf("127.0.0.1:%d", otlpPort), "--instance", "capacity")
	writeFile(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	waitHTTP(t, hc, base+"/healthz", 30*time.Second)

	ctx, stop := context.WithCancel(context.Background())
	var load capLoad
	wg := load.run(ctx, base+"/query/work", capRate)
	t.Cleanup(func() { stop(); wg.Wait() })

	// α·w from the utilization (paper 003 §III-B): the tier's CPU over a
	// stretch of the load, with the arrival rate actually achieved.
	time.Sleep(5 * time.Second)
	c0, t0 := processCPU(t, pid), time.Now()
	time.Sleep(20 * time.Second)
	used := (processCPU(t, pid) - c0) / time.Since(t0).Seconds() // cores
	w := float64(len(load.between(t0, time.Now()))) / time.Since(t0).Seconds()
	basis := gradient.Basis{Kind: gradient.KindCapacity, Operating: capOperating, FrequencyMHz: capStdMHz,
		Alpha: used * capStdMHz / w, Workload: w}
	if err := basis.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Logf("demand %.3f cores at %.1f req/s: α = %.2f megacycles per request (%.2f configured), utilization %.2f of %.2f cores",
		used, w, basis.Alpha, capBusyMs*capStdMHz/1000, basis.Utilization(), capOperating)

	// Training: M chunks of N bins of k requests, unperturbed.
	cfg := spectral.TrainConfig{K: 8, N: 64, Chunks: 3, Scale: 30, MinSamplesPerPeriod: spectral.DefaultMinSamplesPerPeriod}
	trainFrom := time.Now()
	// A bin is the mean + 3σ of the time k Poisson arrivals take.
	binGuess := (float64(cfg.K) + 3*math.Sqrt(float64(cfg.K))) / capRate
	time.Sleep(time.Duration(float64(cfg.Chunks*cfg.N)*binGuess*1.15*float64(time.Second)) + 2*time.Second)
	plan, err := spectral.Train(load.between(trainFrom, time.Now().Add(-time.Second)), "work", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("training: bins of %.3f s, k_d %d of N %d (period %.2f s), A_d %.2f ms, %d chunks; response time %.2f ± %.2f ms",
		plan.BinSeconds, plan.Kd, plan.N, plan.PeriodSeconds, plan.AmplitudeMs, plan.Chunks, plan.ResponseTime.MeanMs, plan.ResponseTime.StdMs)

	// The active phase: withhold the fraction a of the quota as a square wave
	// of k_d + 1 cycles; the window is the N bins from its start. a is sized
	// so that the expected change of response time, α·Δb by the M/G/1/PS
	// prior, is A_d.
	prior := basis.Alpha * 1000 // ms per basis unit (α in megacycles)
	a, err := basis.Knob(plan.AmplitudeMs / prior)
	if err != nil || !(a > 0) {
		t.Fatalf("no amplitude for A_d %.2f ms: %v", plan.AmplitudeMs, err)
	}
	a = math.Min(a, 0.3)
	waveStart := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	period := time.Duration(plan.PeriodSeconds * float64(time.Second)).Round(time.Millisecond)
	var lease struct {
		ID    string         `json:"id"`
		State string         `json:"state"`
		Stats map[string]any `json:"stats"`
	}
	req := map[string]any{
		"kind": "capacity", "target": map[string]any{"cgroup": group},
		"wave":     map[string]any{"amplitude": a, "period": period.String(), "cycles": plan.Kd + 1, "start": waveStart.UTC()},
		"duration": (time.Until(waveStart) + time.Duration(plan.Kd+1)*period + 5*time.Second).Round(time.Second).String(),
	}
	if _, err := sendJSON(hc, "POST", inj+"/v1/leases", req, &lease); err != nil {
		t.Fatal(err)
	}
	windowEnd := waveStart.Add(time.Duration(float64(plan.N) * plan.BinSeconds * float64(time.Second)))
	time.Sleep(time.Until(windowEnd) + 2*time.Second)
	if _, err := sendJSON(hc, "DELETE", inj+"/v1/leases/"+lease.ID, nil, &lease); err != nil {
		t.Fatal(err)
	}
	quota, _ := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	if got := strings.TrimSpace(string(quota)); got != strconv.Itoa(int(capOperating*capPeriodUs)) {
		t.Errorf("after the lease the quota is %s, want %d restored", got, int(capOperating*capPeriodUs))
	}
	t.Logf("lease %s ended %s: withheld %.3f of %.2f cores, stats %v", lease.ID, lease.State, a, capOperating, lease.Stats)
	m, err := gradient.Measure(plan, load.between(waveStart.Add(-time.Second), windowEnd.Add(time.Second)), gradient.Injection{
		Start: float64(waveStart.UnixNano()) / 1e9, FrequencyHz: plan.FrequencyHz, AmplitudeMs: a, ActualMeanDelayMs: a,
		Element: "capacity:" + group, Basis: &basis,
	})
	if err != nil {
		t.Fatal(err)
	}
	g, ok := m.Transactions["work"]
	if !ok {
		t.Fatalf("no gradient: %v", m.Errors)
	}
	td := math.NaN()
	if g.TimeDomain != nil {
		td = g.TimeDomain.Gradient
	}
	t.Logf("capacity gradient %.1f ms per basis unit, ci95 [%.1f, %.1f], snr %.1f (prior α = %.1f); on/off comparator %.1f; perturbation %.2f ms = %.2fσ",
		g.Gradient, g.CI95[0], g.CI95[1], g.SNR, prior, td, g.PerturbationMs, g.PerturbationMs/plan.ResponseTime.StdMs)

	// Fixed quotas: the measured response time at each against b(c).
	type level struct{ cores, b, ms, n float64 }
	var levels []level
	unseen := map[float64]bool{0.4: true, 0.7: true, 0.9: true}
	for _, c := range []float64{0.35, 0.4, 0.5, 0.6, 0.7, 0.9} {
		setCores(t, dir, c)
		time.Sleep(3 * time.Second)
		from := time.Now()
		time.Sleep(25 * time.Second)
		s := load.between(from, time.Now())
		b, err := basis.Value(c)
		if err != nil {
			t.Fatal(err)
		}
		levels = append(levels, level{c, b, meanMs(s), float64(len(s))})
	}
	setCores(t, dir, capOperating)
	var sx, sy, sxx, sxy, syy, n float64
	for _, l := range levels {
		sx, sy, sxx, sxy, syy, n = sx+l.b, sy+l.ms, sxx+l.b*l.b, sxy+l.b*l.ms, syy+l.ms*l.ms, n+1
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	r := (n*sxy - sx*sy) / math.Sqrt((n*sxx-sx*sx)*(n*syy-sy*sy))
	t.Logf("response time against b(c) over %d quotas: slope %.1f ms per basis unit, R² %.4f", len(levels), slope, r*r)
	if r*r < 0.95 {
		t.Errorf("R² %.4f of the response time against 1/(c·f − α·w), want ≥ 0.95", r*r)
	}
	var baseline level
	for _, l := range levels {
		if l.cores == capOperating {
			baseline = l
		}
	}
	grads := m.Gradients()
	for _, l := range levels {
		if !unseen[l.cores] {
			t.Logf("quota %.2f cores: b %.6f, measured %.2f ms (n=%.0f)", l.cores, l.b, l.ms, l.n)
			continue
		}
		p, err := gradient.Predict("work", baseline.ms, 0, grads, []gradient.Change{{Element: "capacity:" + group, Absolute: true, Value: l.cores}})
		if err != nil {
			t.Fatal(err)
		}
		rel := (p.PredictedMs - l.ms) / l.ms
		t.Logf("quota %.2f cores (unseen): b %.6f, predicted %.2f ms [%.2f, %.2f], measured %.2f ms (n=%.0f): %+.1f%%",
			l.cores, l.b, p.PredictedMs, p.CI95[0], p.CI95[1], l.ms, l.n, 100*rel)
		if math.Abs(rel) > 0.10 {
			t.Errorf("quota %.2f: predicted %.2f ms, measured %.2f ms (%+.1f%%), want within 10%%", l.cores, p.PredictedMs, l.ms, 100*rel)
		}
	}
	load.mu.Lock()
	t.Logf("load: %d requests, %d errors (last %v)", len(load.samples), load.errs, load.lastErr)
	if load.errs > len(load.samples)/100 {
		t.Errorf("%d of %d requests failed (last %v)", load.errs, len(load.samples), load.lastErr)
	}
	load.mu.Unlock()
}
