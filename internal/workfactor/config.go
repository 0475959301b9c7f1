package workfactor

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Method is the regression solver.
type Method int

const (
	// Plain is the paper's ordinary least squares, α̂ = C⁻¹D (equation 4).
	Plain Method = iota
	// Ridge adds λ to the diagonal of the standardized C (Hoerl and Kennard, the
	// paper's reference [9]): α̂ = S(SCS + λI)⁻¹SD with S = diag(C)^-½.
	Ridge
	// NNLS is non-negative least squares (Lawson and Hanson's active set on C and
	// D): a work factor is never negative, so the constraint is physical.
	NNLS
)

func (m Method) String() string {
	switch m {
	case Plain:
		return "plain"
	case Ridge:
		return "ridge"
	case NNLS:
		return "nnls"
	}
	return "Method(" + strconv.Itoa(int(m)) + ")"
}

// ParseMethod reads "plain", "ridge" or "nnls".
func ParseMethod(s string) (Method, error) {
	switch s {
	case "plain", "ols":
		return Plain, nil
	case "ridge":
		return Ridge, nil
	case "nnls":
		return NNLS, nil
	}
	return 0, fmt.Errorf("unknown method %q (plain, ridge or nnls)", s)
}

// Background selects the optional background column of §4.8.
type Background int

const (
	// BackgroundOff is the paper's recommendation and the default: no column of
	// ones. CPU not caused by the flows is then attributed to them.
	BackgroundOff Background = iota
	// BackgroundShared adds one column of ones per block (in machine mode, the
	// paper's single column): one background power, in standard MHz, shared by
	// every machine of the block.
	BackgroundShared
	// BackgroundPerSource adds one column per machine (or process): each has its
	// own background power.
	BackgroundPerSource
	// BackgroundAuto adds the shared column in machine mode when the data
	// identify it: its variance inflation is at most Config.BackgroundMaxVIF
	// (the flows' rates vary enough not to mimic a constant) and its estimate
	// is not negative; it is the same MHz on every machine or the same share
	// of each, whichever fits the data better. Per-process readings (§4.6) get
	// none: they hold no other tenant's work. The default.
	BackgroundAuto
)

func (b Background) String() string {
	switch b {
	case BackgroundOff:
		return "off"
	case BackgroundShared:
		return "shared"
	case BackgroundPerSource:
		return "per-source"
	case BackgroundAuto:
		return "auto"
	}
	return "Background(" + strconv.Itoa(int(b)) + ")"
}

// ParseBackground reads "auto", "off", "shared" or "per-source".
func ParseBackground(s string) (Background, error) {
	switch s {
	case "auto":
		return BackgroundAuto, nil
	case "off", "none", "":
		return BackgroundOff, nil
	case "shared", "on":
		return BackgroundShared, nil
	case "per-source", "per-machine":
		return BackgroundPerSource, nil
	}
	return 0, fmt.Errorf("unknown background %q (auto, off, shared or per-source)", s)
}

// Combining selects which flows share a column.
type Combining int

const (
	// CombineCollinear, the default, solves every flow alone except groups whose
	// rates cannot be told apart: aged rate correlation of at least
	// Config.CollinearCorrelation. Flows that then fail (§4.3's criterion) join
	// one combined column, the q most powerful (λ·α) always staying alone.
	CombineCollinear Combining = iota
	// CombineRate is the paper's §4.3: flows ranked by mean rate, those from j+q
	// on start combined.
	CombineRate
)

func (c Combining) String() string {
	switch c {
	case CombineCollinear:
		return "collinear"
	case CombineRate:
		return "rate"
	}
	return "Combining(" + strconv.Itoa(int(c)) + ")"
}

// ParseCombining reads "collinear" or "rate".
func ParseCombining(s string) (Combining, error) {
	switch s {
	case "collinear", "":
		return CombineCollinear, nil
	case "rate", "paper":
		return CombineRate, nil
	}
	return 0, fmt.Errorf("unknown combining %q (collinear or rate)", s)
}

// ChangeSelection chooses how the columns that changed at a block's last
// shift are found (acrossRegimes).
type ChangeSelection int

const (
	// ChangeAveraging averages over the subsets of changed columns, each
	// weighted by its posterior probability (averageChanges). Plain least
	// squares only: Ridge and NNLS select by backward elimination.
	ChangeAveraging ChangeSelection = iota
	// ChangeBackward selects one subset by backward elimination of the
	// columns' increments while their goodness is below 3 (the previous
	// default).
	ChangeBackward
)

