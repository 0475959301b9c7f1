package workfactor

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Observation is one machine's reading for one period (machine mode) or one
// server process's (per-process mode, §4.6).
type Observation struct {
	// Machine names the machine; it is required.
	Machine string
	// Process names the server process on Machine, in per-process mode.
	Process string
	// CapacityMHz is Ω_m, the machine's power in standard MHz (standard
	// megacycles per second).
	CapacityMHz float64
	// Utilization is ρ in [0, 1]: the machine's CPU utilization, or in
	// per-process mode the process's share of the machine.
	Utilization float64
	// Rates maps each flow to its request rate on this machine (process), in
	// requests per second. Absent flows have rate 0.
	Rates map[string]float64
}

// key is the source key: the machine, or machine/process.
func (o *Observation) key() string {
	if o.Process == "" {
		return o.Machine
	}
	return o.Machine + "/" + o.Process
}

// ErrPeriodOrder is returned when a period does not follow the previous one.
var ErrPeriodOrder = errors.New("periods must increase")

// Estimator is the incremental work-factor estimator. Feed it one period at a
// time with AddPeriod; persist State and resume with Restore. It is not safe for
// concurrent use.
type Estimator struct {
	cfg     Config
	st      State
	flowIdx map[string]int
	srcIdx  map[string]int
}

// New returns an estimator with an empty state.
func New(cfg Config) (*Estimator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Estimator{cfg: cfg, flowIdx: map[string]int{}, srcIdx: map[string]int{}}
	e.st = State{Version: stateVersion, HalfLife: cfg.HalfLife, SmoothHalfLife: cfg.SmoothHalfLife}
	return e, nil
}

// Restore returns an estimator that continues from st (which it copies). The
// configuration's half-lives must be those st was aged with.
func Restore(cfg Config, st *State) (*Estimator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := st.check(); err != nil {
		return nil, err
	}
	if st.HalfLife != cfg.HalfLife || st.SmoothHalfLife != cfg.SmoothHalfLife {
		return nil, fmt.Errorf("state half-lives %v/%v differ from the configuration's %v/%v", st.HalfLife, st.SmoothHalfLife, cfg.HalfLife, cfg.SmoothHalfLife)
	}
	e := &Estimator{cfg: cfg, st: *st.Clone(), flowIdx: map[string]int{}, srcIdx: map[string]int{}}
	e.st.Version = stateVersion
	for i, f := range e.st.Flows {
		e.flowIdx[f] = i
	}
	for i, s := range e.st.Sources {
		e.srcIdx[s.Key] = i
	}
	return e, nil
}

// State returns a deep copy of the estimator's state.
func (e *Estimator) State() *State { return e.st.Clone() }

// Config returns the estimator's configuration.
func (e *Estimator) Config() Config { return e.cfg }

// row is one validated equation before aging.
type row struct {
	key, machine, process string
	y                     float64 // ρΩ, standard MHz
	capacity              float64 // Ω
	v                     float64 // f(ρ)
	flows                 []string
	rates                 []float64
}

// AddPeriod folds one period's observations into the state, solves the
// regression and updates the smoothing. Invalid observations are skipped and
// counted (Estimate.Counters): a NaN, infinite, negative or above-1 utilization;
// a capacity that is not a positive number; a NaN, infinite or negative rate;
// rates that are all zero (unless a background column is on); an observation of
// the wrong mode; a source given twice. Period numbers must increase; a gap
// counts the missing periods and only ages the data. A period with no usable
// observation ages the data and is not solved.
func (e *Estimator) AddPeriod(period int64, obs []Observation) (*Estimate, error) {
	if e.st.Started && period <= e.st.Period {
		return nil, fmt.Errorf("period %d after period %d: %w", period, e.st.Period, ErrPeriodOrder)
	}
	rows := e.validate(obs)
	if e.st.Started {
		e.st.Count.MissingPeriods += period - e.st.Period - 1
		e.ageWithMemory(period-e.st.Period, period)
	}
	e.st.Started = true
	e.st.Period = period
	e.dropStaleHeld(period)
	if len(rows) == 0 {
		e.st.Count.EmptyPeriods++
		e.pruneSources()
		return e.report(nil), nil
	}
	e.st.Count.Periods++
	e.st.Count.Equations += int64(len(rows))
	// Judge every equation against the previous period's model first, so that a
	// shift forgets the past before any of this period's equations is folded in.
	j := e.judge(rows, period)
	e.applyShifts(j, e.immediateShifts(rows, j, period), period)
	e.foldFitting(rows, j, period)
	e.evict(rows)
	e.pruneSources()
	results := e.solveAll()
	e.smooth(results)
	e.remember(results)
	return e.report(results), nil
}

