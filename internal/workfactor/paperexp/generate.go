package paperexp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tierscope/tierscope/internal/workfactor"
)

// Noise is the measurement and background model. Powers are fractions of the
// machine's capacity Ω.
type Noise struct {
	// DemandCV is the coefficient of variation of one request's CPU demand.
	DemandCV float64
	// OSBackground is the mean operating-system and agent load per machine; each
	// machine's mean is drawn in [0.7, 1.3] times it.
	OSBackground float64
	// DriftSD is the standard deviation of a slow AR(1) drift of the background,
	// with time constant DriftTauSec.
	DriftSD     float64
	DriftTauSec float64
	// JitterSD is the per-second white noise of the background (its 1-minute mean
	// has JitterSD/√60).
	JitterSD float64
	// ProcessIdle is each server process's idle cost (timers, housekeeping).
	ProcessIdle float64
	// BurstsPerHour intermittent bursts per machine of BurstLoad for 20–60 s.
	BurstsPerHour float64
	BurstLoad     float64
	// MachineLagSec shifts the machine utilization minute after the throughput
	// minute; per-process readings are shifted by a uniform 0–ProcessLagMaxSec.
	MachineLagSec    int
	ProcessLagMaxSec int
	// Resolution rounds utilization readings (0 = exact).
	Resolution float64
}

// DefaultNoise is a lightly loaded server running three application server
// processes. Its steady background, 0.35% of Ω for the operating system and
// agents plus 0.1% idle cost per server process (0.65%, 30 standard MHz per
// machine), is calibrated on the bias the paper's own estimates show: in Table 9
// B is overestimated by 2.1–4.1 standard MC at about 13 requests per second per
// machine (28–54 MHz absorbed), in Table 7 A by 0.4–1.5 at about 18 (7–27 MHz).
// On top: a drift of 0.1% over half-hours, 1% per-second jitter, one burst of a
// whole core (25%) for 20–60 s every two hours per machine, demand CV 0.3, and
// readings lagging by 2 s (machine) and 0–10 s (process), rounded to 0.01%.
func DefaultNoise() Noise {
	return Noise{
		DemandCV:         0.3,
		OSBackground:     0.0035,
		DriftSD:          0.001,
		DriftTauSec:      1800,
		JitterSD:         0.01,
		ProcessIdle:      0.001,
		BurstsPerHour:    0.5,
		BurstLoad:        0.25,
		MachineLagSec:    2,
		ProcessLagMaxSec: 10,
		Resolution:       1e-4,
	}
}

// Scaled returns the noise with its background terms multiplied by k.
func (n Noise) Scaled(k float64) Noise {
	n.OSBackground *= k
	n.DriftSD *= k
	n.JitterSD *= k
	n.ProcessIdle *= k
	n.BurstsPerHour *= k
	return n
}

// Hyperthreading models §5.6: the machine's power is PowerFactor × Ω, and the
// reported utilization is Distort(true utilization).
type Hyperthreading struct {
	PowerFactor float64
	// Distort is a polynomial, constant term first.
	Distort []float64
}

// DefaultHyperthreading: 1.25 × the power, and a degree-3 distortion that
// reports 35% when half the power is delivered (the paper: "much less than one
// half"), d(u) = 0.55u + 0.15u² + 0.3u³, whose inverse fits a degree-3
// polynomial within 0.7% (the paper: "also fits a degree 3 polynomial very
// well").
func DefaultHyperthreading() *Hyperthreading {
	return &Hyperthreading{PowerFactor: 1.25, Distort: []float64{0, 0.55, 0.15, 0.3}}
}

// Config is one replay.
type Config struct {
	Scenario Scenario
	Noise    Noise
	Seed     uint64
	// RateScale multiplies every throughput (1: A at 35.5 requests per second).
	RateScale float64
	// SharedSessions makes every request of a session pick its flow in
	// proportion to the throughputs; by default each flow has its own Poisson
	// stream of sessions.
	SharedSessions bool
	// SessionRequests is the mean number of requests per session; ThinkSec the
	// mean think time.
	SessionRequests float64
	ThinkSec        float64
	// Hyperthreading, when set, distorts the readings (§5.6).
	Hyperthreading *Hyperthreading
}

// DefaultConfig replays the no-collinearity experiment with the default noise.
func DefaultConfig() Config {
	return Config{Scenario: NoCollinearity(), Noise: DefaultNoise(), Seed: 1, RateScale: 1, SessionRequests: 3, ThinkSec: 7}
}

