package spectral

import (
	"errors"
	"fmt"
	"math"
	"math/cmplx"
	"slices"
)

// The paper's defaults (§3, §4).
const (
	DefaultN                   = 128
	DefaultChunks              = 9  // M
	DefaultScale               = 30 // d, the delay scale factor
	DefaultMinSamplesPerPeriod = 8  // figure 8(a)
	MinChunks                  = 2  // a standard deviation needs two
)

// TrainConfig holds the parameters of the training phase.
type TrainConfig struct {
	K      int     `mapstructure:"k"`      // minimum requests per bin
	N      int     `mapstructure:"n"`      // bins per measurement, a power of two
	Chunks int     `mapstructure:"chunks"` // M, the number of N-bin chunks of baseline; fewer are used if the data is shorter (at least MinChunks)
	Scale  float64 `mapstructure:"scale"`  // d: A_d = d·σ(FFT⁰)(f)
	// MinSamplesPerPeriod bounds the frequency: k_d ≤ N/MinSamplesPerPeriod.
	MinSamplesPerPeriod float64 `mapstructure:"min_samples_per_period"`
	// Kd, when > 0, forces the frequency instead of choosing it (sweeps).
	Kd int `mapstructure:"-"`
}

// DefaultTrainConfig returns the paper's parameters: k=8, N=128, M=9, d=30,
// at least 8 samples per period.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{K: DefaultK, N: DefaultN, Chunks: DefaultChunks, Scale: DefaultScale, MinSamplesPerPeriod: DefaultMinSamplesPerPeriod}
}

// Validate reports the first invalid parameter.
func (c TrainConfig) Validate() error {
	sppErr := CheckMinSamplesPerPeriod(c.MinSamplesPerPeriod, c.N)
	switch {
	case c.K < 1:
		return fmt.Errorf("k must be ≥ 1, got %d", c.K)
	case c.N < 8 || !IsPowerOfTwo(c.N):
		return fmt.Errorf("n must be a power of two ≥ 8, got %d", c.N)
	case c.Chunks < MinChunks:
		return fmt.Errorf("chunks must be ≥ %d, got %d", MinChunks, c.Chunks)
	case !(c.Scale > 0) || math.IsInf(c.Scale, 0):
		return fmt.Errorf("scale must be > 0, got %v", c.Scale)
	case sppErr != nil:
		return fmt.Errorf("min samples per period %w", sppErr)
	case c.Kd < 0 || 2*c.Kd >= c.N:
		return fmt.Errorf("forced k_d must be in [1, n/2), got %d", c.Kd)
	}
	return nil
}

// CheckMinSamplesPerPeriod says whether v bins per period fit a window of
// n bins: at least 2 (a half period each way), at most n (k_d = 1).
func CheckMinSamplesPerPeriod(v float64, n int) error {
	if !(v >= 2) || v > float64(n) {
		return fmt.Errorf("must be in [2, n = %d], got %v", n, v)
	}
	return nil
}

// MaxKd is the highest frequency index allowed: ⌊N / MinSamplesPerPeriod⌋.
func (c TrainConfig) MaxKd() int {
	return max(1, int(math.Floor(float64(c.N)/c.MinSamplesPerPeriod+1e-9)))
}

// Complex is a complex number in JSON, as [real, imaginary].
type Complex [2]float64

// C converts c.
func C(c complex128) Complex { return Complex{real(c), imag(c)} }

// Value returns c as a complex128.
func (c Complex) Value() complex128 { return complex(c[0], c[1]) }

// Abs returns |c|.
func (c Complex) Abs() float64 { return math.Hypot(c[0], c[1]) }

// Baseline is step 2 of the training phase: the mean and the standard
// deviation of the normalized complex FFT at each frequency k = 0 … N/2, over
// chunks of N bins of unperturbed series. The standard deviation is complex
// as in the paper, σ_re + j·σ_im; its modulus is the standard deviation of
// the coefficient about its mean, the noise an injected spike competes with.
type Baseline struct {
	N      int
	Chunks int
	Mean   []complex128
	Std    []complex128
}

