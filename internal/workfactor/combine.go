package workfactor

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// blockSolve is one block's solve in progress; solveBlock's steps share it.
type blockSolve struct {
	e   *Estimator
	b   block
	br  blockResult
	out map[int]*flowResult
	// sx is each flow's aged rate sum over the block's sources (N_h·X̄_k).
	sx map[int]float64
	// kept are the flows not rejected (§4.1), by decreasing mean rate.
	kept []int
	// ind are the columns solved alone (one flow, or a collinear group), most
	// important first; comb the flows of the combined column (§4.3).
	ind  [][]int
	comb []int
	// bgCols are the background columns (§4.8), used while useBg.
	bgCols []column
	useBg  bool
	// budgetFixed: the combined column is fixed at its prior because the
	// equations do not support another free column; combFixed: the last
	// solve fixed it (by the budget, or because it failed).
	budgetFixed, combFixed bool
	// twoRegimes: fits also use the previous regime (acrossRegimes).
	twoRegimes bool
}

// solveBlock runs flow rejection (§4.1), flow combining (§4.3) and the solve
// of one block, in these steps:
//
//  1. rejectFlows: X̄_k/‖X̄‖₁ < δ leaves flow k out.
//  2. backgroundColumns: the column of ones of §4.8 (Config.Background).
//  3. startingColumns: the paper's rate ranking (flows j+q … K combined) or
//     collinear groups ranked by power λ·α; an automatic background column
//     whose VIF B0/(B0 − bᵀC⁻¹b) exceeds BackgroundMaxVIF is dropped.
//  4. fitBudget: at most ⌊(N_h − 1)/2⌋ columns, the q largest always.
//  5. solve, then combineFailing: §4.3's loop, at most 2q+1 re-solves, moving
//     failing columns (α̂ < 0, singular, g < 1, implausible) into the
//     combined column, or grouping one with its collinear partner.
//  6. record: each flow's α̂, g and smoothing weight, and the background.
func (e *Estimator) solveBlock(bi int, b block, out map[int]*flowResult) blockResult {
	s := &blockSolve{e: e, b: b, br: blockResult{b: b}, out: out}
	s.rejectFlows(bi)
	s.backgroundColumns()
	s.startingColumns()
	if !s.fitBudget() {
		e.st.Count.UnsolvedBlocks++
		return s.br
	}
	s.useBg = len(s.bgCols) > 0
	// With a previous regime, every fit (and so the failing criterion) uses
	// the flows that did not change at the last shift from both regimes.
	s.twoRegimes = b.pnh > 0 && !e.cfg.memoryFixed()
	f := s.combineFailing(s.solve())
	s.br.fit = f
	if f.columns == 0 {
		e.st.Count.UnsolvedBlocks++
		return s.br
	}
	s.record(f)
	return s.br
}

// rejectFlows sums each flow's rates over the block (sx), sets every flow's
// share X̄_k/‖X̄‖₁, and keeps the flows at or above δ (§4.1), by decreasing
// mean rate (ties by name: b.flows is in name order, the sort is stable).
func (s *blockSolve) rejectFlows(bi int) {
	e, b := s.e, &s.b
	s.sx = make(map[int]float64, len(b.flows))
	total := 0.0
	for _, si := range b.sources {
		src := e.st.Sources[si]
		for _, i := range b.flows {
			if i < len(src.SX) {
				s.sx[i] += src.SX[i]
			}
		}
	}
	for _, i := range b.flows {
		total += s.sx[i]
		s.br.flows = append(s.br.flows, e.st.Flows[i])
	}
	for _, i := range b.flows {
		r := &flowResult{block: bi}
		if total > 0 {
			r.share = s.sx[i] / total
		}
		if !(total > 0) || r.share < e.cfg.Delta {
			r.rejected = true
		} else {
			s.kept = append(s.kept, i)
		}
		s.out[i] = r
	}
	slices.SortStableFunc(s.kept, func(x, y int) int { return cmp.Compare(s.sx[y], s.sx[x]) })
}

