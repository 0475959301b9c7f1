package workfactor

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// State is the estimator's persistent state: the aged sufficient statistics of
// the regression, which merge exactly, and the smoothing accumulators P and Q.
// Every field is exported so it can be stored as JSON; MarshalBinary gives a
// compact versioned encoding.
//
// Notation: an equation (one source in one period i, 1 = newest) has the row
// weight v = 2^((1−i)/h)·f(ρ), the scaled rates vλ_k and the scaled power vρΩ.
// Sums over every equation ever folded in:
//
//	C[k,l] = Σ v²λ_kλ_l          (C = XᵀX, K×K, row-major)
//	D[k]   = Σ v²λ_k ρΩ          (D = XᵀY)
//
// and per source:
//
//	N   = Σ 2^((1−i)/h)          (N_h of §3.4: the equations' aging weights)
//	SY  = Σ vρΩ                  (1ᵀY)
//	YY  = Σ (vρΩ)²               (YᵀY)
//	SX  = Σ vλ_k                 (1ᵀX, for X̄ = 1ᵀX/N_h, flow rejection and combining)
//	B0  = Σ v², BX = Σ v²λ_k, BY = Σ v²ρΩ   (the background column's entries)
//
// Folding in a period multiplies the squared sums by 2^(−2g/h) and the others by
// 2^(−g/h), g being the number of periods since the last one, then adds the new
// equations.
//
// # Merging
//
// Two states (shards that observed different machines, or the same machines in
// different periods) combine with Merge: both are first aged to the later of
// their periods, then flows are matched by name and sources by key, and every sum
// above is added. The merged regression statistics are exactly those one
// estimator would hold had it seen every equation of both, so a solve on them
// equals the single-instance solve. An equation seen by both shards (the same
// source in the same period) is counted twice: give every source to one shard.
// The smoothing accumulators P and Q are also aged and added, so the merged
// smoothed work factor is the Q-weighted mean of the shards' (exact when one
// shard holds all the smoothing, as when the other has only statistics).
type State struct {
	Version        int     `json:"version"`
	HalfLife       float64 `json:"half_life"`
	SmoothHalfLife float64 `json:"smooth_half_life"`
	// Started is false until the first period has been folded in.
	Started bool `json:"started"`
	// Period is the last period folded in; the sums are aged to it.
	Period  int64         `json:"period"`
	Flows   []string      `json:"flows"`
	C       []float64     `json:"c"`
	D       []float64     `json:"d"`
	Sources []SourceState `json:"sources"`
	Smooth  []SmoothState `json:"smooth"` // parallel to Flows
	Count   Counters      `json:"counters"`
	// PrevC and PrevD are C and D of the previous regime: the sums a block held
	// when its last change was detected (zero for flows of blocks that never
	// changed; empty until a first change). Flows that did not change are
	// estimated from both regimes (see package documentation).
	PrevC []float64 `json:"prev_c,omitempty"`
	PrevD []float64 `json:"prev_d,omitempty"`
}