// NewBaseline computes the baseline of the first min(chunks, ⌊len/N⌋)
// chunks of x. It needs at least MinChunks.
func NewBaseline(x []float64, n, chunks int) (Baseline, error) {
	m := min(chunks, len(x)/n)
	if m < MinChunks {
		return Baseline{}, fmt.Errorf("the baseline needs %d chunks of %d bins, have %d bins", MinChunks, n, len(x))
	}
	spectra := make([][]complex128, m)
	for c := range spectra {
		s, err := Spectrum(x[c*n : (c+1)*n])
		if err != nil {
			return Baseline{}, err
		}
		spectra[c] = s
	}
	b := Baseline{N: n, Chunks: m, Mean: make([]complex128, n/2+1), Std: make([]complex128, n/2+1)}
	for k := range b.Mean {
		var sum complex128
		for _, s := range spectra {
			sum += s[k]
		}
		mean := sum / complex(float64(m), 0)
		var vr, vi float64
		for _, s := range spectra {
			d := s[k] - mean
			vr += real(d) * real(d)
			vi += imag(d) * imag(d)
		}
		b.Mean[k] = mean
		b.Std[k] = complex(math.Sqrt(vr/float64(m-1)), math.Sqrt(vi/float64(m-1)))
	}
	return b, nil
}

// Sigma is the modulus of the standard deviation at k.
func (b Baseline) Sigma(k int) float64 { return cmplx.Abs(b.Std[k]) }

// PoolWidth is how many neighbours on each side of a frequency pool into
// its noise estimate (PooledSigma).
const PoolWidth = 2

// PooledSigma is the RMS of σ(FFT⁰) over k−PoolWidth … k+PoolWidth (DC
// and the Nyquist bin left out). With M chunks, σ at one frequency rests on
// M complex values; at the paper's M = 9 it is already uncertain by ±25%,
// and the training phase takes its minimum over every allowed frequency
// (step 4), so it picks the frequency whose σ is lowest by chance: A_d and
// the experiment's SNR come out several-fold too small (a 0.26 ms wave
// for a 0.9 ms noise on the testbed, at M = 3). Away from narrow periodic
// components the noise spectrum is smooth, so the neighbours estimate the
// same σ; pooling gives 2·PoolWidth+1 times the degrees of freedom, and a
// periodic component still raises the pooled σ of every frequency near it.
func (b Baseline) PooledSigma(k int) float64 {
	return pooledSigma(func(j int) float64 { return b.Sigma(j) }, k, b.N)
}

func pooledSigma(sigma func(int) float64, k, n int) float64 {
	var sum float64
	var m int
	for j := max(1, k-PoolWidth); j <= min(n/2-1, k+PoolWidth); j++ {
		s := sigma(j)
		sum += s * s
		m++
	}
	if m == 0 {
		return sigma(k)
	}
	return math.Sqrt(sum / float64(m))
}

// Candidate is one frequency the training phase considered (steps 3 and 4).
type Candidate struct {
	Kd               int     `json:"k_d"`
	SamplesPerPeriod float64 `json:"samples_per_period"`
	// SigmaMs is the pooled σ(FFT⁰)(f) the choice uses (PooledSigma);
	// RawSigmaMs the σ at f alone.
	SigmaMs     float64 `json:"sigma_ms"`
	RawSigmaMs  float64 `json:"raw_sigma_ms"`
	AmplitudeMs float64 `json:"amplitude_ms"`
}

// Candidates lists A_d = d·σ(FFT⁰)(f) for k_d = 1 … maxKd, σ pooled over
// neighbouring frequencies (PooledSigma).
func (b Baseline) Candidates(scale float64, maxKd int) []Candidate {
	var out []Candidate
	for kd := 1; kd <= maxKd && kd < len(b.Std); kd++ {
		s := b.PooledSigma(kd)
		out = append(out, Candidate{Kd: kd, SamplesPerPeriod: float64(b.N) / float64(kd), SigmaMs: s, RawSigmaMs: b.Sigma(kd), AmplitudeMs: scale * s})
	}
	return out
}

// ResponseTime summarizes the raw response times of a series.
type ResponseTime struct {
	Samples int     `json:"samples"`
	MeanMs  float64 `json:"mean_ms"`
	StdMs   float64 `json:"std_ms"`
}

// ResponseTimeOf summarizes the samples in bins.
func ResponseTimeOf(b *Bins) ResponseTime {
	var n int
	var sum, sumsq float64
	for i := range b.Count {
		n += b.Count[i]
		sum += b.Sum[i]
		sumsq += b.SumSq[i]
	}
	r := ResponseTime{Samples: n}
	if n > 0 {
		r.MeanMs = sum / float64(n)
	}
	if n > 1 {
		r.StdMs = math.Sqrt(math.Max(0, (sumsq-float64(n)*r.MeanMs*r.MeanMs)/float64(n-1)))
	}
	return r
}

