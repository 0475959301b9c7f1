//go:build long

package e2e

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/signature"
	"github.com/tierscope/tierscope/testbed/config"
	"github.com/tierscope/tierscope/testbed/load"
	"github.com/tierscope/tierscope/testbed/services"
)

// The models' windows: short, so a run of a minute or two gives enough periods
// (work factors) and enough utilization buckets per version (signatures: each
// window is one point of the profile; 5 buckets of ≥ 5 requests are required).
const (
	modelWindow = 5 * time.Second
	sigWindow   = 2 * time.Second
)

// perfmodelExporter is a perfmodel exporter config with a short window and a
// fast flush, its store in dir. hostName is its host_name: hostmetrics sets no
// host.name, and this names the machine its readings belong to.
func perfmodelExporter(apiAddr, dir, hostName string, window time.Duration, capacityMHz float64) map[string]any {
	cfg := map[string]any{
		"endpoint": apiAddr, "window": window.String(), "flush_interval": "1s", "trace_wait": "2s",
		"host_name": hostName,
		"storage":   map[string]any{"dsn": "sqlite://" + filepath.Join(dir, "perfmodel.db")},
	}
	if capacityMHz > 0 {
		cfg["capacity_mhz"] = capacityMHz
	}
	return cfg
}

func otlpReceiver(port int) map[string]any {
	return map[string]any{"protocols": map[string]any{"grpc": map[string]any{"endpoint": fmt.Sprintf("127.0.0.1:%d", port)}}}
}

// flowTruth is one flow's known burn and its share of the testbed's burn.
type flowTruth struct {
	mc, share float64
	requests  int64
}

// workFactorTruth derives every flow's true work factor from the testbed
// configuration: a request of a flow busy-loops cpu_mc megacycles at the
// configured MHz (thread CPU time), and with Ω = logical CPUs × that MHz the
// regression's α is in the same megacycles. Requests per flow follow the call
// graph from the load generator's per-transaction counts; the share is the
// flow's part of all burned megacycles (what "≥ 5% of CPU" refers to).
func workFactorTruth(cfg *config.Config, counts map[string]int64) map[string]*flowTruth {
	out := map[string]*flowTruth{}
	add := func(flow string, mc float64, n int64) {
		f := out[flow]
		if f == nil {
			f = &flowTruth{mc: mc}
			out[flow] = f
		}
		f.requests += n
	}
	query := func(name string, n int64) {
		q := cfg.Queries[name]
		add("db "+name, q.CPUMC, n)
		if q.Write && cfg.Replication != "none" {
			add("db "+name, q.CPUMC, n) // the backup serves the replicated write
		}
	}
	dbCalls := func(op config.Op, n int64) {
		for _, d := range op.DB {
			query(d.Query, n*int64(max(d.Count, 1)))
		}
	}
	for _, tx := range cfg.Transactions {
		n := counts[tx.Name]
		add("web "+tx.Name, tx.Web.CPUMC, n)
		for _, s := range tx.Steps {
			switch {
			case s.Call != "":
				m := n * int64(max(s.Count, 1))
				add("app "+s.Op, cfg.Ops[s.Op].CPUMC, m)
				dbCalls(cfg.Ops[s.Op], m)
			case s.Publish != "":
				dbCalls(cfg.Topics[s.Publish], n) // the worker's db calls; the worker itself serves no SERVER span
			}
		}
	}
	total := 0.0
	for _, f := range out {
		total += f.mc * float64(f.requests)
	}
	for _, f := range out {
		f.share = f.mc * float64(f.requests) / total
	}
	return out
}

// flowKey maps the exporter's flow name ("web GET /txn/Home", "app POST
// /op/catalog", "db POST /query/get_item") to the truth's ("web Home", ...).
func flowKey(flow string) string {
	service, _, _ := strings.Cut(flow, " ")
	return service + " " + flow[strings.LastIndexByte(flow, '/')+1:]
}

