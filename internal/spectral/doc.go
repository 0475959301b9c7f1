// Package spectral measures how much a square-wave perturbation moves a
// response time, by reading its spectrum at the wave's frequency: the
// estimator of Chen et al., "Link Gradients" (paper 000, §2.3 and §3), which
// paper 003 (§II-B) reuses for every resource gradient. It is pure: no I/O
// beyond parsing a reader, no clock, no global state.
//
// # The method
//
//  1. Binning (SizeBins, Bins). Requests arrive irregularly; the series the
//     FFT needs is the mean response time per bin of ΔTs = m̄ + 3σ(m), where
//     m is the time k consecutive requests span, so a bin holds at least k
//     requests with high probability. Every window of k consecutive requests
//     counts (overlapping), which estimates the same mean and spread as
//     disjoint windows with less variance. Bins keep count, sum and sum of
//     squares, so shards merge exactly.
//  2. Training (Train, TrainBins). M = 9 chunks of N bins of unperturbed
//     series give the mean and the (complex) standard deviation of the FFT at
//     every frequency k/(N·ΔTs). The delay is A_d = d·σ(FFT⁰)(f) with d = 30,
//     and the frequency is the k_d that minimizes it among those with at
//     least 8 bins per period (figure 8(a)): k_d ≤ N/8.
//  3. Estimation (EstimateGradient). Equation 5,
//     ∇ = |FFTᵈ(f_d) − FFT⁰(f_d)|·sin(π·k_d/N) / (Δ·k_d), with Δ the change
//     actually injected as the injector reports it, not the one requested.
//     Rough is the adaptive phase's version over one period.
//  4. The comparator (OnOff, OnOffBins): the mean response time while the
//     wave was on minus while it was off, over Δ. It needs the wave's phase,
//     which the spectral estimate does not.
//
// # Choices where the paper is silent or loose
//
//   - Normalization. The FFT here is divided by N, so coefficients are in
//     milliseconds. Equation 2 has no 1/N, but then A_d = d·σ(FFT⁰) would be
//     N-fold too large to be a delay: with the paper's §4 system (N(100 ms,
//     30 ms), k = 8, N = 128, about 10 requests per bin) the normalized σ is
//     about 0.8 ms and d = 30 gives about 25 ms, the paper's "30 ms"; and
//     σ(FFT⁰) then falls as N grows, as figure 8(c) shows. Equation 5 is
//     applied with the normalization undone.
//   - Phase. Equation 3 assumes the wave's edges fall on bin edges. With no
//     shared clock they fall anywhere; averaged over the offset, the
//     coefficient at k_d is the fundamental's, attenuated by the bin's
//     moving average: sinc²(π·k_d/N) times what equation 3 says
//     (PhaseAveragedGain). This is the droop of figure 8(a): 0.95 at 8
//     samples per period, 0.81 at 4, 0.46 at 2.1, all measured within a few
//     percent in simulation. The estimate divides it out (Estimate.Gradient),
//     and keeps equation 5 as printed (Estimate.Equation5); with the
//     correction the estimate is unbiased from 2 samples per period up
//     (docs/gradient-report.md). EstimateInput.Aligned turns it off for a
//     wave known to be aligned with the bins.
//   - Empty bins (FillEmpty) take the value interpolated linearly between
//     the nearest non-empty bins, or the nearest one at either end: this
//     keeps a square wave many bins long intact, where the series mean would
//     shrink it and zero would add a spike. A series with more than half its
//     bins empty is refused (ErrTooSparse).
//   - Short baselines use as many whole chunks as there are, at least two.
//   - The interval. FFTᵈ − FFT⁰ is the spike plus circular complex noise of
//     variance σ²; its modulus has a standard error of σ/√2. σ is the larger
//     of the baseline's σ(FFT⁰)(f_d), inflated by √(1+1/M) for the error of
//     the subtracted mean, and the noise measured in the perturbed spectrum
//     at the eight frequencies nearest k_d that are not among its first five
//     harmonics (the baseline may be stale, and the perturbation may itself
//     add noise, as a queue does). The error of Δ adds in quadrature. When
//     the spike is not significant (SNR below √(−ln 0.05) ≈ 1.73, the level
//     noise alone passes 5% of the time), the standard error is at least the
//     estimate and the interval starts at 0, because the modulus of noise is
//     positive and a zero gradient must stay well inside it.
//   - Per-transaction baselines. One perturbation measures every
//     transaction, so the plan keeps each transaction's baseline at k_d (and
//     for the adaptive window), on the target transaction's bins.
//
// # Beyond the paper: exogenous covariates
//
// Paper 000 §2.2 takes the noise as given and outruns it with a quiet
// frequency. On a virtual machine much of it is not the application's: a
// hypervisor's steal slows every tier at once (the namespace testbed's 5 s
// response-time means were 0.94-correlated with its steal share). When
// such a series is measured, Adjust regresses it out of each N-bin window,
// y′ = y − Σ β_j·(c_j − c̄_j), with β fitted on the spectra at every
// frequency except the wave's harmonics, so the fit cannot absorb the
// wave; for a covariate the wave does not move equation 5 stays unbiased
// at any β (analysis of covariance). TrainBinsAdjusted adjusts the
// training chunks alike, so σ(FFT⁰) and A_d describe the adjusted series;
// CovariateBins bins interval readings (a scraper's utilization) on the
// response time's grid.
package spectral
