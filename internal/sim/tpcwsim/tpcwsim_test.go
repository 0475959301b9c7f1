package tpcwsim

import (
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/signature"
)

func TestDeterministic(t *testing.T) {
	cfg := DefaultConfig(MixI, 42)
	cfg.Duration = 15 * time.Minute
	a, b := Run(cfg), Run(cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different runs")
	}
	cfg.Seed = 43
	if c := Run(cfg); reflect.DeepEqual(a.Rows, c.Rows) {
		t.Fatal("different seeds, same rows")
	}
	if len(a.Rows) == 0 || a.Requests < 1000 {
		t.Fatalf("%d rows, %d requests", len(a.Rows), a.Requests)
	}
}

// The front tier is a processor-sharing queue: a transaction's front latency
// grows as 1/(1−U) with utilization (paper 004 eq. 10), so S = R·(1−U) stays
// put while R more than doubles.
func TestProcessorSharingFront(t *testing.T) {
	type point struct{ u, r, s float64 }
	measure := func(ebs int) point {
		cfg := DefaultConfig(Workload{"constant", ebs, 0, 0, 0, 0}, 5)
		cfg.Duration, cfg.LockCapacity = 40*time.Minute, 0
		res := Run(cfg)
		var n, rsum, ssum, usum float64
		for _, row := range res.Rows {
			if row.Transaction != "Home" || row.WindowStart.Sub(cfg.Start) < 5*time.Minute {
				continue
			}
			c := float64(row.Count)
			n += c
			rsum += c * row.FrontLatencyMs()
			ssum += c * row.FrontLatencyMs() * (1 - row.CPUUtilization)
			usum += c * row.CPUUtilization
		}
		return point{usum / n, rsum / n, ssum / n}
	}
	lo, hi := measure(100), measure(800)
	t.Logf("U %.3f: R %.2f S %.2f; U %.3f: R %.2f S %.2f (true S 7.5)", lo.u, lo.r, lo.s, hi.u, hi.r, hi.s)
	if lo.u > 0.15 || hi.u < 0.6 {
		t.Fatalf("utilizations %.3f and %.3f do not span the range", lo.u, hi.u)
	}
	if hi.r < 2*lo.r {
		t.Fatalf("latency did not inflate with utilization: %.2f → %.2f", lo.r, hi.r)
	}
	for _, p := range []point{lo, hi} {
		if math.Abs(p.s-7.5)/7.5 > 0.03 {
			t.Fatalf("S = R(1−U) = %.3f at U %.3f, want 7.5 ± 3%%", p.s, p.u)
		}
	}
}

var (
	caseOnce    sync.Once
	caseExps    []Experiment
	caseResults []Result
)

// caseStudy runs the whole replay once (seed 1), about 10 s of CPU.
// stableHours is the observation per workload under which every transaction's
// signature is within 5% across the workloads (docs/signature-report.md).
const stableHours = 24

func caseStudy(t *testing.T) ([]Experiment, []Result) {
	if testing.Short() {
		t.Skip("the case-study replay takes ~10 s of CPU")
	}
	caseOnce.Do(func() {
		caseExps = CaseStudy(1)
		caseResults = RunAll(caseExps)
	})
	return caseExps, caseResults
}

// Table IV: the front server's one-minute utilization under each workload.
// The low end is set by the base processes and is checked per workload; the
// high end depends on the random process's draws of random(150, 700) EBs in a
// given run, so only the highest over the three workloads is checked here
// (docs/signature-report.md gives the ranges over ten seeds).
func TestCaseStudyUtilizationRanges(t *testing.T) {
	exps, res := caseStudy(t)
	paper := map[string][2]float64{"Mix I": {0.06, 0.60}, "Mix II": {0.10, 0.61}, "Mix III": {0.10, 0.64}}
	top := 0.0
	for i, e := range exps[:3] {
		lo, hi := slices.Min(res[i].FrontUtil), slices.Max(res[i].FrontUtil)
		p := paper[e.Config.Workload.Name]
		t.Logf("%s: front %.1f%%–%.1f%% (paper %.0f%%–%.0f%%), DB %.1f%%–%.1f%%", e.Name, 100*lo, 100*hi, 100*p[0], 100*p[1],
			100*slices.Min(res[i].DBUtil), 100*slices.Max(res[i].DBUtil))
		if math.Abs(lo-p[0]) > 0.05 || hi > p[1]+0.1 {
			t.Errorf("%s: front utilization %.3f–%.3f, paper %.2f–%.2f", e.Name, lo, hi, p[0], p[1])
		}
		top = max(top, hi)
	}
	if top < 0.55 {
		t.Errorf("no workload reached the paper's high end: at most %.3f", top)
	}
}

