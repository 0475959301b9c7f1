//go:build long

package e2e

// What the testbed's own noise allows: a study of recorded, unperturbed
// client response times (scripts/noise-study.sh records them with
// GRADIENTS_RUN=noise). A square wave is added to the recorded response
// times, so the truth is known and the noise is the host's real noise, and
// equation 5 is applied over sliding windows of N bins:
//
//   - the per-window standard error of a gradient, for a wave that moves
//     the response time by a given fraction of σ, as the coordinator's
//     perturbation bound asks (a sync call: every request shifted; a
//     load-balanced link: half of them);
//   - the same with other per-bin statistics than the paper's mean (median,
//     10% trimmed mean, winsorized at p99 and at mean + 3σ), to see whether
//     the noise is in a few outliers (host stalls) that a robust statistic
//     would remove;
//   - the noise spectrum's shape and how coherent the transactions' noise
//     is at the candidate frequencies (common-mode slowness of the host);
//   - at equal perturbation, the spread of equation 5 against the
//     time-domain estimates: the on/off comparator on the same wave, paper
//     000 §2.2's before/after step (N bins of a constant change after the N
//     bins before) and a step inside the same N bins.

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat"

	"github.com/tierscope/tierscope/internal/spectral"
)

// binStat turns one bin's response times into the series value.
type binStat struct {
	name string
	of   func(v []float64) float64
}

func meanOf(v []float64) float64 { return stat.Mean(v, nil) }

// quantileOf is the q-quantile of sorted values.
func quantileOf(sorted []float64, q float64) float64 {
	return stat.Quantile(q, stat.Empirical, sorted, nil)
}

// noiseSeries bins the transaction's samples from start into n bins of
// width w, each response time passed through shift (the synthetic wave),
// and reduces each bin by stat; empty bins are filled as spectral.FillEmpty
// does.
func noiseSeries(samples []spectral.Sample, tx string, start, w float64, n int, shift func(t, ms float64) float64, stat binStat) []float64 {
	bins := make([][]float64, n)
	for _, s := range samples[firstFrom(samples, start):] {
		i := int((s.Time - start) / w)
		if i >= n {
			break
		}
		if s.Transaction == tx {
			bins[i] = append(bins[i], shift(s.Time, s.Ms))
		}
	}
	sum, count := make([]float64, n), make([]int, n)
	for i, v := range bins {
		if len(v) > 0 {
			sum[i], count[i] = stat.of(v), 1
		}
	}
	out, _, _ := spectral.FillEmpty(sum, count)
	return out
}

// firstFrom is the index of the first of the time-ordered samples at or
// after t.
func firstFrom(samples []spectral.Sample, t float64) int {
	i, _ := slices.BinarySearchFunc(samples, t, func(s spectral.Sample, t float64) int {
		switch {
		case s.Time < t:
			return -1
		case s.Time > t:
			return 1
		}
		return 0
	})
	return i
}

