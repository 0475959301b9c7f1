//go:build long

package e2e

// Issue 11's capacity gradient on a real cgroup: a testbed db tier whose one
// query burns 4 ms of CPU runs in a cgroup v1 cpu group of its own, under an
// open-loop Poisson load. The real collector runs the experiment
// "capacity:db" through the perfmodel exporter's coordinator: it builds paper
// 003 §III-C's basis b(c) = 1/(c·f − α·w) from the tier's hostmetrics CPU
// readings, trains on the tier's SERVER spans, and has the injector
// square-wave the group's CFS quota; the spectral estimate is the gradient
// with respect to b. Then the quota is set to several fixed values: the
// response time must be linear in b (R² ≥ 0.95), and /api/v1/predict must
// give the response time at quotas the experiment never saw within 10%.
//
// Run it with scripts/e2e-capacity.sh (root, /sys/fs/cgroup/cpu mounted).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/spectral"
	"gonum.org/v1/gonum/stat"
)

const (
	capV1Root = "/sys/fs/cgroup/cpu"
	// The basis treats a quota of c CPUs as a CPU of speed c·f shared by the
	// requests in service. CFS bandwidth control is that only when a request
	// spans several periods: with 4 ms requests and a 10 ms period a lone
	// request ran at full speed whatever the quota, and the response time
	// stopped following b(c) above 0.6 cores. So requests burn 9 ms and the
	// period is 3 ms (the kernel's least quota, 1 ms, then allows ≥ 0.34).
	capPeriodUs  = 3000
	capBusyMs    = 9.0 // CPU per request at full speed (cpu_mc 9 at cpu_mhz 1000)
	capStdMHz    = 1000.0
	capOperating = 0.5  // cores allotted while the gradient is measured
	capRate      = 24.0 // requests per second: about 0.25 cores of demand
	// capLevel is how long each quota is held for the linearity check, in
	// two visits: at 0.35–0.4 cores (ρ ≈ 0.6–0.7) 25 s of a PS queue left
	// its mean a few percent uncertain, as much as the prediction's own
	// error; at 60 s the level at 0.40 cores still read ±2.2 ms (run 20,
	// 5%), half the tolerance there.
	capLevel = 90 * time.Second
)