// runVaryingLoad drives every transaction from its own closed-loop generator
// in the nonstationary mix (fixed base users plus fig. 2's random process of
// random size and random on/off periods), each with its own seed, so the
// per-transaction rates change independently over the run: the regression
// needs rates that are not proportional to each other. The run is cut into
// segments, each a load run of its own: fig. 2's process makes about 4.5
// on/off cycles per run whatever its length, and with one run of 6 minutes a
// transaction whose few sizes happened to be close had too little variation
// to be told from the others (standard errors of 10–13% of its work factor).
func runVaryingLoad(t *testing.T, target string, cfg *config.Config, users int, think, d time.Duration, segments int, seed uint64) map[string]int64 {
	t.Helper()
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		counts = map[string]int64{}
		errs   int64
		fail   error
	)
	for i, tx := range cfg.Transactions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range segments {
				st, err := load.Run(context.Background(), load.Options{
					Target: target, Mode: "closed", Mix: "nonstationary", Users: users, Duration: d / time.Duration(segments),
					Seed: seed + uint64(i) + 100*uint64(j), Classes: map[string][]string{"browsing": {tx.Name}}, ThinkMean: think,
					RequestTimeout: 30 * time.Second, // the machine is shared: a starved tier is slow, not broken
				})
				mu.Lock()
				if err != nil {
					fail = err
					mu.Unlock()
					return
				}
				counts[tx.Name] += st.Transactions[tx.Name].Count
				errs += st.Errors
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if fail != nil {
		t.Fatal(fail)
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	// A failed request (a tier's 5 s call timeout on a starved machine) may
	// have burned part of its CPU. The truth is calibrated apart from this
	// load, and its server spans still count as requests, so one in a hundred
	// moves the regression by little; more means the testbed is broken.
	if errs > total/100 {
		t.Fatalf("the load had %d errors in %d requests (%v)", errs, total, counts)
	} else if errs > 0 {
		t.Logf("the load had %d errors in %d requests (tolerated up to 1%%)", errs, total)
	}
	return counts
}

// Issue 9 on the real testbed: every tier runs as its own process, the
// collector's hostmetrics process scraper reads each one's CPU, the tiers' SERVER
// spans give the request rates, and /api/v1/workfactors must find each flow's
// known cost: its CPU per request measured alone, times its service's
// discount in the mix, both measured before the load (calibrateFlows,
// calibrateInMix). Spans and readings meet on host.name/process.executable.name: the
// tiers' spans carry the machine's host name and their executable name, and
// host_name gives the hostmetrics resources the same host name.
//
// A second perfmodel instance in the same collector gets the same spans but only
// the machine's system.cpu.utilization (no process readings, so it stays in
// machine mode), for comparison only: on this shared machine other people's
// work is part of that utilization.
func TestWorkFactorsOnTestbed(t *testing.T) {
	b := newWorkfactorBench(t, "proc", "mach")
	cfg, dir, mhz, host, omega := b.cfg, b.dir, b.mhz, b.host, b.omega
	procAPI := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	machAPI := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	collectorCfg := map[string]any{
		"receivers": map[string]any{
			"otlp": otlpReceiver(b.otlpPort),
			"hostmetrics/proc": map[string]any{"collection_interval": "1s", "scrapers": map[string]any{"process": map[string]any{
				"include":                 map[string]any{"names": []string{"^tb"}, "match_type": "regexp"},
				"mute_process_all_errors": true,
				"metrics":                 map[string]any{"process.cpu.utilization": map[string]any{"enabled": true}},
			}}},
			"hostmetrics/machine": map[string]any{"collection_interval": "1s", "scrapers": map[string]any{"cpu": map[string]any{
				"metrics": map[string]any{"system.cpu.utilization": map[string]any{"enabled": true}},
			}}},
		},
		"exporters": map[string]any{
			"perfmodel/proc":    perfmodelExporter(procAPI, filepath.Join(dir, "proc"), host, modelWindow, omega),
			"perfmodel/machine": perfmodelExporter(machAPI, filepath.Join(dir, "mach"), host, modelWindow, omega),
		},
		"service": map[string]any{
			"telemetry": map[string]any{"metrics": map[string]any{"level": "none"}},
			"pipelines": map[string]any{
				"traces":          map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"perfmodel/proc", "perfmodel/machine"}},
				"metrics/proc":    map[string]any{"receivers": []string{"hostmetrics/proc"}, "exporters": []string{"perfmodel/proc"}},
				"metrics/machine": map[string]any{"receivers": []string{"hostmetrics/machine"}, "exporters": []string{"perfmodel/machine"}},
			},
		},
	}
	// The raw inputs too (every span, every per-second process reading), to
	// re-window offline: the samples CSV holds only the exporter's windows.
	if out := os.Getenv("WORKFACTOR_SAMPLES_DIR"); out != "" {
		exporters := collectorCfg["exporters"].(map[string]any)
		exporters["file/spans"] = map[string]any{"path": filepath.Join(out, "spans.jsonl")}
		exporters["file/cpu"] = map[string]any{"path": filepath.Join(out, "process-cpu.jsonl")}
		pipelines := collectorCfg["service"].(map[string]any)["pipelines"].(map[string]any)
		pipelines["traces"].(map[string]any)["exporters"] = []string{"perfmodel/proc", "perfmodel/machine", "file/spans"}
		pipelines["metrics/proc"].(map[string]any)["exporters"] = []string{"perfmodel/proc", "file/cpu"}
	}
	startModelsCollector(t, b.bin, collectorCfg, procAPI)

	tiers := b.startTiers(t)
	pids := map[string][]int{ // service → its tiers' processes
		"db": {tiers.pid["backup"], tiers.pid["primary"]}, "app": {tiers.pid["app1"], tiers.pid["app2"]}, "web": {tiers.pid["web"]},
	}
	db1PID, db2PID := tiers.pid["primary"], tiers.pid["backup"]
	cpuOf := func() map[string]float64 {
		out := map[string]float64{}
		for svc, ps := range pids {
			for _, p := range ps {
				out[svc] += processCPU(t, p)
			}
		}
		// The primary and the backup apart, for the calibration's log only.
		out["db primary"], out["db backup"] = processCPU(t, db1PID), processCPU(t, db2PID)
		return out
	}

	// The truth, measured before the load (models_truth_test.go): each flow's
	// CPU per request with its transaction alone, times its service's discount
	// in the whole mix; each flow's marginal cost in the mix is logged beside it.
	idle := measureIdle(t, cfg, tiers.web, cpuOf)
	alone := calibrateFlows(t, cfg, tiers.web, tiers.queue, cpuOf, idle)
	mix := calibrateInMix(t, cfg, tiers.web, tiers.queue, cpuOf, idle, alone)
	known := mix.known

	dur := wfDuration
	start := time.Now()
	cpu0 := cpuOf()
	// A 1 s think time keeps the tiers near half the machine with these burns,
	// so that they are not starved by each other (or by other work).
	counts := runVaryingLoad(t, tiers.web, cfg, 2, time.Second, dur, wfSegments, 9)
	end := time.Now()
	cpu1 := cpuOf()
	time.Sleep(5 * time.Second) // trace_wait, the SDKs' batch delay and a flush

	// Whole windows inside the load only: the first one is skipped (processes
	// warming up, the first utilization sample missing).
	w := int64(modelWindow / time.Second)
	from := (start.Unix()/w + 2) * w
	to := end.Unix() / w * w
	truth := workFactorTruth(cfg, counts)
	var total int64
	for _, n := range counts {
		total += n
	}
	t.Logf("load: %d requests in %v (%v); %d periods of %v; Ω = %d × %.0f MHz",
		total, end.Sub(start).Round(time.Second), counts, (to-from)/w, modelWindow, runtime.NumCPU(), mhz)
	// Additivity: the calibrated costs of the load's requests, plus idle, against
	// what /proc measured over the load, per service.
	for _, c := range []struct {
		what  string
		costs map[string]*flowCost
	}{{"known (alone × mix factor)", known}, {"alone", alone}, {"in-mix marginal", mix.marginal}} {
		predicted := map[string]float64{}
		for k, f := range truth {
			svc, _, _ := strings.Cut(k, " ")
			if fc := c.costs[k]; fc != nil {
				predicted[svc] += fc.mc * float64(f.requests)
			}
		}
		for _, svc := range []string{"web", "app", "db"} {
			used := (cpu1[svc] - cpu0[svc]) * mhz
			idleMc := idle[svc] * end.Sub(start).Seconds() * mhz
			t.Logf("%s: %.0f Mc of CPU (/proc) over the load; the %s costs of its requests plus idle predict %.0f (%+.1f%%)",
				svc, used, c.what, predicted[svc]+idleMc, 100*(predicted[svc]+idleMc-used)/used)
		}
	}

	check := func(apiAddr, what string) (worst float64, errs map[string]float64) {
		var wf api.WorkFactors
		getJSON(t, fmt.Sprintf("http://%s/api/v1/workfactors?from=%d&to=%d", apiAddr, from, to), &wf)
		errs = map[string]float64{}
		if len(wf.Machines) == 0 {
			t.Errorf("%s: no work factors at all", what)
			return math.Inf(1), errs
		}
		m := wf.Machines[0]
		t.Logf("%s: machines %s, R² %.3f", what, m.Machine, m.R2)
		got := map[string]api.FlowWorkFactor{}
		for _, f := range m.Flows {
			got[flowKey(f.Flow)] = f
		}
		keys := make([]string, 0, len(truth))
		for k := range truth {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			tr := truth[k]
			f, ok := got[k]
			if !ok {
				t.Logf("  %-16s share %5.1f%%  burn %5.2f Mc  no estimate", k, 100*tr.share, tr.mc)
				if tr.share >= 0.05 {
					errs[k] = math.Inf(1)
					worst = math.Inf(1)
				}
				continue
			}
			c := known[k]
			if c == nil {
				t.Errorf("%s: no calibrated cost", k)
				continue
			}
			want := c.mc
			e := (f.WorkFactor - want) / want
			marginal, marginalSE := math.NaN(), math.NaN()
			if m := mix.marginal[k]; m != nil {
				marginal, marginalSE = m.mc, m.stderr
			}
			t.Logf("  %-16s share %5.1f%%  known %6.2f Mc (burn %5.2f; alone %6.2f: %s; in-mix marginal %6.2f ± %.2f)  est %6.2f (raw %6.2f, g %.2f, combined %v)  error %+6.1f%% (raw %+6.1f%%; against alone %+6.1f%%, against the marginal %+6.1f%%)",
				k, 100*tr.share, want, tr.mc, alone[k].mc, c.levels(), marginal, marginalSE, f.WorkFactor, f.AlphaRaw, f.Goodness, f.Combined,
				100*e, 100*(f.AlphaRaw-want)/want, 100*(f.WorkFactor-alone[k].mc)/alone[k].mc, 100*(f.WorkFactor-marginal)/marginal)
			if tr.share >= 0.05 {
				errs[k] = e
				worst = max(worst, math.Abs(e))
			}
		}
		return worst, errs
	}
	// The regression's inputs, to replay offline (tierscope workfactor --in).
	if out := os.Getenv("WORKFACTOR_SAMPLES_DIR"); out != "" {
		for name, apiAddr := range map[string]string{"process": procAPI, "machine": machAPI} {
			saveSamples(t, fmt.Sprintf("http://%s%s?from=%d&to=%d", apiAddr, api.PathWorkFactorSamples, from, to), filepath.Join(out, "workfactor-samples-"+name+".csv"))
		}
	}
	worstProc, procErrs := check(procAPI, "per process")
	worstMach, _ := check(machAPI, "machine level (reported, not asserted)")
	t.Logf("worst error on flows ≥ 5%% of CPU: per process %.1f%%, machine level %.1f%%", 100*worstProc, 100*worstMach)
	if len(procErrs) == 0 {
		t.Fatal("no flow drew ≥ 5% of the CPU")
	}
	for k, e := range procErrs {
		if !(math.Abs(e) <= wfTolerance) {
			t.Errorf("%s: work factor off by %+.1f%%, want within ±%.0f%%", k, 100*e, 100*wfTolerance)
		}
	}
}