// judgement is how a period's equations fit the last solve, per row: its
// source, its standardized misfit z and residual, whether it is suspect
// (z > ShiftSigma: held back) and whether its source's CUSUM alarmed.
type judgement struct {
	idx             []int
	sus, alarm      []bool
	z, resid, scale []float64
}

// judge predicts every row from the last solve (misfit), holds the suspect
// ones (z > ShiftSigma) and runs each source's CUSUM.
func (e *Estimator) judge(rows []row, period int64) judgement {
	n := len(rows)
	j := judgement{idx: make([]int, n), sus: make([]bool, n), alarm: make([]bool, n), z: make([]float64, n), resid: make([]float64, n), scale: make([]float64, n)}
	for i := range rows {
		r := &rows[i]
		si := e.source(r)
		j.idx[i] = si
		s := &e.st.Sources[si]
		s.Last, s.Capacity = period, r.capacity
		j.z[i], j.resid[i] = e.misfit(r, s)
		j.alarm[i], j.scale[i] = e.cusum(s, j.z[i], j.resid[i], period)
		if j.sus[i] = j.z[i] > e.cfg.ShiftSigma && e.cfg.ShiftSigma > 0; j.sus[i] {
			s.Held = append(s.Held, HeldRow{Period: period, Y: r.y, V: r.v, Flows: r.flows, Rates: r.rates, Resid: j.resid[i], Scale: j.scale[i]})
		}
	}
	return j
}

// immediateShifts returns the sources whose block shifts now: two or more
// sources of a block suspect at once, with misfits that one flow's change of
// work factor explains (r_s ≈ Δα·λ_k,s). A background burst hits one machine
// (or several, unrelated to the flows' rates), a changed work factor every
// machine of its flow in proportion to its rate there. Within the quiet window
// after a shift the model is young and mispredicts moderately; only a much
// larger misfit (3 × ShiftSigma) counts there (a change can follow a mixed
// period that looked like a smaller one).
func (e *Estimator) immediateShifts(rows []row, j judgement, period int64) map[int]bool {
	immediate := map[int]bool{}
	if n := countTrue(j.sus); n < 2 || !(e.cfg.ShiftSigma > 0) {
		return immediate
	}
	for _, b := range e.blocks() {
		var hit []int
		for i := range rows {
			quiet := period < e.st.Sources[j.idx[i]].QuietUntil
			if j.sus[i] && slices.Contains(b.sources, j.idx[i]) && (!quiet || j.z[i] > 3*e.cfg.ShiftSigma) {
				hit = append(hit, i)
			}
		}
		if len(hit) >= 2 && oneFlowExplains(rows, j.resid, hit) {
			immediate[j.idx[hit[0]]] = true
		}
	}
	return immediate
}

// applyShifts starts a new regime where a change is found: at once for the
// immediate ones (change point: the previous period); on a CUSUM alarm
// outside the quiet window (change point: the start of the CUSUM's
// excursion); after ShiftPeriods consecutive suspect periods (the first
// suspect period, which straddles the change and mixes both regimes, is
// thrown out). Within the quiet window a persistent misfit is more data of
// the young regime, and is folded in.
func (e *Estimator) applyShifts(j judgement, immediate map[int]bool, period int64) {
	for i := range j.idx {
		si := j.idx[i]
		if immediate[si] {
			e.shift(si, period, period-1, nil)
			continue
		}
		if j.alarm[i] && period >= e.st.Sources[si].QuietUntil {
			e.shiftAtAlarm(si, period)
			continue
		}
		if !j.sus[i] || len(e.st.Sources[si].Held) < e.cfg.ShiftPeriods {
			continue // not a shift (or folded by an earlier shift of its block)
		}
		if period < e.st.Sources[si].QuietUntil {
			e.foldHeld(si, period)
			continue
		}
		e.shift(si, period, e.st.Sources[si].Held[0].Period, nil)
	}
}