// SourceState holds the per-source sums (see State). Its SX and BX are indexed
// like State.Flows and may be shorter (missing entries are zero).
type SourceState struct {
	Key     string    `json:"key"`
	Machine string    `json:"machine"`
	Process string    `json:"process,omitempty"`
	N       float64   `json:"n"`
	SY      float64   `json:"sy"`
	YY      float64   `json:"yy"`
	B0      float64   `json:"b0"`
	BY      float64   `json:"by"`
	SX      []float64 `json:"sx"`
	BX      []float64 `json:"bx"`
	// Last is the last period in which the source gave an equation.
	Last int64 `json:"last"`

	// Shift detection (see Config.ShiftSigma). Sigma2 is σ_y², the variance of
	// one unweighted equation's residual in the source's block at the last solve
	// (0: unknown); Bg the background power the last solve gave this source; Held
	// the suspect equations not yet folded in; QuietUntil the first period in
	// which detection is on again after a shift.
	Sigma2     float64   `json:"sigma2"`
	Bg         float64   `json:"bg"`
	Held       []HeldRow `json:"held,omitempty"`
	QuietUntil int64     `json:"quiet_until"`
	// Recent are the equations folded in during the last ShiftPeriods periods:
	// on a shift they are folded in again after the forgetting, since they
	// already belong to the new regime.
	Recent []HeldRow `json:"recent,omitempty"`
	// Capacity is the last Ω reported, in standard MHz.
	Capacity float64 `json:"capacity"`
	// RegimeStart is the period of the last detected change of the source's
	// block (or of its first equation): the memory grows from it
	// (Config.MaxHalfLife).
	RegimeStart int64 `json:"regime_start"`
	// CusumPos and CusumNeg are the two sides of the CUSUM of the source's
	// standardized residuals (Config.CusumThreshold); CusumStart is the first
	// period of the current excursion from zero, the estimated change point.
	CusumPos   float64 `json:"cusum_pos"`
	CusumNeg   float64 `json:"cusum_neg"`
	CusumStart int64   `json:"cusum_start"`
	// Leverage is the mean leverage of an equation in the last solve of the
	// source's block (columns/N_h): a prediction's error variance is
	// σ_y²(1 + Leverage), the parameters' uncertainty added to the noise.
	Leverage float64 `json:"leverage"`
	// PrevN, PrevYY, PrevB0, PrevBY and PrevBX are the source's sums of the
	// previous regime (see State.PrevC).
	PrevN  float64   `json:"prev_n,omitempty"`
	PrevYY float64   `json:"prev_yy,omitempty"`
	PrevB0 float64   `json:"prev_b0,omitempty"`
	PrevBY float64   `json:"prev_by,omitempty"`
	PrevBX []float64 `json:"prev_bx,omitempty"`
	// ResidVar is the source's own mean squared residual against the last
	// solves (exponentially weighted, 1/cusumMemory per period): machines of
	// different power, or readings of different quality, have different noise,
	// and the block's pooled σ_y would make the noisier ones drift.
	ResidVar float64 `json:"resid_var"`
	// Trail are the equations folded in since the regime started (at most
	// maxTrail periods, Config.ChangePoint other than ChangePointRecent),
	// oldest first: at a CUSUM alarm, those after the estimated change point
	// are moved out of the previous regime into the new one.
	Trail []TrailRow `json:"trail,omitempty"`
}

// HeldRow is a suspect equation awaiting confirmation (an outlier or the start
// of a shift).
type HeldRow struct {
	Period int64     `json:"period"`
	Y      float64   `json:"y"` // ρΩ
	V      float64   `json:"v"` // f(ρ)
	Flows  []string  `json:"flows"`
	Rates  []float64 `json:"rates"`
	// Resid is the equation's residual against the solve before it, and
	// Scale its standard deviation (σ_y·√(1 + leverage), the CUSUM's
	// divisor); 0: not judged (no model, or a young one).
	Resid float64 `json:"resid,omitempty"`
	Scale float64 `json:"scale,omitempty"`
}

// TrailRow is an equation folded into the sums and Weight, the aging weight
// it still has in them (its share of N_h; v = Weight·V in C and D).
type TrailRow struct {
	HeldRow
	Weight float64 `json:"weight"`
}

// SmoothState is P and Q of equation 8 for one flow, aged by 2^(−1/t) per
// period (one solve per period).
type SmoothState struct {
	P float64 `json:"p"`
	Q float64 `json:"q"`
	// Raw is the flow's coefficient in the last solve (the combined column's for
	// a combined flow, 0 for a rejected or singular one), used to predict new
	// equations for shift detection; RawOK is false when its block was not solved.
	Raw   float64 `json:"raw"`
	RawOK bool    `json:"raw_ok"`
	// Delta is the flow's increment at its block's last shift in the last
	// solve (the posterior mean); DeltaOK is false when it was not estimated.
	// At the next shift it rewrites the previous regime in the ending
	// regime's work factors (rebasePrevious).
	Delta   float64 `json:"delta,omitempty"`
	DeltaOK bool    `json:"delta_ok,omitempty"`
	// Until is the last period of the window after a shift of the flow's block
	// (or the flow's first appearance) in which an own estimate that disagrees
	// with the smoothed value by more than ShiftSigma standard errors makes the
	// smoothing forget P and Q.
	Until int64 `json:"until,omitempty"`
	// Since is the period of the first estimate folded into P and Q (after the
	// flow appeared, or after its smoothing was last forgotten); 0: none yet. A
	// smoothed value younger than HalfLife periods is not used as a prior.
	Since int64 `json:"since,omitempty"`
}