// TransactionBaseline is the baseline of one transaction at the chosen
// frequency, so that one perturbation measures every transaction.
type TransactionBaseline struct {
	ResponseTime
	EmptyBins int     `json:"empty_bins"`
	FFTMean   Complex `json:"fft_mean"` // at k_d
	FFTStd    Complex `json:"fft_std"`  // at k_d
	// PooledStdMs is σ at k_d pooled over its neighbours (PooledSigma), the
	// σ the estimate's interval uses.
	PooledStdMs float64 `json:"pooled_std_ms,omitempty"`
	// AdaptiveMean and AdaptiveStd are the baseline of the adaptive phase's
	// one-cycle window (see Plan.AdaptiveBins) at one cycle per window.
	AdaptiveMean Complex `json:"adaptive_fft_mean"`
	AdaptiveStd  Complex `json:"adaptive_fft_std"`
	// HalfPeriodStdMs is the standard deviation of the mean over
	// consecutive half periods (Plan.AdaptiveBins/2 bins): the noise of a
	// level step taken over one on-phase, as an adaptive cycle inside the
	// active window takes it (gradient.Config.AdaptiveInWindow).
	HalfPeriodStdMs float64 `json:"half_period_std_ms,omitempty"`
	// CovariateNoiseRatio is the noise after the covariate adjustment over
	// the noise before, averaged over the chunks (absent without covariates),
	// and CovariateBetas the chunks' mean β, one per covariate.
	CovariateNoiseRatio float64   `json:"covariate_noise_ratio,omitempty"`
	CovariateBetas      []float64 `json:"covariate_betas,omitempty"`
	// AdaptiveAdjustedMean and AdaptiveAdjustedStd are the adaptive window's
	// baseline over the training series adjusted with CovariateBetas
	// (SubtractCovariates), for a one-cycle window adjusted alike.
	AdaptiveAdjustedMean Complex `json:"adaptive_adjusted_fft_mean,omitempty"`
	AdaptiveAdjustedStd  Complex `json:"adaptive_adjusted_fft_std,omitempty"`
	// Error says why this transaction has no usable baseline (too sparse).
	Error string `json:"error,omitempty"`
}

// AtKd is the baseline's mean at k_d and σ there, pooled over neighbouring
// frequencies when it was (the σ an estimate's interval uses).
func (b TransactionBaseline) AtKd() (mean complex128, sigma float64) {
	if b.PooledStdMs > 0 {
		return b.FFTMean.Value(), b.PooledStdMs
	}
	return b.FFTMean.Value(), b.FFTStd.Abs()
}

// AdjustedBaseline is the baseline at the plan's k_d of a transaction's
// training bins (the plan's grid, Chunks·N of them) adjusted for covariates
// of that length: another baseline of the same transaction, for windows
// adjusted for covariates the plan was not trained with (a reference
// series that only some elements have; see gradient.Config.References).
func (p *Plan) AdjustedBaseline(b *Bins, covariates [][]float64) TransactionBaseline {
	return transactionBaseline(b, covariates, p, p.Chunks)
}