// foldFitting folds the rows that fit into the sums. A source whose suspect
// run is broken by a fitting row had intermittent background (§4.8): its held
// rows are thrown out.
func (e *Estimator) foldFitting(rows []row, j judgement, period int64) {
	for i := range rows {
		if j.sus[i] {
			continue // held, or folded by a shift
		}
		si := j.idx[i]
		if s := &e.st.Sources[si]; len(s.Held) > 0 {
			e.st.Count.Outliers += int64(len(s.Held))
			s.Held = nil
		}
		r := &rows[i]
		e.foldRow(si, HeldRow{Period: period, Y: r.y, V: r.v, Flows: r.flows, Rates: r.rates, Resid: j.resid[i], Scale: j.scale[i]}, period)
	}
}

// Current solves the regression on the present state without changing it (the
// smoothing is not updated): for a state restored or merged at query time.
func (e *Estimator) Current() *Estimate {
	if !e.st.Started {
		return e.report(nil)
	}
	return e.report(e.solveAll())
}

func (e *Estimator) validate(obs []Observation) []row {
	rows := make([]row, 0, len(obs))
	seen := map[string]bool{}
	c := &e.st.Count
	for i := range obs {
		o := &obs[i]
		if o.Machine == "" || (o.Process != "") != e.cfg.PerProcess {
			c.WrongMode++
			continue
		}
		rho := o.Utilization
		if math.IsNaN(rho) || rho < 0 || rho > 1+1e-9 {
			c.BadUtilization++
			continue
		}
		if !(o.CapacityMHz > 0) || math.IsInf(o.CapacityMHz, 0) {
			c.BadCapacity++
			continue
		}
		if len(e.cfg.UtilizationPolynomial) > 0 {
			rho = Polynomial(e.cfg.UtilizationPolynomial, rho)
		}
		rho = min(max(rho, 0), 1)
		r := row{key: o.key(), machine: o.Machine, process: o.Process, y: rho * o.CapacityMHz, capacity: o.CapacityMHz, v: 1}
		// §4.2 discounts an idle machine's noisy reading. A process's own
		// share is not noisier for being small, and weighing rows by a steep
		// function of the regressand biases the fit (package documentation).
		if !e.cfg.NoDiscount && !e.cfg.PerProcess {
			r.v = Discount(rho)
		}
		bad, nonzero := false, false
		for f, x := range o.Rates {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				bad = true
				break
			}
			if x > 0 {
				nonzero = true
				r.flows = append(r.flows, f)
			}
		}
		if bad {
			c.BadRate++
			continue
		}
		if !nonzero && (e.cfg.Background == BackgroundOff || e.cfg.Background == BackgroundAuto) {
			c.ZeroRates++
			continue
		}
		if seen[r.key] {
			c.Duplicate++
			continue
		}
		seen[r.key] = true
		slices.Sort(r.flows)
		r.rates = make([]float64, len(r.flows))
		for j, f := range r.flows {
			r.rates[j] = o.Rates[f]
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.key, b.key) })
	return rows
}

// flow returns the index of flow f, adding it if new.
func (e *Estimator) flow(f string) int {
	if i, ok := e.flowIdx[f]; ok {
		return i
	}
	k := len(e.st.Flows)
	c := make([]float64, (k+1)*(k+1))
	for i := 0; i < k; i++ {
		copy(c[i*(k+1):i*(k+1)+k], e.st.C[i*k:(i+1)*k])
	}
	e.st.C = c
	e.st.D = append(e.st.D, 0)
	if len(e.st.PrevC) > 0 {
		pc := make([]float64, (k+1)*(k+1))
		for i := 0; i < k; i++ {
			copy(pc[i*(k+1):i*(k+1)+k], e.st.PrevC[i*k:(i+1)*k])
		}
		e.st.PrevC = pc
		e.st.PrevD = append(e.st.PrevD, 0)
	}
	e.st.Flows = append(e.st.Flows, f)
	e.st.Smooth = append(e.st.Smooth, SmoothState{Until: e.st.Period + int64(math.Ceil(e.cfg.HalfLife))})
	e.flowIdx[f] = k
	return k
}

// source returns the index of the row's source, adding it if new.
func (e *Estimator) source(r *row) int {
	if i, ok := e.srcIdx[r.key]; ok {
		return i
	}
	e.st.Sources = append(e.st.Sources, SourceState{Key: r.key, Machine: r.machine, Process: r.process, RegimeStart: e.st.Period})
	e.srcIdx[r.key] = len(e.st.Sources) - 1
	return len(e.st.Sources) - 1
}