// Counters count what was skipped or evicted, cumulatively.
type Counters struct {
	// Periods folded in (with at least one equation), and periods given with no
	// usable observation.
	Periods      int64 `json:"periods"`
	EmptyPeriods int64 `json:"empty_periods"`
	// MissingPeriods counts the period numbers skipped between consecutive calls
	// (their absence only ages the data).
	MissingPeriods int64 `json:"missing_periods"`
	Equations      int64 `json:"equations"`
	// Observations skipped, by reason.
	BadUtilization int64 `json:"bad_utilization"`
	BadCapacity    int64 `json:"bad_capacity"`
	BadRate        int64 `json:"bad_rate"`
	ZeroRates      int64 `json:"zero_rates"`
	WrongMode      int64 `json:"wrong_mode"`
	Duplicate      int64 `json:"duplicate"`
	// UnsolvedBlocks counts block solves that produced no estimate (too few
	// equations for the columns, or every column singular).
	UnsolvedBlocks int64 `json:"unsolved_blocks"`
	// Evicted flows and sources (MaxFlows, MaxSources) and pruned ones (their
	// aged weight fell below 1e-12 of the total).
	EvictedFlows   int64 `json:"evicted_flows"`
	EvictedSources int64 `json:"evicted_sources"`
	// Outliers counts equations thrown out as intermittent background (§4.8):
	// suspect, and not followed by enough suspect periods to be a shift. Shifts
	// counts confirmed shifts, each of which made a block forget its past.
	Outliers int64 `json:"outliers"`
	Shifts   int64 `json:"shifts"`
}

func (c *Counters) add(o Counters) {
	c.Periods += o.Periods
	c.EmptyPeriods += o.EmptyPeriods
	c.MissingPeriods += o.MissingPeriods
	c.Equations += o.Equations
	c.BadUtilization += o.BadUtilization
	c.BadCapacity += o.BadCapacity
	c.BadRate += o.BadRate
	c.ZeroRates += o.ZeroRates
	c.WrongMode += o.WrongMode
	c.Duplicate += o.Duplicate
	c.UnsolvedBlocks += o.UnsolvedBlocks
	c.EvictedFlows += o.EvictedFlows
	c.EvictedSources += o.EvictedSources
	c.Outliers += o.Outliers
	c.Shifts += o.Shifts
}

// Skipped is the total number of observations skipped.
func (c Counters) Skipped() int64 {
	return c.BadUtilization + c.BadCapacity + c.BadRate + c.ZeroRates + c.WrongMode + c.Duplicate
}

// stateVersion 2 adds the adaptive memory and the CUSUM to SourceState;
// version 3 the trail of equations since the regime started and each held
// equation's residual. Older states are read with those at zero (empty).
// Version 4 changes only the encodings: an equation names its flows by index
// (both), and the JSON stores equations as columns (statejson.go). Version 5
// adds each flow's increment at the last shift (SmoothState.Delta).
const stateVersion = 5

// Clone returns a deep copy.
func (s *State) Clone() *State {
	c := *s
	c.Flows = slices.Clone(s.Flows)
	c.C = slices.Clone(s.C)
	c.D = slices.Clone(s.D)
	c.Smooth = slices.Clone(s.Smooth)
	c.PrevC = slices.Clone(s.PrevC)
	c.PrevD = slices.Clone(s.PrevD)
	c.Sources = make([]SourceState, len(s.Sources))
	for i, src := range s.Sources {
		src.SX = slices.Clone(src.SX)
		src.BX = slices.Clone(src.BX)
		src.PrevBX = slices.Clone(src.PrevBX)
		src.Held = cloneRows(src.Held)
		src.Recent = cloneRows(src.Recent)
		src.Trail = cloneTrail(src.Trail)
		c.Sources[i] = src
	}
	return &c
}

func cloneTrail(rows []TrailRow) []TrailRow {
	rows = slices.Clone(rows)
	for j := range rows {
		rows[j].HeldRow = rows[j].HeldRow.clone()
	}
	return rows
}

func cloneRows(rows []HeldRow) []HeldRow {
	rows = slices.Clone(rows)
	for j := range rows {
		rows[j] = rows[j].clone()
	}
	return rows
}

// clone copies the row's slices, so that the copy shares nothing.
func (r HeldRow) clone() HeldRow {
	r.Flows, r.Rates = slices.Clone(r.Flows), slices.Clone(r.Rates)
	return r
}

