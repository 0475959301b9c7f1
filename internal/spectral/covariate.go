package spectral

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// CovariateBins holds an exogenous series, such as a host's CPU steal
// fraction, on the same grid as a transaction's Bins. Its samples are
// values held over intervals (a scraper's utilization between two scrapes),
// so each bin keeps the time-weighted mean of what overlaps it.
type CovariateBins struct {
	Start, Width float64
	Sum          []float64 // value × seconds
	Cover        []float64 // seconds covered
}

// NewCovariateBins returns n empty bins of width seconds from start.
func NewCovariateBins(start, width float64, n int) *CovariateBins {
	return &CovariateBins{Start: start, Width: width, Sum: make([]float64, n), Cover: make([]float64, n)}
}

// Add spreads the value v, held over (from, to], over the bins it overlaps.
// Non-finite values and empty intervals are ignored.
func (c *CovariateBins) Add(from, to, v float64) {
	if !(to > from) || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	end := c.Start + float64(len(c.Sum))*c.Width
	from, to = math.Max(from, c.Start), math.Min(to, end)
	if !(to > from) {
		return
	}
	first := int((from - c.Start) / c.Width)
	for i := max(0, first); i < len(c.Sum); i++ {
		lo, hi := c.Start+float64(i)*c.Width, c.Start+float64(i+1)*c.Width
		if lo >= to {
			break
		}
		if w := math.Min(hi, to) - math.Max(lo, from); w > 0 {
			c.Sum[i] += v * w
			c.Cover[i] += w
		}
	}
}

// Series returns the mean of each bin. A bin less than a quarter covered is
// treated as empty and filled as FillEmpty fills response times; more than
// half empty is refused (ErrTooSparse).
func (c *CovariateBins) Series() ([]float64, error) {
	count := make([]int, len(c.Sum))
	sum := make([]float64, len(c.Sum))
	for i := range c.Sum {
		if c.Cover[i] >= c.Width/4 {
			count[i], sum[i] = 1, c.Sum[i]/c.Cover[i]
		}
	}
	v, _, err := FillEmpty(sum, count)
	return v, err
}

// Adjustment describes one covariate adjustment (Adjust).
type Adjustment struct {
	// Betas are the fitted coefficients, one per covariate: milliseconds of
	// response time per unit of the covariate.
	Betas []float64 `json:"betas"`
	// NoiseBeforeMs and NoiseAfterMs are the RMS modulus of the spectrum at
	// the frequencies the fit used, before and after.
	NoiseBeforeMs float64 `json:"noise_before_ms"`
	NoiseAfterMs  float64 `json:"noise_after_ms"`
}

// waveHarmonics bounds the harmonics m·k_d, with their aliases, that the
// fit leaves out: a bin-averaged square wave's m-th harmonic is below 1/m of
// its fundamental, so past the ninth it is lost in any noise.
const waveHarmonics = 9

// fitFrequencies are 1 … N/2−1 without the wave's harmonics m·k_d,
// m ≤ waveHarmonics, folded into [0, N/2] as the FFT aliases them.
func fitFrequencies(n, kd int) []int {
	skip := map[int]bool{}
	if kd > 0 {
		for m := 1; m <= waveHarmonics; m++ {
			f := (m * kd) % n
			skip[min(f, n-f)] = true
		}
	}
	var use []int
	for k := 1; k < n/2; k++ {
		if !skip[k] {
			use = append(use, k)
		}
	}
	return use
}

// ErrNoCovariateVariation says no covariate moved in the window, so there is
// nothing to adjust for (a host without steal, for one).
var ErrNoCovariateVariation = errors.New("the covariates do not vary")

// minFitFrequencies per covariate keeps the fit from absorbing noise by
// chance: with J covariates fitted on F complex coefficients, the residual
// power is lower than the true noise by about J/(2F).
const minFitFrequencies = 8

