package signature

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Verdicts of a comparison.
const (
	VerdictChanged      = "changed"
	VerdictUnchanged    = "unchanged"
	VerdictSpread       = "spread"
	VerdictInsufficient = StatusInsufficientData
)

// CompareOptions control when a difference counts as a change.
type CompareOptions struct {
	// Alpha is the significance level of the Mann-Whitney U test.
	Alpha float64 `json:"alpha"`
	// MinEffectMs and MinEffectPct are the minimum effect size: a shift counts
	// only when it is at least max(MinEffectMs, MinEffectPct% of the base).
	MinEffectMs  float64 `json:"min_effect_ms"`
	MinEffectPct float64 `json:"min_effect_pct"`
	// CommonRange restricts the test to the buckets inside the utilization
	// range both signatures cover, when each keeps MinBuckets there; otherwise
	// all used buckets are compared. Off by default: it costs power (the
	// measurements in docs/signature-report.md) and the utilization limit
	// already keeps the load-dependent buckets out.
	CommonRange bool `json:"common_range"`
	// MinBuckets is the fewest solutions on each side for the test; fewer give
	// "insufficient data".
	MinBuckets int `json:"min_buckets"`
}

// Defaults, chosen from the measurements in docs/signature-report.md.
const (
	DefaultAlpha        = 0.01
	DefaultMinEffectMs  = 0.5
	DefaultMinEffectPct = 5
)

// DefaultCompareOptions returns the defaults.
func DefaultCompareOptions() CompareOptions {
	return CompareOptions{Alpha: DefaultAlpha, MinEffectMs: DefaultMinEffectMs, MinEffectPct: DefaultMinEffectPct,
		CommonRange: false, MinBuckets: DefaultMinBuckets}
}

// Validate reports options that cannot decide.
func (o CompareOptions) Validate() error {
	switch {
	case !(o.Alpha > 0 && o.Alpha < 1):
		return fmt.Errorf("alpha must be in (0, 1), got %v", o.Alpha)
	case !(o.MinEffectMs >= 0) || math.IsInf(o.MinEffectMs, 0):
		return fmt.Errorf("min effect must be ≥ 0 ms, got %v", o.MinEffectMs)
	case !(o.MinEffectPct >= 0) || math.IsInf(o.MinEffectPct, 0):
		return fmt.Errorf("min effect must be ≥ 0%%, got %v", o.MinEffectPct)
	case o.MinBuckets < 2:
		return fmt.Errorf("min buckets must be ≥ 2, got %d", o.MinBuckets)
	}
	return nil
}

// TestResult is the statistical basis of a verdict.
type TestResult struct {
	Name string  `json:"name"` // "mann-whitney-u"
	U    float64 `json:"u"`
	Z    float64 `json:"z"`
	// PValue is two-sided; Exact says it came from the exact null
	// distribution rather than the normal approximation.
	PValue float64 `json:"p_value"`
	Exact  bool    `json:"exact"`
	NBase  int     `json:"n_base"`
	NCand  int     `json:"n_candidate"`
	// ShiftMs is the Hodges-Lehmann estimate of the shift of the candidate's
	// solutions over the base's, and CIMs its confidence interval at 1 − alpha.
	ShiftMs float64    `json:"shift_ms"`
	CIMs    [2]float64 `json:"ci_ms"`
	// UtilizationRange is the range of bucket utilizations compared; Range is
	// "common" when the test was restricted to the range both sides cover and
	// "all" otherwise.
	UtilizationRange [2]float64 `json:"utilization_range"`
	Range            string     `json:"range"`
}

// TransactionComparison compares one transaction's signatures.
type TransactionComparison struct {
	Transaction string `json:"transaction"`
	// Verdict is "changed", "unchanged", "spread" (significant and large
	// enough, but within the load-dependent spread of a spread transaction, so
	// not attributable to the code) or "insufficient data".
	Verdict string `json:"verdict"`
	Changed bool   `json:"changed"`
	Reason  string `json:"reason,omitempty"`
	// BaseMs and CandidateMs are the two service times; DeltaMs and DeltaPct
	// their difference. All null for insufficient data.
	BaseMs      *float64 `json:"base_ms"`
	CandidateMs *float64 `json:"candidate_ms"`
	DeltaMs     *float64 `json:"delta_ms"`
	DeltaPct    *float64 `json:"delta_pct"`
	// Confidence is 1 − p of the test.
	Confidence *float64 `json:"confidence"`
	// EffectThresholdMs is the minimum effect applied.
	EffectThresholdMs *float64 `json:"effect_threshold_ms"`
	// BaseSpread and CandidateSpread are the spread classes of the two sides.
	BaseSpread      string      `json:"base_spread,omitempty"`
	CandidateSpread string      `json:"candidate_spread,omitempty"`
	Test            *TestResult `json:"test"`
}

