//go:build long

package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/tierscope/tierscope/testbed/config"
)

// The calibration of the work factors' truth: each transaction alone, at two
// closed-loop levels, before the load. The lower level is about a
// transaction's mean rate in the load (2 base users plus the random process
// at 1 s think time), the higher about three times that.
var (
	calibrationUsers = []int{4, 12}
	calibrationPhase = 15 * time.Second
	calibrationIdle  = 10 * time.Second
	calibrationThink = time.Second
)

// calibrationRun is one transaction alone at one level: the flows' requests
// it caused (the call graph of its completed transactions) and each
// service's CPU beyond idle, in megacycles.
type calibrationRun struct {
	tx       string
	users    int
	requests map[string]float64 // flow → requests
	cpuMc    map[string]float64 // service → Mc beyond its idle CPU
}

// flowCost is a flow's measured CPU per request in megacycles (burn and
// everything else the request costs its process: HTTP, tracing, SQLite, GC).
type flowCost struct {
	mc      float64         // over every calibration run
	byLevel map[int]float64 // over the runs of one level only
	runs    int             // calibration runs in which the flow had requests
	stderr  float64         // mc's standard error from the fit's residuals (in-mix calibration)
}

// calibrateFlows measures what each flow costs per request under load,
// independently of the regression: the processes' own CPU time (/proc) while
// one transaction runs alone, less the processes' idle CPU over the same
// time. With one transaction at a time, the web and app tiers serve one flow
// each; the db serves one query per transaction except PutBid, whose notify
// adds insert_notice to insert_bid, so the db's costs are the least-squares
// solution over the runs (exactly determined per level: six transactions, six
// queries). A run's CPU is read once the queue has no message left for the
// worker, whose db calls belong to the run. webURL is the front tier,
// queueURL the queue, cpuOf each service's CPU seconds (keys
// with a space, such as "db primary", are logged only).
// idle is each service's idle CPU (measureIdle).
func calibrateFlows(t *testing.T, cfg *config.Config, webURL, queueURL string, cpuOf func() map[string]float64, idle map[string]float64) map[string]*flowCost {
	t.Helper()
	mhz := cfg.MHz()
	var runs []calibrationRun
	for li, users := range calibrationUsers {
		for ti, tx := range cfg.Transactions {
			c0, t0 := cpuOf(), time.Now()
			n := driveClosedLoop(t, webURL+"/txn/"+tx.Name, users, calibrationThink, calibrationPhase, uint64(100*li+ti))
			backlog, waited := drainQueue(t, queueURL)
			time.Sleep(time.Second) // the worker's last db call and the last spans' export
			c1, el := cpuOf(), time.Since(t0).Seconds()
			r := calibrationRun{tx: tx.Name, users: users, requests: map[string]float64{}, cpuMc: map[string]float64{}}
			for flow, f := range workFactorTruth(cfg, map[string]int64{tx.Name: n}) {
				if f.requests > 0 {
					r.requests[flow] = float64(f.requests)
				}
			}
			for svc := range c0 {
				r.cpuMc[svc] = (c1[svc] - c0[svc] - idle[svc]*el) * mhz
			}
			t.Logf("calibration: %-8s alone, %2d users: %d transactions in %.1f s (queue backlog %d, drained in %v); Mc beyond idle: web %.0f, app %.0f, db %.0f (primary %.0f, backup %.0f)",
				tx.Name, users, n, el, backlog, waited.Round(10*time.Millisecond), r.cpuMc["web"], r.cpuMc["app"], r.cpuMc["db"], r.cpuMc["db primary"], r.cpuMc["db backup"])
			runs = append(runs, r)
		}
	}
	out := map[string]*flowCost{}
	for flow, mc := range solveFlowCosts(runs, nil) {
		out[flow] = &flowCost{mc: mc, byLevel: map[int]float64{}}
	}
	for _, users := range calibrationUsers {
		for flow, mc := range solveFlowCosts(runs, func(r calibrationRun) bool { return r.users == users }) {
			out[flow].byLevel[users] = mc
		}
	}
	for _, r := range runs {
		for flow := range r.requests {
			out[flow].runs++
		}
	}
	return out
}

