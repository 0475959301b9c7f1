package signature

import (
	"cmp"
	"math"
	"slices"
)

// weightedQuantile returns the q-quantile (0 ≤ q ≤ 1) of values with
// non-negative weights, by linear interpolation between the midpoints of the
// weights: value i sits at (C_i − w_i/2)/W, where C_i is the cumulative weight
// through i and W the total. With equal weights this is the usual (i−½)/n
// plotting position, so the median of an odd count is its middle value and of
// an even count the mean of the middle two. It returns NaN for no weight.
func weightedQuantile(values, weights []float64, q float64) float64 {
	type vw struct{ v, w float64 }
	xs := make([]vw, 0, len(values))
	var total float64
	for i, v := range values {
		if weights[i] > 0 {
			xs = append(xs, vw{v, weights[i]})
			total += weights[i]
		}
	}
	if total == 0 {
		return math.NaN()
	}
	slices.SortStableFunc(xs, func(a, b vw) int { return cmp.Compare(a.v, b.v) })
	target := q * total
	var cum float64
	prevPos, prevV := math.Inf(-1), xs[0].v
	for _, x := range xs {
		pos := cum + x.w/2
		if target <= pos {
			if math.IsInf(prevPos, -1) {
				return x.v
			}
			return prevV + (x.v-prevV)*(target-prevPos)/(pos-prevPos)
		}
		cum += x.w
		prevPos, prevV = pos, x.v
	}
	return xs[len(xs)-1].v
}

// mwResult is a two-sided Mann-Whitney U test of y against x.
type mwResult struct {
	U     float64 // U of y: the number of pairs with y > x, ties counting ½
	Z     float64 // the normal score of U (0 for the exact test)
	P     float64 // two-sided p-value
	Exact bool    // p from the exact null distribution (small samples, no ties)
}

// exactLimit is the largest n_x + n_y for which the exact null distribution of
// U is used when there are no ties.
const exactLimit = 40

// mannWhitney tests whether x and y come from the same distribution against a
// shift in either direction.
func mannWhitney(x, y []float64) mwResult {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return mwResult{P: math.NaN()}
	}
	type obs struct {
		v   float64
		inY bool
	}
	all := make([]obs, 0, m+n)
	for _, v := range x {
		all = append(all, obs{v, false})
	}
	for _, v := range y {
		all = append(all, obs{v, true})
	}
	slices.SortStableFunc(all, func(a, b obs) int { return cmp.Compare(a.v, b.v) })
	N := float64(m + n)
	var rankY, tieTerm float64
	ties := false
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		t := float64(j - i)
		if t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		mid := float64(i+j+1) / 2 // mean of ranks i+1..j
		for k := i; k < j; k++ {
			if all[k].inY {
				rankY += mid
			}
		}
		i = j
	}
	fm, fn := float64(m), float64(n)
	u := rankY - fn*(fn+1)/2
	if !ties && m+n <= exactLimit {
		return mwResult{U: u, P: exactTwoSided(m, n, int(math.Round(u))), Exact: true}
	}
	mean := fm * fn / 2
	variance := fm * fn / 12 * (N + 1 - tieTerm/(N*(N-1)))
	if variance <= 0 {
		return mwResult{U: u, P: 1}
	}
	d := u - mean
	// Continuity correction toward the mean.
	switch {
	case d > 0.5:
		d -= 0.5
	case d < -0.5:
		d += 0.5
	default:
		d = 0
	}
	z := d / math.Sqrt(variance)
	p := math.Erfc(math.Abs(z) / math.Sqrt2)
	return mwResult{U: u, Z: z, P: math.Min(1, p)}
}

// exactTwoSided is the two-sided p-value of U = u for sample sizes m and n
// under the null, from the exact distribution: twice the smaller tail.
func exactTwoSided(m, n, u int) float64 {
	dist := uDistribution(m, n)
	var total, lower, upper float64
	for k, c := range dist {
		total += c
		if k <= u {
			lower += c
		}
		if k >= u {
			upper += c
		}
	}
	return math.Min(1, 2*math.Min(lower, upper)/total)
}

// uDistribution returns the number of arrangements giving each U = 0…m·n,
// by the recursion f(u; m, n) = f(u − n; m − 1, n) + f(u; m, n − 1).
func uDistribution(m, n int) []float64 {
	// prev[j][u] holds f(u; i−1, j) while row i is built.
	prev := make([][]float64, n+1)
	for j := range prev {
		prev[j] = []float64{1} // f(0; 0, j) = 1
	}
	for i := 1; i <= m; i++ {
		cur := make([][]float64, n+1)
		cur[0] = []float64{1} // f(0; i, 0) = 1
		for j := 1; j <= n; j++ {
			row := make([]float64, i*j+1)
			for u := range row {
				if u-j >= 0 && u-j < len(prev[j]) {
					row[u] += prev[j][u-j]
				}
				if u < len(cur[j-1]) {
					row[u] += cur[j-1][u]
				}
			}
			cur[j] = row
		}
		prev = cur
	}
	return prev[n]
}

// hodgesLehmann returns the Hodges-Lehmann estimate of the shift of y over x
// (the median of all pairwise differences y_j − x_i) and its distribution-free
// confidence interval at level 1 − alpha, from the normal approximation of U
// (Lehmann 1975, §2.6).
func hodgesLehmann(x, y []float64, alpha float64) (est, lo, hi float64) {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	d := make([]float64, 0, m*n)
	for _, b := range y {
		for _, a := range x {
			d = append(d, b-a)
		}
	}
	slices.Sort(d)
	k := len(d)
	if k%2 == 1 {
		est = d[k/2]
	} else {
		est = (d[k/2-1] + d[k/2]) / 2
	}
	z := normalQuantile(1 - alpha/2)
	fm, fn := float64(m), float64(n)
	c := int(math.Floor(fm*fn/2 - z*math.Sqrt(fm*fn*(fm+fn+1)/12)))
	if c < 1 {
		return est, d[0], d[k-1]
	}
	return est, d[c-1], d[k-c]
}

// normalQuantile is the inverse of the standard normal CDF (Acklam's rational
// approximation, refined by one Newton step; error below 1e-12).
func normalQuantile(p float64) float64 {
	if p <= 0 {
		return math.Inf(-1)
	}
	if p >= 1 {
		return math.Inf(1)
	}
	a := [6]float64{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00}
	b := [5]float64{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01}
	c := [6]float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	d := [4]float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00}
	var x float64
	switch {
	case p < 0.02425:
		q := math.Sqrt(-2 * math.Log(p))
		x = (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	case p <= 1-0.02425:
		q := p - 0.5
		r := q * q
		x = (((((a[0]*r+a[1])*r+a[2])*r+a[3])*r+a[4])*r + a[5]) * q / (((((b[0]*r+b[1])*r+b[2])*r+b[3])*r+b[4])*r + 1)
	default:
		q := math.Sqrt(-2 * math.Log(1-p))
		x = -(((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	}
	e := 0.5*math.Erfc(-x/math.Sqrt2) - p
	u := e * math.Sqrt(2*math.Pi) * math.Exp(x*x/2)
	return x - u/(1+x*u/2)
}