// rateOfA is flow A's throughput in Tables 6–9 (requests per second).
const rateOfA = 35.5

// Period is one minute of the replay.
type Period struct {
	// Index numbers periods from 1, warm-up included.
	Index int64
	// Phase is 1-based; 0 is the warm-up.
	Phase int
	// Tail is false in the transient stage.
	Tail bool
	// Machines and Processes are the readings for machine and per-process mode.
	Machines  []workfactor.Observation
	Processes []workfactor.Observation
	// TrueAlpha is each flow's work factor; Rate its total throughput (requests
	// per second) in the period.
	TrueAlpha map[string]float64
	Rate      map[string]float64
	// TruePowerMHz is the power the flows' requests drew in the period.
	TruePowerMHz map[string]float64
}

// Run is a whole replay.
type Run struct {
	Config  Config
	Flows   []string
	Periods []Period
	// MinUtil and MaxUtil are the extreme machine utilization readings (scored
	// periods).
	MinUtil, MaxUtil float64
}

type proc struct {
	machine, cluster, name string
	mi                     int
}

// Generate runs the replay. The same configuration always gives the same run.
func Generate(cfg Config) (*Run, error) {
	sc := cfg.Scenario
	if len(sc.Kinds) == 0 || sc.PhaseSec%60 != 0 || sc.WarmupSec%60 != 0 || sc.TransientSec%60 != 0 {
		return nil, fmt.Errorf("paperexp: scenario %q needs phases and whole minutes", sc.Name)
	}
	if cfg.RateScale <= 0 || cfg.SessionRequests < 1 || cfg.ThinkSec <= 0 {
		return nil, fmt.Errorf("paperexp: rate scale, session length and think time must be positive")
	}
	g := &generator{cfg: cfg, sc: sc, rng: rand.New(rand.NewPCG(cfg.Seed, 0x9fd81a594037fef0)), nf: len(sc.Flows)}
	if err := g.layout(); err != nil {
		return nil, err
	}
	g.allocate()
	g.sessions()
	g.background()
	g.processIdle()
	return g.periods(), nil
}

// generator is one run in progress: the layout, and the CPU per second and
// request counts per period that the steps fill in.
type generator struct {
	cfg Config
	sc  Scenario
	rng *rand.Rand
	nf  int
	// procs are the server processes, one per (machine, cluster), machines in
	// order; flowProcs each flow's processes.
	procs     []proc
	flowProcs [][]int
	// cum is the flows' cumulative share of the requests; totalRate the
	// requests per second of all flows.
	cum       []float64
	totalRate float64
	// warm, total and nPeriods: the warm-up and the run, in seconds, and the
	// run in periods of 60 s.
	warm, total, nPeriods int
	omega, power          float64
	// machCPU and procCPU are the CPU per second, standard megacycles, of each
	// machine and process; counts[period][proc·nf+flow] the requests served;
	// truePower[period][flow] the flows' true CPU, MHz.
	machCPU, procCPU [][]float64
	counts           [][]int32
	truePower        [][]float64
}

// pad is how far the CPU series run past the end: readings lag.
const pad = 120

// layout places the processes and derives the flows' request mix: flow A
// runs at RateScale × rateOfA requests per second, the others in proportion
// to their Rel.
func (g *generator) layout() error {
	sc := g.sc
	clusterProcs := map[string][]int{}
	for mi, m := range Machines {
		for _, c := range sc.Placement[m] {
			clusterProcs[c] = append(clusterProcs[c], len(g.procs))
			g.procs = append(g.procs, proc{machine: m, cluster: c, name: "server-" + c, mi: mi})
		}
	}
	g.flowProcs = make([][]int, g.nf)
	relTotal, relA := 0.0, 0.0
	for i, f := range sc.Flows {
		g.flowProcs[i] = clusterProcs[f.Cluster]
		if len(g.flowProcs[i]) == 0 {
			return fmt.Errorf("paperexp: cluster %s of flow %s is placed nowhere", f.Cluster, f.Name)
		}
		relTotal += f.Rel
		if f.Name == "A" {
			relA = f.Rel
		}
	}
	g.totalRate = g.cfg.RateScale * rateOfA * relTotal / relA
	g.cum = make([]float64, g.nf)
	acc := 0.0
	for i, f := range sc.Flows {
		acc += f.Rel / relTotal
		g.cum[i] = acc
	}
	g.warm = sc.WarmupSec
	g.total = g.warm + len(sc.Kinds)*sc.PhaseSec
	g.nPeriods = g.total / 60
	g.omega = float64(CapacityMHz)
	g.power = g.omega
	if g.cfg.Hyperthreading != nil {
		g.power *= g.cfg.Hyperthreading.PowerFactor
	}
	return nil
}