// prior is the combined flows' rate-weighted smoothed work factor
// Σλ_i·α̃_i/Σλ_i: the value a failing combined column is fixed at. It exists
// only when flows carrying 90% of the combined rate have a mature smoothed
// work factor (at least HalfLife periods of estimates since it started or was
// forgotten).
func (s *blockSolve) prior(comb []int) (float64, bool) {
	e := s.e
	num, den, all := 0.0, 0.0, 0.0
	for _, i := range comb {
		all += s.sx[i]
		if sm := e.st.Smooth[i]; sm.Q > 0 && sm.Since > 0 && float64(e.st.Period-sm.Since) >= e.cfg.HalfLife {
			num += s.sx[i] * sm.P / sm.Q
			den += s.sx[i]
		}
	}
	if den == 0 || den < 0.9*all {
		return 0, false
	}
	return num / den, true
}

// backgroundColumns sets the background columns of §4.8: one shared by the
// block's sources, or one per source. A process's reading holds no other
// tenant's work, and its own idle work is small: per-process readings are the
// remedy for background (§4.6), so BackgroundAuto gives them none (a column
// there would take per-request costs at low rates).
func (s *blockSolve) backgroundColumns() {
	mode := s.e.cfg.Background
	if mode == BackgroundAuto && s.e.cfg.PerProcess {
		mode = BackgroundOff
	}
	switch mode {
	case BackgroundShared, BackgroundAuto:
		s.bgCols = []column{{bg: s.b.sources}}
		s.br.bgSource = []int{-1}
	case BackgroundPerSource:
		for _, si := range s.b.sources {
			s.bgCols = append(s.bgCols, column{bg: []int{si}})
			s.br.bgSource = append(s.br.bgSource, si)
		}
	}
}

// capacityScale is each source's capacity (the last Ω reported) over the
// sources' mean, and the mean.
func (e *Estimator) capacityScale(sources []int) ([]float64, float64) {
	w := make([]float64, len(sources))
	mean := 0.0
	for j, si := range sources {
		w[j] = e.st.Sources[si].Capacity
		mean += w[j] / float64(len(sources))
	}
	for j := range w {
		if mean > 0 {
			w[j] /= mean
		} else {
			w[j] = 1
		}
	}
	return w, mean
}

// startingColumns sets the starting columns, most important first. The
// paper's (CombineRate): flows 1 … j+q−1 by mean rate alone, j being the first
// whose mean rate is at most CombineThreshold × the mean over the block's
// flows, the rest combined. CombineCollinear: every flow alone except
// collinear groups, in decreasing power. An automatic background column whose
// variance inflation exceeds BackgroundMaxVIF (the rates barely vary) is not
// identifiable and is dropped.
func (s *blockSolve) startingColumns() {
	e := s.e
	if e.cfg.Combining == CombineRate {
		nInd := len(s.kept)
		if len(s.kept) > 0 {
			keptTotal := 0.0
			for _, i := range s.kept {
				keptTotal += s.sx[i]
			}
			thr := e.cfg.CombineThreshold * keptTotal / float64(len(s.kept))
			for j, i := range s.kept {
				if s.sx[i] <= thr {
					nInd = min(j+e.cfg.Q, len(s.kept))
					break
				}
			}
		}
		for _, i := range s.kept[:nInd] {
			s.ind = append(s.ind, []int{i})
		}
		s.comb = slices.Clone(s.kept[nInd:])
	} else {
		s.ind = e.collinearGroups(&s.b, s.kept, s.sx, &s.br)
	}
	if e.cfg.Background == BackgroundAuto && len(s.ind) > 0 && e.backgroundVIF(&s.b, s.ind) > e.cfg.BackgroundMaxVIF {
		s.bgCols, s.br.bgSource, s.br.bgScale = nil, nil, nil
	}
	if e.cfg.Background == BackgroundAuto && len(s.bgCols) == 1 && len(s.ind) > 0 {
		s.backgroundForm()
	}
}