func (c ChangeSelection) String() string {
	switch c {
	case ChangeAveraging:
		return "averaging"
	case ChangeBackward:
		return "backward"
	}
	return "ChangeSelection(" + strconv.Itoa(int(c)) + ")"
}

// ChangePointMethod chooses where, at a CUSUM alarm, the new regime is taken
// to have started: the equations after that period are moved out of the
// previous regime into the new one (changepoint.go).
type ChangePointMethod int

const (
	// ChangePointRecent moves only the last ShiftPeriods equations of each
	// source; the ones between the change and the alarm stay in the previous
	// regime (the behaviour before issue 37's fourth round).
	ChangePointRecent ChangePointMethod = iota
	// ChangePointExcursion moves the equations since the start of the
	// alarming source's CUSUM excursion.
	ChangePointExcursion
	// ChangePointMeanShift moves the equations after the maximum-likelihood
	// change point of a mean shift in the block's sources' standardized
	// residuals (argmax_k Σ_s S_s,k²/n_s,k), if it is significant.
	ChangePointMeanShift
	// ChangePointRegression moves the equations after the most probable
	// change point of a two-segment regression of the block's residuals on
	// its rates (the old model before it, a change of the work factors after
	// it, integrated over the increments' prior), if it is significant.
	ChangePointRegression
)

func (c ChangePointMethod) String() string {
	switch c {
	case ChangePointRecent:
		return "recent"
	case ChangePointExcursion:
		return "excursion"
	case ChangePointMeanShift:
		return "mean-shift"
	case ChangePointRegression:
		return "regression"
	}
	return "ChangePointMethod(" + strconv.Itoa(int(c)) + ")"
}