// Plan is everything the training phase chooses (docs/formats.md §7, plan.json).
// Coefficients are normalized by 1/N and in milliseconds.
type Plan struct {
	Transaction string  `json:"transaction"`
	BinSeconds  float64 `json:"bin_seconds"`
	N           int     `json:"n"`
	FrequencyHz float64 `json:"frequency_hz"`
	Kd          int     `json:"k_d"`
	AmplitudeMs float64 `json:"amplitude_ms"`
	// BaselineFFTMean and BaselineFFTStd are the target transaction's mean and
	// standard deviation at k = 0 … N/2, as [re, im].
	BaselineFFTMean []Complex `json:"baseline_fft_mean"`
	BaselineFFTStd  []Complex `json:"baseline_fft_std"`
	Chunks          int       `json:"chunks"`

	K                   int     `json:"k"`
	Scale               float64 `json:"scale"`
	MinSamplesPerPeriod float64 `json:"min_samples_per_period"`
	PeriodSeconds       float64 `json:"period_seconds"`
	SamplesPerPeriod    float64 `json:"samples_per_period"`
	// NoiseMs is σ(FFT⁰)(f_d), the modulus of the standard deviation.
	NoiseMs float64 `json:"noise_ms"`
	// MeasurementSeconds is N·ΔTs, the length of the active phase.
	MeasurementSeconds float64      `json:"measurement_seconds"`
	FFTNormalization   string       `json:"fft_normalization"`
	BinSizing          BinSizing    `json:"bin_sizing"`
	ResponseTime       ResponseTime `json:"response_time"`
	Start              float64      `json:"start"` // first baseline bin, Unix seconds
	EmptyBins          int          `json:"empty_bins"`
	Candidates         []Candidate  `json:"candidates"`
	// AdaptiveBins is the length of the adaptive phase's window: one period.
	AdaptiveBins int `json:"adaptive_bins"`
	// Transactions holds every transaction's baseline at k_d, the target's too.
	Transactions map[string]TransactionBaseline `json:"transactions"`
	// Covariates is how many exogenous series the baseline was adjusted for
	// (TrainBinsAdjusted; each transaction's CovariateNoiseRatio says by
	// how much); the active windows must be adjusted alike.
	Covariates int `json:"covariates,omitempty"`
}

// Validate checks a plan read from a file.
func (p *Plan) Validate() error {
	switch {
	case !(p.BinSeconds > 0):
		return fmt.Errorf("bin_seconds must be > 0, got %v", p.BinSeconds)
	case p.N < 8 || !IsPowerOfTwo(p.N):
		return fmt.Errorf("n must be a power of two ≥ 8, got %d", p.N)
	case p.Kd < 1 || 2*p.Kd >= p.N:
		return fmt.Errorf("k_d must be in [1, n/2), got %d", p.Kd)
	case len(p.BaselineFFTMean) != p.N/2+1 || len(p.BaselineFFTStd) != p.N/2+1:
		return fmt.Errorf("baseline_fft_mean and baseline_fft_std must have n/2+1 = %d entries", p.N/2+1)
	case p.Chunks < MinChunks:
		return fmt.Errorf("chunks must be ≥ %d, got %d", MinChunks, p.Chunks)
	}
	return nil
}

// Baseline returns the baseline of transaction tx at k_d: its mean, the
// modulus of its standard deviation pooled over neighbouring frequencies
// (PooledSigma), and whether the plan has one. The
// target transaction falls back to the full arrays.
func (p *Plan) Baseline(tx string) (mean complex128, sigma float64, ok bool) {
	if b, found := p.Transactions[tx]; found && b.Error == "" {
		mean, sigma := b.AtKd()
		return mean, sigma, true
	}
	if tx == p.Transaction && p.Kd < len(p.BaselineFFTStd) {
		sigma := pooledSigma(func(k int) float64 { return p.BaselineFFTStd[k].Abs() }, p.Kd, p.N)
		return p.BaselineFFTMean[p.Kd].Value(), sigma, true
	}
	return 0, 0, false
}

// Train runs the training phase over unperturbed samples (steps 1–4 of
// paper 000 §3): it sizes the bins from the target transaction's request
// times, bins every transaction from the target's first request, and trains
// on as many whole N-bin chunks as there are, up to cfg.Chunks.
func Train(samples []Sample, target string, cfg TrainConfig) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	times := Times(samples, target)
	if len(times) == 0 {
		return nil, fmt.Errorf("no samples of transaction %q", target)
	}
	sizing, err := SizeBins(times, cfg.K)
	if err != nil {
		return nil, err
	}
	start, end := times[0], times[len(times)-1]
	whole := int(math.Floor((end - start) / sizing.BinSeconds))
	chunks := min(cfg.Chunks, whole/cfg.N)
	if chunks < MinChunks {
		return nil, fmt.Errorf("training needs %d chunks of %d bins of %.3f s (%.0f s of %q), have %.0f s",
			MinChunks, cfg.N, sizing.BinSeconds, float64(MinChunks*cfg.N)*sizing.BinSeconds, target, end-start)
	}
	bins := map[string]*Bins{}
	for _, s := range samples {
		b := bins[s.Transaction]
		if b == nil {
			b = NewBins(start, sizing.BinSeconds, chunks*cfg.N)
			bins[s.Transaction] = b
		}
		b.Add(s.Time, s.Ms)
	}
	cfg.Chunks = chunks
	return TrainBins(bins, target, sizing, cfg)
}