// backgroundForm chooses the shared background column's form from the data:
// the same MHz on every machine, or the same share of each machine's
// capacity. Both add one column to the starting columns, so the form whose
// column lowers the residual sum of squares more decides: with the flows'
// normal equations C_FF, D_F and a candidate column z, the reduction is
// (D_z − C_zF·C_FF⁻¹D_F)² / (C_zz − C_zF·C_FF⁻¹C_Fz), one factorization of
// C_FF serving both.
func (s *blockSolve) backgroundForm() {
	e := s.e
	scale, mean := e.capacityScale(s.b.sources)
	differ := false
	for _, w := range scale {
		differ = differ || math.Abs(w-1) > 1e-9
	}
	if !differ {
		return
	}
	nF := len(s.ind)
	cols := make([]column, 0, nF+2)
	for _, g := range s.ind {
		cols = append(cols, column{flows: g})
	}
	byCap := s.bgCols[0]
	byCap.bgScale = scale
	cols = append(cols, s.bgCols[0], byCap)
	n := len(cols)
	cg, dg := e.normalEquations(cols)
	cff := make([]float64, nF*nF)
	for a := 0; a < nF; a++ {
		copy(cff[a*nF:(a+1)*nF], cg[a*n:a*n+nF])
	}
	st := standardize(cff, dg[:nF], nF)
	sc, ex := st.scale, st.excluded
	l, _ := cholesky(st.cs, nF, ex)
	alpha := cholSolve(l, nF, ex, st.ds)
	gain := func(z int) float64 {
		u := make([]float64, nF)
		for a := range u {
			u[a] = cg[a*n+z] * sc[a]
		}
		x := cholSolve(l, nF, ex, u)
		num, den := dg[z], cg[z*n+z]
		for a := range u {
			num -= u[a] * alpha[a]
			den -= u[a] * x[a]
		}
		if !(den > 0) {
			return 0
		}
		return num * num / den
	}
	if gain(nF+1) > gain(nF) {
		s.bgCols[0] = byCap
		s.br.bgScale, s.br.bgMeanCapacity = scale, mean
	}
}

// fitBudget trims the columns to what the equations support well: at least
// as many residual degrees of freedom as columns, dof = N_h − columns − 1 ≥
// columns, i.e. at most ⌊(N_h − 1)/2⌋ columns. The paper only asks N_h ≥ K;
// right after a shift, or at the start, fits with fewer spare equations swing
// wildly and would enter the smoothing. When columns are short, the combined
// column is the first to give up its freedom: it is fixed at its members'
// prior, so the main flows can be solved from the first periods after a
// shift. The q largest columns are solved whenever dof ≥ 1 (dof ≥ 0 when the
// noise level is known from before a shift): §4.3 always keeps q. The columns
// cut go to the combined column. False: the block cannot be solved.
func (s *blockSolve) fitBudget() bool {
	e, b := s.e, &s.b
	maxCols := int(math.Floor((b.nh - 1) / 2))
	spare := 2.0 // dof ≥ 1
	if b.sigma2 > 0 {
		spare = 1 // the noise is known: dof ≥ 0
	}
	minInd := min(e.cfg.Q, len(s.ind)+boolInt(len(s.comb) > 0), max(int(math.Floor(b.nh-spare))-len(s.bgCols), 0))
	minInd = min(minInd, len(s.ind))
	ncols := func(nInd int) int {
		c := nInd + len(s.bgCols)
		if (nInd < len(s.ind) || len(s.comb) > 0) && !s.budgetFixed {
			c++
		}
		return c
	}
	canFix := func(nInd int) bool {
		_, ok := s.prior(s.rest(nInd))
		return nInd > 0 && len(s.rest(nInd)) > 0 && ok
	}
	nInd := len(s.ind)
	if ncols(nInd) > maxCols && canFix(nInd) {
		s.budgetFixed = true
	}
	for nInd > minInd && ncols(nInd) > maxCols {
		nInd--
		s.budgetFixed = s.budgetFixed || canFix(nInd)
		if s.budgetFixed && !canFix(nInd) {
			s.budgetFixed = false
		}
	}
	if ncols(nInd) > maxCols && nInd > 0 && nInd == minInd {
		maxCols = ncols(nInd) // the q largest, on few spare equations
	}
	if nInd == 0 {
		s.budgetFixed = false // the combined column is then the only one
	}
	if ncols(nInd) > maxCols || ncols(nInd) == 0 {
		return false
	}
	s.comb = s.rest(nInd)
	s.ind = slices.Clone(s.ind[:nInd])
	return true
}