// foldAged adds one equation with row weight v (its aging weight times f(ρ));
// the aging weight alone is a, which N_h counts.
func (e *Estimator) foldAged(flows []string, rates []float64, y, v, a float64, si int) {
	idx := make([]int, len(flows))
	for j, f := range flows {
		idx[j] = e.flow(f)
	}
	k := len(e.st.Flows)
	s := &e.st.Sources[si]
	v2 := v * v
	s.N += a
	s.SY += v * y
	s.YY += v2 * y * y
	s.B0 += v2
	s.BY += v2 * y
	if len(s.SX) < k {
		s.SX = append(s.SX, make([]float64, k-len(s.SX))...)
		s.BX = append(s.BX, make([]float64, k-len(s.BX))...)
	}
	for p, i := range idx {
		xp := rates[p]
		s.SX[i] += v * xp
		s.BX[i] += v2 * xp
		e.st.D[i] += v2 * xp * y
		for q, j := range idx {
			e.st.C[i*k+j] += v2 * xp * rates[q]
		}
	}
}

// foldRow folds in an equation of period h.Period with its aging weight, and
// remembers it among the source's recent equations.
func (e *Estimator) foldRow(si int, h HeldRow, period int64) {
	e.foldWeighted(si, h, math.Exp2(-float64(period-h.Period)/e.cfg.HalfLife), period)
}

// foldWeighted folds in an equation with aging weight a, and remembers it
// among the source's recent equations and on its trail.
func (e *Estimator) foldWeighted(si int, h HeldRow, a float64, period int64) {
	e.foldAged(h.Flows, h.Rates, h.Y, a*h.V, a, si)
	if e.cfg.ShiftSigma == 0 && e.cfg.CusumThreshold == 0 {
		return
	}
	s := &e.st.Sources[si]
	if e.trailOn() {
		s.Trail = append(trimTrail(s.Trail, period), TrailRow{HeldRow: h, Weight: a})
	}
	keep := s.Recent[:0]
	for _, r := range s.Recent {
		if r.Period > period-int64(e.cfg.ShiftPeriods) {
			keep = append(keep, r)
		}
	}
	s.Recent = append(keep, h)
}

// oneFlowExplains reports whether some flow k explains, to 80% of their sum of
// squares, the misfits of two or more of the suspect rows hit as a change of
// its work factor, r_s ≈ Δα·λ_k,s: on the rows where k carries at least a tenth
// of the requests (a flow carrying few of a source's requests would need an
// absurd change to explain a large misfit; small flows' shifts are confirmed
// over periods instead).
func oneFlowExplains(rows []row, resid []float64, hit []int) bool {
	flows := map[string]bool{}
	for _, i := range hit {
		for _, f := range rows[i].flows {
			flows[f] = true
		}
	}
	for f := range flows {
		var on []int
		var rate []float64
		for _, i := range hit {
			if k, ok := slices.BinarySearch(rows[i].flows, f); ok && rows[i].rates[k] >= 0.1*rowRate(&rows[i]) {
				on = append(on, i)
				rate = append(rate, rows[i].rates[k])
			}
		}
		if len(on) < 2 {
			continue
		}
		var rl, ll, total float64
		for j, i := range on {
			rl += resid[i] * rate[j]
			ll += rate[j] * rate[j]
			total += resid[i] * resid[i]
		}
		delta := rl / ll
		left := 0.0
		for j, i := range on {
			d := resid[i] - delta*rate[j]
			left += d * d
		}
		if left <= 0.2*total {
			return true
		}
	}
	return false
}

func rowRate(r *row) float64 {
	sum := 0.0
	for _, x := range r.rates {
		sum += x
	}
	return sum
}

// misfit is a new equation's distance from the last solve's model, in σ_y
// (Config.ShiftSigma), and its residual; 0 when there is no model to judge by.
func (e *Estimator) misfit(r *row, s *SourceState) (z, resid float64) {
	if (e.cfg.ShiftSigma == 0 && e.cfg.CusumThreshold == 0) || !(s.Sigma2 > 0) {
		return 0, 0
	}
	// Flows the model does not know yet count for nothing, unless they carry
	// more than a tenth of the requests: then there is no prediction.
	pred, unknown, total := s.Bg, 0.0, 0.0
	for j, f := range r.flows {
		total += r.rates[j]
		i, ok := e.flowIdx[f]
		if !ok || !e.st.Smooth[i].RawOK {
			unknown += r.rates[j]
			continue
		}
		pred += r.rates[j] * e.st.Smooth[i].Raw
	}
	if unknown > 0.1*total {
		return 0, 0
	}
	// σ_y is floored at 0.1% of Ω: readings are rounded, and a near-exact fit
	// must not make every equation suspect.
	sigma := max(math.Sqrt(s.Sigma2), sigmaFloor*r.capacity)
	return math.Abs(r.y-pred) / sigma, r.y - pred
}