// check verifies the shapes and that every number is finite.
func (s *State) check() error {
	k := len(s.Flows)
	// Version 1 lacks the memory and CUSUM fields: read as zero, a fresh
	// memory; version 2 the trail: read as empty; version 3 differs only in
	// its encodings.
	if s.Version < 1 || s.Version > stateVersion {
		return fmt.Errorf("state version %d, want %d", s.Version, stateVersion)
	}
	if len(s.C) != k*k || len(s.D) != k || len(s.Smooth) != k {
		return fmt.Errorf("state shapes disagree: %d flows, C %d, D %d, smoothing %d", k, len(s.C), len(s.D), len(s.Smooth))
	}
	if (len(s.PrevC) != 0 || len(s.PrevD) != 0) && (len(s.PrevC) != k*k || len(s.PrevD) != k) {
		return fmt.Errorf("state shapes disagree: %d flows, previous regime's C %d, D %d", k, len(s.PrevC), len(s.PrevD))
	}
	if !finiteAll(s.PrevC) || !finiteAll(s.PrevD) {
		return errors.New("state has a non-finite previous-regime sum")
	}
	if !(s.HalfLife > 0) || !(s.SmoothHalfLife > 0) {
		return errors.New("state half-lives must be positive")
	}
	seen := map[string]bool{}
	for _, f := range s.Flows {
		if seen[f] {
			return fmt.Errorf("state has flow %q twice", f)
		}
		seen[f] = true
	}
	finite := func(xs ...float64) bool {
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
		return true
	}
	if !finite(s.C...) || !finite(s.D...) {
		return errors.New("state has a non-finite sum")
	}
	for _, sm := range s.Smooth {
		if !finite(sm.P, sm.Q, sm.Raw, sm.Delta) {
			return errors.New("state has a non-finite smoothing sum")
		}
	}
	keys := map[string]bool{}
	for _, src := range s.Sources {
		if keys[src.Key] {
			return fmt.Errorf("state has source %q twice", src.Key)
		}
		keys[src.Key] = true
		if len(src.SX) > k || len(src.BX) > k || len(src.PrevBX) > k {
			return fmt.Errorf("source %q has more rate sums than flows", src.Key)
		}
		if !finite(src.N, src.SY, src.YY, src.B0, src.BY, src.Sigma2, src.Bg) || !finite(src.SX...) || !finite(src.BX...) {
			return fmt.Errorf("source %q has a non-finite sum", src.Key)
		}
		rows := append(slices.Clone(src.Held), src.Recent...)
		for _, t := range src.Trail {
			if !finite(t.Weight) || t.Weight < 0 {
				return fmt.Errorf("source %q has an invalid trail weight", src.Key)
			}
			rows = append(rows, t.HeldRow)
		}
		for _, h := range rows {
			if len(h.Flows) != len(h.Rates) || !finite(h.Y, h.V, h.Resid, h.Scale) || !finite(h.Rates...) {
				return fmt.Errorf("source %q has an invalid held equation", src.Key)
			}
		}
		if !finite(src.Capacity, src.CusumPos, src.CusumNeg, src.Leverage, src.ResidVar, src.PrevN, src.PrevYY, src.PrevB0, src.PrevBY) || !finite(src.PrevBX...) {
			return fmt.Errorf("source %q has a non-finite capacity", src.Key)
		}
	}
	return nil
}

// age multiplies the sums by the aging of g periods.
func (s *State) age(g int64) {
	if g <= 0 {
		return
	}
	a := math.Exp2(-float64(g) / s.HalfLife)
	a2 := a * a
	for i := range s.C {
		s.C[i] *= a2
	}
	for i := range s.D {
		s.D[i] *= a2
	}
	for i := range s.Sources {
		src := &s.Sources[i]
		src.N *= a
		src.SY *= a
		src.SX = scale(src.SX, a)
		src.YY *= a2
		src.B0 *= a2
		src.BY *= a2
		src.BX = scale(src.BX, a2)
		ageTrail(src.Trail, a)
	}
	s.agePrev(math.Exp2(-float64(g) / s.HalfLife))
	b := math.Exp2(-float64(g) / s.SmoothHalfLife)
	for i := range s.Smooth {
		s.Smooth[i].P *= b
		s.Smooth[i].Q *= b
	}
	// Underflow to subnormals is harmless but slow; flush.
	for i := range s.C {
		if math.Abs(s.C[i]) < 1e-290 {
			s.C[i] = 0
		}
	}
}

