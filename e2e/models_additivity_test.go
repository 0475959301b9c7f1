//go:build long

package e2e

import (
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const additivityTolerance = 0.10

// The work factors' truth (calibrateFlows) measures each transaction alone and
// assumes a request costs the same beside others. This checks that premise
// where the testbed's misses were (the db's replicated writes): phases of
// StoreBid alone, PutBid alone and both together, each process's CPU from
// /proc; the together phases must cost what the alone phases' per-transaction
// costs predict, within additivityTolerance. Measured: −4.8% to +3.2%
// (docs/workfactor-report.md, "The testbed").
func TestWorkFactorTruthIsAdditive(t *testing.T) {
	b := newWorkfactorBench(t, "proc")
	dir := b.dir
	procAPI := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startModelsCollector(t, b.bin, map[string]any{
		"receivers": map[string]any{"otlp": otlpReceiver(b.otlpPort)},
		"exporters": map[string]any{"perfmodel/proc": perfmodelExporter(procAPI, filepath.Join(dir, "proc"), b.host, modelWindow, b.omega)},
		"service": map[string]any{
			"telemetry": map[string]any{"metrics": map[string]any{"level": "none"}},
			"pipelines": map[string]any{"traces": map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"perfmodel/proc"}}},
		},
	}, procAPI)
	tiers := b.startTiers(t)
	pid := tiers.pid
	web := tiers.web
	procs := []string{"web", "app1", "app2", "primary", "backup", "worker"}
	cpuOf := func() map[string]float64 {
		out := map[string]float64{}
		for _, p := range procs {
			out[p] = processCPU(t, pid[p])
		}
		return out
	}
	for i, tx := range []string{"PutBid", "StoreBid"} {
		driveClosedLoop(t, web+"/txn/"+tx, 2, calibrationThink/4, 3*time.Second, uint64(1000+i))
	}
	phase := 20 * time.Second
	users := 6
	type ph struct {
		s, p   int   // users
		ns, np int64 // transactions
		mc     map[string]float64
	}
	plan := []ph{{s: users}, {p: users}, {s: users, p: users}, {p: users}, {s: users}, {s: users, p: users}, {s: 2 * users}, {s: 2 * users, p: users}, {s: users}}
	for k := range plan {
		pl := &plan[k]
		c0, t0 := cpuOf(), time.Now()
		var wg sync.WaitGroup
		var ns, np int64
		if pl.s > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ns = driveClosedLoop(t, web+"/txn/StoreBid", pl.s, calibrationThink, phase, uint64(10*k))
			}()
		}
		if pl.p > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				np = driveClosedLoop(t, web+"/txn/PutBid", pl.p, calibrationThink, phase, uint64(10*k+1))
			}()
		}
		wg.Wait()
		pl.ns, pl.np = ns, np
		drainQueue(t, tiers.queue)
		time.Sleep(time.Second)
		c1, el := cpuOf(), time.Since(t0).Seconds()
		pl.mc = map[string]float64{}
		line := fmt.Sprintf("phase %d: StoreBid %2d users %4d tx, PutBid %2d users %4d tx, %.1f s; Mc:", k, pl.s, ns, pl.p, np, el)
		for _, p := range procs {
			pl.mc[p] = (c1[p] - c0[p]) * b.mhz
			line += fmt.Sprintf(" %s %.0f", p, pl.mc[p])
		}
		t.Log(line)
	}
	for _, p := range procs[:5] { // the worker serves no flow of its own
		var storeMc, putMc float64
		var stores, puts int64
		for _, pl := range plan {
			switch {
			case pl.p == 0:
				storeMc, stores = storeMc+pl.mc[p], stores+pl.ns
			case pl.s == 0:
				putMc, puts = putMc+pl.mc[p], puts+pl.np
			}
		}
		store, put := storeMc/float64(stores), putMc/float64(puts)
		for k, pl := range plan {
			if pl.s == 0 || pl.p == 0 {
				continue
			}
			want := store*float64(pl.ns) + put*float64(pl.np)
			dev := (pl.mc[p] - want) / want
			t.Logf("%-7s phase %d: %.0f Mc, the alone costs (StoreBid %.1f, PutBid %.1f Mc) predict %.0f (%+.1f%%)", p, k, pl.mc[p], store, put, want, 100*dev)
			if math.Abs(dev) > additivityTolerance {
				t.Errorf("%s phase %d: together %+.1f%% from the alone costs, want within ±%.0f%%", p, k, 100*dev, 100*additivityTolerance)
			}
		}
	}
}
