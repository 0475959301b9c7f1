package workfactor

import (
	"cmp"
	"math"
	"slices"
)

// Where a regime found by a CUSUM alarm started (Config.ChangePoint).
//
// A CUSUM alarm comes tens of periods after a minor flow's change. The
// equations between the change and the alarm hold the new work factors; left
// in the previous regime, they bias the flows estimated across both regimes
// (acrossRegimes). So every source keeps its trail, the equations folded in
// since its regime started (at most maxTrail periods, each with the aging
// weight it still has in the sums and its residual against the solve before
// it), and at an alarm those after the estimated change point are subtracted
// from the previous regime and folded into the new one.

// maxTrail bounds a source's trail, in periods: the latest change point an
// alarm can reach back to.
const maxTrail = 128

// changePoint is an estimated change: the new regime's equations are those
// after period after.
type changePoint struct {
	after int64
}

// trailOn reports whether sources keep their trails.
func (e *Estimator) trailOn() bool {
	return e.cfg.ChangePoint != ChangePointRecent && e.cfg.CusumThreshold > 0
}

// trimTrail drops the rows older than maxTrail periods before period. It
// reslices rather than moving the rest (a copy per period was a tenth of a
// run's time); append reallocates once the capacity is used up, so the
// backing array stays within twice the trail.
func trimTrail(rows []TrailRow, period int64) []TrailRow {
	n := 0
	for n < len(rows) && rows[n].Period <= period-maxTrail {
		n++
	}
	return rows[n:]
}

// shiftAtAlarm starts a new regime for source si's block at a CUSUM alarm,
// from the change point Config.ChangePoint estimates; without one (the
// method is ChangePointRecent, or its estimate is not significant), only
// the recent equations since the excursion started move.
func (e *Estimator) shiftAtAlarm(si int, period int64) {
	start := e.st.Sources[si].CusumStart - 1
	cp := e.estimateChangePoint(si)
	e.shift(si, period, start, cp)
}

// estimateChangePoint returns the change point of source si's block at an
// alarm, or nil.
func (e *Estimator) estimateChangePoint(si int) *changePoint {
	if !e.trailOn() {
		return nil
	}
	if e.cfg.ChangePoint == ChangePointExcursion {
		return &changePoint{after: e.st.Sources[si].CusumStart - 1}
	}
	var b *block
	for _, x := range e.blocks() {
		if slices.Contains(x.sources, si) {
			b = &x
			break
		}
	}
	if b == nil {
		return nil
	}
	if e.cfg.ChangePoint == ChangePointRegression && len(b.flows) <= maxSelectColumns {
		return e.regressionChangePoint(b)
	}
	return e.meanShiftChangePoint(b)
}

// standardized is a trail row's residual over its standard deviation,
// capped like the CUSUM's; ok is false for a row not judged.
func (e *Estimator) standardized(t *TrailRow) (z float64, ok bool) {
	if !(t.Scale > 0) {
		return 0, false
	}
	lim := max(e.cfg.ShiftSigma-1, 4)
	return min(max(t.Resid/t.Scale, -lim), lim), true
}

// evidence returns, per source of the block, its trail and its held
// (suspect) equations, oldest first, and the distinct periods among them,
// newest first: the equations a change point is estimated from.
func (e *Estimator) evidence(b *block) (rows [][]TrailRow, periods []int64) {
	rows = make([][]TrailRow, len(b.sources))
	for j, si := range b.sources {
		src := &e.st.Sources[si]
		r := slices.Clone(src.Trail)
		for _, h := range src.Held {
			r = append(r, TrailRow{HeldRow: h})
		}
		slices.SortStableFunc(r, func(x, y TrailRow) int { return cmp.Compare(x.Period, y.Period) })
		rows[j] = r
		for _, t := range r {
			periods = append(periods, t.Period)
		}
	}
	slices.Sort(periods)
	periods = slices.Compact(periods)
	slices.Reverse(periods)
	return rows, periods
}

// meanShiftChangePoint is the maximum-likelihood change point of a shift in
// the mean of each source's standardized residuals (Hinkley 1970, "Inference
// about the change-point in a sequence of random variables"; the shift may
// differ per source): with S_s,k the sum of source s's residuals from period
// k on and n_s,k their number, k̂ = argmax_k Λ_k, Λ_k = Σ_s S_s,k²/n_s,k
// (twice the log-likelihood ratio of a shift at k against none, unit
// variance). It is used when Λ_k̂ exceeds 2·ln n, n the periods searched
// (Schwarz's 1978 penalty for the change point's location): the alarm has
// already rejected "no change"; the test asks whether the data locate it.
func (e *Estimator) meanShiftChangePoint(b *block) *changePoint {
	rows, periods := e.evidence(b)
	if len(periods) < 2 {
		return nil
	}
	m := len(rows)
	sum := make([]float64, m)
	cnt := make([]float64, m)
	next := make([]int, m) // per source, the index of its next row (newest first)
	for j := range rows {
		next[j] = len(rows[j]) - 1
	}
	best, bestAt := 0.0, int64(0)
	for _, p := range periods {
		for j := range rows {
			tr := rows[j]
			for next[j] >= 0 && tr[next[j]].Period >= p {
				z, _ := e.standardized(&tr[next[j]])
				sum[j] += z
				cnt[j]++
				next[j]--
			}
		}
		stat := 0.0
		for j := range sum {
			if cnt[j] > 0 {
				stat += sum[j] * sum[j] / cnt[j]
			}
		}
		if stat > best {
			best, bestAt = stat, p
		}
	}
	if best < 2*math.Log(float64(len(periods))) {
		return nil
	}
	return &changePoint{after: bestAt - 1}
}