// Compare decides whether one transaction's service time changed from base to
// cand. The test is a two-sided Mann-Whitney U test over the per-bucket
// solutions S_k of the two signatures, as in Kayenta's judge: a difference is a
// change when the test rejects at Alpha and its Hodges-Lehmann shift is at
// least the minimum effect. When either side is spread and the shift is within
// the mean of the two interquartile ranges, the verdict is "spread" instead.
func Compare(base, cand *TransactionSignature, opts CompareOptions) TransactionComparison {
	var c TransactionComparison
	switch {
	case base != nil:
		c.Transaction = base.Transaction
	case cand != nil:
		c.Transaction = cand.Transaction
	}
	insufficient := func(reason string) TransactionComparison {
		c.Verdict, c.Changed, c.Reason = VerdictInsufficient, false, reason
		return c
	}
	switch {
	case base == nil:
		return insufficient("absent from the base")
	case cand == nil:
		return insufficient("absent from the candidate")
	case !base.OK():
		return insufficient("base: " + base.Reason)
	case !cand.OK():
		return insufficient("candidate: " + cand.Reason)
	}
	c.BaseSpread, c.CandidateSpread = base.SpreadClass, cand.SpreadClass
	bMs, cMs := *base.ServiceTimeMs, *cand.ServiceTimeMs
	c.BaseMs, c.CandidateMs = ptr(bMs), ptr(cMs)
	c.DeltaMs = ptr(cMs - bMs)
	if bMs > 0 {
		c.DeltaPct = ptr(100 * (cMs - bMs) / bMs)
	}
	x, xu := usedWithUtil(base)
	y, yu := usedWithUtil(cand)
	rng, lo, hi := "all", math.Min(minOf(xu), minOf(yu)), math.Max(maxOf(xu), maxOf(yu))
	if opts.CommonRange {
		clo, chi := math.Max(minOf(xu), minOf(yu)), math.Min(maxOf(xu), maxOf(yu))
		xc, yc := within(x, xu, clo, chi), within(y, yu, clo, chi)
		if len(xc) >= opts.MinBuckets && len(yc) >= opts.MinBuckets {
			x, y, rng, lo, hi = xc, yc, "common", clo, chi
		}
	}
	if len(x) < opts.MinBuckets || len(y) < opts.MinBuckets {
		return insufficient(fmt.Sprintf("%d base and %d candidate solutions, the test needs %d each", len(x), len(y), opts.MinBuckets))
	}
	mw := mannWhitney(x, y)
	shift, ciLo, ciHi := hodgesLehmann(x, y, opts.Alpha)
	c.Test = &TestResult{Name: "mann-whitney-u", U: mw.U, Z: mw.Z, PValue: mw.P, Exact: mw.Exact,
		NBase: len(x), NCand: len(y), ShiftMs: shift, CIMs: [2]float64{ciLo, ciHi},
		UtilizationRange: [2]float64{lo, hi}, Range: rng}
	c.Confidence = ptr(1 - mw.P)
	threshold := math.Max(opts.MinEffectMs, opts.MinEffectPct/100*bMs)
	c.EffectThresholdMs = ptr(threshold)
	delta := cMs - bMs
	switch {
	case !(mw.P < opts.Alpha):
		c.Verdict = VerdictUnchanged
		c.Reason = fmt.Sprintf("not significant: p = %.3g ≥ alpha %.3g", mw.P, opts.Alpha)
	case math.Abs(delta) < threshold:
		c.Verdict = VerdictUnchanged
		c.Reason = fmt.Sprintf("significant (p = %.3g) but the delta %.3f ms is below the minimum effect %.3f ms", mw.P, delta, threshold)
	case delta*shift <= 0:
		c.Verdict = VerdictUnchanged
		c.Reason = fmt.Sprintf("the delta %.3f ms and the test's shift %.3f ms disagree in sign", delta, shift)
	default:
		spreadTol := (iqr(base) + iqr(cand)) / 2
		if (base.SpreadClass == ClassSpread || cand.SpreadClass == ClassSpread) && math.Abs(delta) <= spreadTol {
			c.Verdict = VerdictSpread
			c.Reason = fmt.Sprintf("delta %.3f ms (p = %.3g) lies within the interquartile range %.3f ms of a spread transaction: load-dependent, not attributed to the code", delta, mw.P, spreadTol)
		} else {
			c.Verdict, c.Changed = VerdictChanged, true
			c.Reason = fmt.Sprintf("delta %.3f ms, p = %.3g < alpha %.3g, at least the minimum effect %.3f ms", delta, mw.P, opts.Alpha, threshold)
		}
	}
	return c
}

func iqr(t *TransactionSignature) float64 {
	if t.Q25Ms == nil || t.Q75Ms == nil {
		return 0
	}
	return *t.Q75Ms - *t.Q25Ms
}

func usedWithUtil(t *TransactionSignature) (s, u []float64) {
	for _, b := range t.Buckets {
		if b.Used {
			s = append(s, b.ServiceTimeMs)
			u = append(u, b.Utilization)
		}
	}
	return s, u
}

func within(s, u []float64, lo, hi float64) []float64 {
	var out []float64
	for i := range s {
		if u[i] >= lo && u[i] <= hi {
			out = append(out, s[i])
		}
	}
	return out
}

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

// AppComparison compares two application signatures of one service.
type AppComparison struct {
	Service          string         `json:"service"`
	BaseVersion      string         `json:"base_version"`
	CandidateVersion string         `json:"candidate_version"`
	Options          CompareOptions `json:"options"`
	// Changed lists the transactions whose verdict is "changed".
	Changed      []string                `json:"changed"`
	Transactions []TransactionComparison `json:"transactions"`
}

// CompareApps compares every transaction present in either signature.
func CompareApps(base, cand *AppSignature, opts CompareOptions) AppComparison {
	out := AppComparison{Service: cand.Service, BaseVersion: base.Version, CandidateVersion: cand.Version,
		Options: opts, Changed: []string{}}
	names := map[string]bool{}
	for _, t := range base.Transactions {
		names[t.Transaction] = true
	}
	for _, t := range cand.Transactions {
		names[t.Transaction] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.SortFunc(sorted, cmp.Compare)
	for _, n := range sorted {
		c := Compare(base.Transaction(n), cand.Transaction(n), opts)
		c.Transaction = n
		if c.Changed {
			out.Changed = append(out.Changed, n)
		}
		out.Transactions = append(out.Transactions, c)
	}
	return out
}