// allocate makes the CPU series and the per-period tables.
func (g *generator) allocate() {
	g.machCPU = make([][]float64, len(Machines))
	g.procCPU = make([][]float64, len(g.procs))
	for i := range g.machCPU {
		g.machCPU[i] = make([]float64, g.total+pad)
	}
	for i := range g.procCPU {
		g.procCPU[i] = make([]float64, g.total+pad)
	}
	g.counts = make([][]int32, g.nPeriods)
	for i := range g.counts {
		g.counts[i] = make([]int32, len(g.procs)*g.nf)
	}
	g.truePower = make([][]float64, g.nPeriods)
	for i := range g.truePower {
		g.truePower[i] = make([]float64, g.nf)
	}
}

// pickFlow draws a flow in proportion to its share of the requests.
func (g *generator) pickFlow() int {
	u := g.rng.Float64()
	i, _ := slices.BinarySearch(g.cum, u)
	return min(i, g.nf-1)
}

// kindsAt is the work-factor kind of each flow at second sec: the phase's,
// or during the warm-up WarmupKinds (the last phase's by default).
func (g *generator) kindsAt(sec int) []int {
	sc := g.sc
	if sec < g.warm {
		if sc.WarmupKinds != nil {
			return sc.WarmupKinds
		}
		return sc.Kinds[len(sc.Kinds)-1]
	}
	return sc.Kinds[(sec-g.warm)/sc.PhaseSec]
}

// sessions simulates the requests: sessions arrive as a Poisson process
// (rate totalRate/SessionRequests, from a 120 s lead-in so the first minute
// is in steady state, and on through the readings' lag); a session's length
// is geometric with mean SessionRequests, its think times exponential with
// mean ThinkSec. Each request costs its kind's work factor (Gamma-distributed
// with DemandCV) on a random process of its flow.
func (g *generator) sessions() {
	cfg := g.cfg
	cv := cfg.Noise.DemandCV
	shape := 1.0
	if cv > 0 {
		shape = 1 / (cv * cv)
	}
	sessionRate := g.totalRate / cfg.SessionRequests
	pNext := 1 - 1/cfg.SessionRequests // geometric: continue with this probability
	lead := 120.0
	horizon := float64(g.total + pad)
	rng := g.rng
	for t := -lead + rng.ExpFloat64()/sessionRate; t < horizon; t += rng.ExpFloat64() / sessionRate {
		flow := -1
		if !cfg.SharedSessions {
			flow = g.pickFlow()
		}
		rt := t
		for {
			if rt >= 0 && rt < horizon {
				g.request(flow, int(rt), cv, shape)
			}
			if rng.Float64() >= pNext {
				break
			}
			rt += rng.ExpFloat64() * cfg.ThinkSec
			if rt >= horizon {
				break
			}
		}
	}
}

// request serves one request of flow (drawn now when negative) at second sec.
func (g *generator) request(flow, sec int, cv, shape float64) {
	f := flow
	if f < 0 {
		f = g.pickFlow()
	}
	kind := g.kindsAt(min(sec, g.total-1))[f]
	cost := KindAlpha[kind]
	if cv > 0 {
		cost *= gamma(g.rng, shape) / shape
	}
	ps := g.flowProcs[f]
	p := ps[g.rng.IntN(len(ps))]
	g.procCPU[p][sec] += cost
	g.machCPU[g.procs[p].mi][sec] += cost
	if period := sec / 60; period < g.nPeriods {
		g.counts[period][p*g.nf+f]++
		g.truePower[period][f] += cost / 60
	}
}

// background adds each machine's background: a base of OSBackground·Ω
// (× 0.7–1.3), an AR(1) drift (DriftSD, DriftTauSec), white jitter
// (JitterSD) and bursts of BurstLoad for 20–60 s (BurstsPerHour).
func (g *generator) background() {
	nz, omega, rng := g.cfg.Noise, g.omega, g.rng
	phi := 0.0
	if nz.DriftTauSec > 0 {
		phi = math.Exp(-1 / nz.DriftTauSec)
	}
	for mi := range Machines {
		base := nz.OSBackground * omega * (0.7 + 0.6*rng.Float64())
		drift := nz.DriftSD * omega * rng.NormFloat64()
		burstLeft := 0
		for s := 0; s < g.total+pad; s++ {
			drift = drift*phi + nz.DriftSD*omega*math.Sqrt(1-phi*phi)*rng.NormFloat64()
			load := base + drift + nz.JitterSD*omega*rng.NormFloat64()
			if burstLeft == 0 && nz.BurstsPerHour > 0 && rng.Float64() < nz.BurstsPerHour/3600 {
				burstLeft = 20 + rng.IntN(41)
			}
			if burstLeft > 0 {
				load += nz.BurstLoad * omega
				burstLeft--
			}
			g.machCPU[mi][s] += max(load, 0)
		}
	}
}

