package spectral

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/cmplx"
	"slices"
)

// z95 is the two-sided 95% normal quantile.
const z95 = 1.959963984540054

// SignificantSNR is the SNR that noise alone exceeds 5% of the time: the
// modulus of circular complex noise of variance σ² passes r with
// probability exp(−r²/σ²), so r = σ·√(−ln 0.05) ≈ 1.73σ.
var SignificantSNR = math.Sqrt(-math.Log(0.05))

// Estimate is the spectral gradient of one transaction (docs/formats.md §7,
// gradient.json): paper 000 equation 5 with the delay actually injected,
// and its confidence interval.
type Estimate struct {
	// Gradient is equation 5 divided by sinc²(π·k_d/N), the mean loss of a
	// wave whose edges fall anywhere in the bins (PhaseAveragedGain), unless
	// the input says they fall on bin edges.
	Gradient float64 `json:"gradient"`
	// Equation5 is |FFTᵈ(f_d) − FFT⁰(f_d)|·sin(π·k_d/N) / (Δ·k_d), with the
	// unnormalized FFT, as printed; Δ is the change actually injected
	// (milliseconds of delay for a link, the change of the basis otherwise).
	Equation5 float64    `json:"equation5"`
	CI95      [2]float64 `json:"ci95"`
	StdErr    float64    `json:"std_err"`
	// SNR is the spike over the noise: |FFTᵈ − FFT⁰| / σ, both at f_d.
	SNR  float64 `json:"snr"`
	Bins int     `json:"bins"`
	// PerturbationMs is the amplitude of the square wave the injection caused
	// in the response time: Gradient·Δ.
	PerturbationMs float64 `json:"perturbation_ms"`
	Samples        int     `json:"samples"`
	EmptyBins      int     `json:"empty_bins"`
	// PeakMs is |FFTᵈ − FFT⁰| at f_d (normalized by 1/N).
	PeakMs float64 `json:"peak_ms"`
	// NoiseMs is the σ used for the interval and the SNR: the larger of the
	// baseline's (inflated for its own error) and the one measured.
	NoiseMs         float64 `json:"noise_ms"`
	BaselineNoiseMs float64 `json:"baseline_noise_ms"`
	MeasuredNoiseMs float64 `json:"measured_noise_ms"`
	Delta           float64 `json:"delta"`
	// PerturbationOverStd compares PerturbationMs with the natural standard
	// deviation of the response time (paper 000 table 3); 0 when unknown.
	PerturbationOverStd float64 `json:"perturbation_over_std,omitempty"`
	// CovariateNoiseRatio is the window's noise after its covariate
	// adjustment over before (Adjust); absent when it was not adjusted.
	CovariateNoiseRatio float64 `json:"covariate_noise_ratio,omitempty"`
	// Spike is the complex gradient (FFTᵈ − FFT⁰)(f_d) / (gain·Δ): its
	// modulus is Gradient, its phase the wave's position in the window.
	// Windows whose waves start at the same point of their bins share that
	// phase, so CombineCoherent can average their spikes before taking the
	// modulus. Not serialized.
	Spike complex128 `json:"-"`
	// NoiseStdErr is the noise's part of StdErr (per component of Spike),
	// and DeltaRelErr the relative error of Δ; StdErr is their sum in
	// quadrature, raised to the gradient for a spike that is not
	// significant. Not serialized.
	NoiseStdErr float64 `json:"-"`
	DeltaRelErr float64 `json:"-"`
	// Significant says the spike stands out of the noise (SNR ≥
	// SignificantSNR). When it does not, the standard error is at least the
	// gradient itself and the interval starts at 0: the modulus of noise
	// alone is positive, so a gradient of zero must stay well inside the
	// interval, also after a prediction adds other errors in quadrature.
	Significant bool `json:"significant"`
}

// EstimateInput is what EstimateGradient needs.
type EstimateInput struct {
	// Values is the perturbed series, N = len(Values) bins (a power of two).
	Values []float64
	Kd     int
	// BaselineMean and BaselineSigma are FFT⁰(f_d): the training phase's mean
	// and the modulus of its standard deviation at k_d, normalized by 1/N.
	BaselineMean  complex128
	BaselineSigma float64
	// Chunks is the number of chunks the baseline was averaged over.
	Chunks int
	// Delta is the change actually injected; DeltaStdErr its standard error
	// (0 if unknown).
	Delta, DeltaStdErr float64
	// Aligned says the wave's edges fall on bin edges, so equation 3 holds
	// exactly and no phase correction is made.
	Aligned bool
}

// EstimateGradient applies equation 5 at k_d. The interval treats the
// difference FFTᵈ − FFT⁰ as the spike plus circular complex noise of
// variance σ²: the modulus then has a standard error of σ/√2 (the noise
// component along the spike). σ is the baseline's σ(FFT⁰)(f_d) inflated by
// √(1+1/M) for the error of the subtracted mean, or the noise measured in
// the perturbed spectrum itself away from k_d and its harmonics, whichever
// is larger: the baseline may be stale. The error of Δ adds in quadrature.
// The interval is clipped at 0, since the estimate is a modulus.
func EstimateGradient(in EstimateInput) (Estimate, error) {
	n := len(in.Values)
	if in.Kd < 1 || 2*in.Kd >= n {
		return Estimate{}, fmt.Errorf("k_d=%d outside [1, n/2) for n=%d", in.Kd, n)
	}
	if !(in.Delta > 0) {
		return Estimate{}, fmt.Errorf("the injected change must be > 0, got %v", in.Delta)
	}
	spec, err := Spectrum(in.Values)
	if err != nil {
		return Estimate{}, err
	}
	d := spec[in.Kd] - in.BaselineMean
	gain := PhaseAveragedGain(n, in.Kd)
	if in.Aligned {
		gain = SquareWaveGain(n, in.Kd)
	}
	e := Estimate{Bins: n, Delta: in.Delta, PeakMs: cmplx.Abs(d), MeasuredNoiseMs: noiseFloor(spec, in.Kd)}
	e.BaselineNoiseMs = in.BaselineSigma
	base := in.BaselineSigma
	if in.Chunks > 0 {
		base *= math.Sqrt(1 + 1/float64(in.Chunks))
	}
	e.NoiseMs = math.Max(base, e.MeasuredNoiseMs)
	finish(&e, gain, in.DeltaStdErr)
	e.Spike = d / complex(gain*e.Delta, 0)
	e.Equation5 = e.PeakMs / SquareWaveGain(n, in.Kd) / e.Delta
	return e, nil
}

