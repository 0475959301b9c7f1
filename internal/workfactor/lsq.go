package workfactor

import (
	"math"
	"slices"
)

// solveColumns solves one block's least-squares problem on the given columns
// (§3.1, equation 4, with fixed columns moved to the left-hand side) and
// scores every column (§3.2). The steps:
//
//  1. normalEquations: C_g = XᵀX and D_g = XᵀY over the columns (gram).
//  2. regimeTotals: N_h, YᵀY, Σv², Σv²ρΩ of the regimes the columns span.
//  3. freeProblem: C_FF α_F = D_F − C_F,fixed·α_fixed.
//  4. standardize: S = diag(C_FF)^-½, solve (S C_FF S) x = S D_F.
//  5. solveStandardized: x and diag of its covariance over the MSE (Method).
//  6. residuals: SSE = YᵀY − 2αᵀD + αᵀCα, MSE = SSE/(N_h − K − 1), R².
//  7. columnFits: g_k = α̂_k/S_k with S_k² = MSE·diag(C⁻¹)_k, and the
//     plausibility bound α̂ ≤ 2·D_c/C_cc.
func (e *Estimator) solveColumns(b *block, cols []column) fit {
	cg, dg := e.normalEquations(cols)
	b = regimeTotals(b, cols)
	free, cf, df := freeProblem(cols, cg, dg)
	st := standardize(cf, df, len(free))
	x, vdiag := e.solveStandardized(st)
	n := len(cols)
	f := fit{cols: make([]colFit, n)}
	alpha := make([]float64, n)
	for a, c := range cols {
		if c.fixed {
			alpha[a] = c.value
		}
	}
	for p, a := range free {
		if !st.excluded[p] {
			alpha[a] = x[p] * st.scale[p]
			f.columns++
		}
	}
	f.residuals(b, alpha, cg, dg)
	f.columnFits(cols, free, alpha, st, vdiag, cg, dg)
	return f
}

// normalEquations returns the columns' C_g (n×n) and D_g: each regime's part
// (gram) for the regimes the columns span.
func (e *Estimator) normalEquations(cols []column) (cg, dg []float64) {
	n := len(cols)
	cg = make([]float64, n*n)
	dg = make([]float64, n)
	usesCur, usesPrev := false, false
	for _, c := range cols {
		usesCur = usesCur || c.regime.has(current)
		usesPrev = usesPrev || c.regime.has(previous)
	}
	for _, r := range []regime{current, previous} {
		if (r == previous && usesPrev) || (r == current && usesCur) {
			e.gram(r, cols, cg, dg)
		}
	}
	return cg, dg
}

// regimeTotals returns the block with the totals (N_h, YᵀY, Σv², Σv²ρΩ) of
// the regimes the columns span: the current one's, the previous one's, or
// their sums.
func regimeTotals(b *block, cols []column) *block {
	usesCur, usesPrev := false, false
	for _, c := range cols {
		usesCur = usesCur || c.regime.has(current)
		usesPrev = usesPrev || c.regime.has(previous)
	}
	if !usesPrev {
		return b
	}
	t := *b
	t.nh, t.yy, t.b0, t.by = b.pnh, b.pyy, b.pb0, b.pby
	if usesCur {
		t.nh, t.yy, t.b0, t.by = b.nh+b.pnh, b.yy+b.pyy, b.b0+b.pb0, b.by+b.pby
	}
	return &t
}

// freeProblem returns the indices of the free columns and their problem
// C_FF α_F = D_F − C_F,fixed·α_fixed (fixed columns' contributions moved to
// the right-hand side).
func freeProblem(cols []column, cg, dg []float64) (free []int, cf, df []float64) {
	n := len(cols)
	for a, c := range cols {
		if !c.fixed {
			free = append(free, a)
		}
	}
	m := len(free)
	cf = make([]float64, m*m)
	df = make([]float64, m)
	for p, a := range free {
		df[p] = dg[a]
		for c, col := range cols {
			if col.fixed {
				df[p] -= cg[a*n+c] * col.value
			}
		}
		for q, bi := range free {
			cf[p*m+q] = cg[a*n+bi]
		}
	}
	return free, cf, df
}

// standardized is a problem scaled to a unit diagonal: cs = S·C·S and
// ds = S·D with S = diag(C)^-½ (scale); a column with no positive finite
// diagonal is excluded (singular).
type standardized struct {
	m        int
	cs, ds   []float64
	scale    []float64
	excluded []bool
}

// standardize scales C x = D to a unit diagonal (the paper's future work
// names scaling and standardization for numerical stability).
func standardize(cf, df []float64, m int) standardized {
	s := standardized{m: m, scale: make([]float64, m), excluded: make([]bool, m),
		cs: make([]float64, m*m), ds: make([]float64, m)}
	for i := 0; i < m; i++ {
		if d := cf[i*m+i]; d > 0 && !math.IsInf(d, 0) {
			s.scale[i] = 1 / math.Sqrt(d)
		} else {
			s.excluded[i] = true
		}
	}
	for i := 0; i < m; i++ {
		s.ds[i] = df[i] * s.scale[i]
		for j := 0; j < m; j++ {
			s.cs[i*m+j] = cf[i*m+j] * s.scale[i] * s.scale[j]
		}
	}
	return s
}

