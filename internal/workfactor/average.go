package workfactor

import (
	"cmp"
	"math"
	"slices"
)

// maxAverageColumns bounds the exact model averaging of averageChanges: the
// 2^m subsets of the m flow columns whose increments are most significant in
// the full model are enumerated; the others are taken as unchanged.
const maxAverageColumns = 10

// changePosterior is the model-averaged fit of averageChanges, by column of
// the block's layout: the current regime's work factor (posterior mean), its
// posterior standard deviation, and the posterior probability that the
// column changed at the last shift.
type changePosterior struct {
	alpha, sd, inclusion []float64
	// delta is the posterior mean of the column's increment at the shift.
	delta []float64
}

// averageChanges is Bayesian model averaging over which columns changed at the
// block's last shift, instead of one hard selection.
//
// Every free column a has a coefficient β_a over both regimes and, if its
// flows' work factor changed, an increment δ_a over the current regime's
// equations: y = Xβ + Z_S δ_S + ε, Var ε = σ²·W⁻¹ (the aged weights), σ² the
// MSE of the model with every increment. The background column gets no
// increment: a release changes work factors, and a background increment is
// confounded with the change of any flow whose rate is steady. Priors:
//
//   - β flat;
//   - a changed column's increment δ_a ~ N(0, τ_a²), τ_a = ChangeScale ·
//     max(|β̂_a|, |β̂_a + δ̂_a|), the larger of the two regimes' work factors in
//     the full model: a release moves a work factor by a fraction of itself
//     (ChangeScale ½: halving or doubling is one standard deviation). Scaled
//     by the previous regime alone, a flow whose work factor grew from a small
//     value was held unchanged (§5.5's collinear placement, per process: D
//     38% off instead of 10%);
//   - the subsets: with ChangePrior π, each of the m candidates changed
//     independently with probability π; with ChangePrior 0, π uniform on [0, 1]
//     (beta-binomial, p(S) = 1/((m+1)·C(m, |S|))), which learns from the data how
//     many columns a release changed and corrects for the number of subsets.
//
// With β integrated out, only the Schur complement of the normal equations
// matters:
//
//	A = C_ZZ − C_ZX C_XX⁻¹ C_XZ,  b = D_Z − C_ZX C_XX⁻¹ D_X,
//
// and per subset S, with M_S = A_SS + σ² T_S⁻² (T = diag τ):
//
//	log p(S | y) = log p(S) − ½ log det(I + T_S A_SS T_S / σ²) + ½ b_Sᵀ M_S⁻¹ b_S / σ² + const,
//	δ̂_S = M_S⁻¹ b_S,  Cov(δ_S | S, y) = σ² M_S⁻¹.
//
// The current regime's coefficients are β + Eδ = β̂⁰ + (E − P)δ, with
// β̂⁰ = C_XX⁻¹D_X, P = C_XX⁻¹C_XZ and E mapping each increment to its column;
// their posterior mean is β̂⁰ + (E − P)δ̄ (δ̄ the probability-weighted mean of
// the δ̂_S) and their variance σ²(C_XX⁻¹)_aa + ((E − P) Cov(δ) (E − P)ᵀ)_aa,
// Cov(δ) that of the mixture. A hard selection pays the full error of one
// wrong subset; the average hedges between subsets the data cannot tell
// apart. ok is false when a column is singular over both regimes (the caller
// then selects by backward elimination).
func (e *Estimator) averageChanges(b *block, cols []column) (post changePosterior, ok bool) {
	n := len(cols)
	joint := slices.Clone(cols)
	for a := range joint {
		joint[a].regime = both
	}
	var base, incOf []int // free columns; the base position of each increment
	for a, c := range cols {
		if !c.fixed {
			base = append(base, a)
		}
	}
	for j, a := range base {
		if len(cols[a].bg) == 0 {
			inc := cols[a]
			inc.regime = current
			joint = append(joint, inc)
			incOf = append(incOf, j)
		}
	}
	p, q := len(base), len(incOf)
	if q == 0 {
		return post, false
	}
	full := e.solveColumns(b, joint)
	if !full.mseOK || !(full.mse > 0) {
		return post, false
	}
	sigma2 := full.mse
	cg, dg := e.normalEquations(joint)
	free, cf, df := freeProblem(joint, cg, dg)
	st := standardize(cf, df, len(free))
	sp := schurChanges(st, p, q)
	if sp == nil {
		return post, false
	}
	// τ per increment, in standardized units (δ_std = δ/scale).
	tau := make([]float64, q)
	var cand []int
	for j, bj := range incOf {
		ref := full.cols[base[bj]]
		if ref.singular {
			continue
		}
		scale := math.Abs(ref.alpha) // the larger of the two regimes' work factors
		if inc := full.cols[n+j]; !inc.singular {
			scale = max(scale, math.Abs(ref.alpha+inc.alpha))
		}
		tau[j] = e.cfg.ChangeScale * scale / st.scale[p+j]
		if !st.excluded[p+j] && tau[j] > 0 && !math.IsInf(tau[j], 0) && sp.a[j*q+j] > 0 {
			cand = append(cand, j)
		}
	}
	z := func(j int) float64 {
		if c := full.cols[n+j]; c.gOK {
			return math.Abs(c.g)
		}
		return 0
	}
	slices.SortStableFunc(cand, func(x, y int) int { return cmp.Compare(z(y), z(x)) })
	cand = cand[:min(len(cand), maxAverageColumns)]
	slices.Sort(cand)
	mix := sp.average(cand, tau, sigma2, e.cfg.ChangePrior)
	post = changePosterior{alpha: make([]float64, n), sd: make([]float64, n), inclusion: make([]float64, n), delta: make([]float64, n)}
	// Row a of E − P, in the column's own units (a column and its increment
	// are scaled differently when standardized).
	row := make([]float64, q)
	for i, a := range base {
		sx := st.scale[i]
		for j := range row {
			row[j] = -sx * sp.proj[i*q+j]
			if incOf[j] == i {
				row[j] += st.scale[p+j]
				post.inclusion[a] = mix.inclusion[j]
				post.delta[a] = st.scale[p+j] * mix.mean[j]
			}
		}
		mean := sx * sp.beta0[i]
		v := sx * sx * sigma2 * sp.xxInvDiag[i]
		for j := range row {
			mean += row[j] * mix.mean[j]
			for k := range row {
				v += row[j] * mix.cov[j*q+k] * row[k]
			}
		}
		post.alpha[a] = mean
		post.sd[a] = math.Sqrt(max(v, 0))
	}
	return post, true
}