// saveSamples writes the CSV at url to path.
func saveSamples(t *testing.T, url, path string) {
	t.Helper()
	if err := os.WriteFile(path, getBody(t, url), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("work-factor samples: %s", path)
}

// Issue 10 on the real testbed: web v1, then web v2 (+2 ms of busy work on
// Home, testbed.yaml's versions), under the same nonstationary load; through
// the collector (spans, and the machine's CPU from hostmetrics), the comparison
// of web v2 against v1 must flag Home and nothing else. The spans carry no
// host.name: host_name keys them and the hostmetrics readings alike.
func TestSignatureCompareOnTestbed(t *testing.T) {
	bin := modelsCollectorBinary(t)
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	otlpPort := freePort(t)
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startModelsCollector(t, bin, map[string]any{
		"receivers": map[string]any{
			"otlp": otlpReceiver(otlpPort),
			"hostmetrics": map[string]any{"collection_interval": "1s", "scrapers": map[string]any{"cpu": map[string]any{
				"metrics": map[string]any{"system.cpu.utilization": map[string]any{"enabled": true}},
			}}},
		},
		"exporters": map[string]any{"perfmodel": perfmodelExporter(apiAddr, dir, "sighost", sigWindow, 0)},
		"service": map[string]any{
			"telemetry": map[string]any{"metrics": map[string]any{"level": "none"}},
			"pipelines": map[string]any{
				"traces":  map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"perfmodel"}},
				"metrics": map[string]any{"receivers": []string{"hostmetrics"}, "exporters": []string{"perfmodel"}},
			},
		},
	}, apiAddr)

	start := time.Now()
	for _, version := range []string{"v1", "v2"} {
		// How much of the machine's CPU the testbed (this process) used, and how
		// much everything else did: the signature's U is the machine's.
		m0, s0 := machineCPU(t), processCPU(t, os.Getpid())
		t0 := time.Now()
		runVersion(t, cfg, version, fmt.Sprintf("127.0.0.1:%d", otlpPort))
		m1, s1 := machineCPU(t), processCPU(t, os.Getpid())
		avail := time.Since(t0).Seconds() * float64(runtime.NumCPU())
		t.Logf("web %s: machine utilization %.2f, of which the testbed (this process) %.2f and the rest %.2f",
			version, (m1-m0)/avail, (s1-s0)/avail, ((m1-m0)-(s1-s0))/avail)
	}
	time.Sleep(5 * time.Second) // trace_wait, the SDKs' batch delay and a flush
	w := int64(sigWindow / time.Second)
	from, to := start.Unix()/w*w, (time.Now().Unix()/w+1)*w

	ms := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", *p)
	}
	// The profiles first: they say why a transaction has no signature (every
	// bucket above the utilization guard, or too few transactions per bucket).
	var sigs api.Signatures
	getJSON(t, "http://"+apiAddr+"/api/v1/signatures?"+url.Values{"service": {"web"}, "from": {fmt.Sprint(from)}, "to": {fmt.Sprint(to)}}.Encode(), &sigs)
	guard := 100 * signature.DefaultMaxUtilization
	for _, sg := range sigs.Signatures {
		for _, ts := range sg.Transactions {
			var n, above, nAbove, small, lo, hi float64 = 0, 0, 0, 0, 100, 0
			for _, b := range ts.Profile {
				n += b[1]
				lo, hi = min(lo, b[0]), max(hi, b[0])
				if b[0] >= guard {
					above++
					nAbove += b[1]
				} else if b[1] < signature.DefaultMinBucketCount {
					small++
				}
			}
			t.Logf("  signature web %s %-14s %-18s %s ms, %d buckets used of %d (U %.0f-%.0f%%; %.0f above the %.0f%% guard with %.0f%% of the %.0f requests; %.0f below it with < %d requests)",
				sg.Version, ts.Transaction, ts.Status, ms(ts.ServiceTimeMs), ts.BucketsUsed, len(ts.Profile), lo, hi,
				above, guard, 100*nAbove/max(n, 1), n, small, signature.DefaultMinBucketCount)
		}
	}

	var c api.Comparison
	q := url.Values{"service": {"web"}, "base": {"v1"}, "candidate": {"v2"}, "from": {fmt.Sprint(from)}, "to": {fmt.Sprint(to)}}
	getJSON(t, "http://"+apiAddr+"/api/v1/signatures/compare?"+q.Encode(), &c)
	seen := map[string]bool{}
	for _, tc := range c.Transactions {
		seen[tc.Transaction] = true
		t.Logf("  %-20s base %6s ms  candidate %6s ms  Δ %6s ms  %-17s confidence %.3f", tc.Transaction,
			ms(tc.BaseMs), ms(tc.CandidateMs), ms(tc.DeltaMs), tc.Verdict, tc.Confidence)
	}
	for _, tx := range cfg.Transactions {
		var tc *api.TransactionComparison
		for i := range c.Transactions {
			if strings.HasSuffix(c.Transactions[i].Transaction, "/"+tx.Name) {
				tc = &c.Transactions[i]
			}
		}
		switch {
		case tc == nil:
			t.Errorf("%s: not compared (transactions: %v)", tx.Name, seen)
		case tx.Name == "Home":
			if !tc.Changed || tc.DeltaMs == nil || *tc.DeltaMs < 1 || *tc.DeltaMs > 3 {
				t.Errorf("Home: want changed by about +2 ms, got %s (Δ %s ms)", tc.Verdict, ms(tc.DeltaMs))
			}
		case tc.Changed:
			t.Errorf("%s: flagged %s (Δ %s ms), but only Home changed", tx.Name, tc.Verdict, ms(tc.DeltaMs))
		case tc.Verdict != "unchanged":
			// Not a false alarm, but then the check would not show that the
			// comparison can tell an unchanged transaction.
			t.Errorf("%s: verdict %q, want unchanged", tx.Name, tc.Verdict)
		}
	}
}

