package tpcwsim

import (
	"fmt"
	"math"

	"github.com/tierscope/tierscope/internal/signature"
)

// Study is the case study's results under one choice of options: what the
// issue's "must show" asks for, measured.
type Study struct {
	Options        signature.Options
	CompareOptions signature.CompareOptions
	// Signatures by run name.
	Signatures map[string]signature.AppSignature
	// Stability: per transaction, the largest relative difference of the
	// service time between two of the three Table III workloads under v1,
	// |S_a − S_b| / ((S_a + S_b)/2). NaN when a workload had insufficient data.
	Stability map[string]float64
	// MaxStability is the largest Stability value.
	MaxStability float64
	// Comparisons by "base run → candidate run".
	Comparisons map[string]signature.AppComparison
	// HomeDetected[d] counts the comparisons of v1 against Home +d ms in which
	// Home was "changed", out of HomeTrials[d].
	HomeDetected, HomeTrials map[float64]int
	// HomeMissed names the comparisons in which a Home change was not
	// detected, with the verdict's reason.
	HomeMissed []string
	// FalseAlarms counts "changed" verdicts on a transaction that did not
	// change: the other 13 in v1 → v2 comparisons, and all 14 in v1 → v1
	// comparisons across workloads, out of FalseAlarmTrials.
	FalseAlarms, FalseAlarmTrials int
	// FalseAlarmList names them.
	FalseAlarmList []string
	// Contention: the verdicts for Execute Search, v1 under each Table III
	// workload against v1 under the heavy workload, and every transaction
	// flagged "changed" in those comparisons.
	ContentionVerdicts []string
	ContentionChanged  []string
}

// Stability is, per transaction, the largest relative difference of the
// service time between two of the signatures, |S_a − S_b| / ((S_a + S_b)/2)
// (NaN when one has insufficient data), and the largest over transactions.
func Stability(sigs []signature.AppSignature) (map[string]float64, float64) {
	out := map[string]float64{}
	maxAll := 0.0
	for _, T := range Transactions {
		worst := 0.0
		for i := range sigs {
			for j := i + 1; j < len(sigs); j++ {
				ta, tb := sigs[i].Transaction(T.Name), sigs[j].Transaction(T.Name)
				if ta == nil || tb == nil || !ta.OK() || !tb.OK() {
					worst = math.NaN()
					continue
				}
				sa, sb := *ta.ServiceTimeMs, *tb.ServiceTimeMs
				if d := math.Abs(sa-sb) / ((sa + sb) / 2); d > worst {
					worst = d
				}
			}
		}
		out[T.Name] = worst
		if math.IsNaN(worst) || worst > maxAll {
			maxAll = worst
		}
	}
	return out, maxAll
}

// Evaluate builds the signatures of the case study's runs and measures them.
// exps and results are CaseStudy's runs and RunAll's results.
func Evaluate(exps []Experiment, results []Result, opts signature.Options, copts signature.CompareOptions) (*Study, error) {
	s := &Study{Options: opts, CompareOptions: copts, Signatures: map[string]signature.AppSignature{},
		Stability: map[string]float64{}, Comparisons: map[string]signature.AppComparison{},
		HomeDetected: map[float64]int{}, HomeTrials: map[float64]int{}}
	for i, e := range exps {
		a, err := AppSignature(results[i], opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name, err)
		}
		s.Signatures[e.Name] = a
	}
	get := func(version string, w Workload) (signature.AppSignature, bool) {
		a, ok := s.Signatures[RunName(version, w)]
		return a, ok
	}
	compare := func(bv string, bw Workload, cv string, cw Workload) (signature.AppComparison, bool) {
		b, ok1 := get(bv, bw)
		c, ok2 := get(cv, cw)
		if !ok1 || !ok2 {
			return signature.AppComparison{}, false
		}
		cmp := signature.CompareApps(&b, &c, copts)
		s.Comparisons[RunName(bv, bw)+" → "+RunName(cv, cw)] = cmp
		return cmp, true
	}

	// Stability across the three workloads.
	var v1 []signature.AppSignature
	for _, w := range Mixes {
		a, _ := get("v1", w)
		v1 = append(v1, a)
	}
	s.Stability, s.MaxStability = Stability(v1)

	falseAlarm := func(c signature.AppComparison, changedTx string) {
		for _, t := range c.Transactions {
			if t.Transaction == changedTx {
				continue
			}
			s.FalseAlarmTrials++
			if t.Changed {
				s.FalseAlarms++
				s.FalseAlarmList = append(s.FalseAlarmList, fmt.Sprintf("%s: %s → %s", t.Transaction, c.BaseVersion, c.CandidateVersion))
			}
		}
	}
	// v1 against v1 across workloads: nothing changed.
	for _, bw := range Mixes {
		for _, cw := range Mixes {
			if bw.Name == cw.Name {
				continue
			}
			if c, ok := compare("v1", bw, "v1", cw); ok {
				falseAlarm(c, "")
			}
		}
	}
	// v1 against each v2, from every base workload.
	for _, d := range HomeDeltas {
		for _, cw := range append(Mixes, MixHeavy) {
			if _, ok := get(VersionName(d), cw); !ok {
				continue
			}
			for _, bw := range Mixes {
				c, ok := compare("v1", bw, VersionName(d), cw)
				if !ok {
					continue
				}
				s.HomeTrials[d]++
				for _, t := range c.Transactions {
					if t.Transaction != "Home" {
						continue
					}
					if t.Changed {
						s.HomeDetected[d]++
					} else {
						s.HomeMissed = append(s.HomeMissed, fmt.Sprintf("%s → %s: %s (%s)", RunName("v1", bw), RunName(VersionName(d), cw), t.Verdict, t.Reason))
					}
				}
				falseAlarm(c, "Home")
			}
		}
	}
	// The §IX regime: the same code under a heavier load.
	for _, bw := range Mixes {
		c, ok := compare("v1", bw, "v1", MixHeavy)
		if !ok {
			continue
		}
		for _, t := range c.Transactions {
			if t.Transaction == "Execute Search" {
				s.ContentionVerdicts = append(s.ContentionVerdicts, t.Verdict)
			}
			if t.Changed {
				s.ContentionChanged = append(s.ContentionChanged, fmt.Sprintf("%s (%s base)", t.Transaction, bw.Name))
			}
		}
	}
	return s, nil
}
