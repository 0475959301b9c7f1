package workfactor

import "math"

// Small dense linear algebra on the normal equations. K (the number of columns
// solved at once) is the number of significant flows of one block, tens at most,
// so O(K³) per solve is nothing; what matters is that every routine is
// deterministic and reports a singular pivot instead of producing Inf or NaN.

// pivotTol is the smallest acceptable Cholesky pivot of a standardized (unit
// diagonal) matrix. A column whose pivot falls below it is, to working precision,
// a linear combination of the columns before it: its estimate "represents a
// problem with the floating-point calculations" (paper §4.3) and it fails.
const pivotTol = 1e-10

// cholesky factors the symmetric matrix a (n×n, row-major) as L·Lᵀ over the
// columns not excluded. A column whose pivot is below pivotTol·a[j][j] is added to
// excluded and skipped, so the factor covers the remaining columns. It returns the
// factor (entries of excluded rows and columns are zero) and the columns it
// excluded, in order.
func cholesky(a []float64, n int, excluded []bool) (l []float64, dropped []int) {
	l = make([]float64, n*n)
	for j := 0; j < n; j++ {
		if excluded[j] {
			continue
		}
		d := a[j*n+j]
		for k := 0; k < j; k++ {
			d -= l[j*n+k] * l[j*n+k]
		}
		if !(d > pivotTol*math.Abs(a[j*n+j])) || !(a[j*n+j] > 0) || math.IsInf(d, 0) {
			excluded[j] = true
			dropped = append(dropped, j)
			continue
		}
		ljj := math.Sqrt(d)
		l[j*n+j] = ljj
		for i := j + 1; i < n; i++ {
			if excluded[i] {
				continue
			}
			s := a[i*n+j]
			for k := 0; k < j; k++ {
				s -= l[i*n+k] * l[j*n+k]
			}
			l[i*n+j] = s / ljj
		}
	}
	return l, dropped
}

// cholSolve solves L·Lᵀ·x = b over the columns not excluded (x is zero on the
// excluded ones).
func cholSolve(l []float64, n int, excluded []bool, b []float64) []float64 {
	y := make([]float64, n)
	for i := 0; i < n; i++ {
		if excluded[i] {
			continue
		}
		s := b[i]
		for k := 0; k < i; k++ {
			s -= l[i*n+k] * y[k]
		}
		y[i] = s / l[i*n+i]
	}
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		if excluded[i] {
			continue
		}
		s := y[i]
		for k := i + 1; k < n; k++ {
			s -= l[k*n+i] * x[k]
		}
		x[i] = s / l[i*n+i]
	}
	return x
}

// cholInverse returns the inverse of L·Lᵀ over the columns not excluded (rows
// and columns of excluded ones are zero).
func cholInverse(l []float64, n int, excluded []bool) []float64 {
	inv := make([]float64, n*n)
	e := make([]float64, n)
	for j := 0; j < n; j++ {
		if excluded[j] {
			continue
		}
		for i := range e {
			e[i] = 0
		}
		e[j] = 1
		x := cholSolve(l, n, excluded, e)
		for i := 0; i < n; i++ {
			inv[i*n+j] = x[i]
		}
	}
	return inv
}

// nnls minimises ½xᵀAx − bᵀx subject to x ≥ 0 (Lawson and Hanson's active-set
// method on the normal equations, A = XᵀX and b = XᵀY) over the columns not
// excluded. It returns x and the passive set (the columns free of their bound).
// Columns that turn out singular inside the passive set are added to excluded.
func nnls(a []float64, n int, excluded []bool, b []float64) (x []float64, passive []bool) {
	x = make([]float64, n)
	passive = make([]bool, n)
	w := make([]float64, n)
	gradient := func() {
		for i := 0; i < n; i++ {
			s := b[i]
			for k := 0; k < n; k++ {
				s -= a[i*n+k] * x[k]
			}
			w[i] = s
		}
	}
	// subSolve solves A_PP z_P = b_P; it reports the singular columns it met.
	subSolve := func() ([]float64, []int) {
		ex := make([]bool, n)
		for i := range ex {
			ex[i] = excluded[i] || !passive[i]
		}
		l, dropped := cholesky(a, n, ex)
		return cholSolve(l, n, ex, b), dropped
	}
	const tol = 1e-12
	for outer := 0; outer < 3*n+3; outer++ {
		gradient()
		best, bestW := -1, tol
		for i := 0; i < n; i++ {
			if excluded[i] || passive[i] {
				continue
			}
			// The scale of w is that of b; compare against the column's own scale.
			if wi := w[i] / math.Sqrt(math.Max(a[i*n+i], tiny)); wi > bestW {
				best, bestW = i, wi
			}
		}
		if best < 0 {
			break
		}
		passive[best] = true
		for inner := 0; inner < 3*n+3; inner++ {
			z, dropped := subSolve()
			for _, d := range dropped {
				// Collinear with the passive columns: it can never enter.
				passive[d] = false
				excluded[d] = true
				x[d] = 0
			}
			allPos := true
			for i := 0; i < n; i++ {
				if passive[i] && z[i] <= 0 {
					allPos = false
				}
			}
			if allPos {
				copy(x, z)
				break
			}
			// Step from x toward z until the first passive coordinate hits zero.
			step := math.Inf(1)
			for i := 0; i < n; i++ {
				if passive[i] && z[i] <= 0 {
					if t := x[i] / (x[i] - z[i]); t < step {
						step = t
					}
				}
			}
			if math.IsInf(step, 1) || math.IsNaN(step) {
				step = 0
			}
			for i := 0; i < n; i++ {
				if passive[i] {
					x[i] += step * (z[i] - x[i])
					if x[i] <= tol*math.Max(1, math.Abs(z[i])) {
						x[i] = 0
						passive[i] = false
					}
				}
			}
		}
	}
	for i := 0; i < n; i++ {
		if !passive[i] {
			x[i] = 0
		}
	}
	return x, passive
}

// tiny guards divisions by quantities that are zero only in degenerate input.
const tiny = 1e-300
