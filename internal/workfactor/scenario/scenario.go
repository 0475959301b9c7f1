// Package scenario generates synthetic work-factor problems with known truth
// and scores estimates against it: machines of known power serve flows of known
// CPU demand (work factor) at varying request rates; the utilization reading is
// the flows' CPU, plus a background (constant, or swinging), plus reading
// noise. It varies what issue 37 names (number of flows, utilization noise,
// collinear groups, background load, releases that change work factors) and
// more (machines, run length, how the rates move, utilization, the
// background's form and swing, the size of a release, flows that start
// late), and is deterministic for a seed. Evaluation only: no production code
// imports it.
package scenario

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tierscope/tierscope/internal/workfactor"
)

// Config describes one scenario.
type Config struct {
	// Machines and Flows are the numbers of machines and of request flows.
	Machines, Flows int
	// Periods is the length of the run, in periods.
	Periods int
	// Noise is the standard deviation of each utilization reading, as a fraction
	// of the machine (0.02 = 2 points of utilization).
	Noise float64
	// Background is the constant CPU not caused by any flow, as a fraction of
	// each machine; with BackgroundSameMHz, as a fraction of the mean machine,
	// the same MHz on every machine.
	Background        float64
	BackgroundSameMHz bool
	// BackgroundSwing makes the background follow a slow wave of ±Swing of
	// itself (0: constant; 1: between none and twice the mean), as
	// monitoring, garbage collection and batch jobs do.
	BackgroundSwing float64
	// Collinear is the number of flow pairs whose rates move together: the second
	// flow's rate is a fixed multiple of the first's, up to CollinearJitter.
	Collinear int
	// CollinearJitter is the relative noise between a collinear pair's rates.
	CollinearJitter float64
	// ReleaseAt is the fraction of the run at which a release changes the work
	// factors of ReleaseFlows flows (0 = no release).
	ReleaseAt    float64
	ReleaseFlows int
	// NewFlows flows (none of a collinear pair, none the release changes)
	// carry no requests before the period at NewFlowsAt of the run: endpoints
	// that a deployment adds.
	NewFlows   int
	NewFlowsAt float64
	// ReleaseFactor is the largest factor a release multiplies (or divides)
	// a changed work factor by; each factor is drawn from [1.25, ReleaseFactor]
	// (from [ReleaseFactor, 1.25] when below 1.25).
	ReleaseFactor float64
	// Utilization is the mean utilization of a machine from the flows.
	Utilization float64
	// RateSpread is the standard deviation of each flow's log rate, and
	// RateMemory its correlation from one period to the next (0: independent
	// periods). Each flow's rate also follows a wave of ±30%.
	RateSpread, RateMemory float64
	Seed                   uint64
}

// Default is the must-show scenario of issue 37: 3 machines, 7 flows, 2%
// utilization noise, a 1% background, one collinear pair, 400 periods.
func Default() Config {
	return Config{Machines: 3, Flows: 7, Periods: 400, Noise: 0.02, Background: 0.01,
		Collinear: 1, CollinearJitter: 0.01, Utilization: 0.35, RateSpread: 0.3, RateMemory: 0.95, ReleaseFactor: 2, Seed: 1}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Machines < 1 || c.Flows < 1 || c.Periods < 2:
		return fmt.Errorf("scenario: machines, flows ≥ 1 and periods ≥ 2, not %d, %d, %d", c.Machines, c.Flows, c.Periods)
	case 2*c.Collinear > c.Flows:
		return fmt.Errorf("scenario: %d collinear pairs need %d flows, have %d", c.Collinear, 2*c.Collinear, c.Flows)
	case !(c.Noise >= 0) || !(c.Background >= 0) || !(c.Utilization > 0 && c.Utilization+c.Background < 1):
		return fmt.Errorf("scenario: noise and background ≥ 0, utilization + background in (0, 1)")
	case !(c.RateSpread >= 0) || !(c.RateMemory >= 0 && c.RateMemory < 1):
		return fmt.Errorf("scenario: rate spread ≥ 0 and rate memory in [0, 1)")
	case !(c.ReleaseFactor > 1):
		return fmt.Errorf("scenario: release factor must exceed 1, not %v", c.ReleaseFactor)
	case c.ReleaseAt < 0 || c.ReleaseAt >= 1 || c.ReleaseFlows < 0 || c.ReleaseFlows > c.Flows:
		return fmt.Errorf("scenario: release at in [0, 1), release flows in [0, flows]")
	case !(c.BackgroundSwing >= 0 && c.BackgroundSwing <= 1):
		return fmt.Errorf("scenario: background swing in [0, 1], not %v", c.BackgroundSwing)
	case c.NewFlows < 0 || c.NewFlows > 0 && (c.NewFlows+c.ReleaseFlows+2*c.Collinear > c.Flows || !(c.NewFlowsAt > 0 && c.NewFlowsAt < 1)):
		return fmt.Errorf("scenario: new flows in [0, flows − release flows − 2·collinear pairs], starting at a fraction in (0, 1)")
	}
	return nil
}

