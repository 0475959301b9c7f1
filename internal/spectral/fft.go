package spectral

import (
	"fmt"
	"math"
	"math/bits"

	"gonum.org/v1/gonum/dsp/fourier"
)

// IsPowerOfTwo reports whether n is 2^m for some m ≥ 0.
func IsPowerOfTwo(n int) bool { return n > 0 && bits.OnesCount(uint(n)) == 1 }

// Spectrum returns the one-sided discrete Fourier transform of x, normalized
// by its length: X_k = (1/N)·Σ x_i·e^(−2πj·ik/N) for k = 0 … N/2, the
// frequencies k/(N·ΔTs). Paper 000's equation 2 is the same sum without the
// 1/N; see the package documentation for why the coefficients are kept in
// milliseconds. The length must be a power of two ≥ 2: the transform is
// gonum's radix-2 FFT, as the paper's implementation restricts N.
func Spectrum(x []float64) ([]complex128, error) {
	n := len(x)
	if n < 2 || !IsPowerOfTwo(n) {
		return nil, fmt.Errorf("FFT length %d is not a power of two ≥ 2", n)
	}
	buf := make([]complex128, n)
	for i, v := range x {
		buf[i] = complex(v, 0)
	}
	fourier.CoefficientsRadix2(buf)
	out := make([]complex128, n/2+1)
	inv := complex(1/float64(n), 0)
	for k := range out {
		out[k] = buf[k] * inv
	}
	return out, nil
}

// DFT returns the normalized Fourier coefficient of x at k cycles per len(x)
// samples, for any length (the adaptive phase's one-cycle window need not be
// a power of two).
func DFT(x []float64, k float64) complex128 {
	n := len(x)
	var re, im float64
	for i, v := range x {
		a := -2 * math.Pi * k * float64(i) / float64(n)
		re += v * math.Cos(a)
		im += v * math.Sin(a)
	}
	return complex(re/float64(n), im/float64(n))
}

// SquareWaveGain is the magnitude of the normalized coefficient at k_d that a
// square wave of unit amplitude (on for half of each period, off for the
// other half) adds to an N-point series holding k_d periods. From paper 000
// equation 3 with 2n = N/k_d points per period: k_d / (N·sin(π·k_d/N)). For
// k_d ≪ N it tends to 1/π.
func SquareWaveGain(n, kd int) float64 {
	return float64(kd) / (float64(n) * math.Sin(math.Pi*float64(kd)/float64(n)))
}

// PhaseAveragedGain is the gain of SquareWaveGain averaged over where the
// wave's edges fall within the bins. Equation 3 assumes they fall on bin
// edges; without a shared clock they fall anywhere, and then the
// coefficient at k_d is on average that of the wave's fundamental (A/π)
// attenuated by the bin's moving average, sinc(π·k_d/N): the harmonics that
// alias onto k_d add with a phase that turns with the offset and average
// out. The ratio to SquareWaveGain is sinc²(π·k_d/N): 0.95 at 8 samples per
// period, 0.987 at 16, 0.81 at 4. It is the droop of figure 8(a).
func PhaseAveragedGain(n, kd int) float64 {
	x := math.Pi * float64(kd) / float64(n)
	return math.Sin(x) / (math.Pi * x)
}