// agePrev multiplies the previous regime's sums by the row aging a.
func (s *State) agePrev(a float64) {
	a2 := a * a
	scale(s.PrevC, a2)
	scale(s.PrevD, a2)
	for i := range s.Sources {
		src := &s.Sources[i]
		src.PrevN *= a
		src.PrevYY *= a2
		src.PrevB0 *= a2
		src.PrevBY *= a2
		src.PrevBX = scale(src.PrevBX, a2)
	}
}

// ageTrail multiplies the trail's weights by the row aging a.
func ageTrail(rows []TrailRow, a float64) {
	for i := range rows {
		rows[i].Weight *= a
	}
}

func finiteAll(xs []float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

func scale(xs []float64, a float64) []float64 {
	for i := range xs {
		xs[i] *= a
	}
	return xs
}

// Merge combines two states as described in the State documentation. Neither
// argument is modified. Both must have the same half-lives.
func Merge(a, b *State) (*State, error) {
	if err := a.check(); err != nil {
		return nil, fmt.Errorf("merge: first state: %w", err)
	}
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("merge: second state: %w", err)
	}
	if a.HalfLife != b.HalfLife || a.SmoothHalfLife != b.SmoothHalfLife {
		return nil, fmt.Errorf("merge: half-lives differ (%v/%v and %v/%v)", a.HalfLife, a.SmoothHalfLife, b.HalfLife, b.SmoothHalfLife)
	}
	if !b.Started {
		return a.Clone(), nil
	}
	if !a.Started {
		return b.Clone(), nil
	}
	m := a.Clone()
	o := b.Clone()
	if o.Period > m.Period {
		m.age(o.Period - m.Period)
		m.Period = o.Period
	} else {
		o.age(m.Period - o.Period)
	}
	om := m.mergeFlows(o)
	m.mergeSums(o, om, len(a.Flows), len(a.PrevC) > 0)
	m.mergeSources(o, om)
	slices.SortFunc(m.Sources, func(x, y SourceState) int { return compareStrings(x.Key, y.Key) })
	m.Count.add(o.Count)
	return m, nil
}

// mergeFlows appends o's flows that m lacks (with empty smoothing) and
// returns om, the index in m of each of o's flows.
func (m *State) mergeFlows(o *State) []int {
	idx := map[string]int{}
	for i, f := range m.Flows {
		idx[f] = i
	}
	om := make([]int, len(o.Flows))
	for i, f := range o.Flows {
		j, ok := idx[f]
		if !ok {
			j = len(m.Flows)
			m.Flows = append(m.Flows, f)
			idx[f] = j
			m.Smooth = append(m.Smooth, SmoothState{})
		}
		om[i] = j
	}
	return om
}

// mergeSums adds o's C, D and smoothing sums (and its previous regime's) into
// m's, re-indexed by om; m's own matrices are ka×ka before, K×K after. hadPrev:
// the first state had a previous regime.
func (m *State) mergeSums(o *State, om []int, ka int, hadPrev bool) {
	k := len(m.Flows)
	c := widen(m.C, ka, k)
	d := make([]float64, k)
	copy(d, m.D)
	ko := len(o.Flows)
	for i := 0; i < ko; i++ {
		d[om[i]] += o.D[i]
		for j := 0; j < ko; j++ {
			c[om[i]*k+om[j]] += o.C[i*ko+j]
		}
		ms := &m.Smooth[om[i]]
		ms.P += o.Smooth[i].P
		ms.Q += o.Smooth[i].Q
		if !ms.RawOK {
			ms.Raw, ms.RawOK = o.Smooth[i].Raw, o.Smooth[i].RawOK
			ms.Delta, ms.DeltaOK = o.Smooth[i].Delta, o.Smooth[i].DeltaOK
		}
	}
	m.C, m.D = c, d
	if !hadPrev && len(o.PrevC) == 0 {
		return
	}
	pc := make([]float64, k*k)
	pd := make([]float64, k)
	if len(m.PrevC) > 0 {
		pc = widen(m.PrevC, ka, k)
		copy(pd, m.PrevD)
	}
	if len(o.PrevC) > 0 {
		for i := 0; i < ko; i++ {
			pd[om[i]] += o.PrevD[i]
			for j := 0; j < ko; j++ {
				pc[om[i]*k+om[j]] += o.PrevC[i*ko+j]
			}
		}
	}
	m.PrevC, m.PrevD = pc, pd
}