// With more observation than the paper's three hours, the four rarest
// transactions meet the 5% stability too: what kept them out was sampling
// noise, not load dependence.
func TestRareTransactionsStableWithMoreData(t *testing.T) {
	if testing.Short() {
		t.Skip("three simulated days of TPC-W take ~20 s of CPU")
	}
	exps := MixRuns(1, stableHours*time.Hour)
	res := RunAll(exps)
	var sigs []signature.AppSignature
	for i := range exps {
		a, err := AppSignature(res[i], signature.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		sigs = append(sigs, a)
	}
	stab, _ := Stability(sigs)
	for _, T := range Transactions {
		if x := stab[T.Name]; !(x <= 0.05) {
			t.Errorf("%s: signatures differ by %.1f%% across workloads with %d hours each", T.Name, 100*x, stableHours)
		} else {
			t.Logf("%-22s worst difference %.1f%%", T.Name, 100*x)
		}
	}
}

// The headline results of the issue, under the default options.
func TestCaseStudyHeadline(t *testing.T) {
	exps, res := caseStudy(t)
	s, err := Evaluate(exps, res, signature.DefaultOptions(), signature.DefaultCompareOptions())
	if err != nil {
		t.Fatal(err)
	}
	// Signatures equal across the three workloads within 5%, for every
	// transaction with at least 1% of the requests in every mix. The four
	// rarest (0.1–0.75% of requests, a few hundred to a few thousand per run)
	// must agree within three combined bootstrap standard errors: their
	// run-to-run noise alone exceeds 5% (docs/signature-report.md).
	for i, T := range Transactions {
		rare := min(Browsing.Pct[i], Shopping.Pct[i], Ordering.Pct[i]) < 1
		if !rare {
			if x := s.Stability[T.Name]; !(x <= 0.05) {
				t.Errorf("%s: signatures differ by %.1f%% across workloads", T.Name, 100*x)
			}
			continue
		}
		for a := range Mixes {
			for b := a + 1; b < len(Mixes); b++ {
				ta := s.Signatures[RunName("v1", Mixes[a])].Transaction(T.Name)
				tb := s.Signatures[RunName("v1", Mixes[b])].Transaction(T.Name)
				if !ta.OK() || !tb.OK() {
					t.Errorf("%s: insufficient data", T.Name)
					continue
				}
				d := math.Abs(*ta.ServiceTimeMs - *tb.ServiceTimeMs)
				se := math.Hypot(*ta.StandardErrorMs, *tb.StandardErrorMs)
				if d > 3*se {
					t.Errorf("%s: %s vs %s differ by %.3f ms, over 3 standard errors (%.3f ms)", T.Name, Mixes[a].Name, Mixes[b].Name, d, se)
				}
			}
		}
	}
	// Home +1, +2, +5, +10 ms detected in every comparison.
	for _, d := range HomeDeltas {
		if s.HomeTrials[d] == 0 || s.HomeDetected[d] != s.HomeTrials[d] {
			t.Errorf("Home +%g ms detected in %d of %d comparisons", d, s.HomeDetected[d], s.HomeTrials[d])
		}
	}
	// No false alarm: the other 13 transactions in every v1 → v2 comparison,
	// and all 14 in v1 → v1 across workloads.
	if s.FalseAlarms != 0 || s.FalseAlarmTrials < 13*18 {
		t.Errorf("%d false alarms in %d: %v", s.FalseAlarms, s.FalseAlarmTrials, s.FalseAlarmList)
	}
	// The §IX regime: the same code under heavy load is not "changed".
	if len(s.ContentionVerdicts) != 3 {
		t.Fatalf("contention verdicts %v", s.ContentionVerdicts)
	}
	for _, v := range s.ContentionVerdicts {
		if v == signature.VerdictChanged {
			t.Errorf("Execute Search under heavy load: %v", s.ContentionVerdicts)
		}
	}
	t.Logf("worst stability %.1f%%, %d false-alarm trials, contention verdicts %v, others flagged under heavy load %v",
		100*s.MaxStability, s.FalseAlarmTrials, s.ContentionVerdicts, s.ContentionChanged)
}

// Without the guards the heavy run reproduces the paper's false alarm on
// Execute Search, so the scenario has teeth.
func TestCaseStudyContentionNeedsTheGuard(t *testing.T) {
	exps, res := caseStudy(t)
	o := signature.DefaultOptions()
	o.MaxUtilization, o.SpreadThreshold = 1, 1e9
	s, err := Evaluate(exps, res, o, signature.DefaultCompareOptions())
	if err != nil {
		t.Fatal(err)
	}
	flagged := 0
	for _, v := range s.ContentionVerdicts {
		if v == signature.VerdictChanged {
			flagged++
		}
	}
	if flagged == 0 {
		t.Fatalf("Execute Search never flagged without the guards: %v", s.ContentionVerdicts)
	}
	t.Logf("without guards: Execute Search %v; flagged %v", s.ContentionVerdicts, s.ContentionChanged)
}
