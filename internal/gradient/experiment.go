package gradient

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tierscope/tierscope/internal/spectral"
)

// Phase is the stage an experiment is in.
type Phase string

// The phases, in order (paper 000 §3, figure 6).
const (
	// PhaseTraining is passive: it sizes the bins, then collects M·N bins of
	// unperturbed response times and chooses frequency and amplitude.
	PhaseTraining Phase = "training"
	// PhaseAdaptive injects one on-phase of a small amplitude A⁰ into the
	// current element for a rough gradient g′.
	PhaseAdaptive Phase = "adaptive"
	// PhaseActive injects N bins of the square wave of amplitude A_d/g′.
	PhaseActive Phase = "active"
	// PhaseDone has every element's result.
	PhaseDone Phase = "done"
	// PhaseAborted was stopped by the guard or the caller.
	PhaseAborted Phase = "aborted"
)

// ActionKind says what the caller must do.
type ActionKind string

// The actions.
const (
	// ActionStartLease asks for a square-wave lease on the element.
	ActionStartLease ActionKind = "start_lease"
	// ActionStopLease asks to stop and release the lease now. The caller
	// then reports the change actually injected with Injected (the final
	// status of the lease carries it). It may come for a lease whose start
	// the caller has not finished; the caller must stop that one as soon as
	// it exists.
	ActionStopLease ActionKind = "stop_lease"
)

// Action is one instruction to the caller, who executes it against the
// injector's lease API. Times are absolute.
type Action struct {
	Kind ActionKind
	// Lease is the experiment's name for the lease, unique within it; the
	// caller maps it to the injector's lease id.
	Lease   string
	Element string
	// LeaseKind is the injector's lease kind: delay, cpufreq or capacity.
	LeaseKind string
	// Amplitude is in the injector's unit: ms of delay, kHz below the base
	// frequency, or the fraction of capacity withheld.
	Amplitude float64
	// Floor is the knob in the off-phases, the on-phases taking Floor +
	// Amplitude: −Amplitude/2 for a centered capacity wave and −Amplitude
	// for one above, which grant in their off-phases (Basis.OffKnob), else 0.
	Floor  float64
	Period time.Duration
	// Cycles is the number of periods. Every wave is whole periods, so
	// that a delay's floor holds through its last off-phase.
	Cycles int
	// Start is when the first on-phase begins.
	Start time.Time
	// Duration is the lease's length from now: the wave and a margin, so
	// the injector ends it by itself if the caller dies.
	Duration time.Duration
	// Reason says why a lease is stopped.
	Reason string
}

// Element is one thing to perturb.
type Element struct {
	// ID names the element, e.g. "app->db" or "app/cpu".
	ID    string
	Basis Basis
	// InitialAmplitude is A⁰ for the adaptive phase, in knob units. For a
	// link it defaults to Config.AdaptiveFraction·A_d (a gradient of 1 is
	// the prior); other kinds must set it (or FixedAmplitude).
	InitialAmplitude float64
	// MinAmplitude and MaxAmplitude bound every amplitude (the injector's
	// caps; MaxAmplitude 0 means no bound beyond MaxGrowth).
	MinAmplitude, MaxAmplitude float64
	// FixedAmplitude, when > 0, skips the adaptive phase and injects this.
	FixedAmplitude float64
	// PriorGradients are upper bounds, known before any wave, on each
	// transaction's gradient (a link's calls per request, from the causal
	// paths). A⁰ comes before any measured gradient, so these alone can keep
	// the adaptive pulse within MaxPerturbation of each one's response time.
	// They bound the active windows for the transactions whose spike is lost
	// in the noise, and an adaptive cycle that contradicts them is repeated
	// once.
	PriorGradients map[string]float64
	// SeparateAdaptive keeps this element's adaptive cycle a phase of its
	// own even with Config.AdaptiveInWindow (the collector's CPU waves,
	// which were validated that way on a real cgroup).
	SeparateAdaptive bool
}

// The measures of a perturbation that MaxPerturbation can bound.
const (
	PerturbationPeak = "peak"
	PerturbationMean = "mean"
)

// PerturbationShare is the share of the peak change g·A a measure counts:
// 1 for the peak, ½ for the mean over a square wave on half the time; 0
// for an unknown measure.
func PerturbationShare(measure string) float64 {
	switch measure {
	case PerturbationPeak:
		return 1
	case PerturbationMean:
		return 0.5
	}
	return 0
}

// CheckPerturbationMeasure refuses a measure PerturbationShare does not know.
func CheckPerturbationMeasure(measure string) error {
	if PerturbationShare(measure) == 0 {
		return fmt.Errorf("must be %q or %q, got %q", PerturbationPeak, PerturbationMean, measure)
	}
	return nil
}

// Config configures an experiment. Zero durations and counts take the
// defaults noted.
type Config struct {
	// ID names the experiment; lease names begin with it, so leases of
	// several experiments never collide.
	ID string
	// Settings are the knobs a deployment chooses once (the perfmodel
	// exporter's experiments configuration embeds the same struct).
	Settings
	// Target is the transaction whose baseline chooses the plan, and whose
	// rough gradient scales the amplitude.
	Target string
	// Plan, when set, skips the training phase.
	Plan     *spectral.Plan
	Elements []Element
	// CalibrationRequests is how many target requests size the bins
	// (default 50·k).
	CalibrationRequests int
	// Lateness is how long after a window ends samples of it may still
	// arrive (default 10 s).
	Lateness time.Duration
	// LeadTime is how far ahead a lease's wave is scheduled (default 2 s).
	LeadTime time.Duration
	// SkewGuard is how far the injector's clock may be off ours: the wave
	// starts this much before the window and is stopped this much after it,
	// at most a quarter period (default 1 s).
	SkewGuard time.Duration
	// LeaseMargin is added to each lease's duration past the wave's end
	// (default 30 s).
	LeaseMargin time.Duration
	// InjectedTimeout is how long to wait for the injected report before
	// assuming the requested amplitude (default 60 s).
	InjectedTimeout time.Duration
	// AdaptiveFraction sets a link's default A⁰ = fraction·A_d (default 0.5).
	AdaptiveFraction float64
	// GradientFloor bounds the rough link gradient from below when scaling,
	// A_d′ = A_d / max(g′, floor) (default 0.1).
	GradientFloor float64
	// MaxGrowth bounds the active amplitude to MaxGrowth·A⁰ (default 20).
	MaxGrowth float64
	// RemeasureGrowth bounds the remeasured amplitude to this many times
	// the first (default 3).
	RemeasureGrowth float64
	// PerturbationAim is the fraction of MaxPerturbation the amplitudes are
	// chosen for (default 0.8). Aiming at the bound itself overshoots it in
	// about half the windows: σ, the one-cycle gradients and the measured
	// perturbation each carry 5–10% of error, and the rarer transactions'
	// one-cycle gradients are too noisy to be counted at all.
	PerturbationAim float64
	Guard           Guard
	// MaxTransactions bounds the series kept (default 64); samples of
	// further transactions are counted and dropped.
	MaxTransactions int
	// MaxBuffered bounds the samples held while the bins are sized
	// (default 200000); sizing happens early when it fills.
	MaxBuffered int
	// MaxCovariates bounds the exogenous series kept (ObserveCovariate;
	// default 8), and MaxCovariateSamples the samples kept of each (default
	// 20000, the oldest dropped first); what is left out is counted.
	MaxCovariates       int
	MaxCovariateSamples int
}