// widen copies a ka×ka matrix into the top-left corner of a new k×k one.
func widen(a []float64, ka, k int) []float64 {
	c := make([]float64, k*k)
	for i := 0; i < ka; i++ {
		copy(c[i*k:i*k+ka], a[i*ka:(i+1)*ka])
	}
	return c
}

// mergeSources adds each of o's sources into m's source of the same key (sums
// added, the later period, capacity, quiet window and regime start kept, held
// rows appended), or appends it, its rate sums re-indexed by om.
func (m *State) mergeSources(o *State, om []int) {
	k := len(m.Flows)
	sidx := map[string]int{}
	for i, src := range m.Sources {
		sidx[src.Key] = i
	}
	reindex := func(xs []float64) []float64 {
		out := make([]float64, k)
		for i := range xs {
			out[om[i]] += xs[i]
		}
		return out
	}
	for _, src := range o.Sources {
		sx, bx, pbx := reindex(src.SX), reindex(src.BX), reindex(src.PrevBX)
		if i, ok := sidx[src.Key]; ok {
			m.Sources[i].mergeSource(src, sx, bx, pbx)
			continue
		}
		src.SX, src.BX, src.PrevBX = sx, bx, pbx
		sidx[src.Key] = len(m.Sources)
		m.Sources = append(m.Sources, src)
	}
}

// mergeSource adds src (its rate sums already re-indexed: sx, bx, pbx) into t.
func (t *SourceState) mergeSource(src SourceState, sx, bx, pbx []float64) {
	t.N += src.N
	t.SY += src.SY
	t.YY += src.YY
	t.B0 += src.B0
	t.BY += src.BY
	t.SX = addInto(t.SX, sx)
	t.BX = addInto(t.BX, bx)
	t.PrevBX = addInto(t.PrevBX, pbx)
	t.PrevN += src.PrevN
	t.PrevYY += src.PrevYY
	t.PrevB0 += src.PrevB0
	t.PrevBY += src.PrevBY
	t.Last = max(t.Last, src.Last)
	t.Held = append(t.Held, src.Held...)
	t.Recent = append(t.Recent, src.Recent...)
	t.Trail = append(t.Trail, src.Trail...)
	slices.SortStableFunc(t.Trail, func(x, y TrailRow) int { return cmp.Compare(x.Period, y.Period) })
	t.Capacity = max(t.Capacity, src.Capacity)
	t.QuietUntil = max(t.QuietUntil, src.QuietUntil)
	t.RegimeStart = max(t.RegimeStart, src.RegimeStart)
	if t.Sigma2 == 0 {
		t.Sigma2, t.Bg = src.Sigma2, src.Bg
	}
}

func addInto(dst, src []float64) []float64 {
	if len(dst) < len(src) {
		dst = append(dst, make([]float64, len(src)-len(dst))...)
	}
	for i, v := range src {
		dst[i] += v
	}
	return dst
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// binary encoding: magic, version, then fields in order. Strings are
// length-prefixed; floats are IEEE-754 little endian.
var stateMagic = [4]byte{'T', 'S', 'W', 'F'}

// MarshalBinary encodes the state.
func (s *State) MarshalBinary() ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	ws := func(str string) { w(uint32(len(str))); b.WriteString(str) }
	wf := func(xs []float64) { w(uint32(len(xs))); w(xs) }
	b.Write(stateMagic[:])
	w(uint16(stateVersion))
	w(s.HalfLife)
	w(s.SmoothHalfLife)
	w(s.Started)
	w(s.Period)
	w(uint32(len(s.Flows)))
	for _, f := range s.Flows {
		ws(f)
	}
	idx := rowFlowIndex(s)
	w(uint32(len(idx.extra)))
	for _, f := range idx.extra {
		ws(f)
	}
	wu := func(n int) { b.Write(binary.AppendUvarint(nil, uint64(n))) }
	wf(s.C)
	wf(s.D)
	for _, sm := range s.Smooth {
		w(sm.P)
		w(sm.Q)
		w(sm.Raw)
		w(sm.RawOK)
		w(sm.Until)
		w(sm.Since)
		w(sm.Delta)
		w(sm.DeltaOK)
	}
	wf(s.PrevC)
	wf(s.PrevD)
	w(uint32(len(s.Sources)))
	for _, src := range s.Sources {
		ws(src.Key)
		ws(src.Machine)
		ws(src.Process)
		w([]float64{src.N, src.SY, src.YY, src.B0, src.BY})
		wf(src.SX)
		wf(src.BX)
		w(src.Last)
		w(src.Sigma2)
		w(src.Bg)
		w(src.QuietUntil)
		w(src.Capacity)
		w(src.RegimeStart)
		w([]float64{src.CusumPos, src.CusumNeg, src.Leverage, src.ResidVar})
		w(src.CusumStart)
		w([]float64{src.PrevN, src.PrevYY, src.PrevB0, src.PrevBY})
		wf(src.PrevBX)
		trail := make([]HeldRow, len(src.Trail))
		weights := make([]float64, len(src.Trail))
		for i, t := range src.Trail {
			trail[i], weights[i] = t.HeldRow, t.Weight
		}
		for _, rows := range [][]HeldRow{src.Held, src.Recent, trail} {
			w(uint32(len(rows)))
			for _, h := range rows {
				w(h.Period)
				w(h.Y)
				w(h.V)
				wu(len(h.Flows))
				for _, f := range h.Flows {
					wu(idx.of[f])
				}
				w(h.Rates)
				w([]float64{h.Resid, h.Scale})
			}
		}
		wf(weights)
	}
	w(s.Count)
	return b.Bytes(), nil
}