// Flow is one flow's truth.
type Flow struct {
	Name string
	// Alpha is the work factor before the release and AlphaAfter after it, in
	// standard megacycles per request.
	Alpha, AlphaAfter float64
	// Group names the flow's collinear group ("" when alone).
	Group string
	// From is the first period with requests (1 unless Config.NewFlows).
	From int64
}

// Period is one period's observations and truth.
type Period struct {
	Index int64
	Obs   []workfactor.Observation
	// Rates is each flow's total rate over the machines, requests per second.
	Rates map[string]float64
	// BackgroundMHz is the background over all machines.
	BackgroundMHz float64
}

// Run is a generated scenario.
type Run struct {
	Config  Config
	Flows   []Flow
	Periods []Period
	// Release is the first period with the new work factors (0: none).
	Release int64
	// CapacityMHz is each machine's power.
	CapacityMHz []float64
	// Clamped counts readings that fell outside [0, 1] and were clamped.
	Clamped int
}

// AlphaAt is a flow's true work factor in a period.
func (r *Run) AlphaAt(f Flow, period int64) float64 {
	if r.Release > 0 && period >= r.Release {
		return f.AlphaAfter
	}
	return f.Alpha
}

// Generate builds the run.
func Generate(c Config) (*Run, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x37))
	run := &Run{Config: c}
	for m := 0; m < c.Machines; m++ {
		run.CapacityMHz = append(run.CapacityMHz, 2000+2000*rng.Float64())
	}
	share := drawFlows(rng, run)
	partner := pairFlows(rng, run)
	frac := placeFlows(rng, c, partner)
	base := baseRates(run, share, frac)
	drawRelease(rng, run)
	// The axes added later draw from streams of their own, so that a
	// scenario without them is the same as before they existed.
	drawNewFlows(rand.New(rand.NewPCG(c.Seed, 0x38)), run, partner)
	drawPeriods(rng, run, base, frac, partner)
	return run, nil
}

// drawFlows draws each flow's work factor, log-uniform in [2, 60]
// megacycles, and its share of the CPU, drawn independently of it (0.2 +
// Exp(1), normalised later), so that a costly flow may run at a low rate and
// a cheap one at a high rate.
func drawFlows(rng *rand.Rand, run *Run) []float64 {
	share := make([]float64, run.Config.Flows)
	for k := range share {
		share[k] = 0.2 + rng.ExpFloat64()
		run.Flows = append(run.Flows, Flow{Name: fmt.Sprintf("f%02d", k+1), Alpha: 2 * math.Pow(30, rng.Float64())})
	}
	return share
}