// sigmaFloor is the least σ_y shift detection assumes, as a fraction of Ω.
const sigmaFloor = 1e-3

// cusum advances the source's two-sided CUSUM (Page) by one standardized
// residual and reports an alarm. Residuals are capped at ShiftSigma − 1 (4 σ by
// default), so that one or two bursts of background work, which the outlier
// test throws out, cannot raise an alarm alone. No model (z = 0 and no
// residual) or the quiet window after a shift leaves the CUSUM at zero.
func (e *Estimator) cusum(s *SourceState, z, resid float64, period int64) (alarm bool, scale float64) {
	if e.cfg.CusumThreshold == 0 {
		return false, 0
	}
	if (z == 0 && resid == 0) || period < s.QuietUntil || float64(period-s.RegimeStart) < youngRegime*e.cfg.HalfLife {
		s.CusumPos, s.CusumNeg = 0, 0
		return false, 0
	}
	// A young model's own error is part of a prediction's (recursive residuals,
	// Brown, Durbin and Evans): without it, estimation error accumulates as if
	// it were a change. The scale is the source's own residual level (its
	// machine may be noisier than the block's pooled σ_y), learnt slowly so that
	// a change does not hide itself, and from residuals capped at the limit.
	lim := max(e.cfg.ShiftSigma-1, 4)
	pooled := math.Abs(resid) / z // the block's σ_y, floored
	w := resid / math.Sqrt(1+s.Leverage)
	if !(s.ResidVar > 0) {
		s.ResidVar = pooled * pooled
	}
	scale = math.Sqrt(s.ResidVar * (1 + s.Leverage))
	z = w / math.Sqrt(s.ResidVar)
	z = min(max(z, -lim), lim)
	c := min(max(w, -lim*pooled), lim*pooled)
	s.ResidVar += (c*c - s.ResidVar) / cusumMemory
	if s.CusumPos == 0 && s.CusumNeg == 0 {
		s.CusumStart = period
	}
	s.CusumPos = max(0, s.CusumPos+z-e.cfg.CusumDrift)
	s.CusumNeg = max(0, s.CusumNeg-z-e.cfg.CusumDrift)
	return s.CusumPos > e.cfg.CusumThreshold || s.CusumNeg > e.cfg.CusumThreshold, scale
}

// youngRegime is the age, in HalfLife, below which a regime is not kept as
// the previous one at a shift, and in which the CUSUM stays off.
const youngRegime = 4

// cusumMemory is the number of periods over which a source's own residual
// level is averaged for the CUSUM.
const cusumMemory = 50

// halfLife is the memory of a block whose current regime started at start:
// the periods since then, between HalfLife and MaxHalfLife.
func (e *Estimator) halfLife(start, period int64) float64 {
	if e.cfg.memoryFixed() {
		return e.cfg.HalfLife
	}
	return min(max(e.cfg.MemoryGrowth*float64(period-start), e.cfg.HalfLife), e.cfg.MaxHalfLife)
}

// ageWithMemory ages the sums by g periods, each block by its own half-life
// (Config.MaxHalfLife); flows and sources outside any block by HalfLife.
func (e *Estimator) ageWithMemory(g, period int64) {
	if e.cfg.memoryFixed() || g <= 0 {
		e.st.age(g)
		return
	}
	st := &e.st
	def := math.Exp2(-float64(g) / e.cfg.HalfLife)
	fa := make([]float64, len(st.Flows))
	sa := make([]float64, len(st.Sources))
	for i := range fa {
		fa[i] = def
	}
	for i := range sa {
		sa[i] = def
	}
	for _, b := range e.blocks() {
		a := math.Exp2(-float64(g) / e.halfLife(b.start, period-g))
		for _, i := range b.flows {
			fa[i] = a
		}
		for _, s := range b.sources {
			sa[s] = a
		}
	}
	k := len(st.Flows)
	for i := 0; i < k; i++ {
		for j := 0; j < k; j++ {
			st.C[i*k+j] *= fa[i] * fa[j]
			if math.Abs(st.C[i*k+j]) < 1e-290 {
				st.C[i*k+j] = 0
			}
		}
		st.D[i] *= fa[i] * fa[i]
	}
	for i := range st.Sources {
		src := &st.Sources[i]
		a := sa[i]
		a2 := a * a
		src.N *= a
		src.SY *= a
		src.SX = scale(src.SX, a)
		src.YY *= a2
		src.B0 *= a2
		src.BY *= a2
		src.BX = scale(src.BX, a2)
		ageTrail(src.Trail, a)
	}
	// The previous regime is evidence about the flows that did not change; it
	// fades at the longest memory.
	st.agePrev(math.Exp2(-float64(g) / e.cfg.MaxHalfLife))
	b := math.Exp2(-float64(g) / st.SmoothHalfLife)
	for i := range st.Smooth {
		st.Smooth[i].P *= b
		st.Smooth[i].Q *= b
	}
}