// Config holds the estimator's parameters. Start from DefaultConfig.
type Config struct {
	// HalfLife is h, the half-life of the geometric aging of the data, in periods
	// (§3.4); with MaxHalfLife above it, the shortest memory, used right after a
	// change. The paper asks for h ≥ 1/(−log₂(1−1/K)) so that N_h ≥ K. Default 10.
	HalfLife float64
	// MaxHalfLife is the longest memory. A block's half-life is MemoryGrowth ×
	// the periods since its last detected change, between HalfLife and MaxHalfLife:
	// it grows while the work factors hold, and a change (ShiftSigma, CUSUM)
	// brings it back to HalfLife. 0 (or HalfLife): the paper's fixed aging.
	// Default 1000.
	MaxHalfLife float64
	// MemoryGrowth is how fast the memory grows: the half-life is
	// MemoryGrowth × the periods since the last change (within HalfLife …
	// MaxHalfLife). At g, the regime's first period weighs (1/age)^(ln 2/g)
	// of its last: 1 gives the equations right after a change little weight
	// (about 4% after 100 periods), 4 keeps them near full weight (46%), as
	// a stationary regime deserves. Default 4.
	MemoryGrowth float64
	// CusumThreshold is the alarm level h of a two-sided CUSUM of each source's
	// standardized residuals against the last solve, in σ_y (Page's test): a
	// change of work factors too small for ShiftSigma is found as it accumulates.
	// 0 disables it. Default 8.
	CusumThreshold float64
	// CusumDrift is the CUSUM's allowance k in σ_y per equation: drifts smaller
	// than this are not accumulated. Default 0.5.
	CusumDrift float64
	// ChangePoint chooses where a regime found by a CUSUM alarm started
	// (ChangePointMethod): the equations after it leave the previous regime.
	// Default ChangePointMeanShift.
	ChangePoint ChangePointMethod
	// Changes chooses how the columns that changed at the last shift are
	// found: ChangeAveraging (default) or ChangeBackward.
	Changes ChangeSelection
	// ChangePrior is ChangeAveraging's prior probability that a column changed
	// at a shift; 0 (the default) makes it uniform on [0, 1] (beta-binomial
	// over the subsets), so that the data tell how many columns changed.
	ChangePrior float64
	// ChangeScale is ChangeAveraging's prior standard deviation of a changed
	// column's increment, relative to the larger of its work factors before
	// and after the change. Default 0.5 (halving or doubling is one standard
	// deviation).
	ChangeScale float64
	// Combining chooses which flows share a column: CombineCollinear (default)
	// or the paper's CombineRate.
	Combining Combining
	// CollinearCorrelation is the aged, centred correlation of two flows' rates
	// (over every equation) from which they are one collinear group. Default 0.99.
	CollinearCorrelation float64
	// BackgroundMaxVIF is the largest variance inflation of the background
	// column (B0/(B0 − bᵀC⁻¹b)) for which BackgroundAuto estimates it. Default 1000.
	BackgroundMaxVIF float64
	// SmoothHalfLife is t, the half-life of the smoothing of §4.4, in periods (one
	// solve per period). Default 15.
	SmoothHalfLife float64
	// Delta is δ: a flow whose mean rate is below δ of the block's total (L1) mean
	// rate is removed from the regression (§4.1). Default 1e-5.
	Delta float64
	// Q is q of the flow-combining algorithm (§4.3): the flows ranked j+q and below
	// start combined, and the re-solve loop runs at most 2q+1 times. Default 2.
	Q int
	// CombineThreshold sets j of §4.3: the first flow, in decreasing order of mean
	// rate, whose mean rate is at most CombineThreshold × the mean over the block's
	// flows. Default 1 (the text's "X̄_j ≤ ‖X̄‖" read as ‖X̄‖/K; see the package
	// documentation).
	CombineThreshold float64
	// NoDiscount disables the utilization discounting f(ρ) of §4.2 (machine
	// mode; per-process mode never discounts). True by default: weighing rows by
	// a function of the noisy reading biases the fit (package documentation);
	// PaperConfig discounts.
	NoDiscount bool
	// PerProcess selects the per-process mode of §4.6: observations carry a
	// process and that process's utilization. Observations without a process are
	// then skipped (and counted), and in machine mode those with one are.
	PerProcess bool
	// Background is the background column of §4.8: BackgroundAuto (default)
	// estimates it when the data identify it; the paper's is BackgroundOff.
	Background Background
	// Method is the solver: Plain (the paper), Ridge or NNLS.
	Method Method
	// RidgeLambda is λ of Ridge, relative to the standardized diagonal. Default 0.01.
	RidgeLambda float64
	// UtilizationPolynomial, when set, corrects every utilization reading before
	// use: ρ ← Σ cᵢρⁱ (coefficients from the constant term up), clamped to [0, 1].
	// It is the hyperthreading correction of §5.6 (a degree-3 polynomial there);
	// InvertPolynomial fits one from a measured distortion. Ω must then be the
	// hyperthreaded machine's power.
	UtilizationPolynomial []float64
	// ShiftSigma turns on outlier rejection (§4.8) and shift detection (beyond
	// the paper; its §6 asks for more responsiveness). A new equation whose
	// residual against the last solve exceeds ShiftSigma·σ_y (σ_y² estimated from
	// the block's weighted residuals) is held back. If the source's next equation
	// fits, the held ones were intermittent background and are thrown out
	// (Counters.Outliers). If ShiftPeriods consecutive equations of a source are
	// suspect, or two sources of a block are suspect in the same period with
	// misfits that one flow's change explains (a burst of background work hits a
	// machine regardless of the flows' rates, a changed work factor every machine
	// of its flow in proportion to its rate there), the work factors have shifted: the block's
	// statistics and smoothing are aged by ShiftForget extra half-lives, the
	// equations since the change are folded in again, and for HalfLife periods
	// a persistent misfit is folded in rather than taken for another shift
	// (Counters.Shifts).
	// 0 disables both. Default 5.
	ShiftSigma float64
	// ShiftPeriods is the number of consecutive suspect periods that confirm a
	// shift. Default 3 (a burst of background work spans at most two periods).
	ShiftPeriods int
	// ShiftForget is the extra aging of a block on a shift, in half-lives.
	// Default 8 (old equations then weigh 2⁻¹⁶ in C and D).
	ShiftForget float64
	// MaxFlows and MaxSources bound the state. When a new flow (source) would
	// exceed the bound, the one with the least aged rate (weight) is evicted and
	// counted. Defaults 4096 and 4096.
	MaxFlows, MaxSources int
}