// measureIdle warms every path (connection pools, SQLite's page cache, the
// heap), then returns each service's idle CPU in CPU seconds per second.
func measureIdle(t *testing.T, cfg *config.Config, webURL string, cpuOf func() map[string]float64) map[string]float64 {
	t.Helper()
	for i, tx := range cfg.Transactions {
		driveClosedLoop(t, webURL+"/txn/"+tx.Name, 2, calibrationThink/4, 2*time.Second, uint64(1000+i))
	}
	time.Sleep(time.Second)
	c0, t0 := cpuOf(), time.Now()
	time.Sleep(calibrationIdle)
	c1, el := cpuOf(), time.Since(t0).Seconds()
	idle := map[string]float64{}
	for svc := range c0 {
		idle[svc] = (c1[svc] - c0[svc]) / el
		if !strings.Contains(svc, " ") {
			t.Logf("calibration: %s idles at %.1f MHz", svc, idle[svc]*cfg.MHz())
		}
	}
	return idle
}

// The in-mix calibration: every transaction at mixUsers, and in turn one of
// them raised by mixBoost users; mixPhase each, the plain mix at the start,
// the middle and the end. With 5 users each the phases run at 26–31
// transactions a second, a little under the load's mean (32).
var (
	mixUsers = 5
	mixBoost = 6
	mixPhase = 25 * time.Second
)

// mixTruth is the work factors' truth: each flow's cost alone, times its
// service's mix factor, and, to check it, each flow's marginal cost fitted
// freely in the mix phases.
type mixTruth struct {
	known    map[string]*flowCost // alone × factor: the truth asserted
	marginal map[string]*flowCost // least squares over the mix phases, with standard errors
	factor   map[string]float64   // service → CPU of the mix phases over what the alone costs predict
	factorSE map[string]float64   // the factor's standard error over the phases
}

// calibrateInMix runs the mix phases (the whole mix, one transaction's rate
// raised at a time) and returns the truth measured with them, independently
// of the regression and before the load: /proc CPU time of each phase
// against the requests its completed transactions caused.
//
// A request costs a little less in the busy mix than alone (the alone costs
// overpredicted the mixed load's CPU by 2–13%, docs/workfactor-report.md).
// A service's factor is the mix phases' CPU over what the alone costs of
// their requests predict: the same discount for all of a service's flows,
// each flow's proportion from its precise calibration alone. The marginal
// costs fitted freely per flow (six per service from nine phases) carry
// standard errors of 3–12%, too wide to be the truth at a 15% tolerance;
// they are logged beside it, and agree with it within about two of those
// errors (docs/workfactor-report.md, fifth round).
func calibrateInMix(t *testing.T, cfg *config.Config, webURL, queueURL string, cpuOf func() map[string]float64, idle map[string]float64, alone map[string]*flowCost) mixTruth {
	t.Helper()
	runs := runMixPhases(t, cfg, webURL, queueURL, cpuOf, idle)
	costs, stderr := solveFlowCostsSE(runs, nil)
	mt := mixTruth{known: map[string]*flowCost{}, marginal: map[string]*flowCost{}, factor: map[string]float64{}, factorSE: map[string]float64{}}
	for flow, mc := range costs {
		mt.marginal[flow] = &flowCost{mc: mc, stderr: stderr[flow], runs: len(runs)}
	}
	for _, svc := range []string{"web", "app", "db"} {
		var cpu, pred float64
		var ratios []float64
		for _, r := range runs {
			p := 0.0
			for flow, n := range r.requests {
				if a := alone[flow]; a != nil && strings.HasPrefix(flow, svc+" ") {
					p += a.mc * n
				}
			}
			cpu, pred = cpu+r.cpuMc[svc], pred+p
			ratios = append(ratios, r.cpuMc[svc]/p)
		}
		mt.factor[svc] = cpu / pred
		mean, sd := stat.MeanStdDev(ratios, nil)
		mt.factorSE[svc] = sd / math.Sqrt(float64(len(ratios)))
		t.Logf("calibration in the mix: %s factor %.3f ± %.3f (mean of the phases' %.3f, %d phases)", svc, mt.factor[svc], mt.factorSE[svc], mean, len(ratios))
	}
	for flow, a := range alone {
		svc, _, _ := strings.Cut(flow, " ")
		known := *a
		known.mc = a.mc * mt.factor[svc]
		mt.known[flow] = &known
	}
	return mt
}