// pairFlows makes the collinear pairs: flows 2i and 2i+1 of a shuffle (so
// that pairs are not always the largest flows). partner[b] = a when b's
// rate follows a's; −1 otherwise.
func pairFlows(rng *rand.Rand, run *Run) []int {
	c := run.Config
	perm := rng.Perm(c.Flows)
	partner := make([]int, c.Flows)
	for k := range partner {
		partner[k] = -1
	}
	for i := 0; i < c.Collinear; i++ {
		a, b := perm[2*i], perm[2*i+1]
		partner[b] = a
		g := fmt.Sprintf("g%d", i+1)
		run.Flows[a].Group, run.Flows[b].Group = g, g
	}
	return partner
}

// placeFlows puts each flow on a random non-empty set of machines, with
// fixed fractions; a collinear pair shares its placement (it is one
// client's pair of calls).
func placeFlows(rng *rand.Rand, c Config, partner []int) [][]float64 {
	frac := make([][]float64, c.Flows)
	for k := 0; k < c.Flows; k++ {
		if frac[k] != nil {
			continue
		}
		frac[k] = placement(rng, c.Machines)
		if p := partner[k]; p >= 0 {
			frac[p] = frac[k]
		}
	}
	return frac
}

// baseRates sets each flow's base rate from its share of the fleet's
// utilization at its work factor: base_k = share_k/Σshare · U · ΣΩ / α_k.
// The busiest machine's mean is kept at most 50%, so that peaks of the rates
// (up to about twice the mean) stay below 100%: clamped readings are a
// different problem (Run.Clamped counts them).
func baseRates(run *Run, share []float64, frac [][]float64) []float64 {
	c := run.Config
	total := 0.0
	for _, s := range share {
		total += s
	}
	fleet := 0.0
	for _, cap := range run.CapacityMHz {
		fleet += cap
	}
	base := make([]float64, c.Flows)
	for k := range base {
		base[k] = share[k] / total * c.Utilization * fleet / run.Flows[k].Alpha
	}
	busiest := 0.0
	for m, cap := range run.CapacityMHz {
		load := c.Background * cap
		for k := range base {
			load += base[k] * frac[k][m] * run.Flows[k].Alpha
		}
		busiest = max(busiest, load/cap)
	}
	if busiest > 0.5 {
		for k := range base {
			base[k] *= (0.5 - c.Background) / (busiest - c.Background)
		}
	}
	return base
}

// drawRelease sets the release period and the work factors after it: the
// ReleaseFlows flows it changes are multiplied or divided by a factor
// between 1.25 and ReleaseFactor (0.5–0.8 or 1.25–2 by default: a release
// that matters).
func drawRelease(rng *rand.Rand, run *Run) {
	c := run.Config
	if c.ReleaseAt > 0 {
		run.Release = int64(math.Round(c.ReleaseAt*float64(c.Periods))) + 1
	}
	changed := map[int]bool{}
	for _, k := range rng.Perm(c.Flows)[:c.ReleaseFlows] {
		changed[k] = true
	}
	for k := range run.Flows {
		f := &run.Flows[k]
		f.AlphaAfter = f.Alpha
		if changed[k] {
			x := 1.25 + (c.ReleaseFactor-1.25)*rng.Float64()
			if rng.IntN(2) == 0 {
				x = 1 / x
			}
			f.AlphaAfter = f.Alpha * x
		}
	}
}

// drawNewFlows picks the Config.NewFlows flows that start late, among those
// in no collinear pair and not changed by the release.
func drawNewFlows(rng *rand.Rand, run *Run, partner []int) {
	c := run.Config
	for k := range run.Flows {
		run.Flows[k].From = 1
	}
	from := int64(math.Round(c.NewFlowsAt*float64(c.Periods))) + 1
	picked := 0
	for _, k := range rng.Perm(c.Flows) {
		f := &run.Flows[k]
		if picked == c.NewFlows {
			break
		}
		if f.Group != "" || partner[k] >= 0 || f.AlphaAfter != f.Alpha {
			continue
		}
		f.From = from
		picked++
	}
}