// TrainBins is the training phase over already binned series, all on one
// grid whose length is a multiple of cfg.N; cfg.Chunks caps the chunks used.
func TrainBins(bins map[string]*Bins, target string, sizing BinSizing, cfg TrainConfig) (*Plan, error) {
	return TrainBinsAdjusted(bins, nil, target, sizing, cfg)
}

// TrainBinsAdjusted is TrainBins with exogenous covariates on the same grid
// (see Adjust): each chunk of every transaction's series is adjusted for
// them before its spectrum is taken, so σ(FFT⁰), A_d and the choice of k_d
// see the noise the active windows will see after their own adjustment.
// Each transaction also keeps the chunks' mean β and the one-cycle
// baseline adjusted with it (SubtractCovariates), beside the unadjusted
// one. With no covariates it is TrainBins.
func TrainBinsAdjusted(bins map[string]*Bins, covariates [][]float64, target string, sizing BinSizing, cfg TrainConfig) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tb := bins[target]
	if tb == nil {
		return nil, fmt.Errorf("no samples of transaction %q", target)
	}
	series, err := tb.Series()
	if err != nil {
		return nil, fmt.Errorf("transaction %q: %w", target, err)
	}
	values, _, _, err := adjustBaseline(series.Values, covariates, cfg.N)
	if err != nil {
		return nil, fmt.Errorf("transaction %q: %w", target, err)
	}
	base, err := NewBaseline(values, cfg.N, cfg.Chunks)
	if err != nil {
		return nil, err
	}
	maxKd := min(cfg.MaxKd(), cfg.N/2-1)
	cands := base.Candidates(cfg.Scale, maxKd)
	if len(cands) == 0 {
		return nil, errors.New("no frequency satisfies the samples-per-period bound")
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if c.AmplitudeMs < best.AmplitudeMs {
			best = c
		}
	}
	if cfg.Kd > 0 {
		s := base.PooledSigma(cfg.Kd)
		best = Candidate{Kd: cfg.Kd, SamplesPerPeriod: float64(cfg.N) / float64(cfg.Kd), SigmaMs: s, RawSigmaMs: base.Sigma(cfg.Kd), AmplitudeMs: cfg.Scale * s}
	}
	p := &Plan{
		Transaction:         target,
		BinSeconds:          sizing.BinSeconds,
		N:                   cfg.N,
		Kd:                  best.Kd,
		FrequencyHz:         float64(best.Kd) / (float64(cfg.N) * sizing.BinSeconds),
		AmplitudeMs:         best.AmplitudeMs,
		Chunks:              base.Chunks,
		K:                   cfg.K,
		Scale:               cfg.Scale,
		MinSamplesPerPeriod: cfg.MinSamplesPerPeriod,
		PeriodSeconds:       float64(cfg.N) * sizing.BinSeconds / float64(best.Kd),
		SamplesPerPeriod:    best.SamplesPerPeriod,
		NoiseMs:             best.SigmaMs,
		MeasurementSeconds:  float64(cfg.N) * sizing.BinSeconds,
		FFTNormalization:    "1/N",
		BinSizing:           sizing,
		ResponseTime:        ResponseTimeOf(tb),
		Start:               tb.Start,
		EmptyBins:           series.Empty,
		Candidates:          cands,
		AdaptiveBins:        max(2, int(math.Round(float64(cfg.N)/float64(best.Kd)))),
		Transactions:        map[string]TransactionBaseline{},
		Covariates:          len(covariates),
	}
	for k := range base.Mean {
		p.BaselineFFTMean = append(p.BaselineFFTMean, C(base.Mean[k]))
		p.BaselineFFTStd = append(p.BaselineFFTStd, C(base.Std[k]))
	}
	names := make([]string, 0, len(bins))
	for name := range bins {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p.Transactions[name] = transactionBaseline(bins[name], covariates, p, base.Chunks)
	}
	return p, nil
}

// adjustBaseline adjusts each chunk of x for the covariates and returns the
// mean ratio of the noise after to before (1 without covariates) and the
// mean of the chunks' β.
func adjustBaseline(x []float64, covariates [][]float64, n int) ([]float64, float64, []float64, error) {
	if len(covariates) == 0 {
		return x, 1, nil, nil
	}
	out, adjs, err := AdjustChunks(x, covariates, n)
	if err != nil {
		return nil, 0, nil, err
	}
	var sum float64
	var m int
	betas := make([]float64, len(covariates))
	for _, a := range adjs {
		for j, b := range a.Betas {
			betas[j] += b / float64(len(adjs))
		}
		if a.NoiseBeforeMs > 0 {
			sum += a.NoiseAfterMs / a.NoiseBeforeMs
			m++
		}
	}
	if m == 0 {
		return out, 1, betas, nil
	}
	return out, sum / float64(m), betas, nil
}