// UnmarshalBinary decodes a state written by MarshalBinary: the header
// (magic, version, half-lives, period), the flows, C, D, the smoothing, the
// previous regime (version 2), the sources (decodeSource) and the counters.
func (s *State) UnmarshalBinary(data []byte) error {
	d := &decoder{r: bytes.NewReader(data)}
	var magic [4]byte
	d.read(&magic)
	if d.err == nil && magic != stateMagic {
		return errors.New("not a work-factor state")
	}
	var v uint16
	d.read(&v)
	var t State
	t.Version = int(v)
	if d.err == nil && (t.Version < 1 || t.Version > stateVersion) {
		return fmt.Errorf("state version %d, want %d", t.Version, stateVersion)
	}
	d.read(&t.HalfLife)
	d.read(&t.SmoothHalfLife)
	d.read(&t.Started)
	d.read(&t.Period)
	nf := d.count("flows")
	for i := 0; d.err == nil && i < int(nf); i++ {
		t.Flows = append(t.Flows, d.str())
	}
	if t.Version >= 4 {
		d.names = append([]string(nil), t.Flows...)
		ne := d.count("equation flows")
		for i := 0; d.err == nil && i < int(ne); i++ {
			d.names = append(d.names, d.str())
		}
	}
	t.C = d.floats()
	t.D = d.floats()
	t.Smooth = make([]SmoothState, 0, min(int(nf), d.r.Len()/16+1))
	for i := 0; d.err == nil && i < int(nf); i++ {
		var sm SmoothState
		d.read(&sm.P)
		d.read(&sm.Q)
		d.read(&sm.Raw)
		d.read(&sm.RawOK)
		d.read(&sm.Until)
		d.read(&sm.Since)
		if t.Version >= 5 {
			d.read(&sm.Delta)
			d.read(&sm.DeltaOK)
		}
		t.Smooth = append(t.Smooth, sm)
	}
	if t.Version >= 2 {
		t.PrevC = nilIfEmpty(d.floats())
		t.PrevD = nilIfEmpty(d.floats())
	}
	ns := d.count("sources")
	for i := 0; d.err == nil && i < int(ns); i++ {
		t.Sources = append(t.Sources, d.source(t.Version))
	}
	d.read(&t.Count)
	if d.err != nil {
		return fmt.Errorf("decoding work-factor state: %w", d.err)
	}
	if d.r.Len() != 0 {
		return errors.New("decoding work-factor state: trailing bytes")
	}
	if err := t.check(); err != nil {
		return err
	}
	t.Version = stateVersion
	*s = t
	return nil
}

// decoder reads MarshalBinary's encoding; the first error sticks and makes
// every later read a no-op.
type decoder struct {
	r   *bytes.Reader
	err error
	// names are the flows equations refer to by index (version 4).
	names []string
}

// maxArray bounds a decoded array's length.
const maxArray = 1 << 28

func (d *decoder) read(v any) {
	if d.err == nil {
		d.err = binary.Read(d.r, binary.LittleEndian, v)
	}
}

// count reads a length that cannot exceed the bytes left (each element
// takes at least one).
func (d *decoder) count(what string) uint32 {
	var n uint32
	d.read(&n)
	if d.err == nil && int64(n) > int64(d.r.Len()) {
		d.err = errors.New("truncated " + what)
	}
	return n
}