// Settings are an experiment's knobs that a deployment chooses once: the
// perfmodel exporter's experiments configuration squashes this struct, so
// its keys are the exporter's (docs/configuration.md has the evidence behind
// each default). Config embeds it.
type Settings struct {
	// Train holds k, N, M, d and the samples-per-period bound
	// (spectral.DefaultTrainConfig when zero).
	Train spectral.TrainConfig `mapstructure:",squash"`
	// MinSNR, when > 0, is the least SNR the target transaction's spike
	// must reach in the active phase. Below it the element is measured
	// again, its amplitude scaled by the shortfall (at most RemeasureGrowth
	// times, within the element's bounds), and each transaction's estimates
	// are combined by inverse variance, until the combined SNR reaches
	// MinSNR or MaxWindows windows have run. The rough gradient of one
	// cycle can be far off in noise that is not white, and then A_d/g′
	// leaves the spike in the noise; the active window's own SNR tells.
	MinSNR float64 `mapstructure:"min_snr"`
	// MaxWindows bounds the active windows of one element (default 2). Each
	// window is N bins; under the perturbation bound the SNR grows with the
	// square root of the windows once the amplitude has reached it, so a
	// noisy host buys precision with time here.
	MaxWindows int `mapstructure:"max_windows"`
	// MaxPerturbation, when > 0, bounds the active windows' perturbation of
	// every transaction's response time, in standard deviations of its
	// natural noise (paper 000 Table 3 keeps it under 1). The first window's
	// A_d′ is kept to where each transaction's one-cycle gradient (target
	// and significant ones, at their upper standard error; the others at
	// their prior gradient, if any) would reach it; a remeasured window
	// grows at most to where the largest perturbation measured so far (by
	// the windows' combined gradients, bounded alike) would. When it cannot
	// grow, the next window is taken at the same amplitude; combined, two
	// windows still halve the variance. The element's MinAmplitude
	// overrides it. A wave above the operating point (Basis.Above) only
	// grants, so no request is slower for it, and the bound leaves it to
	// the element's caps.
	MaxPerturbation float64 `mapstructure:"max_perturbation"`
	// PerturbationMeasure is what MaxPerturbation bounds: PerturbationPeak
	// (the default), the change g·A while the wave is on, or
	// PerturbationMean, that change averaged over the window, g·A/2 for a
	// square wave on half the time. The mean is what paper 000 Table 3
	// reports ("the increase in response time due to the delays injected
	// during measurement"); the peak, what a request sees while the wave
	// is on, is twice as strict.
	PerturbationMeasure string `mapstructure:"perturbation_measure"`
	// AdaptiveInWindow makes the adaptive cycle the active window's first
	// j periods (fold.go): A⁰ for them, the rough gradient from their
	// on-phases against their off-phases and the quiet level just before
	// the wave, and A_d′ for the other periods; j is the fewest periods after which the first
	// on-phase's samples have arrived (Lateness) a lead time before the
	// next. An element then takes N bins, a lead time and a lateness
	// instead of that plus a period, a lead time and a lateness more. A
	// plan whose window cannot hold j + 1 periods, and an element with
	// SeparateAdaptive, runs the separate adaptive phase.
	AdaptiveInWindow bool `mapstructure:"adaptive_in_window"`
	// References adjusts each transaction's active windows for its own
	// requests that did not cross the element, as a covariate (equation 5
	// is unchanged; the adjustment is spectral.Adjust's, not the papers').
	// Requests fed through ObserveRouted say which elements they crossed.
	// Host noise moves every request alike, and the element's wave moves
	// only the crossing ones, so where a transaction splits over replicas
	// the other replica's requests take the shared noise out of the
	// window, and its interval narrows. A transaction is adjusted so for
	// an element only when [MinReferenceShare, MaxReferenceShare] of its
	// requests did not cross it, in training and in the window; its
	// baseline is then trained adjusted alike. It assumes the wave does
	// not reach the other requests through a resource both share (the
	// caller's threads, say): a part of the gradient that does is taken
	// away with β times its share. At most MaxRoutedElements elements.
	References bool `mapstructure:"reference_requests"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// DefaultSettings are the settings a deployment starts from: the paper's
// training (spectral.DefaultTrainConfig), remeasurement to SNR 6 within two
// windows, the perturbation bounded by one standard deviation at its peak,
// the adaptive cycle inside the window and reference requests on.
func DefaultSettings() Settings {
	return Settings{
		Train:               spectral.DefaultTrainConfig(),
		MinSNR:              6,
		MaxWindows:          2,
		MaxPerturbation:     1,
		PerturbationMeasure: PerturbationPeak,
		AdaptiveInWindow:    true,
		References:          true,
	}
}

// Validate reports the settings that are out of range, naming their keys.
func (s Settings) Validate() error {
	var errs []error
	train := s.Train
	train.MinSamplesPerPeriod = spectral.DefaultMinSamplesPerPeriod // its own check names its key
	if err := train.Validate(); err != nil {
		errs = append(errs, err)
	} else if err := spectral.CheckMinSamplesPerPeriod(s.Train.MinSamplesPerPeriod, s.Train.N); err != nil {
		errs = append(errs, fmt.Errorf("min_samples_per_period: %w", err))
	}
	if !(s.MinSNR >= 0) || math.IsInf(s.MinSNR, 0) {
		errs = append(errs, fmt.Errorf("min_snr: must be ≥ 0, got %v", s.MinSNR))
	}
	if s.MaxWindows < 1 || s.MaxWindows > MaxWindowsLimit {
		errs = append(errs, fmt.Errorf("max_windows: must be in [1, %d], got %d", MaxWindowsLimit, s.MaxWindows))
	}
	if !(s.MaxPerturbation >= 0) || math.IsInf(s.MaxPerturbation, 0) {
		errs = append(errs, fmt.Errorf("max_perturbation: must be ≥ 0, got %v", s.MaxPerturbation))
	}
	if err := CheckPerturbationMeasure(s.PerturbationMeasure); err != nil {
		errs = append(errs, fmt.Errorf("perturbation_measure: %w", err))
	}
	return errors.Join(errs...)
}

// MaxWindowsLimit is the largest MaxWindows: past it the SNR's square-root
// growth no longer pays for the time.
const MaxWindowsLimit = 16

func (c *Config) defaults() {
	if c.Train == (spectral.TrainConfig{}) {
		c.Train = spectral.DefaultTrainConfig()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Lateness, 10*time.Second)
	def(&c.LeadTime, 2*time.Second)
	def(&c.SkewGuard, time.Second)
	def(&c.LeaseMargin, 30*time.Second)
	def(&c.InjectedTimeout, time.Minute)
	def(&c.Guard.Window, 30*time.Second)
	if c.CalibrationRequests == 0 {
		c.CalibrationRequests = 50 * c.Train.K
	}
	if c.AdaptiveFraction == 0 {
		c.AdaptiveFraction = 0.5
	}
	if c.GradientFloor == 0 {
		c.GradientFloor = 0.1
	}
	if c.RemeasureGrowth == 0 {
		c.RemeasureGrowth = 3
	}
	if c.MaxWindows == 0 {
		c.MaxWindows = 2
	}
	if c.MaxGrowth == 0 {
		c.MaxGrowth = 20
	}
	if c.PerturbationAim == 0 {
		c.PerturbationAim = 0.8
	}
	if c.PerturbationMeasure == "" {
		c.PerturbationMeasure = PerturbationPeak
	}
	if c.Guard.MinSamples == 0 {
		c.Guard.MinSamples = 100
	}
	if c.MaxTransactions == 0 {
		c.MaxTransactions = 64
	}
	if c.MaxBuffered == 0 {
		c.MaxBuffered = 200000
	}
	if c.MaxCovariates == 0 {
		c.MaxCovariates = 8
	}
	if c.MaxCovariateSamples == 0 {
		c.MaxCovariateSamples = 20000
	}
}

// Validate reports the first invalid setting (after defaults).
func (c Config) Validate() error {
	if c.Target == "" && c.Plan == nil {
		return errors.New("experiment: target transaction is required")
	}
	if c.Plan != nil {
		if err := c.Plan.Validate(); err != nil {
			return fmt.Errorf("experiment: plan: %w", err)
		}
	} else if err := c.Train.Validate(); err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	if len(c.Elements) == 0 {
		return errors.New("experiment: no elements to measure")
	}
	seen := map[string]bool{}
	for _, e := range c.Elements {
		// One element may be measured on both sides of its operating
		// point (Basis.Side), once each.
		key := e.ID + "\x1f" + e.Basis.Side()
		if e.ID == "" || seen[key] {
			return fmt.Errorf("experiment: element ids must be unique and non-empty, but for one wave per side of a capacity (%q)", e.ID)
		}
		seen[key] = true
		if err := e.Basis.Validate(); err != nil {
			return fmt.Errorf("experiment: element %q: %w", e.ID, err)
		}
		if (e.Basis.Centered || e.Basis.Above) && c.AdaptiveInWindow && !e.SeparateAdaptive {
			// The fold weighs each lease's on-phases against a shared
			// off level, which two granting leases of different
			// amplitudes do not have.
			return fmt.Errorf("experiment: element %q: a %s wave cannot fold the adaptive cycle into the window (AdaptiveInWindow): set the element's SeparateAdaptive", e.ID, e.Basis.Side())
		}
		if e.Basis.Kind != KindLink && e.InitialAmplitude <= 0 && e.FixedAmplitude <= 0 {
			return fmt.Errorf("experiment: element %q: a %s element needs InitialAmplitude or FixedAmplitude", e.ID, e.Basis.Kind)
		}
		if e.MinAmplitude < 0 || (e.MaxAmplitude > 0 && e.MaxAmplitude < e.MinAmplitude) {
			return fmt.Errorf("experiment: element %q: amplitude bounds [%v, %v]", e.ID, e.MinAmplitude, e.MaxAmplitude)
		}
		for _, tx := range sortedKeys(e.PriorGradients) {
			if g := e.PriorGradients[tx]; !(g >= 0) || math.IsInf(g, 0) {
				return fmt.Errorf("experiment: element %q: prior gradient of %q must be finite and ≥ 0, got %v", e.ID, tx, g)
			}
		}
	}
	if err := CheckPerturbationMeasure(c.PerturbationMeasure); err != nil {
		return fmt.Errorf("experiment: perturbation measure %w", err)
	}
	switch {
	case c.CalibrationRequests < c.Train.K+2:
		return fmt.Errorf("experiment: calibration needs at least k+2 = %d requests", c.Train.K+2)
	case c.Lateness < 0 || c.LeadTime < 0 || c.SkewGuard < 0 || c.LeaseMargin <= 0 || c.InjectedTimeout < 0:
		return errors.New("experiment: durations must be ≥ 0 (lease margin > 0)")
	case !(c.AdaptiveFraction > 0) || !(c.GradientFloor > 0) || !(c.MaxGrowth >= 1):
		return errors.New("experiment: adaptive fraction and gradient floor must be > 0, max growth ≥ 1")
	case !(c.MinSNR >= 0) || !(c.RemeasureGrowth >= 1) || !(c.MaxPerturbation >= 0):
		return errors.New("experiment: min SNR and max perturbation must be ≥ 0, remeasure growth ≥ 1")
	case c.MaxWindows < 1 || c.MaxWindows > MaxWindowsLimit:
		return fmt.Errorf("experiment: max windows must be in [1, %d], got %d", MaxWindowsLimit, c.MaxWindows)
	case !(c.PerturbationAim > 0 && c.PerturbationAim <= 1):
		return fmt.Errorf("experiment: perturbation aim must be in (0, 1], got %v", c.PerturbationAim)
	case c.Guard.P99Ms < 0 || c.Guard.Window <= 0 || c.Guard.MinSamples < 1:
		return errors.New("experiment: guard needs p99 ≥ 0, a window > 0 and min samples ≥ 1")
	case c.MaxCovariates < 0 || c.MaxCovariateSamples < 1:
		return errors.New("experiment: max covariates must be ≥ 0 and max covariate samples ≥ 1")
	case c.References && len(c.Elements) > MaxRoutedElements:
		return fmt.Errorf("experiment: references need at most %d elements, got %d", MaxRoutedElements, len(c.Elements))
	}
	return nil
}

// ElementResult is the outcome for one element.
type ElementResult struct {
	Element string `json:"element"`
	Basis   Basis  `json:"basis"`
	// Status is done, failed, aborted or pending.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Rough is the adaptive phase's estimate for the target transaction.
	Rough             *spectral.Estimate `json:"rough,omitempty"`
	AdaptiveAmplitude float64            `json:"adaptive_amplitude,omitempty"`
	AdaptiveInjected  float64            `json:"adaptive_injected,omitempty"`
	// AdaptivePerturbationOverStd is the adaptive cycle's change of each
	// transaction's response time while A⁰ was on, in σ, by its one-cycle
	// gradient (those significant, and the target's). The cycle comes before
	// any gradient is known, so MaxPerturbation cannot bound it; this says
	// what it did. It is as rough as those gradients.
	AdaptivePerturbationOverStd map[string]float64 `json:"adaptive_perturbation_over_std,omitempty"`
	// AdaptiveInWindow says the adaptive cycle was the active window's
	// first periods (Config.AdaptiveInWindow): Amplitude and Injected are the
	// other periods', BasisDelta the window's effective change.
	AdaptiveInWindow bool `json:"adaptive_in_window,omitempty"`
	// Amplitude is A_d′ requested in the active phase, Injected the mean the
	// injector reports, and BasisDelta the change of the basis it caused.
	Amplitude       float64   `json:"amplitude"`
	Injected        float64   `json:"injected"`
	InjectedAssumed bool      `json:"injected_assumed,omitempty"`
	BasisDelta      float64   `json:"basis_delta"`
	FrequencyHz     float64   `json:"frequency_hz"`
	Kd              int       `json:"k_d"`
	WindowStart     time.Time `json:"window_start"`
	WindowEnd       time.Time `json:"window_end"`
	// Transactions holds the spectral gradient of every transaction with a
	// baseline, with respect to the element's basis.
	Transactions map[string]spectral.Estimate `json:"transactions"`
	// TimeDomain is the on/off comparator over the same window.
	TimeDomain map[string]spectral.TimeDomain `json:"time_domain,omitempty"`
	// Errors says why a transaction has no gradient.
	Errors map[string]string `json:"errors,omitempty"`
	// Notes records what went other than planned but did not fail.
	Notes []string `json:"notes,omitempty"`
	// Covariates names the exogenous series the last window was adjusted
	// for (ObserveCovariate), if any.
	Covariates []string `json:"covariates,omitempty"`
	// Referenced lists the transactions whose last window was adjusted for
	// their requests that did not cross the element (Config.References);
	// each one's CovariateNoiseRatio says by how much the noise fell.
	Referenced []string `json:"referenced,omitempty"`
	// Unreferenced holds, for those transactions, the estimate of the same
	// windows without their reference, to compare.
	Unreferenced map[string]spectral.Estimate `json:"unreferenced,omitempty"`
	// ReferenceResponse is each reference's own response at the wave's
	// frequency, against its in-window noise, over the windows so far
	// (combined coherently, as the gradients are): the assumption that the
	// wave does not reach those requests holds where it is not significant.
	ReferenceResponse map[string]spectral.Estimate `json:"reference_response,omitempty"`
	// ReferenceRejected lists the transactions whose reference responded
	// significantly to the wave in a window: from that window on, their
	// estimate is the one without it.
	ReferenceRejected []string `json:"reference_rejected,omitempty"`
}

// Interval is the range of the attribute the active wave swept (its
// injected amplitude), or nil for a link or before a wave.
func (r ElementResult) Interval() *[2]float64 {
	if r.Basis.Kind == KindLink || !(r.Injected > 0) {
		return nil
	}
	iv := r.Basis.Interval(r.Injected)
	return &iv
}

// Gradients lists the element's gradients for prediction.
func (r ElementResult) Gradients() []Gradient {
	var out []Gradient
	interval := r.Interval()
	for _, tx := range sortedKeys(r.Transactions) {
		e := r.Transactions[tx]
		out = append(out, Gradient{Element: r.Element, Transaction: tx, Basis: r.Basis, Gradient: e.Gradient, StdErr: e.StdErr, Interval: interval})
	}
	return out
}

// Result is what an experiment has found so far.
type Result struct {
	Phase    Phase           `json:"phase"`
	Reason   string          `json:"reason,omitempty"`
	Plan     *spectral.Plan  `json:"plan,omitempty"`
	Elements []ElementResult `json:"elements"`
	// Dropped counts samples left out: of a transaction over
	// MaxTransactions or without a baseline, or over the calibration buffer.
	Dropped int `json:"dropped"`
	// Covariates names the exogenous series the training was adjusted for,
	// and CovariatesDropped counts their samples left out (over
	// MaxCovariates series or MaxCovariateSamples each).
	Covariates        []string `json:"covariates,omitempty"`
	CovariatesDropped int      `json:"covariates_dropped,omitempty"`
}

// Progress is where an experiment stands.
type Progress struct {
	Phase Phase `json:"phase"`
	// Step details the phase: calibrating, collecting, injecting, stopping,
	// awaiting-injected.
	Step         string        `json:"step"`
	Element      string        `json:"element,omitempty"`
	ElementIndex int           `json:"element_index"`
	Elements     int           `json:"elements"`
	Percent      float64       `json:"percent"`
	ETA          time.Duration `json:"eta"`
	Started      time.Time     `json:"started"`
	Reason       string        `json:"reason,omitempty"`
}

// The steps of a lease-driven phase.
type step int

const (
	stepCollecting step = iota // lease out, window filling
	stepAwaiting               // window closed and lease stopped, waiting for the injected report
)

// run is the element phase in progress.
type run struct {
	phase     Phase
	lease     string
	leaseOut  bool // started and not yet stopped
	step      step
	requested float64 // knob amplitude
	waveStart float64
	period    float64
	winStart  float64
	winEnd    float64
	stopAt    float64
	awaitFrom float64
	injected  float64
	injSE     float64
	injKnown  bool
	noReport  bool // the injector will not report: assume the requested amplitude now
	bins      map[string]*spectral.Bins
	refBins   map[string]*spectral.Bins // the requests that did not cross the element (Config.References)
	fold      *fold                     // the adaptive cycle is this window's first periods
}

// Experiment is the coordinator's state machine for one gradient
// experiment: a training phase, then for each element an adaptive phase and
// an active phase, then the result. It is pure: no goroutines, no I/O, no
// clock of its own. The caller feeds it samples (Observe) and the time
// (Tick), executes the actions they return against the injector, and
// reports what the injector did (Injected, LeaseFailed). The same inputs
// always give the same actions and result.
type Experiment struct {
	cfg     Config
	phase   Phase
	reason  string
	started float64
	now     float64

	// Training.
	calTimes  []float64
	buffer    []routedSample
	sized     bool
	sizing    spectral.BinSizing
	trainBins map[string]*spectral.Bins
	trainEnd  float64
	plan      *spectral.Plan

	// Elements.
	idx     int
	cur     *run
	results []ElementResult
	seq     int
	windows int                          // active windows of the current element so far
	prior   map[string]spectral.Estimate // its earlier windows' combined estimates
	// priorPlain is prior without the references (ElementResult.Unreferenced).
	priorPlain map[string]spectral.Estimate
	// priorRefResponse is the references' own responses over those windows
	// (ElementResult.ReferenceResponse).
	priorRefResponse map[string]spectral.Estimate
	// firstCycle is the current element's adaptive cycle whose gradients
	// contradicted its priors, while the cycle is repeated.
	firstCycle *oneCycle
	measured   int // elements whose active phase finished
	extra      int // their windows past the first (for the ETA)

	guard   guardWindow
	quiet   quietLevel
	dropped int

	cov      covariates
	covNames []string // the training's
	refs     references
}

// routedSample is a sample held before the bins are sized, with its route
// when it came with one.
type routedSample struct {
	s       spectral.Sample
	crossed Crossings
	routed  bool
}

// NewExperiment validates cfg and returns an experiment in its first phase.
func NewExperiment(cfg Config) (*Experiment, error) {
	cfg.defaults()
	if cfg.Plan != nil && cfg.Target == "" {
		cfg.Target = cfg.Plan.Transaction
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	x := &Experiment{cfg: cfg, phase: PhaseTraining, started: math.NaN(), plan: cfg.Plan,
		cov: covariates{maxSeries: cfg.MaxCovariates, maxSamples: cfg.MaxCovariateSamples}}
	x.guard.init(cfg.Guard)
	x.quiet.reset(math.Inf(-1))
	for _, e := range cfg.Elements {
		x.results = append(x.results, ElementResult{Element: e.ID, Basis: e.Basis, Status: "pending"})
	}
	return x, nil
}

// Phase returns the current phase.
func (x *Experiment) Phase() Phase { return x.phase }

// Finished reports whether the experiment is done or aborted.
func (x *Experiment) Finished() bool { return x.phase == PhaseDone || x.phase == PhaseAborted }

// Plan returns the training phase's plan, or nil before it is made.
func (x *Experiment) Plan() *spectral.Plan { return x.plan }

func secs(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func timeAt(s float64) time.Time { return time.Unix(0, int64(math.Round(s*1e9))) }

func dur(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

func (x *Experiment) clock(now float64) {
	if math.IsNaN(x.started) {
		x.started = now
	}
	if now > x.now {
		x.now = now
	}
}

// Observe takes one response-time sample (its time is the request's, by
// the same convention for every sample). It returns a stop action when the
// sample trips the SLO guard while a lease is out.
func (x *Experiment) Observe(s spectral.Sample) []Action {
	return x.observe(s, 0, false)
}

// ObserveRouted is Observe for a request whose route through the elements
// is known: with Config.References, the requests that did not cross an
// element become its reference.
func (x *Experiment) ObserveRouted(s spectral.Sample, crossed Crossings) []Action {
	return x.observe(s, crossed, true)
}

func (x *Experiment) observe(s spectral.Sample, crossed Crossings, routed bool) []Action {
	if x.Finished() {
		return nil
	}
	if math.IsNaN(x.started) {
		x.started = s.Time
	}
	if x.guard.add(s) && x.cur != nil && x.cur.leaseOut {
		return x.abort(fmt.Sprintf("SLO guard: p99 %.1f ms over %v exceeds %.1f ms", x.guard.p99(), x.cfg.Guard.Window, x.cfg.Guard.P99Ms))
	}
	if x.cfg.AdaptiveInWindow { // only the in-window rough gradient reads the quiet level
		x.quiet.add(s, x.cfg.MaxTransactions)
	}
	switch {
	case x.phase == PhaseTraining && x.plan == nil:
		x.observeTraining(routedSample{s, crossed, routed})
	case x.cur != nil && x.cur.step == stepCollecting:
		if f := x.cur.fold; f != nil {
			f.observe(s)
		}
		if b := x.cur.bins[s.Transaction]; b != nil {
			b.Add(s.Time, s.Ms) // samples outside the window (lead time, guard) are expected
		} else {
			x.dropped++ // no baseline for this transaction
		}
		if b := x.cur.refBins[s.Transaction]; b != nil && routed && !crossed.Has(x.idx) {
			b.Add(s.Time, s.Ms)
		}
	}
	return nil
}

// ObserveCovariate takes one sample of an exogenous series that moves the
// response times but that the perturbation does not move, such as a host's
// CPU steal fraction: the value v held over (from, to], in Unix seconds.
// When covariates cover the training, every chunk and every active window
// is adjusted for them (spectral.Adjust), which removes the noise they
// explain from the estimate without biasing it.
func (x *Experiment) ObserveCovariate(name string, from, to, v float64) {
	if x.Finished() {
		return
	}
	x.cov.add(name, from, to, v)
}

func (x *Experiment) observeTraining(rs routedSample) {
	s := rs.s
	if x.sized {
		b := x.trainBins[s.Transaction]
		if b == nil {
			if len(x.trainBins) >= x.cfg.MaxTransactions {
				x.dropped++
				return
			}
			b = spectral.NewBins(x.trainBins[x.cfg.Target].Start, x.sizing.BinSeconds, x.trainBins[x.cfg.Target].Len())
			x.trainBins[s.Transaction] = b
		}
		b.Add(s.Time, s.Ms)
		if rs.routed && x.cfg.References {
			x.refs.observeTraining(x, s, rs.crossed)
		}
		return
	}
	if len(x.buffer) >= x.cfg.MaxBuffered {
		x.dropped++
		return
	}
	x.buffer = append(x.buffer, rs)
	if s.Transaction == x.cfg.Target {
		x.calTimes = append(x.calTimes, s.Time)
	}
}

// Tick advances the experiment to now and returns what the caller must do.
func (x *Experiment) Tick(now time.Time) []Action {
	if x.Finished() {
		return nil
	}
	t := secs(now)
	x.clock(t)
	x.guard.evict()
	var acts []Action
	for range 8 { // a tick may pass several steps; each returns once it waits
		if x.Finished() {
			return acts
		}
		a, progressed := x.step(t)
		acts = append(acts, a...)
		if !progressed {
			break
		}
	}
	return acts
}

// step makes at most one transition; it reports whether it made one.
func (x *Experiment) step(t float64) ([]Action, bool) {
	if x.phase == PhaseTraining {
		return x.stepTraining(t)
	}
	r := x.cur
	if r == nil {
		return nil, false
	}
	var acts []Action
	if r.leaseOut && t >= r.stopAt {
		acts = append(acts, x.stop("window complete"))
	}
	if f := r.fold; f != nil && !f.decided && t >= f.decideAt {
		return append(acts, x.decideFold(t)...), true
	}
	switch r.step {
	case stepCollecting:
		if t < r.winEnd+x.cfg.Lateness.Seconds() {
			return acts, len(acts) > 0
		}
		if r.leaseOut {
			acts = append(acts, x.stop("window complete"))
		}
		r.step, r.awaitFrom = stepAwaiting, t
		return acts, true
	case stepAwaiting:
		if !r.injKnown && !r.noReport && t < r.awaitFrom+x.cfg.InjectedTimeout.Seconds() {
			return acts, len(acts) > 0
		}
		if r.phase == PhaseAdaptive {
			return append(acts, x.finishAdaptive(t)...), true
		}
		x.finishActive()
		if more, ok := x.remeasure(t); ok {
			return append(acts, more...), true
		}
		x.measured++
		x.extra += max(0, x.windows-1)
		return append(acts, x.nextElement(t)...), true
	}
	return acts, false
}

func (x *Experiment) stepTraining(t float64) ([]Action, bool) {
	if x.plan != nil { // given, or just made
		return x.startElement(t), true
	}
	if !x.sized {
		if len(x.calTimes) < x.cfg.CalibrationRequests && len(x.buffer) < x.cfg.MaxBuffered {
			return nil, false
		}
		if err := x.size(); err != nil {
			return x.abort("training: " + err.Error()), true
		}
		return nil, true
	}
	if t < x.trainEnd+x.cfg.Lateness.Seconds() {
		return nil, false
	}
	cfg := x.cfg.Train
	tb := x.trainBins[x.cfg.Target]
	names, covs := x.cov.binned(tb.Start, tb.Width, tb.Len())
	plan, err := spectral.TrainBinsAdjusted(x.trainBins, covs, x.cfg.Target, x.sizing, cfg)
	if err != nil && len(covs) > 0 { // a covariate the fit cannot use must not cost the experiment
		names = nil
		plan, err = spectral.TrainBins(x.trainBins, x.cfg.Target, x.sizing, cfg)
	}
	if err == nil && x.cfg.References {
		if names == nil {
			covs = nil
		}
		x.refs.finishTraining(plan, x.trainBins, covs)
	}
	x.trainBins = nil
	if err != nil {
		return x.abort("training: " + err.Error()), true
	}
	x.plan, x.covNames = plan, names
	return x.startElement(t), true
}

// size is step 1: the bin width from the calibration requests, then the
// training grid from the first of them, with the buffered samples binned.
func (x *Experiment) size() error {
	slices.Sort(x.calTimes)
	sizing, err := spectral.SizeBins(x.calTimes, x.cfg.Train.K)
	if err != nil {
		return err
	}
	x.sizing, x.sized = sizing, true
	n := x.cfg.Train.Chunks * x.cfg.Train.N
	start := x.calTimes[0]
	x.trainEnd = start + float64(n)*sizing.BinSeconds
	x.quiet.reset(x.trainEnd)
	x.trainBins = map[string]*spectral.Bins{x.cfg.Target: spectral.NewBins(start, sizing.BinSeconds, n)}
	buf := x.buffer
	x.buffer, x.calTimes = nil, nil
	for _, s := range buf {
		x.observeTraining(s)
	}
	return nil
}

// startElement begins the current element's first phase, or finishes.
func (x *Experiment) startElement(t float64) []Action {
	if x.idx >= len(x.cfg.Elements) {
		x.phase, x.cur = PhaseDone, nil
		return nil
	}
	e := x.cfg.Elements[x.idx]
	if e.FixedAmplitude > 0 {
		return x.startActive(t, e.FixedAmplitude)
	}
	a0 := e.InitialAmplitude
	if a0 <= 0 { // links only (Validate)
		a0 = x.cfg.AdaptiveFraction * x.plan.AmplitudeMs
	}
	a0 = x.clampAmplitude(e, a0, math.Inf(1))
	a0 = x.priorBound(e, &x.results[x.idx], a0)
	x.results[x.idx].AdaptiveAmplitude = a0
	if x.folds(e) {
		return x.startFolded(t, a0)
	}
	return x.startAdaptive(t, a0)
}

// skew is the guard time around windows: SkewGuard, at most a quarter period.
func (x *Experiment) skew() float64 {
	return math.Min(x.cfg.SkewGuard.Seconds(), x.plan.PeriodSeconds/4)
}

// newRun prepares bins for every transaction with a baseline.
func (x *Experiment) newRun(phase Phase, amplitude, winStart float64, nbins int) *run {
	x.seq++
	r := &run{phase: phase, lease: x.leaseName(x.cfg.Elements[x.idx], phase), requested: amplitude, period: x.plan.PeriodSeconds,
		winStart: winStart, winEnd: winStart + float64(nbins)*x.plan.BinSeconds, bins: map[string]*spectral.Bins{}}
	x.cov.prune(winStart - x.plan.BinSeconds) // no later window reaches back further
	for tx, b := range x.plan.Transactions {
		if b.Error == "" {
			r.bins[tx] = spectral.NewBins(winStart, x.plan.BinSeconds, nbins)
		}
	}
	if phase == PhaseActive && nbins == x.plan.N {
		r.refBins = x.refs.windowBins(x.idx, winStart, x.plan.BinSeconds, nbins)
	}
	return r
}

// leaseName names the lease of the current sequence number.
func (x *Experiment) leaseName(e Element, phase Phase) string {
	name := fmt.Sprintf("%s#%d/%s", e.ID, x.seq, phase)
	if x.cfg.ID != "" {
		name = x.cfg.ID + "/" + name
	}
	return name
}

// startAdaptive schedules one on-phase of amplitude a0. The window is one
// period that holds the on-phase after SkewGuard of off: within one period
// a half-period pulse anywhere is a circular shift of the square wave, so
// equation 5 with k_d = 1 holds for any skew up to the guard.
//
// The lease is one whole cycle, stopped at the window's end, not a single
// on-phase: an injector ends a single pulse's lease with the pulse, and
// with it the rule, so the window's off-phase after it lacked the floor
// and the queue's pass-through cost that the on-phase paid (and the
// injector's on − off does not count). On the testbed that made one cycle
// read 1.2–1.9× the calls per request, ~1.1–1.5 ms more per crossing
// (runs AR, AS and AT).
func (x *Experiment) startAdaptive(t, a0 float64) []Action {
	if acts, over := x.guardBlocks(); over {
		return acts
	}
	g := x.skew()
	r := x.beginRun(t, PhaseAdaptive, a0, -g, x.plan.AdaptiveBins)
	r.stopAt = math.Max(r.waveStart+r.period/2+g, r.winEnd)
	return []Action{x.leaseAction(r, t, r.waveStart, 1)}
}

// beginRun makes current the run of a phase whose wave starts a lead time
// after t and whose window of nbins starts winOffset after the wave.
func (x *Experiment) beginRun(t float64, phase Phase, a, winOffset float64, nbins int) *run {
	waveStart := t + x.cfg.LeadTime.Seconds()
	r := x.newRun(phase, a, waveStart+winOffset, nbins)
	r.waveStart, r.leaseOut = waveStart, true
	x.cur, x.phase = r, phase
	return r
}

// leaseAction starts r's lease at start: cycles periods of r.requested.
// The lease lasts the wave and the margin, so the injector ends it by
// itself if the caller dies.
func (x *Experiment) leaseAction(r *run, t, start float64, cycles int) Action {
	e := x.cfg.Elements[x.idx]
	length := float64(cycles) * r.period
	return Action{
		Kind: ActionStartLease, Lease: r.lease, Element: e.ID, LeaseKind: e.Basis.Kind.LeaseKind(),
		Amplitude: r.requested, Floor: e.Basis.OffKnob(r.requested), Period: dur(r.period), Cycles: cycles, Start: timeAt(start),
		Duration: dur(start + length - t + x.cfg.LeaseMargin.Seconds()),
	}
}

// startActive schedules the square wave over N bins. The wave starts
// SkewGuard before the window and runs k_d+1 cycles, and is stopped
// SkewGuard after it, so that for any clock offset up to the guard the
// window holds exactly k_d whole periods of a (shifted) wave.
func (x *Experiment) startActive(t, a float64) []Action {
	if acts, over := x.guardBlocks(); over {
		return acts
	}
	g := x.skew()
	r := x.beginRun(t, PhaseActive, a, g, x.plan.N)
	r.stopAt = r.winEnd + g
	x.windows++
	res := &x.results[x.idx]
	res.Amplitude, res.FrequencyHz, res.Kd = a, x.plan.FrequencyHz, x.plan.Kd
	res.WindowStart, res.WindowEnd = timeAt(r.winStart), timeAt(r.winEnd)
	return []Action{x.leaseAction(r, t, r.waveStart, x.plan.Kd+1)}
}

// guardBlocks aborts instead of starting a lease while the p99 is over.
func (x *Experiment) guardBlocks() ([]Action, bool) {
	if x.guard.violated() {
		return x.abort(fmt.Sprintf("SLO guard: p99 %.1f ms exceeds %.1f ms before injecting", x.guard.p99(), x.cfg.Guard.P99Ms)), true
	}
	return nil, false
}

// stop releases the current lease. Requests from SkewGuard on count
// toward the quiet level before the next wave.
func (x *Experiment) stop(reason string) Action {
	r := x.cur
	if r.fold == nil || r.phase != PhaseAdaptive { // not lease 0 handing over to lease 1
		x.quiet.reset(x.now + x.skew())
	}
	r.leaseOut = false
	e := x.cfg.Elements[x.idx]
	return Action{Kind: ActionStopLease, Lease: r.lease, Element: e.ID, LeaseKind: e.Basis.Kind.LeaseKind(), Reason: reason}
}

// injectedDelta is the change actually injected, in knob units and as a
// change of the basis with its standard error.
func (x *Experiment) injectedDelta() (knob, delta, deltaSE float64, err error) {
	r := x.cur
	knob = r.requested
	if r.injKnown {
		knob = r.injected
	}
	e := x.cfg.Elements[x.idx]
	delta, err = e.Basis.Delta(knob)
	if err != nil {
		return knob, 0, 0, err
	}
	if r.injKnown && r.injSE > 0 && knob > 0 {
		delta2, err2 := e.Basis.Delta(knob + r.injSE)
		if err2 == nil {
			deltaSE = math.Abs(delta2 - delta)
		}
	}
	return knob, delta, deltaSE, nil
}

// finishAdaptive computes g′ and starts the active phase with A_d/g′.
func (x *Experiment) finishAdaptive(t float64) []Action {
	r := x.cur
	res := &x.results[x.idx]
	e := x.cfg.Elements[x.idx]
	knob, delta, _, err := x.injectedDelta()
	res.AdaptiveInjected = knob
	if err != nil || !(delta > 0) {
		return x.failElement(t, fmt.Sprintf("adaptive phase: no usable injected change (%v, %v)", knob, err))
	}
	base := x.plan.Transactions[x.cfg.Target]
	b := r.bins[x.cfg.Target]
	if b == nil {
		return x.failElement(t, fmt.Sprintf("adaptive phase: target %q has no baseline", x.cfg.Target))
	}
	covs := x.adaptiveCovariates(r)
	rough, err := oneCycleRough(b, base, covs, delta)
	first := x.firstCycle
	x.firstCycle = nil
	if err != nil && first == nil {
		// No rough gradient (too few samples in one period): measure at A⁰.
		res.Notes = append(res.Notes, "adaptive phase: "+err.Error()+"; the active phase injects A⁰")
		return x.startActive(t, r.requested)
	}
	cycle := &oneCycle{injected: knob}
	if err == nil {
		cycle.rough = rough
		cycle.roughs = x.oneCycleRoughs(r, delta, covs, rough)
		cycle.perturbation = x.adaptivePerturbation(cycle.roughs)
		cycle.contradiction, cycle.contradicted = x.priorContradiction(e, cycle.roughs)
	}
	if first == nil && cycle.contradiction > 1 {
		g := cycle.roughs[cycle.contradicted]
		res.Notes = append(res.Notes, fmt.Sprintf("adaptive phase: one cycle read %s's gradient as %.3f ± %.3f, over its prior %.3g by more than two standard errors; the cycle is repeated once",
			cycle.contradicted, g.Gradient, g.StdErr, e.PriorGradients[cycle.contradicted]))
		x.firstCycle = cycle
		res.Rough, res.AdaptivePerturbationOverStd = &cycle.rough, cycle.perturbation
		return x.startAdaptive(t, r.requested)
	}
	if first != nil {
		cycle = x.keptCycle(res, first, cycle, err)
	}
	res.Rough, res.AdaptivePerturbationOverStd = &cycle.rough, cycle.perturbation
	return x.startActive(t, x.chooseAmplitude(e, res, cycle.rough, cycle.roughs, r.requested))
}

// oneCycle is what one adaptive cycle measured.
type oneCycle struct {
	rough        spectral.Estimate            // the target's gradient
	roughs       map[string]spectral.Estimate // every transaction's
	perturbation map[string]float64           // AdaptivePerturbationOverStd
	injected     float64
	// contradiction is the largest (g′ − 2·SE)/prior over the transactions
	// that count (over 1: a prior contradicted), and contradicted names it.
	contradiction float64
	contradicted  string
}

// priorContradiction measures how far a cycle's rough gradients stand
// over the element's priors. A link's delay adds at most its calls per
// request, so a one-cycle gradient over that by more than two standard
// errors (contradictingErrors) most likely caught something else that
// moved the response times during the single pulse: in run AR a stall of
// the host moved every transaction by 2.3–2.5σ during the pulse of a link
// that half of their calls cross (0.4–0.6σ by the calls). Sized by that
// cycle, the first window would be a fraction of what the bound allows.
func (x *Experiment) priorContradiction(e Element, roughs map[string]spectral.Estimate) (float64, string) {
	worst, who := 0.0, ""
	for _, tx := range sortedKeys(roughs) {
		g, p := roughs[tx], e.PriorGradients[tx]
		if !x.counts(tx, g) || !(p > 0) {
			continue
		}
		if c := (g.Gradient - contradictingErrors*g.StdErr) / p; c > worst {
			worst, who = c, tx
		}
	}
	return worst, who
}

// keptCycle chooses between a contradicted cycle and its repetition
// (whose estimate failed when repeatErr is set): the one that contradicts
// the priors less sizes the window. A system that does amplify a delay
// contradicts them in both, and the smaller reading still counts at its
// upper error. Either pulse was injected, so the larger of each
// transaction's perturbations is the one reported.
func (x *Experiment) keptCycle(res *ElementResult, first, repeat *oneCycle, repeatErr error) *oneCycle {
	kept := repeat
	switch {
	case repeatErr != nil:
		kept = first
		res.Notes = append(res.Notes, "adaptive phase: the repeated cycle gave no gradient ("+repeatErr.Error()+"); the first cycle's are kept")
	case first.contradiction < repeat.contradiction:
		kept = first
		res.Notes = append(res.Notes, fmt.Sprintf("adaptive phase: the repeated cycle contradicted the priors more (%.2f against %.2f); the first cycle's gradients are kept", repeat.contradiction, first.contradiction))
	default:
		res.Notes = append(res.Notes, fmt.Sprintf("adaptive phase: the repeated cycle read the target's gradient as %.3f ± %.3f; its gradients are kept", repeat.rough.Gradient, repeat.rough.StdErr))
	}
	out := *kept
	out.perturbation = map[string]float64{}
	for _, c := range []*oneCycle{first, repeat} {
		for tx, v := range c.perturbation {
			out.perturbation[tx] = math.Max(out.perturbation[tx], v)
		}
	}
	res.AdaptiveInjected = math.Max(first.injected, repeat.injected)
	return &out
}

// adaptiveCovariates bins the training's covariates on the adaptive
// window, or returns nil unless every one of them covers it: the one-cycle
// baseline was adjusted for all of them.
func (x *Experiment) adaptiveCovariates(r *run) [][]float64 {
	if len(x.covNames) == 0 {
		return nil
	}
	names, covs := x.cov.binned(r.winStart, x.plan.BinSeconds, x.plan.AdaptiveBins)
	if !slices.Equal(names, x.covNames) {
		return nil
	}
	return covs
}

// roughInput is a one-cycle window and its baseline: adjusted with the
// training's β when the window has the covariates and the baseline was
// adjusted, as it is, and as it was, otherwise.
func roughInput(values []float64, base spectral.TransactionBaseline, covs [][]float64) ([]float64, complex128, float64) {
	if len(covs) > 0 && len(base.CovariateBetas) == len(covs) && base.AdaptiveAdjustedStd.Abs() > 0 {
		return spectral.SubtractCovariates(values, covs, base.CovariateBetas), base.AdaptiveAdjustedMean.Value(), base.AdaptiveAdjustedStd.Abs()
	}
	return values, base.AdaptiveMean.Value(), base.AdaptiveStd.Abs()
}

// oneCycleRoughs is every transaction's one-cycle gradient over the
// adaptive window, the target's (already computed) included.
func (x *Experiment) oneCycleRoughs(r *run, delta float64, covs [][]float64, target spectral.Estimate) map[string]spectral.Estimate {
	out := map[string]spectral.Estimate{x.cfg.Target: target}
	for tx, b := range r.bins {
		if tx == x.cfg.Target {
			continue
		}
		if g, err := oneCycleRough(b, x.plan.Transactions[tx], covs, delta); err == nil {
			out[tx] = g
		}
	}
	return out
}

// oneCycleRough is a transaction's gradient from the adaptive window's
// single period (spectral.Rough), covariate-adjusted as its baseline was.
func oneCycleRough(b *spectral.Bins, base spectral.TransactionBaseline, covs [][]float64, delta float64) (spectral.Estimate, error) {
	s, err := b.Series()
	if err != nil {
		return spectral.Estimate{}, err
	}
	values, mean, sigma := roughInput(s.Values, base, covs)
	g, err := spectral.Rough(values, mean, sigma, delta)
	g.Samples, g.EmptyBins = s.Samples, s.Empty
	return g, err
}

// finishActive computes every transaction's gradient from the window.
func (x *Experiment) finishActive() {
	r := x.cur
	res := &x.results[x.idx]
	knob, delta, deltaSE, err := x.injectedDelta()
	largest, onOff := delta, delta
	if f := r.fold; f != nil && err == nil {
		delta, deltaSE, largest, onOff, err = x.foldDelta()
		res.AdaptiveInjected = f.a0
		if f.injKnown {
			res.AdaptiveInjected = f.injected
		}
	}
	res.Injected, res.InjectedAssumed, res.BasisDelta = knob, !r.injKnown, delta
	if err != nil || !(delta > 0) {
		res.Status, res.Error = "failed", fmt.Sprintf("no usable injected change (%v, %v)", knob, err)
		return
	}
	res.Transactions = map[string]spectral.Estimate{}
	res.TimeDomain = map[string]spectral.TimeDomain{}
	// The window is adjusted for the covariates only if the baseline was:
	// the interval's σ must describe the same series.
	var covs [][]float64
	res.Covariates, res.Referenced = nil, nil
	if len(x.covNames) > 0 {
		res.Covariates, covs = x.cov.binned(r.winStart, x.plan.BinSeconds, x.plan.N)
	}
	for _, tx := range sortedKeys(r.bins) {
		b := r.bins[tx]
		mean, sigma, _ := x.plan.Baseline(tx)
		txCovs, referenced := covs, false
		// A reference replaces the baseline with the one trained adjusted
		// for it, so that the interval's σ describes the adjusted series.
		rejected := slices.Contains(res.ReferenceRejected, tx)
		if !rejected {
			if c, base, ok := x.refs.forWindow(x.idx, tx, r.refBins[tx], b, covs); ok {
				txCovs, referenced = c, true
				mean, sigma = base.AtKd()
				res.Referenced = append(res.Referenced, tx)
			}
		}
		s, err := b.Series()
		var est spectral.Estimate
		if err == nil {
			est, err = x.estimateWindow(s, txCovs, mean, sigma, delta, deltaSE)
		}
		if err != nil {
			setErr(res, tx, err)
			if f, ok := x.prior[tx]; ok {
				res.Transactions[tx] = f // the earlier windows' estimate stands
			}
			continue
		}
		if f, ok := x.prior[tx]; ok {
			est = spectral.CombineCoherent(f, est)
		}
		if referenced {
			est = x.checkReference(res, tx, s, covs, txCovs[len(txCovs)-1], est, delta, deltaSE)
		}
		if rejected { // in an earlier window: the record stays
			keepEstimate(&res.Unreferenced, tx, est)
			if own, ok := x.priorRefResponse[tx]; ok {
				keepEstimate(&res.ReferenceResponse, tx, own)
			}
		}
		// The perturbation is this window's, by the (combined) gradient; the
		// first period's A⁰ may be the larger change.
		est.PerturbationMs = est.Gradient * largest
		if sd := x.plan.Transactions[tx].StdMs; sd > 0 {
			est.PerturbationOverStd = est.PerturbationMs / sd
		}
		res.Transactions[tx] = est
		if td, err := spectral.OnOffBins(b, r.waveStart, r.period, onOff); err == nil {
			res.TimeDomain[tx] = td
		}
	}
	res.Status = "done"
}

// checkReference keeps, beside est (tx's window adjusted for its reference
// ref and combined with the earlier windows), the same windows' estimate
// without it and the reference's own response to the wave, combined alike.
// A reference the wave moved is not exogenous: its adjustment would take
// that response from the gradient, so the element keeps the estimate
// without it from this window on (ReferenceRejected). Combined, a response
// too small to stand out of one window's noise (run AQ's PutBid, SNR 1.3)
// stands out of several. It returns the estimate to report.
func (x *Experiment) checkReference(res *ElementResult, tx string, s spectral.Series, covs [][]float64, ref []float64, est spectral.Estimate, delta, deltaSE float64) spectral.Estimate {
	own, err := spectral.EstimateGradient(spectral.EstimateInput{Values: ref, Kd: x.plan.Kd, Delta: delta, DeltaStdErr: deltaSE})
	if err == nil {
		if f, ok := x.priorRefResponse[tx]; ok {
			own = spectral.CombineCoherent(f, own)
		}
		keepEstimate(&res.ReferenceResponse, tx, own)
	}
	mean, sigma, _ := x.plan.Baseline(tx)
	plain, perr := x.estimateWindow(s, covs, mean, sigma, delta, deltaSE)
	if perr != nil {
		return est
	}
	if f, ok := x.priorPlain[tx]; ok {
		plain = spectral.CombineCoherent(f, plain)
	}
	keepEstimate(&res.Unreferenced, tx, plain)
	if err != nil || !own.Significant {
		return est
	}
	res.Referenced = slices.DeleteFunc(res.Referenced, func(v string) bool { return v == tx })
	res.ReferenceRejected = append(res.ReferenceRejected, tx)
	return plain
}

// estimateWindow is equation 5 over one transaction's window adjusted for
// covs, against the baseline (mean, sigma) trained alike.
func (x *Experiment) estimateWindow(s spectral.Series, covs [][]float64, mean complex128, sigma, delta, deltaSE float64) (spectral.Estimate, error) {
	values, adj, err := adjustWindow(s.Values, covs, x.plan.Kd)
	if err != nil {
		return spectral.Estimate{}, err
	}
	est, err := spectral.EstimateGradient(spectral.EstimateInput{Values: values, Kd: x.plan.Kd, BaselineMean: mean, BaselineSigma: sigma,
		Chunks: x.plan.Chunks, Delta: delta, DeltaStdErr: deltaSE})
	if err != nil {
		return est, err
	}
	if adj != nil && adj.NoiseBeforeMs > 0 {
		est.CovariateNoiseRatio = adj.NoiseAfterMs / adj.NoiseBeforeMs
	}
	est.Samples, est.EmptyBins = s.Samples, s.Empty
	return est, nil
}

// keepEstimate sets (*m)[tx], making the map if need be.
func keepEstimate(m *map[string]spectral.Estimate, tx string, e spectral.Estimate) {
	if *m == nil {
		*m = map[string]spectral.Estimate{}
	}
	(*m)[tx] = e
}

func setErr(res *ElementResult, tx string, err error) {
	if res.Errors == nil {
		res.Errors = map[string]string{}
	}
	res.Errors[tx] = err.Error()
}

func (x *Experiment) failElement(t float64, msg string) []Action {
	res := &x.results[x.idx]
	res.Status, res.Error = "failed", msg
	return x.nextElement(t)
}

// remeasure starts another active window when the target's spike, over
// the element's windows so far, stayed under MinSNR (see Config.MinSNR),
// up to MaxWindows per element.
func (x *Experiment) remeasure(t float64) ([]Action, bool) {
	res := &x.results[x.idx]
	est, ok := res.Transactions[x.cfg.Target]
	if x.cfg.MinSNR <= 0 || x.windows >= x.cfg.MaxWindows || res.Status != "done" || !ok || est.SNR >= x.cfg.MinSNR {
		return nil, false
	}
	e := x.cfg.Elements[x.idx]
	if e.Basis.Kind == KindLink && est.CI95[1] < x.cfg.GradientFloor {
		// The link does not matter to the target (an asynchronous hop, say):
		// its gradient is pinned near 0, which no amplitude would sharpen.
		return nil, false
	}
	last := res.Amplitude
	// SNR grows with the amplitude: aim a quarter above the bound.
	growth := math.Min(x.cfg.RemeasureGrowth, 1.25*x.cfg.MinSNR/math.Max(est.SNR, 0.1))
	bound := ""
	if x.boundsPerturbation(e) {
		// Each perturbation so far at its gradient's upper bound: at SNR 6
		// the point estimate is ~17% uncertain, and a low draw would let
		// the next window past the bound (boundingGradient).
		// With the adaptive cycle in the window, a perturbation counts the
		// larger of A⁰ and A_d′; the next window grows from A_d′'s.
		largest := res.BasisDelta                         // the window's largest change of the basis
		for _, tx := range sortedKeys(res.Transactions) { // in order: the quotient's rounding must not vary by run
			if te := res.Transactions[tx]; te.Gradient > 0 && te.PerturbationMs > 0 {
				largest = te.PerturbationMs / te.Gradient
				break
			}
		}
		if res.AdaptiveInWindow {
			if d1, err := e.Basis.Delta(res.Injected); err == nil {
				largest = d1
			}
		}
		worst := 0.0
		for tx, te := range res.Transactions {
			up, ok := x.boundingGradient(e, tx, te)
			if sd := x.plan.Transactions[tx].StdMs; ok && sd > 0 {
				worst = math.Max(worst, up*largest/sd)
			}
		}
		if worst > 0 && x.aim()/worst < growth {
			growth = math.Max(1, x.aim()/worst)
			bound = fmt.Sprintf(", kept to a peak perturbation of %.3gσ (%.2fσ in window %d, by its gradient's upper bound)", x.aim(), worst, x.windows)
		}
	}
	a := x.clampAmplitude(e, last*growth, math.Inf(1))
	if !(a > 1.05*last) {
		if x.cfg.MaxPerturbation <= 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("active phase: target SNR %.1f < %.1f, but the amplitude %.4g cannot grow", est.SNR, x.cfg.MinSNR, last))
			return nil, false
		}
		a = last // another window at the same amplitude still adds its samples
	}
	x.prior, x.priorPlain, x.priorRefResponse = res.Transactions, res.Unreferenced, res.ReferenceResponse
	res.Notes = append(res.Notes, fmt.Sprintf("active phase: target SNR %.1f < %.1f after %d window(s), the last at amplitude %.4g (gradient %.3f); measured again at %.4g%s",
		est.SNR, x.cfg.MinSNR, x.windows, last, est.Gradient, a, bound))
	res.Status, res.Transactions, res.TimeDomain, res.Errors, res.Unreferenced, res.ReferenceResponse = "pending", nil, nil, nil, nil, nil
	return x.startActive(t, a), true
}

func (x *Experiment) nextElement(t float64) []Action {
	x.cur = nil
	x.windows, x.prior, x.priorPlain, x.priorRefResponse, x.firstCycle = 0, nil, nil, nil, nil
	x.idx++
	return x.startElement(t)
}

// Injected reports what the injector actually did for a lease: the mean of
// the injected change in knob units (for a delay lease, the mean delay of
// the delayed packets) and its standard error (0 if unknown). Reports for
// other leases are ignored.
func (x *Experiment) Injected(lease string, mean, stdErr float64) {
	if x.cur == nil || !(mean > 0) || math.IsInf(mean, 0) {
		return
	}
	if f := x.cur.fold; f != nil && f.lease0 == lease && x.cur.lease != lease {
		f.injected, f.injSE, f.injKnown = mean, math.Max(0, stdErr), true
		return
	}
	if x.cur.lease != lease {
		return
	}
	x.cur.injected, x.cur.injSE, x.cur.injKnown = mean, math.Max(0, stdErr), true
}

// NoInjectedReport says that no report will come for a lease (the injector
// kept no statistics, as for a link no packet crossed): the phase ends
// without waiting InjectedTimeout, taking the requested amplitude.
func (x *Experiment) NoInjectedReport(lease string) {
	if x.cur != nil && x.cur.lease == lease && !x.cur.injKnown {
		x.cur.noReport = true
	}
}

// LeaseFailed reports that a lease could not be started or failed while
// running. The element fails and the experiment moves to the next one.
func (x *Experiment) LeaseFailed(lease string, now time.Time, err error) []Action {
	if x.cur == nil || x.cur.lease != lease || x.Finished() {
		return nil
	}
	t := secs(now)
	x.clock(t)
	var acts []Action
	if x.cur.leaseOut {
		acts = append(acts, x.stop("lease failed")) // release whatever is left of it
	}
	x.quiet.reset(t + x.skew())
	msg := "lease failed"
	if err != nil {
		msg += ": " + err.Error()
	}
	return append(acts, x.failElement(t, fmt.Sprintf("%s phase: %s", x.cur.phase, msg))...)
}

// Abort stops the experiment, releasing the lease that is out at once.
func (x *Experiment) Abort(now time.Time, reason string) []Action {
	if x.Finished() {
		return nil
	}
	x.clock(secs(now))
	return x.abort(reason)
}

func (x *Experiment) abort(reason string) []Action {
	var acts []Action
	if x.cur != nil && x.cur.leaseOut {
		acts = append(acts, x.stop(reason))
	}
	if x.idx < len(x.results) {
		x.results[x.idx].Status = "aborted"
		x.results[x.idx].Error = reason
	}
	x.phase, x.reason, x.cur = PhaseAborted, reason, nil
	return acts
}

// Result returns the experiment's findings so far.
func (x *Experiment) Result() Result {
	r := Result{Phase: x.phase, Reason: x.reason, Plan: x.plan, Dropped: x.dropped, Elements: slices.Clone(x.results),
		Covariates: x.covNames, CovariatesDropped: x.cov.dropped}
	return r
}

// Progress reports the phase, the share done and the expected time left at
// now. The time left adds up what remains of the current step and the
// planned length of every later one; before the bins are sized the rate of
// the target's requests so far stands in for the bin width. With MinSNR set,
// an element still to be measured counts a second active window in the
// proportion of the measured elements that needed one (none before the
// first is measured).
func (x *Experiment) Progress(now time.Time) Progress {
	t := secs(now)
	p := Progress{Phase: x.phase, Elements: len(x.cfg.Elements), ElementIndex: min(x.idx, len(x.cfg.Elements)), Reason: x.reason}
	if !math.IsNaN(x.started) {
		p.Started = timeAt(x.started)
	}
	if x.idx < len(x.cfg.Elements) {
		p.Element = x.cfg.Elements[x.idx].ID
	}
	switch x.phase {
	case PhaseDone:
		p.Step, p.Percent = "done", 100
		return p
	case PhaseAborted:
		p.Step = "aborted"
		return p
	}
	binSec, n, L, period := 0.0, x.cfg.Train.N, 0, 0.0
	if x.plan != nil {
		binSec, n, L, period = x.plan.BinSeconds, x.plan.N, x.plan.AdaptiveBins, x.plan.PeriodSeconds
	} else if x.sized {
		binSec = x.sizing.BinSeconds
	}
	remaining := 0.0
	unknown := false
	if x.phase == PhaseTraining && x.plan == nil {
		if !x.sized {
			p.Step = "calibrating"
			c := len(x.calTimes)
			if c >= 2 {
				rate := float64(c-1) / math.Max(1e-9, x.calTimes[c-1]-x.calTimes[0])
				if !slices.IsSorted(x.calTimes) {
					lo, hi := slices.Min(x.calTimes), slices.Max(x.calTimes)
					rate = float64(c-1) / math.Max(1e-9, hi-lo)
				}
				binSec = float64(x.cfg.Train.K) / rate * 1.3 // mean + 3σ of Poisson-ish arrivals, roughly
				remaining += float64(x.cfg.CalibrationRequests-c) / rate
				remaining += float64(x.cfg.Train.Chunks*n)*binSec - float64(c)/rate
			} else {
				unknown = true
			}
			remaining += x.cfg.Lateness.Seconds()
		} else {
			p.Step = "collecting"
			remaining += math.Max(0, x.trainEnd+x.cfg.Lateness.Seconds()-t)
		}
		if binSec > 0 { // the adaptive window before a frequency is chosen: mid-band
			L = max(2, 2*int(x.cfg.Train.MinSamplesPerPeriod))
			period = float64(L) * binSec
		}
	}
	perElement := func(e Element) (adaptive, active float64) {
		g := math.Min(x.cfg.SkewGuard.Seconds(), period/4)
		active = x.cfg.LeadTime.Seconds() + g + float64(n)*binSec + x.cfg.Lateness.Seconds()
		if e.FixedAmplitude <= 0 && (L < 1 || x.foldCycles(e, n/L, period) == 0) {
			adaptive = x.cfg.LeadTime.Seconds() - g + float64(L)*binSec + x.cfg.Lateness.Seconds()
		}
		return adaptive, active
	}
	again := 0.0 // expected windows past the first, per element
	if x.cfg.MinSNR > 0 && x.measured > 0 {
		again = float64(x.extra) / float64(x.measured)
	}
	first := x.idx
	if x.cur != nil {
		r := x.cur
		p.Step = "collecting"
		if r.leaseOut {
			p.Step = "injecting"
		}
		if r.step == stepAwaiting {
			p.Step = "awaiting-injected"
		}
		remaining += math.Max(0, r.winEnd+x.cfg.Lateness.Seconds()-t)
		_, active := perElement(x.cfg.Elements[x.idx])
		switch {
		case r.phase == PhaseAdaptive && r.fold == nil:
			remaining += active * (1 + again)
		default:
			remaining += active * math.Max(0, again-float64(max(0, x.windows-1)))
		}
		first++
	}
	for i := first; i < len(x.cfg.Elements); i++ {
		a, b := perElement(x.cfg.Elements[i])
		remaining += a + b*(1+again)
	}
	elapsed := 0.0
	if !math.IsNaN(x.started) {
		elapsed = math.Max(0, t-x.started)
	}
	if unknown || elapsed+remaining <= 0 {
		return p
	}
	p.ETA = dur(remaining)
	p.Percent = 100 * elapsed / (elapsed + remaining)
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