// transactionBaseline computes one transaction's baseline at the plan's k_d
// and for the adaptive window.
func transactionBaseline(b *Bins, covariates [][]float64, p *Plan, chunks int) TransactionBaseline {
	tb := TransactionBaseline{ResponseTime: ResponseTimeOf(b)}
	s, err := b.Series()
	tb.EmptyBins = s.Empty
	if err != nil {
		tb.Error = err.Error()
		return tb
	}
	raw := s.Values[:min(len(s.Values), chunks*p.N)]
	x, ratio, betas, err := adjustBaseline(raw, covariates, p.N)
	if err != nil {
		tb.Error = err.Error()
		return tb
	}
	if len(covariates) > 0 {
		tb.CovariateNoiseRatio, tb.CovariateBetas = ratio, betas
	}
	sigmaAt := func(k int) (complex128, complex128, error) {
		var at []complex128
		for c := 0; (c+1)*p.N <= len(x); c++ {
			at = append(at, DFT(x[c*p.N:(c+1)*p.N], float64(k)))
		}
		return complexStats(at)
	}
	mean, std, err := sigmaAt(p.Kd)
	if err != nil {
		tb.Error = err.Error()
		return tb
	}
	tb.FFTMean, tb.FFTStd = C(mean), C(std)
	tb.PooledStdMs = pooledSigma(func(k int) float64 {
		if k == p.Kd {
			return cmplx.Abs(std)
		}
		_, sd, _ := sigmaAt(k)
		return cmplx.Abs(sd)
	}, p.Kd, p.N)
	// The adaptive window: consecutive one-period windows over the whole
	// baseline, unadjusted as the one-cycle estimate is.
	L := p.AdaptiveBins
	if mean, std, err := oneCycleStats(raw, L); err == nil {
		tb.AdaptiveMean, tb.AdaptiveStd = C(mean), C(std)
	}
	if len(betas) > 0 { // the same windows adjusted with the mean β
		if mean, std, err := oneCycleStats(SubtractCovariates(raw, covariates, betas), L); err == nil {
			tb.AdaptiveAdjustedMean, tb.AdaptiveAdjustedStd = C(mean), C(std)
		}
	}
	tb.HalfPeriodStdMs = blockMeanStd(raw, max(1, L/2))
	return tb
}

// oneCycleStats is the mean and standard deviation of the first DFT
// coefficient over consecutive windows of L bins of x.
func oneCycleStats(x []float64, L int) (complex128, complex128, error) {
	var at []complex128
	for c := 0; (c+1)*L <= len(x); c++ {
		at = append(at, DFT(x[c*L:(c+1)*L], 1))
	}
	return complexStats(at)
}

// blockMeanStd is the standard deviation of the means of consecutive
// blocks of h values (0 with fewer than two blocks).
func blockMeanStd(x []float64, h int) float64 {
	m := len(x) / h
	if m < 2 {
		return 0
	}
	means := make([]float64, m)
	var sum float64
	for b := range means {
		for _, v := range x[b*h : (b+1)*h] {
			means[b] += v
		}
		means[b] /= float64(h)
		sum += means[b]
	}
	mean := sum / float64(m)
	var ss float64
	for _, v := range means {
		ss += (v - mean) * (v - mean)
	}
	return math.Sqrt(ss / float64(m-1))
}

// complexStats returns the mean and the complex standard deviation.
func complexStats(z []complex128) (complex128, complex128, error) {
	if len(z) < 2 {
		return 0, 0, fmt.Errorf("need at least 2 windows, have %d", len(z))
	}
	var sum complex128
	for _, v := range z {
		sum += v
	}
	mean := sum / complex(float64(len(z)), 0)
	var vr, vi float64
	for _, v := range z {
		d := v - mean
		vr += real(d) * real(d)
		vi += imag(d) * imag(d)
	}
	n1 := float64(len(z) - 1)
	return mean, complex(math.Sqrt(vr/n1), math.Sqrt(vi/n1)), nil
}