// finish fills the gradient, interval and SNR from PeakMs, NoiseMs and Delta.
func finish(e *Estimate, gain, deltaSE float64) {
	amp := e.PeakMs / gain
	e.PerturbationMs = amp
	e.Gradient = amp / e.Delta
	ampSE := e.NoiseMs / math.Sqrt2 / gain
	rel := 0.0
	if deltaSE > 0 {
		rel = deltaSE / e.Delta
	}
	e.NoiseStdErr, e.DeltaRelErr = ampSE/e.Delta, rel
	if e.NoiseMs > 0 {
		e.SNR = e.PeakMs / e.NoiseMs
	} else {
		e.SNR = math.Inf(1)
	}
	settle(e)
}

// settle derives StdErr, Significant and CI95 from Gradient, SNR,
// NoiseStdErr and DeltaRelErr.
func settle(e *Estimate) {
	e.StdErr = math.Hypot(e.NoiseStdErr, e.Gradient*e.DeltaRelErr)
	e.Significant = e.SNR >= SignificantSNR
	if !e.Significant {
		e.StdErr = math.Max(e.StdErr, e.Gradient)
	}
	e.CI95 = [2]float64{math.Max(0, e.Gradient-z95*e.StdErr), e.Gradient + z95*e.StdErr}
}

// CombineCoherent merges the estimates of one transaction from several
// active windows of one element. The complex spikes are averaged with
// inverse-variance weights before the modulus is taken: the noise then
// cancels in the complex plane, so the estimate's upward bias at low SNR
// (the modulus of noise is positive; at SNR 2 a window reads ~15% high)
// falls with the windows' combined SNR rather than staying at each
// window's own. This needs the windows' waves to start at the same point
// of their bins, which the coordinator's windows do. The relative error
// of Δ, common to the windows' injector, is the largest of theirs. Samples
// add up; the other fields are the latest window's.
func CombineCoherent(earlier, latest Estimate) Estimate {
	if !(earlier.NoiseStdErr > 0) || !(latest.NoiseStdErr > 0) {
		return latest
	}
	wa, wb := 1/(earlier.NoiseStdErr*earlier.NoiseStdErr), 1/(latest.NoiseStdErr*latest.NoiseStdErr)
	out := latest
	out.Spike = (complex(wa, 0)*earlier.Spike + complex(wb, 0)*latest.Spike) / complex(wa+wb, 0)
	out.NoiseStdErr = 1 / math.Sqrt(wa+wb)
	out.DeltaRelErr = math.Max(earlier.DeltaRelErr, latest.DeltaRelErr)
	out.Gradient = cmplx.Abs(out.Spike)
	// SNR = |spike| / σ with the per-component error σ/√2 (see finish).
	out.SNR = out.Gradient / (out.NoiseStdErr * math.Sqrt2)
	out.Samples = earlier.Samples + latest.Samples
	settle(&out)
	return out
}

// noiseFloor is the RMS modulus of the eight coefficients nearest k_d
// that a wave at k_d leaves alone: its first five harmonics k_d … 5·k_d are
// skipped, the odd ones of the square wave and the even ones an asymmetric
// response (a queue that fills slower than it drains) adds. Noise is
// rarely white, so the nearest frequencies stand for the noise at k_d.
func noiseFloor(spec []complex128, kd int) float64 {
	var ks []int
	for k := 1; k < len(spec)-1; k++ {
		if k%kd == 0 && k/kd <= 5 {
			continue
		}
		ks = append(ks, k)
	}
	slices.SortStableFunc(ks, func(a, b int) int { return cmp.Compare(abs(a-kd), abs(b-kd)) })
	ks = ks[:min(8, len(ks))]
	if len(ks) == 0 {
		return 0
	}
	var sum float64
	for _, k := range ks {
		a := cmplx.Abs(spec[k])
		sum += a * a
	}
	return math.Sqrt(sum / float64(len(ks)))
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Rough is the adaptive phase's estimate (paper 000 §3): equation 5 over a
// window of one period (L bins, one cycle) around a single on-phase of the
// small amplitude A_d⁰ actually injected. mean0 and sigma0 are the baseline
// of such windows (TransactionBaseline.AdaptiveMean/Std).
func Rough(values []float64, mean0 complex128, sigma0, delta float64) (Estimate, error) {
	n := len(values)
	if n < 2 {
		return Estimate{}, errors.New("the adaptive window needs at least 2 bins")
	}
	if !(delta > 0) {
		return Estimate{}, fmt.Errorf("the injected change must be > 0, got %v", delta)
	}
	d := DFT(values, 1) - mean0
	e := Estimate{Bins: n, Delta: delta, PeakMs: cmplx.Abs(d), BaselineNoiseMs: sigma0, NoiseMs: sigma0}
	finish(&e, PhaseAveragedGain(n, 1), 0)
	e.Equation5 = e.PeakMs / SquareWaveGain(n, 1) / e.Delta
	return e, nil
}