// DefaultConfig returns the paper's parameters (t = 15, δ = 1e-5, q = 2,
// machine mode, plain least squares) with what issue 37 adds: no discounting,
// memory from 10 to 1000 periods chosen from the data, outlier rejection and
// shift detection at 5σ and a CUSUM at 8σ, collinear combining, the background
// column when identified. PaperConfig is the paper's algorithm alone.
func DefaultConfig() Config {
	return Config{
		HalfLife:             10,
		MaxHalfLife:          1000,
		MemoryGrowth:         4,
		CusumThreshold:       8,
		CusumDrift:           0.5,
		ChangePoint:          ChangePointMeanShift,
		ChangeScale:          0.5,
		Combining:            CombineCollinear,
		CollinearCorrelation: 0.99,
		Background:           BackgroundAuto,
		BackgroundMaxVIF:     1000,
		NoDiscount:           true,
		SmoothHalfLife:       15,
		Delta:                1e-5,
		Q:                    2,
		CombineThreshold:     1,
		RidgeLambda:          0.01,
		ShiftSigma:           5,
		ShiftPeriods:         3,
		ShiftForget:          8,
		MaxFlows:             4096,
		MaxSources:           4096,
	}
}

// PaperConfig is DefaultConfig without shift detection: only what the paper
// describes (its §4.8 outlier rejection is then off too).
func PaperConfig() Config {
	c := DefaultConfig()
	c.ShiftSigma = 0
	c.MaxHalfLife = 0 // the fixed half-life
	c.CusumThreshold = 0
	c.Combining = CombineRate
	c.Background = BackgroundOff
	c.NoDiscount = false
	return c
}

// memoryFixed is true when the half-life does not grow (the paper's aging).
func (c Config) memoryFixed() bool { return !(c.MaxHalfLife > c.HalfLife) }

// Validate reports the first invalid parameter.
func (c Config) Validate() error {
	switch {
	case !(c.HalfLife > 0) || math.IsInf(c.HalfLife, 0):
		return fmt.Errorf("half-life must be a positive number of periods, not %v", c.HalfLife)
	case !(c.SmoothHalfLife > 0) || math.IsInf(c.SmoothHalfLife, 0):
		return fmt.Errorf("smoothing half-life must be a positive number of periods, not %v", c.SmoothHalfLife)
	case !(c.Delta >= 0 && c.Delta < 1):
		return fmt.Errorf("delta must be in [0, 1), not %v", c.Delta)
	case c.Q < 1:
		return fmt.Errorf("q must be ≥ 1, not %d", c.Q)
	case !(c.CombineThreshold > 0) || math.IsInf(c.CombineThreshold, 0):
		return fmt.Errorf("combine threshold must be > 0, not %v", c.CombineThreshold)
	case c.Method < Plain || c.Method > NNLS:
		return fmt.Errorf("unknown method %d", c.Method)
	case c.Background < BackgroundOff || c.Background > BackgroundAuto:
		return fmt.Errorf("unknown background %d", c.Background)
	case c.Method == Ridge && (!(c.RidgeLambda > 0) || math.IsInf(c.RidgeLambda, 0)):
		return fmt.Errorf("ridge lambda must be > 0, not %v", c.RidgeLambda)
	case !(c.ShiftSigma >= 0) || math.IsInf(c.ShiftSigma, 0):
		return fmt.Errorf("shift sigma must be ≥ 0 (0 = off), not %v", c.ShiftSigma)
	case c.ShiftSigma > 0 && (c.ShiftPeriods < 1 || !(c.ShiftForget >= 0) || math.IsInf(c.ShiftForget, 0)):
		return fmt.Errorf("shift periods must be ≥ 1 and shift forget ≥ 0")
	case c.MaxHalfLife != 0 && (!(c.MaxHalfLife >= c.HalfLife) || math.IsInf(c.MaxHalfLife, 0)):
		return fmt.Errorf("max half-life must be 0 or a number of periods ≥ half-life %v, not %v", c.HalfLife, c.MaxHalfLife)
	case !c.memoryFixed() && (!(c.MemoryGrowth >= 1) || math.IsInf(c.MemoryGrowth, 0)):
		return fmt.Errorf("memory growth must be a number ≥ 1, not %v", c.MemoryGrowth)
	case !(c.CusumThreshold >= 0) || math.IsInf(c.CusumThreshold, 0) || !(c.CusumDrift >= 0) || math.IsInf(c.CusumDrift, 0):
		return fmt.Errorf("cusum threshold and drift must be ≥ 0 (threshold 0 = off), not %v and %v", c.CusumThreshold, c.CusumDrift)
	case c.ChangePoint < ChangePointRecent || c.ChangePoint > ChangePointRegression:
		return fmt.Errorf("unknown change point method %d", c.ChangePoint)
	case c.Changes < ChangeAveraging || c.Changes > ChangeBackward:
		return fmt.Errorf("unknown change selection %d", c.Changes)
	case c.Changes == ChangeAveraging && (!(c.ChangePrior >= 0 && c.ChangePrior < 1) || !(c.ChangeScale > 0) || math.IsInf(c.ChangeScale, 0)):
		return fmt.Errorf("change prior must be in [0, 1) and change scale > 0, not %v and %v", c.ChangePrior, c.ChangeScale)
	case c.Combining < CombineCollinear || c.Combining > CombineRate:
		return fmt.Errorf("unknown combining %d", c.Combining)
	case c.Combining == CombineCollinear && !(c.CollinearCorrelation > 0 && c.CollinearCorrelation <= 1):
		return fmt.Errorf("collinear correlation must be in (0, 1], not %v", c.CollinearCorrelation)
	case c.Background == BackgroundAuto && !(c.BackgroundMaxVIF >= 1):
		return fmt.Errorf("background max VIF must be ≥ 1, not %v", c.BackgroundMaxVIF)
	case c.MaxFlows < 1 || c.MaxSources < 1:
		return fmt.Errorf("max flows and max sources must be ≥ 1")
	}
	for _, v := range c.UtilizationPolynomial {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("utilization polynomial has a non-finite coefficient")
		}
	}
	return nil
}