// rest is the combined column's flows if only the first nInd columns stay
// alone.
func (s *blockSolve) rest(nInd int) []int {
	r := slices.Clone(s.comb)
	for _, col := range s.ind[nInd:] {
		r = append(r, col...)
	}
	return r
}

// fitCols solves the columns on the current regime and, with a previous
// regime, across both (acrossRegimes), which also finds the changed flows.
func (s *blockSolve) fitCols(cols []column) fit {
	f := s.e.solveColumns(&s.b, cols)
	if s.twoRegimes && f.columns > 0 {
		var delta []float64
		f, s.br.changed, delta = s.e.acrossRegimes(&s.b, cols, f)
		s.br.delta = nil
		if delta != nil {
			s.br.delta = map[int]float64{}
			for a, c := range cols {
				if len(c.bg) == 0 && !c.fixed {
					for _, i := range c.flows {
						s.br.delta[i] = delta[a]
					}
				}
			}
		}
	}
	return f
}

// solve lays out the columns (alone, combined, background) and fits them.
// The combined column is fixed at its prior when the budget says so, or when
// it fails §4.3's criterion (not when it is the only column, the block's
// whole estimate, nor without a prior). An automatic background column that
// comes out negative or singular is not identified by these data: the block
// is solved again without it.
func (s *blockSolve) solve() fit {
	cols := make([]column, 0, len(s.ind)+1+len(s.bgCols))
	for _, c := range s.ind {
		cols = append(cols, column{flows: c})
	}
	if len(s.comb) > 0 {
		cols = append(cols, column{flows: s.comb})
	}
	if s.useBg {
		cols = append(cols, s.bgCols...)
	}
	s.combFixed = false
	v, ok := s.prior(s.comb)
	var f fit
	if len(s.comb) > 0 && s.budgetFixed && len(s.ind) > 0 && ok {
		cols[len(s.ind)].fixed, cols[len(s.ind)].value = true, v
		s.combFixed = true
		f = s.fitCols(cols)
	} else {
		f = s.fitCols(cols)
		if len(s.comb) > 0 && f.cols[len(s.ind)].fails() && len(cols) > 1 && ok {
			cols[len(s.ind)].fixed, cols[len(s.ind)].value = true, v
			f = s.fitCols(cols)
			s.combFixed = true
		}
	}
	if s.useBg && s.e.cfg.Background == BackgroundAuto && f.cols[len(cols)-1].failsAsBackground() {
		s.useBg = false
		return s.solve()
	}
	return f
}

// combineFailing is §4.3's loop: while a column solved alone fails, it joins
// the combined column (or, in CombineCollinear, the column its rates move
// with at correlation ≥ failingCollinear, as one reported group), and the
// block is solved again; at most 2q+1 times.
func (s *blockSolve) combineFailing(f fit) fit {
	for round := 0; round < 2*s.e.cfg.Q+1; round++ {
		if !s.moveFailing(f) {
			break
		}
		// The combined column now holds a flow that failed alone: it is
		// solved freely again (fixed only if it fails), never frozen at that
		// flow's old work factor.
		s.budgetFixed = false
		f = s.solve()
	}
	return f
}