func TestTestbedNoise(t *testing.T) {
	path := os.Getenv("GRADIENTS_SAMPLES")
	if path == "" {
		t.Fatal("GRADIENTS_SAMPLES must name a sample file (docs/formats.md §7); scripts/noise-study.sh records one")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := spectral.ReadSamples(f, path)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	k, n, kd := envInt(t, "GRADIENTS_K", 32), envInt(t, "GRADIENTS_N", 128), envInt(t, "NOISE_KD", 12)
	target := os.Getenv("NOISE_TARGET")
	if target == "" {
		target = "Home"
	}
	pert := float64(envInt(t, "NOISE_PERTURBATION_PCT", 50)) / 100 // of σ
	const warmUp = 40.0                                            // seconds
	if len(samples) == 0 || samples[len(samples)-1].Time-samples[0].Time < warmUp+float64(2*n) {
		t.Fatalf("%s: too short a recording", path)
	}
	t0, end := samples[0].Time+warmUp, samples[len(samples)-1].Time
	samples = samples[slices.IndexFunc(samples, func(s spectral.Sample) bool { return s.Time >= t0 }):]
	sizing, err := spectral.SizeBins(spectral.Times(samples, target), k)
	if err != nil {
		t.Fatal(err)
	}
	w := sizing.BinSeconds
	if end-t0 < float64(n)*w*1.5 {
		t.Fatalf("%s: %.0f s after the warm-up, need at least 1.5 windows of %.0f s", path, end-t0, float64(n)*w)
	}
	byTx := map[string][]float64{}
	for _, s := range samples {
		byTx[s.Transaction] = append(byTx[s.Transaction], s.Ms)
	}
	var names []string
	for tx := range byTx {
		names = append(names, tx)
	}
	slices.Sort(names)
	t.Logf("%s: %d samples over %.0f s; ΔTs %.3f s (k %d), windows of N %d bins (%.0f s), wave at k_d %d moving the response time by %.2fσ",
		path, len(samples), end-t0, w, k, n, float64(n)*w, kd, pert)

	period := float64(n) * w / float64(kd)
	gain := spectral.PhaseAveragedGain(n, kd)
	for _, tx := range names {
		v := slices.Clone(byTx[tx])
		slices.Sort(v)
		m, sd := stat.MeanStdDev(v, nil)
		t.Logf("%s: n %d, mean %.2f ms, σ %.2f ms, p50 %.2f, p99 %.2f, p99.9 %.2f, max %.2f ms",
			tx, len(v), m, sd, quantileOf(v, 0.5), quantileOf(v, 0.99), quantileOf(v, 0.999), v[len(v)-1])
		p99, hi := quantileOf(v, 0.99), m+3*sd
		stats := []binStat{
			{"mean (paper)", meanOf},
			{"median", func(b []float64) float64 { c := slices.Clone(b); slices.Sort(c); return quantileOf(c, 0.5) }},
			{"trimmed 10%", func(b []float64) float64 {
				c := slices.Clone(b)
				slices.Sort(c)
				cut := len(c) / 10
				return meanOf(c[cut : len(c)-cut])
			}},
			{"winsorized p99", func(b []float64) float64 { return winsorizedMean(b, p99) }},
			{"winsorized m+3σ", func(b []float64) float64 { return winsorizedMean(b, hi) }},
		}
		change := pert * sd // the wave's effect on the response time
		for _, share := range []float64{1, 0.5} {
			for _, st := range stats {
				rng := rand.New(rand.NewPCG(7, 8))
				var est []float64
				for start := t0; start+float64(n)*w <= end; start += 8 * w {
					phase := start + rng.Float64()*period
					shift := func(ts, ms float64) float64 {
						on := math.Mod(ts-phase+16*period, period) < period/2
						if on && rng.Float64() < share {
							return ms + change
						}
						return ms
					}
					x := noiseSeries(samples, tx, start, w, n, shift, st)
					spec, err := spectral.Spectrum(x)
					if err != nil {
						t.Fatal(err)
					}
					est = append(est, cmplx.Abs(spec[kd])/gain/change) // equation 5 with Δ = the change
				}
				mean, se := stat.MeanStdDev(est, nil)
				t.Logf("  %-8s share %.1f %-16s gradient %.3f (true %.1f), per-window standard error %.3f = %4.1f%% over %d windows",
					tx, share, st.name, mean, share, se, 100*se/share, len(est))
				if st.name == "mean (paper)" && share == 1 && math.Abs(mean-1) > math.Max(0.05, 2*se/math.Sqrt(float64(len(est))/8)) {
					t.Errorf("%s: equation 5 on the recorded noise reads %.3f for a true 1", tx, mean)
				}
			}
		}
	}

	for _, tx := range names {
		_, sd := stat.MeanStdDev(byTx[tx], nil)
		compareWithTimeDomain(t, samples, tx, t0, end, w, n, kd, pert*sd)
	}

	// The noise spectrum over disjoint windows, and its coherence with the
	// target's at the frequencies the training chooses from (N/16 … N/8).
	ident := func(_, ms float64) float64 { return ms }
	var targetSpectra [][]complex128
	for start := t0; start+float64(n)*w <= end; start += float64(n) * w {
		s, _ := spectral.Spectrum(noiseSeries(samples, target, start, w, n, ident, binStat{"mean", meanOf}))
		targetSpectra = append(targetSpectra, s)
	}
	for _, tx := range names {
		power := make([]float64, n/2)
		var cross complex128
		var pa, pb float64
		i := 0
		for start := t0; start+float64(n)*w <= end; start += float64(n) * w {
			s, _ := spectral.Spectrum(noiseSeries(samples, tx, start, w, n, ident, binStat{"mean", meanOf}))
			for j := 1; j < n/2; j++ {
				power[j] += real(s[j] * cmplx.Conj(s[j]))
			}
			for j := n / 16; j <= n/8; j++ {
				cross += s[j] * cmplx.Conj(targetSpectra[i][j])
				pa += real(s[j] * cmplx.Conj(s[j]))
				pb += real(targetSpectra[i][j] * cmplx.Conj(targetSpectra[i][j]))
			}
			i++
		}
		var line strings.Builder
		for _, j := range []int{1, 2, 4, 6, 8, 10, 12, 14, 16, 24, 32, 48} {
			if j < n/2 {
				fmt.Fprintf(&line, " %d: %.3f", j, math.Sqrt(power[j]/float64(i)))
			}
		}
		t.Logf("%s: RMS |FFT| (ms, 1/N) at k:%s; coherence with %s at k %d–%d: %.2f (%d windows)",
			tx, line.String(), target, n/16, n/8, cmplx.Abs(cross)/math.Sqrt(pa*pb), i)
	}
}

func winsorizedMean(v []float64, limit float64) float64 {
	s := 0.0
	for _, x := range v {
		s += math.Min(x, limit)
	}
	return s / float64(len(v))
}

// compareWithTimeDomain adds the same change to the recorded response times
// in four ways and logs each estimate's spread over sliding windows (every 8
// bins, each with a random wave phase), with the spectral spread over each:
//   - equation 5 on a square wave at k_d over N bins;
//   - the on/off comparator (spectral.OnOff) on that wave;
//   - §2.2's step: the change on every request of N bins, against the N bins
//     before (twice the time, and twice the perturbed requests);
//   - a step inside the N bins: the change on their second half, against
//     the first (a wave of one period, as long as the window).
//
// Each step is an on/off comparison of a wave with one period, so all three
// time-domain estimates are spectral.OnOff. They read the unshifted
// requests: a change on every on-phase request adds exactly 1 to the
// gradient.
//
// The noise is the host's own, so this is the paper's claim (§2.1–2.2: a
// frequency component is much tighter than a difference of means) tested on
// real non-stationary noise rather than on a simulated drift.
func compareWithTimeDomain(t *testing.T, samples []spectral.Sample, tx string, t0, end, w float64, n, kd int, change float64) {
	t.Helper()
	var own []spectral.Sample // tx's requests, in time order
	for _, s := range samples {
		if s.Transaction == tx {
			own = append(own, s)
		}
	}
	window := float64(n) * w
	period := window / float64(kd)
	gain := spectral.PhaseAveragedGain(n, kd)
	rng := rand.New(rand.NewPCG(11, 12))
	var spec, onOff, step, halfStep []float64
	for start := t0; start+2*window <= end; start += 8 * w {
		phase := start + rng.Float64()*period
		x := noiseSeries(own, tx, start, w, n, func(ts, ms float64) float64 {
			if math.Mod(ts-phase+16*period, period) < period/2 {
				return ms + change
			}
			return ms
		}, binStat{"mean", meanOf})
		s, err := spectral.Spectrum(x)
		if err != nil {
			t.Fatal(err)
		}
		spec = append(spec, cmplx.Abs(s[kd])/gain/change)

		span := own[firstFrom(own, start):firstFrom(own, start+2*window)]
		for _, c := range []struct {
			into                          *[]float64
			waveStart, period, from, till float64
		}{
			{&onOff, phase, period, start, start + window},
			{&halfStep, start + window/2, window, start, start + window},
			{&step, start + window, 2 * window, start, start + 2*window},
		} {
			td, err := spectral.OnOff(span, c.waveStart, c.period, c.from, c.till, change)
			if err != nil {
				t.Fatalf("%s, window from %.0f s: %v", tx, start, err)
			}
			*c.into = append(*c.into, td.Gradient+1)
		}
	}
	sm, ss := stat.MeanStdDev(spec, nil)
	om, oss := stat.MeanStdDev(onOff, nil)
	hm, hs := stat.MeanStdDev(halfStep, nil)
	pm, ps := stat.MeanStdDev(step, nil)
	t.Logf("%s, every request moved by %.2f ms, %d windows of %.0f s (step: %.0f s): spectral %.3f ± %.3f, on/off %.3f ± %.3f (spectral/on-off %.2f), step in the window %.3f ± %.3f (%.2f), §2.2 step %.3f ± %.3f (%.2f)",
		tx, change, len(spec), window, 2*window, sm, ss, om, oss, ss/oss, hm, hs, ss/hs, pm, ps, ss/ps)
}
