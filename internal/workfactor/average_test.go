package workfactor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// With one candidate the model average has a closed form: the Bayes factor
// of "changed" is (1 + τ²A/σ²)^(−½)·exp(½ b²/(σ²(A + σ²/τ²))), the inclusion
// probability πBF/(πBF + 1 − π), and the mean increment that probability
// times the ridge estimate b/(A + σ²/τ²).
func TestAverageChangesOneCandidate(t *testing.T) {
	const a, b, tau, sigma2 = 4.0, 3.0, 0.8, 0.5
	bf := math.Pow(1+tau*tau*a/sigma2, -0.5) * math.Exp(0.5*b*b/(sigma2*(a+sigma2/(tau*tau))))
	s := &changeSchur{q: 1, a: []float64{a}, b: []float64{b}}
	for _, prior := range []float64{0.1, 0.25, 0} {
		pi := prior
		if prior == 0 {
			pi = 0.5 // beta-binomial over one candidate: ½ and ½
		}
		want := pi * bf / (pi*bf + 1 - pi)
		mix := s.average([]int{0}, []float64{tau}, sigma2, prior)
		if math.Abs(mix.inclusion[0]-want) > 1e-12 {
			t.Errorf("prior %v: inclusion %v, want %v", prior, mix.inclusion[0], want)
		}
		if mean := want * b / (a + sigma2/(tau*tau)); math.Abs(mix.mean[0]-mean) > 1e-12 {
			t.Errorf("prior %v: mean increment %v, want %v", prior, mix.mean[0], mean)
		}
	}
}

// Against the marginal likelihood written out: under subset S the profiled
// statistic b = Aδ + e, e ~ N(0, σ²A), so b ~ N(0, σ²A + A_·S T_S² A_S·).
// The inclusion probabilities of three correlated candidates from those
// densities must equal average's, which uses only the |S|×|S| systems.
func TestAverageChangesMatchesMarginal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	const q, sigma2 = 3, 0.7
	// A random positive definite A = XᵀX.
	x := make([]float64, 8*q)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	a := make([]float64, q*q)
	for i := 0; i < q; i++ {
		for j := 0; j < q; j++ {
			for r := 0; r < 8; r++ {
				a[i*q+j] += x[r*q+i] * x[r*q+j]
			}
		}
	}
	b := []float64{2.5, -0.4, 1.1}
	tau := []float64{0.9, 0.5, 1.4}
	for _, prior := range []float64{0.3, 0} {
		mix := (&changeSchur{q: q, a: a, b: b}).average([]int{0, 1, 2}, tau, sigma2, prior)
		w := make([]float64, 1<<q)
		total := 0.0
		for mask := range w {
			k := 0
			cov := make([]float64, q*q)
			for i := 0; i < q; i++ {
				for j := 0; j < q; j++ {
					cov[i*q+j] = sigma2 * a[i*q+j]
					for s := 0; s < q; s++ {
						if mask>>s&1 == 1 {
							cov[i*q+j] += a[i*q+s] * tau[s] * tau[s] * a[s*q+j]
						}
					}
				}
			}
			for s := 0; s < q; s++ {
				k += mask >> s & 1
			}
			inv, det := invert3(cov)
			quad := 0.0
			for i := 0; i < q; i++ {
				for j := 0; j < q; j++ {
					quad += b[i] * inv[i*q+j] * b[j]
				}
			}
			w[mask] = math.Exp(LogSubsetPrior(k, q, prior) - 0.5*math.Log(det) - 0.5*quad)
			total += w[mask]
		}
		for s := 0; s < q; s++ {
			want := 0.0
			for mask := range w {
				if mask>>s&1 == 1 {
					want += w[mask] / total
				}
			}
			if math.Abs(mix.inclusion[s]-want) > 1e-9 {
				t.Errorf("prior %v, candidate %d: inclusion %v, want %v", prior, s, mix.inclusion[s], want)
			}
		}
	}
}

// invert3 returns the inverse and determinant of a 3×3 matrix (cofactors).
func invert3(m []float64) ([]float64, float64) {
	c := func(i, j int) float64 {
		r := [2]int{}
		k := 0
		for x := 0; x < 3; x++ {
			if x != i {
				r[k] = x
				k++
			}
		}
		cl := [2]int{}
		k = 0
		for y := 0; y < 3; y++ {
			if y != j {
				cl[k] = y
				k++
			}
		}
		v := m[r[0]*3+cl[0]]*m[r[1]*3+cl[1]] - m[r[0]*3+cl[1]]*m[r[1]*3+cl[0]]
		if (i+j)%2 == 1 {
			v = -v
		}
		return v
	}
	det := m[0]*c(0, 0) + m[1]*c(0, 1) + m[2]*c(0, 2)
	inv := make([]float64, 9)
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			inv[j*3+i] = c(i, j) / det
		}
	}
	return inv, det
}