// changeSchur is the standardized joint problem of averageChanges with the
// flat-prior coefficients β profiled out: β̂⁰ = C_XX⁻¹D_X, P = C_XX⁻¹C_XZ
// (proj, p×q), the diagonal of C_XX⁻¹, and A (q×q) and b, the Schur
// complement and right-hand side of the increments.
type changeSchur struct {
	q         int
	beta0     []float64
	proj      []float64
	xxInvDiag []float64
	a, b      []float64
}

// schurChanges builds changeSchur from a standardized problem whose first p
// columns are the free columns and the next q the increments; nil when a
// free column is singular.
func schurChanges(st standardized, p, q int) *changeSchur {
	m := st.m
	gxx := make([]float64, p*p)
	dx := make([]float64, p)
	for i := 0; i < p; i++ {
		if st.excluded[i] {
			return nil
		}
		dx[i] = st.ds[i]
		for j := 0; j < p; j++ {
			gxx[i*p+j] = st.cs[i*m+j]
		}
	}
	ex := make([]bool, p)
	l, dropped := cholesky(gxx, p, ex)
	if len(dropped) > 0 {
		return nil
	}
	s := &changeSchur{q: q, beta0: cholSolve(l, p, ex, dx), proj: make([]float64, p*q),
		xxInvDiag: inverseDiagonal(l, p, ex), a: make([]float64, q*q), b: make([]float64, q)}
	col := make([]float64, p)
	for j := 0; j < q; j++ {
		for i := 0; i < p; i++ {
			col[i] = st.cs[i*m+p+j]
		}
		x := cholSolve(l, p, ex, col)
		for i := 0; i < p; i++ {
			s.proj[i*q+j] = x[i]
		}
	}
	for i := 0; i < q; i++ {
		if st.excluded[p+i] {
			continue
		}
		s.b[i] = st.ds[p+i]
		for k := 0; k < p; k++ {
			s.b[i] -= st.cs[k*m+p+i] * s.beta0[k]
		}
		for j := 0; j < q; j++ {
			if st.excluded[p+j] {
				continue
			}
			v := st.cs[(p+i)*m+p+j]
			for k := 0; k < p; k++ {
				v -= st.cs[k*m+p+i] * s.proj[k*q+j]
			}
			s.a[i*q+j] = v
		}
	}
	return s
}