// Discount is f(ρ) of §4.2: piecewise linear through (0, 0), (0.2, 2/3) and (1, 1),
// and 1 above 1. Rows are multiplied by it, so low-utilization periods, which are
// the noisiest, weigh less.
func Discount(rho float64) float64 {
	switch {
	case !(rho > 0):
		return 0
	case rho <= 0.2:
		return rho * (2.0 / 3.0) / 0.2
	case rho < 1:
		return 2.0/3.0 + (rho-0.2)*(1.0/3.0)/0.8
	}
	return 1
}

// SmoothingWeight is s(g) of §4.4: g for 0 ≤ g < 20, g/20 + 19 for 20 ≤ g < 100
// and 24 above; 0 for a negative or undefined goodness.
func SmoothingWeight(g float64) float64 {
	switch {
	case !(g > 0):
		return 0
	case g < 20:
		return g
	case g < 100:
		return g/20 + 19
	}
	return 24
}

// Polynomial evaluates Σ cᵢxⁱ (coefficients from the constant term up).
func Polynomial(c []float64, x float64) float64 {
	y := 0.0
	for i := len(c) - 1; i >= 0; i-- {
		y = y*x + c[i]
	}
	return y
}

// ParsePolynomial reads comma-separated coefficients, constant term first.
func ParsePolynomial(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var c []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("polynomial coefficient %q is not a finite number", f)
		}
		c = append(c, v)
	}
	return c, nil
}

// InvertPolynomial fits the polynomial of the given degree (no constant term:
// an idle machine reads 0 either way) that maps distort(u) back to u, by least
// squares of the relative error on n evenly spaced u in (0, 1]. Relative error,
// because the corrected reading is multiplied by Ω: an absolute error of 1% at a
// 2% utilization would double the measured work. §5.6: the hyperthreading
// distortion of utilization readings and its inverse both fit a degree-3
// polynomial well. distort must be increasing on [0, 1] with distort(0) = 0.
func InvertPolynomial(distort func(float64) float64, degree, n int) []float64 {
	if degree < 1 {
		degree = 1
	}
	n = max(n, degree+1)
	m := degree // coefficients c1 … c_degree
	a := make([]float64, m*m)
	b := make([]float64, m)
	pow := make([]float64, m)
	for i := 1; i <= n; i++ {
		u := float64(i) / float64(n)
		r := distort(u)
		w := 1 / (u * u) // relative error
		p := r
		for k := 0; k < m; k++ {
			pow[k] = p
			p *= r
		}
		for k := 0; k < m; k++ {
			b[k] += w * pow[k] * u
			for l := 0; l < m; l++ {
				a[k*m+l] += w * pow[k] * pow[l]
			}
		}
	}
	ex := make([]bool, m)
	l, _ := cholesky(a, m, ex)
	return append([]float64{0}, cholSolve(l, m, ex, b)...)
}