// moveFailing moves the failing columns of f out of ind; false if none
// fails.
func (s *blockSolve) moveFailing(f fit) bool {
	e := s.e
	var still [][]int
	moved := false
	joined := map[int]bool{}
	for c, col := range s.ind {
		if joined[c] {
			continue
		}
		if !f.cols[c].fails() {
			still = append(still, col)
			continue
		}
		moved = true
		// A moved column is nobody's partner afterwards: its flows are in a
		// group or in the combined column already, and must not be counted
		// twice.
		joined[c] = true
		if e.cfg.Combining == CombineCollinear {
			if p, r := e.partner(&s.b, s.ind, c, joined); p >= 0 {
				joined[p] = true
				still = slices.DeleteFunc(still, func(x []int) bool { return slices.Equal(x, s.ind[p]) })
				still = append(still, s.groupFailing(col, s.ind[p], r))
				continue
			}
		}
		s.comb = append(s.comb, col...)
	}
	if moved {
		s.ind = still
	}
	return moved
}

// groupFailing joins a failing column with its partner into one group,
// replacing the groups either belonged to, and returns the group's flows.
func (s *blockSolve) groupFailing(col, partner []int, r float64) []int {
	flows := s.e.st.Flows
	g := append(slices.Clone(col), partner...)
	slices.Sort(g)
	s.br.groups = slices.DeleteFunc(s.br.groups, func(x Group) bool {
		return slices.Contains(x.Flows, flows[col[0]]) || slices.Contains(x.Flows, flows[partner[0]])
	})
	s.br.groups = append(s.br.groups, Group{Name: groupName(flows, g), Flows: flowNames(flows, g), Correlation: r,
		Reason: fmt.Sprintf("rate correlation %.4f ≥ %v, and %s fails alone (§4.3)", r, failingCollinear, groupName(flows, col))})
	return g
}

// record writes the fit into the flows' results and the block's: a column's
// α̂ and g go to each of its flows, with smoothing weight 1 for a flow alone
// and λ_i/Σλ for a member of a group or of the combined column (a fixed
// combined column gives no estimate); then the background columns.
func (s *blockSolve) record(f fit) {
	br := &s.br
	br.solved = true
	for _, i := range br.changed {
		s.out[i].changed, s.out[i].regime = true, s.b.start
	}
	for c, col := range s.ind {
		s.recordAlone(f.cols[c], col)
	}
	if len(s.comb) > 0 {
		cf := f.cols[len(s.ind)]
		combRate := 0.0
		for _, i := range s.comb {
			combRate += s.sx[i]
		}
		for _, i := range s.comb {
			r := s.out[i]
			r.combined = true
			r.coef = cf.alpha
			if s.combFixed || cf.singular {
				continue
			}
			r.solved = true
			r.alpha, r.g = cf.alpha, cf.g
			if !cf.gOK {
				r.g = 0
			}
			if combRate > 0 {
				r.weight = s.sx[i] / combRate
			}
		}
	}
	if !s.useBg {
		br.bgSource, br.bgScale = nil, nil
		return
	}
	off := len(s.ind)
	if len(s.comb) > 0 {
		off++
	}
	for c := range s.bgCols {
		cf := f.cols[off+c]
		br.bgAlpha = append(br.bgAlpha, cf.alpha)
		br.bgG = append(br.bgG, cf.g)
		br.bgOK = append(br.bgOK, !cf.singular && cf.gOK)
	}
}

// recordAlone writes a column solved alone (one flow or a group) into its
// flows' results.
func (s *blockSolve) recordAlone(cf colFit, col []int) {
	colRate := 0.0
	for _, i := range col {
		colRate += s.sx[i]
	}
	for _, i := range col {
		r := s.out[i]
		r.solved = !cf.singular
		r.alpha, r.g, r.weight = cf.alpha, cf.g, 1
		if len(col) > 1 {
			r.group = groupName(s.e.st.Flows, col)
			if colRate > 0 {
				r.weight = s.sx[i] / colRate
			}
		}
		if !cf.gOK {
			r.g = 0
		}
		if r.solved {
			r.coef = cf.alpha
		}
	}
}