// regressionChangePoint is the most probable change point of a two-segment
// regression of the block's residuals (Quandt 1958's two-phase regression,
// Bayesian as in Smith 1975, "A Bayesian approach to inference about a
// change-point in a sequence of random variables"): before period k the
// equations follow the last solve's work factors, from k on those plus an
// increment δ, δ_j ~ N(0, τ_j²) (τ_j = ChangeScale × the flow's last
// coefficient, as averageChanges, floored at 5% of the block's largest). With r̃ and x̃ the residuals and rates
// over their standard deviations, H_k = Σ_{t≥k} x̃x̃ᵀ, g_k = Σ_{t≥k} x̃r̃ and
// M_k = H_k + T⁻², the log Bayes factor of a change at k against none is
// ½ g_kᵀM_k⁻¹g_k − ½ log det M_k − Σ log τ_j; k̂ maximizes it (a uniform prior
// over k). It is used when that exceeds changeEvidence.
func (e *Estimator) regressionChangePoint(b *block) *changePoint {
	rows, periods := e.evidence(b)
	p := len(b.flows)
	if len(periods) < 2 || p == 0 {
		return nil
	}
	col := map[string]int{}
	tau := make([]float64, p)
	floor := 0.0
	for _, i := range b.flows {
		floor = max(floor, math.Abs(e.st.Smooth[i].Raw))
	}
	floor = max(0.05*floor, 1e-9)
	logTau := 0.0
	for c, i := range b.flows {
		col[e.st.Flows[i]] = c
		tau[c] = e.cfg.ChangeScale * max(math.Abs(e.st.Smooth[i].Raw), floor)
		logTau += math.Log(tau[c])
	}
	h := make([]float64, p*p)
	g := make([]float64, p)
	m := make([]float64, p*p)
	next := make([]int, len(rows))
	for j := range rows {
		next[j] = len(rows[j]) - 1
	}
	excluded := make([]bool, p)
	best, bestAt := math.Inf(-1), int64(0)
	for _, per := range periods {
		for j := range rows {
			tr := rows[j]
			for ; next[j] >= 0 && tr[next[j]].Period >= per; next[j]-- {
				t := &tr[next[j]]
				z, ok := e.standardized(t)
				if !ok {
					continue
				}
				for a, f := range t.Flows {
					ca, known := col[f]
					if !known {
						continue
					}
					xa := t.Rates[a] / t.Scale
					g[ca] += xa * z
					for c, f2 := range t.Flows {
						if cb, known := col[f2]; known {
							h[ca*p+cb] += xa * t.Rates[c] / t.Scale
						}
					}
				}
			}
		}
		copy(m, h)
		for c := range tau {
			m[c*p+c] += 1 / (tau[c] * tau[c])
			excluded[c] = false
		}
		l, dropped := cholesky(m, p, excluded)
		if len(dropped) > 0 {
			continue
		}
		x := cholSolve(l, p, excluded, g)
		logBF := -logTau
		for c := range g {
			logBF += 0.5*g[c]*x[c] - math.Log(l[c*p+c])
		}
		if logBF > best {
			best, bestAt = logBF, per
		}
	}
	if !(best >= changeEvidence) {
		return nil
	}
	return &changePoint{after: bestAt - 1}
}

// changeEvidence is the least log Bayes factor of a change at the most
// probable change point against none for regressionChangePoint to use it
// (e³ ≈ 20: strong evidence, Kass and Raftery 1995).
const changeEvidence = 3

// subtractFromPrevious takes the equations of the block's trails after
// period after out of the previous regime's sums, at the weight they have
// there (the current regime's, which was just kept or merged into it).
func (e *Estimator) subtractFromPrevious(b block, after int64) {
	st := &e.st
	k := len(st.Flows)
	if len(st.PrevC) != k*k {
		return
	}
	for _, si := range b.sources {
		src := &st.Sources[si]
		for _, t := range src.Trail {
			if t.Period <= after {
				continue
			}
			v := t.Weight * t.V
			v2 := v * v
			src.PrevN = max(src.PrevN-t.Weight, 0)
			src.PrevYY = max(src.PrevYY-v2*t.Y*t.Y, 0)
			src.PrevB0 = max(src.PrevB0-v2, 0)
			src.PrevBY -= v2 * t.Y
			for a, f := range t.Flows {
				i, ok := e.flowIdx[f]
				if !ok {
					continue
				}
				xa := t.Rates[a]
				st.PrevD[i] -= v2 * xa * t.Y
				if len(src.PrevBX) <= i {
					src.PrevBX = append(src.PrevBX, make([]float64, i+1-len(src.PrevBX))...)
				}
				src.PrevBX[i] -= v2 * xa
				for c, f2 := range t.Flows {
					if j, ok := e.flowIdx[f2]; ok {
						st.PrevC[i*k+j] -= v2 * xa * t.Rates[c]
					}
				}
			}
		}
	}
	for i := 0; i < k; i++ {
		st.PrevC[i*k+i] = max(st.PrevC[i*k+i], 0)
	}
}

// foldMoved folds a trail row into the new regime at the weight it had in
// the sums; its residual, against the old model, is dropped.
func (e *Estimator) foldMoved(si int, t TrailRow, period int64) {
	h := t.HeldRow
	h.Resid, h.Scale = 0, 0
	e.foldWeighted(si, h, t.Weight, period)
}