// changeMixture is the model average of the increments: mean δ̄, covariance
// E[δδᵀ] − δ̄δ̄ᵀ, and each increment's posterior inclusion probability.
type changeMixture struct {
	mean, cov, inclusion []float64
}

// LogSubsetPrior is log p(S) for a subset of k of m candidates (Config.ChangePrior,
// exported for the scenarios' averaging reference): independent
// inclusions with probability prior, or the beta-binomial 1/((m+1)·C(m, k))
// when prior is 0.
func LogSubsetPrior(k, m int, prior float64) float64 {
	if prior > 0 {
		return float64(k)*math.Log(prior) + float64(m-k)*math.Log1p(-prior)
	}
	a, _ := math.Lgamma(float64(k + 1))
	b, _ := math.Lgamma(float64(m - k + 1))
	c, _ := math.Lgamma(float64(m + 2))
	return a + b - c
}

// average enumerates every subset S of cand (increment indices), weighs it by
// its posterior probability and accumulates the mixture's moments. Weights are
// kept relative to the largest log-weight seen so far (no overflow).
func (s *changeSchur) average(cand []int, tau []float64, sigma2, prior float64) changeMixture {
	q, m := s.q, len(cand)
	mix := changeMixture{mean: make([]float64, q), cov: make([]float64, q*q), inclusion: make([]float64, q)}
	second := make([]float64, q*q)
	top, total := math.Inf(-1), 0.0
	idx := make([]int, 0, m)
	for mask := 0; mask < 1<<m; mask++ {
		idx = idx[:0]
		for i, j := range cand {
			if mask>>i&1 == 1 {
				idx = append(idx, j)
			}
		}
		k := len(idx)
		mm := make([]float64, k*k)
		rhs := make([]float64, k)
		logw := LogSubsetPrior(k, m, prior)
		for r, i := range idx {
			rhs[r] = s.b[i]
			for c, j := range idx {
				mm[r*k+c] = s.a[i*q+j]
			}
			mm[r*k+r] += sigma2 / (tau[i] * tau[i])
			logw -= 0.5 * math.Log(tau[i]*tau[i]/sigma2)
		}
		ex := make([]bool, k)
		l, dropped := cholesky(mm, k, ex)
		if len(dropped) > 0 {
			continue
		}
		d := cholSolve(l, k, ex, rhs)
		quad := 0.0
		for r := range d {
			quad += rhs[r] * d[r]
			logw -= math.Log(l[r*k+r]) // −½ log det M_S
		}
		logw += 0.5 * quad / sigma2
		if math.IsNaN(logw) || math.IsInf(logw, 0) {
			continue
		}
		if logw > top {
			f := math.Exp(top - logw)
			total *= f
			for i := range mix.mean {
				mix.mean[i] *= f
				mix.inclusion[i] *= f
			}
			for i := range second {
				second[i] *= f
			}
			top = logw
		}
		w := math.Exp(logw - top)
		total += w
		inv := cholInverse(l, k, ex)
		for r, i := range idx {
			mix.mean[i] += w * d[r]
			mix.inclusion[i] += w
			for c, j := range idx {
				second[i*q+j] += w * (sigma2*inv[r*k+c] + d[r]*d[c])
			}
		}
	}
	if !(total > 0) {
		return mix
	}
	for i := range mix.mean {
		mix.mean[i] /= total
		mix.inclusion[i] /= total
	}
	for i := 0; i < q; i++ {
		for j := 0; j < q; j++ {
			mix.cov[i*q+j] = second[i*q+j]/total - mix.mean[i]*mix.mean[j]
		}
	}
	return mix
}