func (d *decoder) str() string {
	var n uint32
	d.read(&n)
	if d.err != nil || int64(n) > int64(d.r.Len()) {
		if d.err == nil {
			d.err = errors.New("truncated string")
		}
		return ""
	}
	buf := make([]byte, n)
	d.read(buf)
	return string(buf)
}

func (d *decoder) floats() []float64 {
	var n uint32
	d.read(&n)
	if d.err != nil || int64(n)*8 > int64(d.r.Len()) || n > maxArray {
		if d.err == nil {
			d.err = errors.New("truncated array")
		}
		return nil
	}
	xs := make([]float64, n)
	d.read(xs)
	return xs
}

// source reads one SourceState; version 1 lacks the regime, CUSUM and
// previous-regime fields.
func (d *decoder) source(version int) SourceState {
	var src SourceState
	src.Key = d.str()
	src.Machine = d.str()
	src.Process = d.str()
	var f [5]float64
	d.read(&f)
	src.N, src.SY, src.YY, src.B0, src.BY = f[0], f[1], f[2], f[3], f[4]
	src.SX = d.floats()
	src.BX = d.floats()
	d.read(&src.Last)
	d.read(&src.Sigma2)
	d.read(&src.Bg)
	d.read(&src.QuietUntil)
	d.read(&src.Capacity)
	if version >= 2 {
		d.read(&src.RegimeStart)
		var c [4]float64
		d.read(&c)
		src.CusumPos, src.CusumNeg, src.Leverage, src.ResidVar = c[0], c[1], c[2], c[3]
		d.read(&src.CusumStart)
		var p [4]float64
		d.read(&p)
		src.PrevN, src.PrevYY, src.PrevB0, src.PrevBY = p[0], p[1], p[2], p[3]
		src.PrevBX = nilIfEmpty(d.floats())
	}
	src.Held = d.heldRows(version)
	src.Recent = d.heldRows(version)
	if version >= 3 {
		trail := d.heldRows(version)
		weights := d.floats()
		if d.err == nil && len(weights) != len(trail) {
			d.err = errors.New("trail weights disagree with the trail")
		}
		for i := 0; d.err == nil && i < len(trail); i++ {
			src.Trail = append(src.Trail, TrailRow{HeldRow: trail[i], Weight: weights[i]})
		}
	}
	return src
}

func (d *decoder) heldRows(version int) []HeldRow {
	nh := d.count("held equations")
	var rows []HeldRow
	for j := 0; d.err == nil && j < int(nh); j++ {
		var h HeldRow
		d.read(&h.Period)
		d.read(&h.Y)
		d.read(&h.V)
		if version >= 4 {
			h.Flows, h.Rates = d.indexedFlows()
		} else {
			nfl := d.count("held flows")
			for k := 0; d.err == nil && k < int(nfl); k++ {
				h.Flows = append(h.Flows, d.str())
			}
			h.Rates = d.floats()
		}
		if version >= 3 {
			var r [2]float64
			d.read(&r)
			h.Resid, h.Scale = r[0], r[1]
		}
		rows = append(rows, h)
	}
	return rows
}

// indexedFlows reads a version 4 equation's flows (a count, then indices
// into d.names) and their rates (one per flow).
func (d *decoder) indexedFlows() ([]string, []float64) {
	n := d.uvarint(uint64(d.r.Len()))
	var flows []string
	for k := uint64(0); d.err == nil && k < n; k++ {
		i := d.uvarint(uint64(d.r.Len()))
		if d.err == nil && i >= uint64(len(d.names)) {
			d.err = errors.New("equation flow index out of range")
		}
		if d.err == nil {
			flows = append(flows, d.names[i])
		}
	}
	if d.err != nil || n*8 > uint64(d.r.Len()) {
		if d.err == nil {
			d.err = errors.New("truncated equation")
		}
		return nil, nil
	}
	rates := make([]float64, n)
	d.read(rates)
	return flows, rates
}

// uvarint reads an unsigned varint no larger than limit.
func (d *decoder) uvarint(limit uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(d.r)
	if err == nil && v > limit {
		err = errors.New("truncated equation")
	}
	d.err = err
	return v
}

func nilIfEmpty(xs []float64) []float64 {
	if len(xs) == 0 {
		return nil
	}
	return xs
}