// Adjust removes from y, a window of N bins of mean response time, the part
// that moves with exogenous covariates: noise the whole host shares (a
// hypervisor's steal, found 0.94-correlated with 5 s bin means on the
// testbed) and that the square wave does not cause. This is regression
// adjustment (analysis of covariance): y′ = y − Σ_j β_j·(c_j − c̄_j).
//
// The β are fitted by least squares on the spectra at every frequency
// 1 … N/2−1 except the wave's harmonics and their aliases (fitFrequencies):
// the wave puts its power there, so the fit cannot take the wave's effect
// for the covariate's. A covariate the wave does not move then leaves
// equation 5 unbiased at any β, and the closer β is to the truth, the more
// of the shared noise leaves FFTᵈ(f_d). The covariates must be exogenous:
// one the wave itself moves (a process's own CPU, say) would take part of
// the effect with it. A hypervisor's steal is nearly so: it moves with the
// delay only through the VM's own CPU demand, which the injector's floor
// keeps level (on the testbed the on-phase ran 2–3 points busier, and
// steal's spike at k_d had an SNR of 0.7–2).
// kd = 0 fits every frequency (an unperturbed chunk).
//
// The covariates must have y's length; one that does not vary at the fitted
// frequencies gets β = 0, and ErrNoCovariateVariation is returned when none
// is left to fit.
func Adjust(y []float64, covs [][]float64, kd int) ([]float64, Adjustment, error) {
	n := len(y)
	spec, err := Spectrum(y)
	if err != nil {
		return nil, Adjustment{}, err
	}
	use := fitFrequencies(n, kd)
	adj := Adjustment{Betas: make([]float64, len(covs))}
	var live []int
	cspecs := make([][]complex128, len(covs))
	for j, c := range covs {
		if len(c) != n {
			return nil, Adjustment{}, fmt.Errorf("covariate %d has %d bins, the series %d", j, len(c), n)
		}
		cs, err := Spectrum(c)
		if err != nil {
			return nil, Adjustment{}, err
		}
		if !(rmsAt(cs, use) > 0) {
			continue
		}
		cspecs[j] = cs
		live = append(live, j)
	}
	adj.NoiseBeforeMs = rmsAt(spec, use)
	if len(live) == 0 {
		adj.NoiseAfterMs = adj.NoiseBeforeMs
		return y, adj, ErrNoCovariateVariation
	}
	if len(use) < minFitFrequencies*len(live) {
		return nil, Adjustment{}, fmt.Errorf("%d covariates need at least %d frequencies to fit, have %d", len(live), minFitFrequencies*len(live), len(use))
	}
	// Real and imaginary parts are separate equations: β is real because
	// at these periods (seconds) the response time follows the host at once.
	a := mat.NewDense(2*len(use), len(live), nil)
	b := mat.NewVecDense(2*len(use), nil)
	for r, k := range use {
		b.SetVec(2*r, real(spec[k]))
		b.SetVec(2*r+1, imag(spec[k]))
		for col, j := range live {
			a.Set(2*r, col, real(cspecs[j][k]))
			a.Set(2*r+1, col, imag(cspecs[j][k]))
		}
	}
	var beta mat.VecDense
	if err := beta.SolveVec(a, b); err != nil {
		return nil, Adjustment{}, fmt.Errorf("fitting the covariates: %w", err)
	}
	for col, j := range live {
		adj.Betas[j] = beta.AtVec(col) // the others stay 0
	}
	out := SubtractCovariates(y, covs, adj.Betas)
	after, _ := Spectrum(out)
	adj.NoiseAfterMs = rmsAt(after, use)
	return out, adj, nil
}

// SubtractCovariates returns y − Σ β_j·(c_j − c̄_j) over y's length: a window
// too short to fit β (the adaptive phase's one period) adjusted with the β
// the training fitted.
func SubtractCovariates(y []float64, covariates [][]float64, betas []float64) []float64 {
	out := slices.Clone(y)
	for j, c := range covariates {
		c = c[:len(y)]
		var mean float64
		for _, v := range c {
			mean += v
		}
		mean /= float64(len(c))
		for i, v := range c {
			out[i] -= betas[j] * (v - mean)
		}
	}
	return out
}

// AdjustChunks adjusts each whole chunk of n bins of x separately, as an
// unperturbed baseline (kd = 0), and leaves a partial tail alone. A chunk
// whose covariates do not vary is kept as it is.
func AdjustChunks(x []float64, covs [][]float64, n int) ([]float64, []Adjustment, error) {
	out := slices.Clone(x)
	var adjs []Adjustment
	for c := 0; (c+1)*n <= len(x); c++ {
		part := make([][]float64, len(covs))
		for j, cv := range covs {
			if len(cv) < (c+1)*n {
				return nil, nil, fmt.Errorf("covariate %d has %d bins, the series %d", j, len(cv), len(x))
			}
			part[j] = cv[c*n : (c+1)*n]
		}
		y, adj, err := Adjust(x[c*n:(c+1)*n], part, 0)
		if err != nil && !errors.Is(err, ErrNoCovariateVariation) {
			return nil, nil, err
		}
		copy(out[c*n:], y)
		adjs = append(adjs, adj)
	}
	return out, adjs, nil
}

func rmsAt(spec []complex128, ks []int) float64 {
	if len(ks) == 0 {
		return 0
	}
	var sum float64
	for _, k := range ks {
		sum += real(spec[k])*real(spec[k]) + imag(spec[k])*imag(spec[k])
	}
	return math.Sqrt(sum / float64(len(ks)))
}