// runMixPhases runs the mix phases; each is a calibrationRun of the whole mix.
func runMixPhases(t *testing.T, cfg *config.Config, webURL, queueURL string, cpuOf func() map[string]float64, idle map[string]float64) []calibrationRun {
	t.Helper()
	mhz := cfg.MHz()
	boosts := []string{""}
	for i, tx := range cfg.Transactions {
		boosts = append(boosts, tx.Name)
		if i == len(cfg.Transactions)/2-1 {
			boosts = append(boosts, "")
		}
	}
	boosts = append(boosts, "")
	var runs []calibrationRun
	for k, boosted := range boosts {
		c0, t0 := cpuOf(), time.Now()
		counts := map[string]int64{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		var failure error
		for i, tx := range cfg.Transactions {
			users := mixUsers
			if tx.Name == boosted {
				users += mixBoost
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := closedLoop(webURL+"/txn/"+tx.Name, users, calibrationThink, mixPhase, uint64(5000+100*k+i))
				mu.Lock()
				defer mu.Unlock()
				counts[tx.Name] = n
				if err != nil && failure == nil {
					failure = err
				}
			}()
		}
		wg.Wait()
		if failure != nil {
			t.Fatalf("calibration in the mix: %v", failure)
		}
		backlog, waited := drainQueue(t, queueURL)
		time.Sleep(time.Second)
		c1, el := cpuOf(), time.Since(t0).Seconds()
		r := calibrationRun{tx: boosted, users: mixUsers, requests: map[string]float64{}, cpuMc: map[string]float64{}}
		for flow, f := range workFactorTruth(cfg, counts) {
			if f.requests > 0 {
				r.requests[flow] = float64(f.requests)
			}
		}
		for svc := range c0 {
			r.cpuMc[svc] = (c1[svc] - c0[svc] - idle[svc]*el) * mhz
		}
		what := "plain mix"
		if boosted != "" {
			what = fmt.Sprintf("mix, %s +%d users", boosted, mixBoost)
		}
		t.Logf("calibration in the mix: %-22s %v in %.1f s (queue backlog %d, drained in %v); Mc beyond idle: web %.0f, app %.0f, db %.0f",
			what, counts, el, backlog, waited.Round(10*time.Millisecond), r.cpuMc["web"], r.cpuMc["app"], r.cpuMc["db"])
		runs = append(runs, r)
	}
	return runs
}

// solveFlowCosts solves, per service, CPU(run) = Σ_flow cost(flow)·requests(flow, run)
// by least squares over the runs that keep selects (all when nil).
func solveFlowCosts(runs []calibrationRun, keep func(calibrationRun) bool) map[string]float64 {
	costs, _ := solveFlowCostsSE(runs, keep)
	return costs
}

// solveFlowCostsSE is solveFlowCosts with each cost's standard error from the
// fit's own residuals (0 when the runs determine the costs exactly).
func solveFlowCostsSE(runs []calibrationRun, keep func(calibrationRun) bool) (costs, stderr map[string]float64) {
	flowsOf := map[string][]string{}
	for _, r := range runs {
		if keep != nil && !keep(r) {
			continue
		}
		for flow := range r.requests {
			svc, _, _ := strings.Cut(flow, " ")
			if !slices.Contains(flowsOf[svc], flow) {
				flowsOf[svc] = append(flowsOf[svc], flow)
			}
		}
	}
	costs, stderr = map[string]float64{}, map[string]float64{}
	for svc, flows := range flowsOf {
		slices.Sort(flows)
		var rows []calibrationRun
		for _, r := range runs {
			served := slices.ContainsFunc(flows, func(f string) bool { return r.requests[f] > 0 })
			if (keep == nil || keep(r)) && served {
				rows = append(rows, r)
			}
		}
		if len(rows) < len(flows) {
			continue
		}
		a := mat.NewDense(len(rows), len(flows), nil)
		b := mat.NewVecDense(len(rows), nil)
		for i, r := range rows {
			for j, flow := range flows {
				a.Set(i, j, r.requests[flow])
			}
			b.SetVec(i, r.cpuMc[svc])
		}
		var x mat.VecDense
		if err := x.SolveVec(a, b); err != nil {
			continue
		}
		var ata, inv mat.Dense
		ata.Mul(a.T(), a)
		var resid mat.VecDense
		resid.MulVec(a, &x)
		resid.SubVec(b, &resid)
		dof := len(rows) - len(flows)
		invOK := inv.Inverse(&ata) == nil
		for j, flow := range flows {
			costs[flow] = x.AtVec(j)
			if dof > 0 && invOK {
				stderr[flow] = math.Sqrt(mat.Dot(&resid, &resid) / float64(dof) * inv.At(j, j))
			}
		}
	}
	return costs, stderr
}

// driveClosedLoop runs users emulated clients against url for d, each
// waiting an exponential think time (mean think) between requests, and
// returns the requests completed. Every request started is waited for, so
// that the CPU read afterwards covers all of them. A failed request fails the
// test: its CPU would be counted without its flows.
func driveClosedLoop(t *testing.T, url string, users int, think, d time.Duration, seed uint64) int64 {
	t.Helper()
	n, err := closedLoop(url, users, think, d, seed)
	if err != nil {
		t.Fatalf("calibration load on %s: %v", url, err)
	}
	return n
}

// closedLoop is driveClosedLoop without the test, for concurrent drivers: a
// failed request stops its client and is returned.
func closedLoop(url string, users int, think, d time.Duration, seed uint64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: users}}
	defer hc.CloseIdleConnections()
	var (
		wg       sync.WaitGroup
		done     atomic.Int64
		failOnce sync.Once
		failure  error
	)
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(u)))
			for ctx.Err() == nil {
				if err := getOK(hc, url); err != nil {
					failOnce.Do(func() { failure = fmt.Errorf("%s: %w", url, err) })
					return
				}
				done.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(rng.ExpFloat64() * float64(think))):
				}
			}
		}()
	}
	wg.Wait()
	return done.Load(), failure
}