// dropStaleHeld throws out held equations of sources that gave none in the
// previous period: the run of suspect periods is broken.
func (e *Estimator) dropStaleHeld(period int64) {
	for i := range e.st.Sources {
		s := &e.st.Sources[i]
		if n := len(s.Held); n > 0 && s.Held[n-1].Period < period-1 {
			e.st.Count.Outliers += int64(n)
			s.Held = nil
		}
	}
}

// shift makes the block of source si forget its past (Config.ShiftForget) and
// folds in again the equations of the block's sources after period start, held
// or already folded; held ones up to start are thrown out. With a change
// point cp (at a CUSUM alarm, changePoint), the equations of the block's
// trails after cp.after are taken out of the previous regime and folded into
// the new one at the weight they had, in place of the recent ones.
func (e *Estimator) shift(si int, period, start int64, cp *changePoint) {
	e.st.Count.Shifts++
	eps := math.Exp2(-e.cfg.ShiftForget)
	eps2 := eps * eps
	sources := []int{si}
	for _, b := range e.blocks() {
		if !slices.Contains(b.sources, si) {
			continue
		}
		sources = b.sources
		k := len(e.st.Flows)
		in := make([]bool, k)
		for _, i := range b.flows {
			in[i] = true
		}
		// A regime younger than youngRegime half-lives is most likely the
		// aftermath of the change before (a model still converging): the
		// regime before that stays the previous one.
		if !e.cfg.memoryFixed() && float64(period-b.start) >= youngRegime*e.cfg.HalfLife {
			if e.renewPrevious(b) && cp != nil {
				e.subtractFromPrevious(b, cp.after)
			}
		}
		for i := 0; i < k; i++ {
			for j := 0; j < k; j++ {
				switch {
				case in[i] && in[j]:
					e.st.C[i*k+j] *= eps2
				case in[i] || in[j]:
					e.st.C[i*k+j] *= eps
				}
			}
			if in[i] {
				e.st.D[i] *= eps2
				// The smoothing is not forgotten here: each flow's is when its own
				// new estimate disagrees with it (see smooth).
				e.st.Smooth[i].Until = period + int64(math.Ceil(e.cfg.HalfLife))
			}
		}
	}
	for _, s := range sources {
		src := &e.st.Sources[s]
		src.N *= eps
		src.SY *= eps
		src.SX = scale(src.SX, eps)
		src.YY *= eps2
		src.B0 *= eps2
		src.BY *= eps2
		src.BX = scale(src.BX, eps2)
	}
	quiet := period + int64(math.Ceil(e.cfg.HalfLife))
	for _, s := range sources {
		src := &e.st.Sources[s]
		held, recent, trail := src.Held, src.Recent, src.Trail
		src.Held, src.Recent, src.Trail = nil, nil, nil
		src.QuietUntil = quiet
		src.RegimeStart = period
		src.CusumPos, src.CusumNeg = 0, 0
		if cp != nil {
			start, recent = cp.after, nil
			for _, t := range trail {
				if t.Period > start {
					e.foldMoved(s, t, period)
				}
			}
		}
		for _, h := range recent {
			if h.Period > start {
				e.foldRow(s, h, period)
			}
		}
		for _, h := range held {
			if h.Period > start {
				e.foldRow(s, h, period)
			} else {
				e.st.Count.Outliers++
			}
		}
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// renewPrevious chooses the block's previous regime at a shift, the data
// from which the flows that did not change are estimated alongside the new
// regime:
//   - no flow of the block was found changed (or new) during the ending
//     regime: the shift that started it was a false alarm, and the ending
//     regime and the one before are one (mergePrevious);
//   - else, when the last solve estimated every flow's increment at the
//     shift that started the ending regime, the previous regime is rewritten
//     in the ending regime's work factors (rebasePrevious) and the two are
//     merged: nothing is discarded, and a false alarm after a release no
//     longer leaves the released work factors to the few periods since it;
//   - else the ending regime replaces the previous one (keepPrevious) if it
//     holds at least as many aged equations (N_h); a short regime between
//     two shifts (often the first one's aftermath, mispredicted while its
//     changed flows were being found) would otherwise discard the long one
//     before it. A flow that changed at either shift differs from whichever
//     regime is kept, and the selection of acrossRegimes finds it.
//
// It reports whether the ending regime went into the previous one.
func (e *Estimator) renewPrevious(b block) (renewed bool) {
	switch {
	case len(e.st.PrevC) > 0 && !e.changedSince(b):
		e.mergePrevious(b)
	case len(e.st.PrevC) > 0 && e.rebasePrevious(b):
		e.mergePrevious(b)
	case b.nh >= b.pnh:
		e.keepPrevious(b)
	default:
		return false
	}
	return true
}

// changedSince reports whether any flow of the block started its smoothing
// afresh during the block's current regime: found changed, or new.
func (e *Estimator) changedSince(b block) bool {
	for _, i := range b.flows {
		if sm := e.st.Smooth[i]; sm.Since > 0 && sm.Since >= b.start {
			return true
		}
	}
	return false
}

// rebasePrevious rewrites the block's previous regime as if every flow had
// had, then, its work factor of the ending regime: each equation y = xᵀα
// becomes y + xᵀδ, δ the increments at the last shift. It reports false
// when the increments are not known for every flow of the block.
func (e *Estimator) rebasePrevious(b block) bool {
	st := &e.st
	k := len(st.Flows)
	delta := make([]float64, k)
	for _, i := range b.flows {
		if !st.Smooth[i].DeltaOK {
			return false
		}
		delta[i] = st.Smooth[i].Delta
	}
	// ΔYY = 2δᵀD + δᵀCδ over the block, with the old D.
	dyy := 0.0
	cd := make([]float64, k)
	for _, i := range b.flows {
		for _, j := range b.flows {
			cd[i] += st.PrevC[i*k+j] * delta[j]
		}
		dyy += 2*delta[i]*st.PrevD[i] + delta[i]*cd[i]
	}
	for _, i := range b.flows {
		st.PrevD[i] += cd[i]
	}
	b0 := 0.0
	for _, si := range b.sources {
		b0 += st.Sources[si].PrevB0
	}
	for _, si := range b.sources {
		src := &st.Sources[si]
		for i, x := range src.PrevBX {
			src.PrevBY += x * delta[i]
		}
		if b0 > 0 {
			src.PrevYY = max(src.PrevYY+dyy*src.PrevB0/b0, 0)
		}
	}
	return true
}

// mergePrevious adds the block's current sums to its previous regime.
func (e *Estimator) mergePrevious(b block) {
	st := &e.st
	k := len(st.Flows)
	for _, i := range b.flows {
		st.PrevD[i] += st.D[i]
		for _, j := range b.flows {
			st.PrevC[i*k+j] += st.C[i*k+j]
		}
	}
	for _, si := range b.sources {
		src := &st.Sources[si]
		src.PrevN += src.N
		src.PrevYY += src.YY
		src.PrevB0 += src.B0
		src.PrevBY += src.BY
		src.PrevBX = addInto(src.PrevBX, src.BX)
	}
}

// keepPrevious makes the block's current sums its previous regime, replacing
// the one before: a flow that did not change at this shift is then estimated
// from both regimes.
func (e *Estimator) keepPrevious(b block) {
	st := &e.st
	k := len(st.Flows)
	if len(st.PrevC) == 0 {
		st.PrevC = make([]float64, k*k)
		st.PrevD = make([]float64, k)
	}
	for _, i := range b.flows {
		st.PrevD[i] = st.D[i]
		for j := 0; j < k; j++ {
			st.PrevC[i*k+j], st.PrevC[j*k+i] = st.C[i*k+j], st.C[j*k+i]
		}
	}
	for _, si := range b.sources {
		src := &st.Sources[si]
		src.PrevN, src.PrevYY, src.PrevB0, src.PrevBY = src.N, src.YY, src.B0, src.BY
		src.PrevBX = slices.Clone(src.BX)
	}
}

// foldHeld folds in a source's held equations.
func (e *Estimator) foldHeld(si int, period int64) {
	held := e.st.Sources[si].Held
	e.st.Sources[si].Held = nil
	for _, h := range held {
		e.foldRow(si, h, period)
	}
}

// flowWeight is a flow's total aged rate sum, its importance for eviction.
func (e *Estimator) flowWeight(i int) float64 {
	w := 0.0
	for _, s := range e.st.Sources {
		if i < len(s.SX) {
			w += s.SX[i]
		}
	}
	return w
}

// evict enforces MaxFlows and MaxSources, sparing what this period reported
// when it can.
func (e *Estimator) evict(rows []row) {
	current := map[string]bool{}
	for _, r := range rows {
		for _, f := range r.flows {
			current[f] = true
		}
	}
	for len(e.st.Flows) > e.cfg.MaxFlows {
		victim, vw, vcur := -1, 0.0, true
		for i, f := range e.st.Flows {
			w, cur := e.flowWeight(i), current[f]
			// Prefer evicting flows not seen now, then the lightest, then by name.
			if victim < 0 || (vcur && !cur) || (cur == vcur && (w < vw || (w == vw && f < e.st.Flows[victim]))) {
				victim, vw, vcur = i, w, cur
			}
		}
		e.removeFlow(victim)
		e.st.Count.EvictedFlows++
	}
	for len(e.st.Sources) > e.cfg.MaxSources {
		victim := 0
		for i, s := range e.st.Sources {
			v := e.st.Sources[victim]
			if s.Last < v.Last || (s.Last == v.Last && (s.N < v.N || (s.N == v.N && s.Key < v.Key))) {
				victim = i
			}
		}
		e.removeSource(victim)
		e.st.Count.EvictedSources++
	}
}

// pruneSources drops sources whose aging weight is below 1e-12 (about 40
// half-lives without an equation): they no longer matter to any sum.
func (e *Estimator) pruneSources() {
	for i := len(e.st.Sources) - 1; i >= 0; i-- {
		if e.st.Sources[i].N < 1e-12 {
			e.removeSource(i)
			e.st.Count.EvictedSources++
		}
	}
}

// removeSource subtracts nothing from C and D: a source is removed either when
// its sums have aged to nothing, or under MaxSources pressure, where its old
// equations stay in C and D (the flows' statistics stay consistent) and only its
// scalars are lost.
func (e *Estimator) removeSource(i int) {
	e.st.Sources = slices.Delete(e.st.Sources, i, i+1)
	clear(e.srcIdx)
	for j, s := range e.st.Sources {
		e.srcIdx[s.Key] = j
	}
}

func (e *Estimator) removeFlow(i int) {
	k := len(e.st.Flows)
	c := make([]float64, 0, (k-1)*(k-1))
	for a := 0; a < k; a++ {
		if a == i {
			continue
		}
		for b := 0; b < k; b++ {
			if b != i {
				c = append(c, e.st.C[a*k+b])
			}
		}
	}
	e.st.C = c
	e.st.D = slices.Delete(e.st.D, i, i+1)
	if len(e.st.PrevC) > 0 {
		pc := make([]float64, 0, (k-1)*(k-1))
		for a := 0; a < k; a++ {
			for b := 0; b < k && a != i; b++ {
				if b != i {
					pc = append(pc, e.st.PrevC[a*k+b])
				}
			}
		}
		e.st.PrevC = pc
		e.st.PrevD = slices.Delete(e.st.PrevD, i, i+1)
	}
	e.st.Flows = slices.Delete(e.st.Flows, i, i+1)
	e.st.Smooth = slices.Delete(e.st.Smooth, i, i+1)
	for j := range e.st.Sources {
		s := &e.st.Sources[j]
		if i < len(s.SX) {
			s.SX = slices.Delete(s.SX, i, i+1)
		}
		if i < len(s.BX) {
			s.BX = slices.Delete(s.BX, i, i+1)
		}
		if i < len(s.PrevBX) {
			s.PrevBX = slices.Delete(s.PrevBX, i, i+1)
		}
	}
	clear(e.flowIdx)
	for j, f := range e.st.Flows {
		e.flowIdx[f] = j
	}
}
