package gradientsim

import (
	"fmt"
	"math"

	"github.com/tierscope/tierscope/internal/spectral"
)

// FrontBack is paper 000 §4's micro-benchmark: one client sends requests one
// at a time to a front end, which calls one back end synchronously over the
// link "front->back"; the back end serves each for N(mean, std) seconds.
func FrontBack(seed uint64, mean, std float64) Config {
	return Config{
		Seed:         seed,
		Start:        1.7e9,
		Links:        map[string]float64{"front->back": 0.0005, "back->front": 0.0005},
		Servers:      map[string]Server{"back": {Kind: "delay", Service: Normal(mean, std)}},
		Transactions: map[string]Pattern{"T": {Front: "front", Calls: []Call{{Targets: []string{"back"}}}}},
		Clients:      []Clients{{Count: 1, Transactions: []string{"T"}}},
	}
}

// ReplayConfig is one run of the spectral method without the coordinator:
// train on a baseline, inject a square wave on one link, estimate.
type ReplayConfig struct {
	Train spectral.TrainConfig
	// Link is the link to perturb, Transaction the one to train on.
	Link, Transaction string
	// AmplitudeMs fixes the injected delay; 0 injects the plan's A_d.
	AmplitudeMs float64
	// Phase offsets the wave from the bin grid, as a fraction of a bin;
	// the estimate must not depend on it.
	Phase float64
}

// ReplayResult is what one replay measured.
type ReplayResult struct {
	Plan     *spectral.Plan
	Injected Injected
	// Spectral and TimeDomain are per transaction.
	Spectral   map[string]spectral.Estimate
	TimeDomain map[string]spectral.TimeDomain
	// Samples is the number of requests in the measurement window.
	Samples int
}

// Replay trains on the simulated system, then runs the active phase (k_d
// periods over N bins) with the requested delay, and estimates every
// transaction's gradient with equation 5 and with the on/off comparator.
func Replay(cfg Config, rc ReplayConfig) (ReplayResult, error) {
	s, err := New(cfg)
	if err != nil {
		return ReplayResult{}, err
	}
	tc := rc.Train
	// Size the bins on a first stretch, then simulate enough for M chunks.
	var base []spectral.Sample
	for len(spectral.Times(base, rc.Transaction)) < 50*tc.K+2 {
		s.RunUntil(s.Now() + 10)
		base = append(base, s.Drain()...)
		if s.Now()-cfg.Start > 1e6 {
			return ReplayResult{}, fmt.Errorf("sim: transaction %q is too rare", rc.Transaction)
		}
	}
	sizing, err := spectral.SizeBins(spectral.Times(base, rc.Transaction), tc.K)
	if err != nil {
		return ReplayResult{}, err
	}
	first := spectral.Times(base, rc.Transaction)[0]
	s.RunUntil(first + float64(tc.Chunks*tc.N+2)*sizing.BinSeconds*1.2 + 5)
	base = append(base, s.Drain()...)
	plan, err := spectral.Train(base, rc.Transaction, tc)
	if err != nil {
		return ReplayResult{}, err
	}
	amp := rc.AmplitudeMs
	if amp <= 0 {
		amp = plan.AmplitudeMs
	}
	// The active phase: wave from a point off the grid, window of N bins.
	winStart := math.Ceil(s.Now()) + 1
	s.RunUntil(winStart)
	s.Drain()
	w := Wave{Key: "active", Kind: "delay", Target: rc.Link, Amplitude: amp, Start: winStart - rc.Phase*plan.BinSeconds, Period: plan.PeriodSeconds, Cycles: plan.Kd + 1}
	if err := s.StartLease(w); err != nil {
		return ReplayResult{}, err
	}
	winEnd := winStart + float64(plan.N)*plan.BinSeconds
	s.RunUntil(winEnd)
	inj, err := s.StopLease("active")
	if err != nil {
		return ReplayResult{}, err
	}
	s.RunUntil(winEnd + 30) // let the last requests of the window finish
	got := s.Drain()
	r := ReplayResult{Plan: plan, Injected: inj, Spectral: map[string]spectral.Estimate{}, TimeDomain: map[string]spectral.TimeDomain{}}
	bins := map[string]*spectral.Bins{}
	for _, smp := range got {
		b := bins[smp.Transaction]
		if b == nil {
			b = spectral.NewBins(winStart, plan.BinSeconds, plan.N)
			bins[smp.Transaction] = b
		}
		if b.Add(smp.Time, smp.Ms) {
			r.Samples++
		}
	}
	for tx, b := range bins {
		mean, sigma, ok := plan.Baseline(tx)
		if !ok {
			continue
		}
		series, err := b.Series()
		if err != nil {
			continue
		}
		e, err := spectral.EstimateGradient(spectral.EstimateInput{Values: series.Values, Kd: plan.Kd, BaselineMean: mean, BaselineSigma: sigma,
			Chunks: plan.Chunks, Delta: inj.Mean, DeltaStdErr: inj.StdErr})
		if err != nil {
			return r, err
		}
		e.Samples, e.EmptyBins = series.Samples, series.Empty
		r.Spectral[tx] = e
		var txs []spectral.Sample
		for _, smp := range got {
			if smp.Transaction == tx {
				txs = append(txs, smp)
			}
		}
		if td, err := spectral.OnOff(txs, w.Start, w.Period, winStart, winEnd, inj.Mean); err == nil {
			r.TimeDomain[tx] = td
		}
	}
	return r, nil
}