func getOK(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	return nil
}

// levels is the flow's cost at each calibration level, for the log.
func (c *flowCost) levels() string {
	var parts []string
	for _, users := range calibrationUsers {
		if mc, ok := c.byLevel[users]; ok {
			parts = append(parts, fmt.Sprintf("%d users %.2f", users, mc))
		}
	}
	return strings.Join(parts, ", ")
}

// drainQueue waits until the queue at queueURL holds no message and every
// message published was consumed (at most 30 s), and returns the messages
// outstanding when called and how long they took.
func drainQueue(t *testing.T, queueURL string) (backlog int64, waited time.Duration) {
	t.Helper()
	outstanding := func() int64 {
		var stats map[string]struct {
			Depth     int64 `json:"depth"`
			Published int64 `json:"published"`
			Consumed  int64 `json:"consumed"`
			Dropped   int64 `json:"dropped"`
		}
		getJSON(t, queueURL+"/stats", &stats)
		var n int64
		for _, s := range stats {
			n += max(s.Depth, s.Published-s.Consumed-s.Dropped)
		}
		return n
	}
	start := time.Now()
	backlog = outstanding()
	for n := backlog; n > 0; n = outstanding() {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("calibration: the queue still holds %d messages after 30 s", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return backlog, time.Since(start)
}