// capLoad is an open-loop Poisson load: each request in its own goroutine,
// so a slower server does not slow the arrivals (α·w stays put).
type capLoad struct {
	mu      sync.Mutex
	samples []spectral.Sample
	errs    int
	errAt   []time.Time // when each failed request started
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
						l.errAt = append(l.errAt, t0)
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

// timeline is the load minute by minute since from: requests answered,
// their mean, and failures, so a log shows when a queue built up.
func (l *capLoad) timeline(from, to time.Time) []string {
	var out []string
	for a := from; a.Before(to); a = a.Add(time.Minute) {
		b := a.Add(time.Minute)
		s := l.between(a, b)
		l.mu.Lock()
		fails := 0
		for _, e := range l.errAt {
			if !e.Before(a) && e.Before(b) {
				fails++
			}
		}
		l.mu.Unlock()
		out = append(out, fmt.Sprintf("+%3.0fs: %4d answered, mean %7.1f ms, %4d failed", a.Sub(from).Seconds(), len(s), meanMs(s), fails))
	}
	return out
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

// batchSE is the standard error of the mean response time from the means
// of batches of secs seconds, by start time.
func batchSE(s []spectral.Sample, secs float64) float64 {
	sums := map[int64][2]float64{}
	for _, x := range s {
		k := int64(math.Floor(x.Time / secs))
		v := sums[k]
		sums[k] = [2]float64{v[0] + x.Ms, v[1] + 1}
	}
	var means []float64
	for _, v := range sums {
		means = append(means, v[0]/v[1])
	}
	if len(means) < 2 {
		return math.NaN()
	}
	_, sd := stat.MeanStdDev(means, nil)
	return sd / math.Sqrt(float64(len(means)))
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

// quotaLog records the cgroup's quota as the injector writes it, polled
// every 20 ms: the ground truth of what the wave did, beside the client's
// response times.
type quotaLog struct {
	mu      sync.Mutex
	at      []time.Time
	quotaUs []int
}

func (q *quotaLog) watch(ctx context.Context, dir string) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us")); err == nil {
			if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				q.mu.Lock()
				if n := len(q.quotaUs); n == 0 || q.quotaUs[n-1] != v {
					q.at, q.quotaUs = append(q.at, time.Now()), append(q.quotaUs, v)
				}
				q.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// trainingEnd is when the experiment first moved the quota: until then it
// was training at the operating point.
func trainingEnd(q *quotaLog, start, end time.Time) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, at := range q.at {
		if at.After(start) && q.quotaUs[i] != int(math.Round(capOperating*capPeriodUs)) {
			return at
		}
	}
	return end
}

// byQuota is the client's mean response time at each quota the log holds
// between from and to, leaving out requests started within settle of a
// change: cores → (requests, mean ms).
func (q *quotaLog) byQuota(samples []spectral.Sample, from, to time.Time, settle time.Duration) map[float64][2]float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	acc := map[float64][2]float64{}
	for _, s := range samples {
		at := time.Unix(0, int64(s.Time*1e9))
		if at.Before(from) || !at.Before(to) {
			continue
		}
		i := sort.Search(len(q.at), func(i int) bool { return q.at[i].After(at) }) - 1
		if i < 0 || at.Sub(q.at[i]) < settle || (i+1 < len(q.at) && q.at[i+1].Sub(at) < 100*time.Millisecond) {
			continue
		}
		c := math.Round(float64(q.quotaUs[i])/capPeriodUs*1000) / 1000
		v := acc[c]
		acc[c] = [2]float64{v[0] + 1, v[1] + s.Ms}
	}
	for c, v := range acc {
		acc[c] = [2]float64{v[0], v[1] / v[0]}
	}
	return acc
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

	// The collector: the injector (capacity leases on our group only), the
	// tier's spans over OTLP, its CPU from the hostmetrics process scraper,
	// and the perfmodel exporter whose coordinator runs "capacity:db".
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	const exe = "tbcapdb"
	otlpPort, injPort, apiPort := freePort(t), freePort(t), freePort(t)
	inj := fmt.Sprintf("http://127.0.0.1:%d", injPort)
	apiBase := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	pm := perfmodelExporter(fmt.Sprintf("127.0.0.1:%d", apiPort), work, host, 10*time.Second, float64(runtime.NumCPU())*capStdMHz)
	pm["core_mhz"] = capStdMHz
	pm["experiments"] = map[string]any{
		"injector": inj, "front_services": []string{"db"}, "k": 8, "n": 128, "chunks": 3,
		// d = 150 takes each wave to its cap (figure 8(e): a larger d buys
		// precision with perturbation): max_grant_fraction's 0.9 cores
		// above, where the response per window is largest against the
		// noise, and max_fraction's 0.41 below. At d = 60 and 90 the grant
		// stopped at 0.70–0.83 cores, and a prediction at 0.85 beyond it
		// took the nearer secant (run 20: −12%).
		"scale": 150,
		// Periods of ≥ 16 bins (≥ 10 s): a queue's mean follows a change
		// of speed with a lag, which a short half period cuts off. At the
		// default 8 bins (a 2.7 s half period) run 5 read the gradient 31%
		// under the steady slope, outside its interval; run 6, at 16, 9%
		// under, inside it.
		"min_samples_per_period": 16,
		// Run 6 read SNR 5.9 after the default two windows (a standard error
		// of 17%), and the prediction at 0.85 cores, the farthest from the
		// operating point, moves 1.3× the gradient's error: buy precision
		// with windows, as the link runs do.
		// Runs 17–20 stopped at SNR 7–11, a standard error of 7–10%: at
		// 0.85 cores, where the change is larger than the response, half
		// the 10% tolerance. min_snr 20 over up to 8 windows.
		"min_snr": 20, "max_windows": 8,
		"capacities": map[string]any{"db": map[string]any{
			"cgroup": group, "cores": capOperating, "frequency_mhz": capStdMHz, "machine": host, "process": exe,
			// A response time near exponential (processor sharing) needs a
			// visible first pulse for a usable rough gradient.
			// A grant of 0.15 moved the response too little for a
			// significant rough gradient in run 20; 0.18 did in runs 21 and
			// 22 (A⁰ is at most max_fraction).
			"initial_fraction": 0.18, "max_fraction": 0.18, "max_grant_fraction": 0.8,
			// Runs 5–7 withheld only and measured the secant below 0.5
			// cores; runs 9–15 swung a centered wave, whose secant matched
			// the spans' levels above 0.5 but not below: there the spans'
			// secant was 24–45% steeper (runs 13, 14), and 0.40 read
			// 6–13% under. One wave below and one above give a secant on
			// each side (paper 000 §6).
			"sides": []string{"below", "above"},
		}},
	}
	startCPUElementCollector(t, map[string]any{
		"endpoint": fmt.Sprintf("127.0.0.1:%d", injPort), "insecure": true, "cgroup_root": capV1Root,
		"allowlist": map[string]any{"cgroups": []string{group}}, "max_lease": "10m",
	}, otlpPort, exe, pm, fmt.Sprintf("127.0.0.1:%d", apiPort))
	hc := &http.Client{Timeout: 10 * time.Second}
	waitHTTP(t, hc, inj+"/v1/health", 30*time.Second)

	dbPort := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", dbPort)
	pid := tierProcess(t, work, exe, "", "db", "--config", cfgPath, "--listen", fmt.Sprintf("127.0.0.1:%d", dbPort),
		"--data", work, "--otlp", fmt.Sprintf("127.0.0.1:%d", otlpPort), "--instance", "capacity")
	writeFile(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	waitHTTP(t, hc, base+"/healthz", 30*time.Second)

	ctx, stop := context.WithCancel(context.Background())
	var load capLoad
	loadStart := time.Now()
	wg := load.run(ctx, base+"/query/work", capRate)
	t.Cleanup(func() { stop(); wg.Wait() })

	// The tier's own view of its demand, to compare with the basis the
	// coordinator builds from hostmetrics.
	time.Sleep(5 * time.Second)
	c0, t0 := processCPU(t, pid), time.Now()
	time.Sleep(15 * time.Second)
	used := (processCPU(t, pid) - c0) / time.Since(t0).Seconds()
	t.Logf("demand from /proc: %.3f cores = %.0f MHz at %.1f req/s (%.1f ms of CPU per request; %.0f configured)",
		used, used*capStdMHz, capRate, 1000*used/capRate, capBusyMs)

	// The experiment, through the coordinator: training, the adaptive
	// single cycle, the active square wave of the quota, the result.
	var wrote quotaLog
	watchCtx, stopWatch := context.WithCancel(context.Background())
	go wrote.watch(watchCtx, dir)
	expStart := time.Now()
	ex := runExperiment(t, hc, apiBase, "capacity:db", 45*time.Minute)
	expEnd := time.Now()
	stopWatch()
	for _, line := range load.timeline(loadStart, time.Now()) {
		t.Logf("load %s", line)
	}
	quota, _ := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	if got := strings.TrimSpace(string(quota)); got != strconv.Itoa(int(capOperating*capPeriodUs)) {
		t.Errorf("after the experiment the quota is %s, want %d restored", got, int(capOperating*capPeriodUs))
	}
	if ex.Phase != "done" || len(ex.Gradients) == 0 {
		t.Fatalf("experiment ended %s (%s) with %d gradients", ex.Phase, ex.Reason, len(ex.Gradients))
	}
	var res gradient.Result
	if err := json.Unmarshal(ex.Detail, &res); err == nil && len(res.Elements) > 0 {
		t.Logf("plan: bins %.3f s, k_d %d of N %d, A_d %.2f ms", res.Plan.BinSeconds, res.Plan.Kd, res.Plan.N, res.Plan.AmplitudeMs)
		for _, el := range res.Elements {
			td := math.NaN()
			for _, v := range el.TimeDomain {
				td = v.Gradient
			}
			t.Logf("%s wave: adaptive A⁰ %.3f (rough %v), active amplitude %.3f of %.2f cores over %s–%s; on/off comparator %.1f",
				el.Basis.Side(), el.AdaptiveAmplitude, el.Rough != nil && el.Rough.Significant, el.Amplitude, capOperating,
				el.WindowStart.Format("15:04:05"), el.WindowEnd.Format("15:04:05"), td)
			for _, note := range el.Notes {
				t.Logf("%s wave: %s", el.Basis.Side(), note)
			}
		}
		for tx, b := range res.Plan.Transactions {
			t.Logf("training baseline of %s (server spans): mean %.2f ms, σ %.2f ms", tx, b.MeanMs, b.StdMs)
		}
	}
	sides := map[string]bool{}
	for _, g := range ex.Gradients {
		if g.Basis == nil || g.Basis.Kind != "capacity" || g.Interval == nil {
			t.Fatalf("gradient %+v has no capacity basis or interval", g)
		}
		sides[g.Basis.Side] = true
		t.Logf("%s: capacity gradient of %s over [%.3f, %.3f] cores: %.0f ms·MHz, ci95 [%.0f, %.0f], snr %.1f, perturbation %.2f ms",
			g.Basis.Side, g.Transaction, g.Interval[0], g.Interval[1], g.Gradient, g.CI95[0], g.CI95[1], g.SNR, g.PerturbationMs)
	}
	if !sides["below"] || !sides["above"] {
		t.Fatalf("gradients on sides %v, want below and above", sides)
	}
	g := ex.Gradients[0]
	basis := gradient.Basis{Kind: gradient.KindCapacity, Operating: g.Basis.Operating, FrequencyMHz: g.Basis.FrequencyMHz, Alpha: g.Basis.Alpha, Workload: g.Basis.Workload}
	t.Logf("basis: α·w %.0f MHz (utilization %.2f of %.2f cores)", basis.Alpha*basis.Workload, basis.Utilization(), capOperating)

	// Fixed quotas: the measured response time at each against b(c). Each
	// quota is visited twice, on a sweep up and a sweep down, so that a
	// backlog carried over from the quota before, or a drift of the host,
	// weighs on both sides alike; its standard error is from 5 s batch
	// means, since a PS queue's response times are strongly autocorrelated.
	type level struct{ cores, b, ms, se, n float64 }
	quotas := []float64{0.35, 0.4, 0.5, 0.6, 0.7, 0.85}
	visits := map[float64][]spectral.Sample{}
	sweeps := slices.Clone(quotas)
	for i := len(quotas) - 1; i >= 0; i-- {
		sweeps = append(sweeps, quotas[i])
	}
	type span struct{ from, to time.Time }
	held := map[float64][]span{}
	for _, c := range sweeps {
		setCores(t, dir, c)
		time.Sleep(3 * time.Second)
		from := time.Now()
		time.Sleep(capLevel / 2)
		visits[c] = append(visits[c], load.between(from, time.Now())...)
		held[c] = append(held[c], span{from, time.Now()})
	}
	// The operating point is every prediction's baseline, so its error
	// enters all three: two 30 s visits left it ±1.3 ms (run 19's client),
	// 9% of the response at 0.85 cores, the whole tolerance. The training
	// held the same quota for M·N bins (4–5 minutes) and is pooled with
	// the visits.
	trainEnd := trainingEnd(&wrote, expStart, expEnd)
	visits[capOperating] = append(visits[capOperating], load.between(expStart, trainEnd)...)
	held[capOperating] = append(held[capOperating], span{expStart, trainEnd})
	t.Logf("operating point: the training's %.0f s at %.2f cores pooled with the visits", trainEnd.Sub(expStart).Seconds(), capOperating)
	// The same levels as the model sees them: the db's SERVER spans, from
	// the exporter's 10 s windows wholly inside each visit. A span starts
	// when the handler runs, so time the request waited for a throttled
	// process to read it is the client's only.
	time.Sleep(12 * time.Second) // the last window closes
	serverMs := map[float64]float64{}
	for c, spans := range held {
		var n, sum float64
		for _, sp := range spans {
			from := (sp.from.Unix() + 9) / 10 * 10
			to := sp.to.Unix() / 10 * 10
			var gr api.Graph
			if _, err := sendJSON(hc, "GET", fmt.Sprintf("%s%s?from=%d&to=%d", apiBase, api.PathGraph, from, to), nil, &gr); err != nil {
				t.Fatalf("graph for %.2f cores: %v", c, err)
			}
			for _, node := range gr.Nodes {
				if node.ID == "db" && node.LatencyMs != nil && node.Requests > 0 {
					n += float64(node.Requests)
					sum += float64(node.Requests) * node.LatencyMs.Mean
				}
			}
		}
		if n > 0 {
			serverMs[c] = sum / n
		}
	}
	// What the wave did, from the quota file and the client's side: the
	// response time at each quota it held, against the steady levels.
	load.mu.Lock()
	all := slices.Clone(load.samples)
	load.mu.Unlock()
	during := wrote.byQuota(all, expStart, expEnd, 2*time.Second)
	unsettled := wrote.byQuota(all, expStart, expEnd, 0)
	if dump := os.Getenv("TIERSCOPE_CAPACITY_DUMP"); dump != "" {
		// The raw series, for analysis off line: each request (start, ms)
		// and each quota change (time, µs).
		if err := os.MkdirAll(dump, 0o755); err != nil {
			t.Fatalf("TIERSCOPE_CAPACITY_DUMP: %v", err)
		}
		var b strings.Builder
		for _, x := range all {
			fmt.Fprintf(&b, "%.6f,%.3f\n", x.Time, x.Ms)
		}
		writeFile(t, filepath.Join(dump, "requests.csv"), b.String())
		b.Reset()
		wrote.mu.Lock()
		for i, at := range wrote.at {
			fmt.Fprintf(&b, "%.6f,%d\n", float64(at.UnixNano())/1e9, wrote.quotaUs[i])
		}
		wrote.mu.Unlock()
		writeFile(t, filepath.Join(dump, "quota.csv"), b.String())
		t.Logf("raw series in %s (requests.csv, quota.csv; experiment %.3f–%.3f)", dump, float64(expStart.UnixNano())/1e9, float64(expEnd.UnixNano())/1e9)
	}
	var levels []level
	// Up to 0.85: one request runs on one CPU, so past a CPU a lone request
	// gains nothing and the single-queue basis no longer holds.
	unseen := map[float64]bool{0.4: true, 0.7: true, 0.85: true}
	for _, c := range quotas {
		b, err := basis.Value(c)
		if err != nil {
			t.Fatal(err)
		}
		s := visits[c]
		levels = append(levels, level{c, b, meanMs(s), batchSE(s, 5), float64(len(s))})
	}
	setCores(t, dir, capOperating)
	steadyAt := func(c float64) float64 { // linear in b between the levels either side
		b, _ := basis.Value(c)
		for i := 1; i < len(levels); i++ {
			if lo, hi := levels[i-1], levels[i]; c >= lo.cores && c <= hi.cores {
				return lo.ms + (hi.ms-lo.ms)*(b-lo.b)/(hi.b-lo.b)
			}
		}
		return math.NaN()
	}
	for _, c := range slices.Sorted(maps.Keys(during)) {
		v := during[c]
		t.Logf("during the experiment at %.3f cores (from the quota file): %4.0f requests, client mean %.2f ms (%.2f ms with the 2 s after each change); steady levels give %.2f ms",
			c, v[0], v[1], unsettled[c][1], steadyAt(c))
	}
	secant := func(lo, hi float64) float64 {
		var a, b level
		for _, l := range levels {
			if l.cores == lo {
				a = l
			}
			if l.cores == hi {
				b = l
			}
		}
		return (a.ms - b.ms) / (a.b - b.b)
	}
	t.Logf("secants in b: 0.40–0.50 %.0f (below), 0.40–0.60 %.0f (across), 0.50–0.70 %.0f, 0.50–0.85 %.0f (above)",
		secant(0.4, 0.5), secant(0.4, 0.6), secant(0.5, 0.7), secant(0.5, 0.85))
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
	clientMs := map[float64]float64{}
	for _, l := range levels {
		clientMs[l.cores] = l.ms
	}
	// predictAt asks the exporter for the response time at cores from a
	// baseline at the operating point.
	predictAt := func(baselineMs, cores float64) api.TransactionPrediction {
		var pred api.Prediction
		req := api.PredictRequest{BaselineMs: map[string]float64{g.Transaction: baselineMs},
			Changes: []api.Change{{Element: "capacity:db", Delta: cores - capOperating}}}
		if _, err := sendJSON(hc, "POST", apiBase+api.PathPredict, req, &pred); err != nil || len(pred.Transactions) != 1 {
			t.Fatalf("predict at %.2f cores: %v (%+v)", cores, err, pred)
		}
		return pred.Transactions[0]
	}
	for _, l := range levels {
		if !unseen[l.cores] {
			t.Logf("quota %.2f cores: b %.6f, measured %.2f ± %.2f ms (n=%.0f)", l.cores, l.b, l.ms, l.se, l.n)
			continue
		}
		p := predictAt(clientMs[capOperating], l.cores)
		rel := (p.PredictedMs - l.ms) / l.ms
		t.Logf("quota %.2f cores (unseen): b %.6f, predicted %.2f ms [%.2f, %.2f], measured %.2f ± %.2f ms (n=%.0f): %+.1f%%",
			l.cores, l.b, p.PredictedMs, p.CI95[0], p.CI95[1], l.ms, l.se, l.n, 100*rel)
	}
	// The model's own measure, which the must-show asserts: the prediction
	// from the server-side level at the operating point, against the
	// server-side level. The client's levels (logged above) also hold the
	// wait before a throttled process reads the request, which no span
	// sees: 6–8 ms more at 0.35–0.40 cores than at 0.5 in run 13.
	if serverMs[capOperating] == 0 {
		t.Errorf("no server-side level at %.2f cores from %s", capOperating, api.PathGraph)
	}
	for _, l := range levels {
		if !unseen[l.cores] || serverMs[l.cores] == 0 || serverMs[capOperating] == 0 {
			continue
		}
		p := predictAt(serverMs[capOperating], l.cores)
		rel := p.PredictedMs/serverMs[l.cores] - 1
		side, grad := "", math.NaN()
		if len(p.Terms) == 1 {
			side, grad = p.Terms[0].Side, p.Terms[0].Gradient
		}
		t.Logf("quota %.2f cores (unseen), server spans: predicted %.2f ms from %.2f ms at %.2f cores with the %s secant %.0f, measured %.2f ms: %+.1f%% (client %.2f ms)",
			l.cores, p.PredictedMs, serverMs[capOperating], capOperating, side, grad, serverMs[l.cores], 100*rel, l.ms)
		if math.Abs(rel) > 0.10 {
			t.Errorf("quota %.2f: predicted %.2f ms, measured %.2f ms in the db's server spans (%+.1f%%), want within 10%%", l.cores, p.PredictedMs, serverMs[l.cores], 100*rel)
		}
	}
	for _, c := range quotas {
		t.Logf("quota %.2f cores: server spans %.2f ms, client %.2f ms", c, serverMs[c], clientMs[c])
	}
	load.mu.Lock()
	t.Logf("load: %d requests, %d errors (last %v)", len(load.samples), load.errs, load.lastErr)
	if load.errs > len(load.samples)/100 {
		t.Errorf("%d of %d requests failed (last %v)", load.errs, len(load.samples), load.lastErr)
	}
	load.mu.Unlock()
}

// runExperiment starts an experiment on element through the API and polls it
// to its end, logging each phase; past limit it is aborted and the test fails.
func runExperiment(t *testing.T, hc *http.Client, apiBase, element string, limit time.Duration) api.Experiment {
	t.Helper()
	var ex api.Experiment
	begun := time.Now()
	if _, err := sendJSON(hc, "POST", apiBase+api.PathExperiments, api.ExperimentRequest{Element: element}, &ex); err != nil {
		t.Fatal(err)
	}
	phase := ""
	for ex.Finished == 0 {
		if time.Since(begun) > limit {
			_, _ = sendJSON(hc, "DELETE", apiBase+api.PathExperiments+"/"+ex.ID, nil, nil)
			t.Fatalf("%s: still %s after %v", element, ex.Phase, limit)
		}
		time.Sleep(time.Second)
		if _, err := sendJSON(hc, "GET", apiBase+api.PathExperiments+"/"+ex.ID, nil, &ex); err != nil {
			t.Logf("%v", err)
			continue
		}
		if ex.Phase != phase {
			t.Logf("%s: %6.1fs phase %s %.0f%% eta %.0fs", element, time.Since(begun).Seconds(), ex.Phase, ex.Percent, ex.ETASeconds)
			phase = ex.Phase
		}
	}
	t.Logf("%s: %s after %v (%s)", element, ex.Phase, time.Since(begun).Round(time.Second), ex.Reason)
	return ex
}

// startCPUElementCollector runs the collector for a CPU element's e2e test:
// the injector extension configured by injector, the tier's spans over OTLP,
// the tier process exe's CPU from the hostmetrics process scraper, and the
// perfmodel exporter pm whose coordinator runs the experiment.
func startCPUElementCollector(t *testing.T, injector map[string]any, otlpPort int, exe string, pm map[string]any, apiAddr string) {
	t.Helper()
	startModelsCollector(t, collectorBinary(t), map[string]any{
		"extensions": map[string]any{"injector": injector},
		"receivers": map[string]any{
			"otlp": otlpReceiver(otlpPort),
			"hostmetrics": map[string]any{"collection_interval": "1s", "scrapers": map[string]any{"process": map[string]any{
				"include":                 map[string]any{"names": []string{"^" + exe + "$"}, "match_type": "regexp"},
				"mute_process_all_errors": true,
				"metrics":                 map[string]any{"process.cpu.utilization": map[string]any{"enabled": true}},
			}}},
		},
		"exporters": map[string]any{"perfmodel": pm},
		"service": map[string]any{
			"extensions": []string{"injector"},
			"telemetry":  map[string]any{"metrics": map[string]any{"level": "none"}},
			"pipelines": map[string]any{
				"traces":  map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"perfmodel"}},
				"metrics": map[string]any{"receivers": []string{"hostmetrics"}, "exporters": []string{"perfmodel"}},
			},
		},
	}, apiAddr)
}