// Patterns is the front calling one back end ("back", N(mean, std)) over
// "front->back" in the ways of paper 000 §2.1: Sync makes one synchronous
// call, Serial3 three in series, and Async sends a one-way message and
// replies after its own N(10 ms, 3 ms) of work. Serial3 has three clients,
// the others one each.
func Patterns(seed uint64, mean, std float64) Config {
	back := []string{"back"}
	return Config{
		Seed:    seed,
		Start:   1.7e9,
		Links:   map[string]float64{"front->back": 0.0005, "back->front": 0.0005},
		Servers: map[string]Server{"back": {Kind: "delay", Service: Normal(mean, std)}},
		Transactions: map[string]Pattern{
			"Sync":    {Front: "front", Calls: []Call{{Targets: back}}},
			"Serial3": {Front: "front", Calls: []Call{{Targets: back, Repeat: 3}}},
			"Async":   {Front: "front", Pre: Normal(0.010, 0.003), Calls: []Call{{Targets: back, Async: true}}},
		},
		Clients: []Clients{
			{Count: 1, Transactions: []string{"Sync"}},
			{Count: 3, Transactions: []string{"Serial3"}},
			{Count: 1, Think: Const(0.09), Transactions: []string{"Async"}},
		},
	}
}

// Balanced is the front balancing one transaction "LB" round-robin over two
// replicas "back1" and "back2" of N(mean, std), over "front->back1" and
// "front->back2", with two clients.
func Balanced(seed uint64, mean, std float64) Config {
	return Config{
		Seed:  seed,
		Start: 1.7e9,
		Links: map[string]float64{"front->back1": 0.0005, "back1->front": 0.0005, "front->back2": 0.0005, "back2->front": 0.0005},
		Servers: map[string]Server{
			"back1": {Kind: "delay", Service: Normal(mean, std)},
			"back2": {Kind: "delay", Service: Normal(mean, std)},
		},
		Transactions: map[string]Pattern{"LB": {Front: "front", Calls: []Call{{Targets: []string{"back1", "back2"}}}}},
		Clients:      []Clients{{Count: 2, Transactions: []string{"LB"}}},
	}
}

// PS is an open Poisson workload of rate requests per second whose one
// transaction "Cap" calls a processor-sharing CPU "cpu" of capacity c and
// frequency fMHz; each request needs Exp(workMc) megacycles. Its mean
// response time is workMc/(c·f − rate·workMc) seconds plus the links'
// 1 ms: linear in the capacity basis of paper 003 §III-C.
func PS(seed uint64, rate, workMc, c, fMHz float64) Config {
	return Config{
		Seed:         seed,
		Start:        1.7e9,
		Links:        map[string]float64{"front->cpu": 0.0005, "cpu->front": 0.0005},
		Servers:      map[string]Server{"cpu": {Kind: "ps", Work: Exp(workMc), Capacity: c, FreqMHz: fMHz}},
		Transactions: map[string]Pattern{"Cap": {Front: "front", Calls: []Call{{Targets: []string{"cpu"}}}}},
		Open:         []Open{{Rate: rate, Transactions: []string{"Cap"}}},
	}
}