// machineCPU is the machine's busy CPU time in seconds (all CPUs, everything
// but idle and iowait) from /proc/stat.
func machineCPU(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	busy := 0.0
	for i, v := range f[1:min(len(f), 9)] {
		if i == 3 || i == 4 {
			continue
		}
		var x float64
		fmt.Sscan(v, &x)
		busy += x
	}
	return busy / 100 // USER_HZ
}

// runVersion deploys the whole testbed (in this process) at version, sends its
// spans to the collector without host.name (the collector's host_name names
// the machine whose CPU it reads), runs the nonstationary load and stops it.
func runVersion(t *testing.T, cfg *config.Config, version, otlp string) {
	t.Helper()
	ctx := context.Background()
	var (
		mu  sync.Mutex
		tps []*sdktrace.TracerProvider
	)
	st, err := services.StartStack(services.StackOptions{
		Config: cfg, Version: version,
		TracerProvider: func(service, instance string) trace.TracerProvider {
			exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(otlp), otlptracegrpc.WithInsecure())
			if err != nil {
				t.Errorf("otlptracegrpc: %v", err)
				return nil
			}
			res := resource.NewSchemaless(attribute.String("service.name", service), attribute.String("service.instance.id", instance),
				attribute.String("service.version", version))
			tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
				sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(500*time.Millisecond), sdktrace.WithMaxQueueSize(50000)))
			mu.Lock()
			tps = append(tps, tp)
			mu.Unlock()
			return tp
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := load.Run(ctx, load.Options{
		Target: st.WebURL, Mode: "closed", Mix: "nonstationary", Users: sigUsers, Duration: sigDuration,
		Seed: 10, Classes: cfg.Classes(), ThinkMean: 250 * time.Millisecond,
	})
	closeCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if cerr := st.Close(closeCtx); cerr != nil {
		t.Errorf("stopping the testbed: %v", cerr)
	}
	for _, tp := range tps {
		if err := tp.Shutdown(closeCtx); err != nil {
			t.Errorf("flushing spans: %v", err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("web %s: %d requests, %d errors, %.0f/s", version, stats.Requests, stats.Errors, stats.Rate)
	if stats.Errors > 0 {
		t.Fatalf("the load had errors: %+v", stats)
	}
}