// processIdle adds each process's idle cost, ProcessIdle·Ω·(1 + N(0, ½²)),
// to it and its machine.
func (g *generator) processIdle() {
	nz := g.cfg.Noise
	for pi := range g.procs {
		for s := 0; s < g.total+pad; s++ {
			idle := max(nz.ProcessIdle*g.omega*(1+0.5*g.rng.NormFloat64()), 0)
			g.procCPU[pi][s] += idle
			g.machCPU[g.procs[pi].mi][s] += idle
		}
	}
}

// read is the utilization reading of the minute from second from: the mean
// CPU over the machine's power, distorted by hyperthreading and rounded to
// the reading's resolution.
func (g *generator) read(cpu []float64, from int) float64 {
	sum := 0.0
	for s := from; s < from+60; s++ {
		sum += cpu[s]
	}
	u := min(sum/(60*g.power), 1)
	if g.cfg.Hyperthreading != nil {
		u = min(max(workfactor.Polynomial(g.cfg.Hyperthreading.Distort, u), 0), 1)
	}
	if r := g.cfg.Noise.Resolution; r > 0 {
		u = math.Round(u/r) * r
	}
	return u
}

// periods assembles the periods: truth, and per machine and per process the
// observed rates and utilization readings (a process's lagged by up to
// ProcessLagMaxSec, a machine's by MachineLagSec).
func (g *generator) periods() *Run {
	run := &Run{Config: g.cfg, Flows: g.sc.FlowNames(), MinUtil: 1, MaxUtil: 0}
	for i := 0; i < g.nPeriods; i++ {
		run.Periods = append(run.Periods, g.period(run, i))
	}
	return run
}

func (g *generator) period(run *Run, i int) Period {
	sc, nz := g.sc, g.cfg.Noise
	start := i * 60
	p := Period{Index: int64(i + 1), TrueAlpha: map[string]float64{}, Rate: map[string]float64{}, TruePowerMHz: map[string]float64{}}
	if start >= g.warm {
		p.Phase = 1 + (start-g.warm)/sc.PhaseSec
		p.Tail = (start-g.warm)%sc.PhaseSec >= sc.TransientSec
	}
	kinds := g.kindsAt(start)
	for f, spec := range sc.Flows {
		p.TrueAlpha[spec.Name] = KindAlpha[kinds[f]]
		p.TruePowerMHz[spec.Name] = g.truePower[i][f]
	}
	for mi, m := range Machines {
		rates := map[string]float64{}
		for pi, pr := range g.procs {
			if pr.mi != mi {
				continue
			}
			prates := map[string]float64{}
			for f, spec := range sc.Flows {
				if c := g.counts[i][pi*g.nf+f]; c > 0 {
					prates[spec.Name] = float64(c) / 60
					rates[spec.Name] += float64(c) / 60
					p.Rate[spec.Name] += float64(c) / 60
				}
			}
			lag := 0
			if nz.ProcessLagMaxSec > 0 {
				lag = g.rng.IntN(nz.ProcessLagMaxSec + 1)
			}
			p.Processes = append(p.Processes, workfactor.Observation{Machine: m, Process: pr.name,
				CapacityMHz: g.power, Utilization: g.read(g.procCPU[pi], start+lag), Rates: prates})
		}
		u := g.read(g.machCPU[mi], start+nz.MachineLagSec)
		if p.Phase > 0 {
			run.MinUtil = min(run.MinUtil, u)
			run.MaxUtil = max(run.MaxUtil, u)
		}
		p.Machines = append(p.Machines, workfactor.Observation{Machine: m, CapacityMHz: g.power, Utilization: u, Rates: rates})
	}
	for _, spec := range sc.Flows {
		if _, ok := p.Rate[spec.Name]; !ok {
			p.Rate[spec.Name] = 0
		}
	}
	return p
}

// gamma draws a Gamma(shape, 1) variate (Marsaglia and Tsang).
func gamma(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		return gamma(rng, shape+1) * math.Pow(rng.Float64(), 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