// drawPeriods generates the periods. Each flow's rate is a log-normal AR(1)
// (σ RateSpread, correlation RateMemory per period) times a daily-like wave with its
// own period and phase; a collinear partner's is a fixed multiple of its
// pair's (CollinearJitter). A machine's reading is its flows' CPU plus the
// background, plus N(0, Noise²), clamped to [0, 1].
func drawPeriods(rng *rand.Rand, run *Run, base []float64, frac [][]float64, partner []int) {
	c := run.Config
	logRate := make([]float64, c.Flows)
	phase := make([]float64, c.Flows)
	wave := make([]float64, c.Flows)
	for k := range logRate {
		logRate[k] = c.RateSpread * rng.NormFloat64()
		phase[k] = 2 * math.Pi * rng.Float64()
		wave[k] = 60 + 200*rng.Float64()
	}
	rho, spread := c.RateMemory, c.RateSpread
	bgRng := rand.New(rand.NewPCG(c.Seed, 0x39))
	bgPhase, bgWave := 2*math.Pi*bgRng.Float64(), 60+200*bgRng.Float64()
	for p := 1; p <= c.Periods; p++ {
		per := Period{Index: int64(p), Rates: map[string]float64{}}
		rate := make([]float64, c.Flows)
		for k := range rate {
			logRate[k] = rho*logRate[k] + math.Sqrt(1-rho*rho)*spread*rng.NormFloat64()
			if q := partner[k]; q >= 0 {
				continue
			}
			rate[k] = base[k] * math.Exp(logRate[k]-spread*spread/2) * (1 + 0.3*math.Sin(2*math.Pi*float64(p)/wave[k]+phase[k]))
		}
		for k := range rate {
			if q := partner[k]; q >= 0 {
				rate[k] = rate[q] * base[k] / base[q] * (1 + c.CollinearJitter*rng.NormFloat64())
			}
		}
		for k, f := range run.Flows {
			if int64(p) < f.From {
				rate[k] = 0
			}
		}
		swing := 1 + c.BackgroundSwing*math.Sin(2*math.Pi*float64(p)/bgWave+bgPhase)
		per.Obs, per.BackgroundMHz = observe(rng, run, rate, frac, int64(p), swing)
		for k, f := range run.Flows {
			per.Rates[f.Name] = rate[k]
		}
		run.Periods = append(run.Periods, per)
	}
}

// observe returns each machine's observation of one period.
// swing scales the background.
func observe(rng *rand.Rand, run *Run, rate []float64, frac [][]float64, period int64, swing float64) (obs []workfactor.Observation, background float64) {
	c := run.Config
	meanCapacity := meanOf(run.CapacityMHz)
	for m := 0; m < c.Machines; m++ {
		o := workfactor.Observation{Machine: fmt.Sprintf("m%d", m+1), CapacityMHz: run.CapacityMHz[m], Rates: map[string]float64{}}
		mhz := c.Background * swing * run.CapacityMHz[m]
		if c.BackgroundSameMHz {
			mhz = c.Background * swing * meanCapacity
		}
		background += mhz
		for k, f := range run.Flows {
			if frac[k][m] == 0 || period < f.From {
				continue
			}
			x := rate[k] * frac[k][m]
			o.Rates[f.Name] = x
			mhz += x * run.AlphaAt(f, period)
		}
		u := mhz/run.CapacityMHz[m] + c.Noise*rng.NormFloat64()
		if u < 0 || u > 1 {
			run.Clamped++
		}
		o.Utilization = min(max(u, 0), 1)
		obs = append(obs, o)
	}
	return obs, background
}

func meanOf(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// placement spreads a flow over a random non-empty subset of the machines.
func placement(rng *rand.Rand, machines int) []float64 {
	f := make([]float64, machines)
	sum := 0.0
	for sum == 0 {
		for m := range f {
			f[m] = 0
			if rng.Float64() < 0.6 {
				f[m] = 0.5 + rng.Float64()
				sum += f[m]
			}
		}
	}
	for m := range f {
		f[m] /= sum
	}
	return f
}