// solveStandardized returns the standardized solution x and the diagonal of
// Cov(x)/MSE, by the configured Method:
//   - Plain: x = C⁻¹D, Cov/MSE = C⁻¹;
//   - Ridge: x = (C + λI)⁻¹D, Cov/MSE = A⁻¹ C A⁻¹ with A = C + λI;
//   - NNLS: Lawson and Hanson's active set, Cov/MSE = C⁻¹ over the passive set.
func (e *Estimator) solveStandardized(s standardized) (x, vdiag []float64) {
	m, cs, ds, excluded := s.m, s.cs, s.ds, s.excluded
	switch e.cfg.Method {
	case Plain:
		l, _ := cholesky(cs, m, excluded)
		x = cholSolve(l, m, excluded, ds)
		vdiag = inverseDiagonal(l, m, excluded)
	case Ridge:
		ar := slices.Clone(cs)
		for i := 0; i < m; i++ {
			ar[i*m+i] += e.cfg.RidgeLambda
		}
		l, _ := cholesky(ar, m, excluded)
		x = cholSolve(l, m, excluded, ds)
		inv := cholInverse(l, m, excluded)
		vdiag = make([]float64, m)
		for i := 0; i < m; i++ {
			v := 0.0
			for p := 0; p < m; p++ {
				for q := 0; q < m; q++ {
					v += inv[i*m+p] * cs[p*m+q] * inv[q*m+i]
				}
			}
			vdiag[i] = v
		}
	case NNLS:
		var passive []bool
		x, passive = nnls(cs, m, excluded, ds)
		ex := make([]bool, m)
		for i := range ex {
			ex[i] = excluded[i] || !passive[i]
		}
		l, _ := cholesky(cs, m, ex)
		vdiag = inverseDiagonal(l, m, ex)
	}
	return x, vdiag
}

// inverseDiagonal is diag(C⁻¹) from C's Cholesky factor l.
func inverseDiagonal(l []float64, m int, excluded []bool) []float64 {
	inv := cholInverse(l, m, excluded)
	d := make([]float64, m)
	for i := range d {
		d[i] = inv[i*m+i]
	}
	return d
}

// residuals sets SSE = YᵀY − 2αᵀD + αᵀCα (floored at 0), the degrees of
// freedom N_h − K − 1, MSE = SSE/dof (equation 5), and R² = 1 − SSE/SST with
// the weighted SST = YᵀY − (Σv²y)²/Σv². With too few equations to measure
// the noise (right after a shift), the block's remembered σ_y² stands in:
// MSE ≈ σ_y²·Σv²/N_h.
func (f *fit) residuals(b *block, alpha, cg, dg []float64) {
	n := len(alpha)
	sse := b.yy
	for i := 0; i < n; i++ {
		sse -= 2 * alpha[i] * dg[i]
		for j := 0; j < n; j++ {
			sse += alpha[i] * alpha[j] * cg[i*n+j]
		}
	}
	f.sse = max(sse, 0)
	f.nh, f.b0 = b.nh, b.b0
	f.dof = b.nh - float64(f.columns) - 1
	switch {
	case f.dof >= 1:
		f.mse, f.mseOK = f.sse/f.dof, true
	case b.sigma2 > 0 && f.columns > 0 && b.nh > 0:
		f.mse, f.mseOK = b.sigma2*b.b0/b.nh, true
	case f.dof > 0:
		f.mse, f.mseOK = f.sse/f.dof, true
	}
	// The paper's YᵀY − N_hȲ² mixes squared and plain weights once rows are
	// aged, and can be negative; this is its consistent weighted form (equal
	// without aging).
	if b.b0 > 0 {
		f.sst = b.yy - b.by*b.by/b.b0
		if f.sst > 0 {
			f.r2, f.r2OK = 1-f.sse/f.sst, true
		}
	}
}

// columnFits scores each column: a fixed one keeps its value; a free one gets
// g = α̂/S with S² = MSE·vdiag·scale² (±gMax when S = 0), and is implausible
// when α̂ > 2·max(D_c, 0)/C_cc. With α ≥ 0 and background ≥ 0 a column's work
// factor is at most D_c/C_cc, the coefficient it would get if it alone
// explained the CPU of its equations; twice that is a fitting artefact
// (typically a flow seen in one or two periods, whose column acts as an
// indicator of those periods).
func (f *fit) columnFits(cols []column, free []int, alpha []float64, st standardized, vdiag, cg, dg []float64) {
	n := len(cols)
	for a, col := range cols {
		if col.fixed {
			f.cols[a] = colFit{alpha: col.value, fixed: true}
		}
	}
	for p, a := range free {
		c := colFit{alpha: alpha[a], singular: st.excluded[p]}
		if !c.singular && f.mseOK {
			s := math.Sqrt(f.mse * vdiag[p] * st.scale[p] * st.scale[p])
			switch {
			case s > 0 && !math.IsInf(s, 0) && !math.IsNaN(s):
				c.g = c.alpha / s
			case c.alpha > 0:
				c.g = gMax
			case c.alpha < 0:
				c.g = -gMax
			}
			c.g = min(max(c.g, -gMax), gMax)
			c.gOK = !math.IsNaN(c.g)
		}
		if math.IsNaN(c.alpha) || math.IsInf(c.alpha, 0) {
			c.alpha, c.singular, c.gOK = 0, true, false
		}
		if len(cols[a].flows) > 0 && cg[a*n+a] > 0 && c.alpha > 2*max(dg[a], 0)/cg[a*n+a] {
			c.implausible = true
		}
		f.cols[a] = c
	}
}
