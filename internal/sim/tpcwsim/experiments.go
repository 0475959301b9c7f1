package tpcwsim

import (
	"fmt"
	"time"

	"github.com/tierscope/tierscope/internal/parallel"
	"github.com/tierscope/tierscope/internal/signature"
)

// Experiment is one named run of the case study.
type Experiment struct {
	Name   string
	Config Config
}

// HomeDeltas are the code changes of paper 004 §VIII (+2, +5, +10 ms on Home)
// and the +1 ms beyond it.
var HomeDeltas = []float64{1, 2, 5, 10}

// VersionName is the version label of a run with extra ms on Home.
func VersionName(homeExtraMs float64) string {
	if homeExtraMs == 0 {
		return "v1"
	}
	return fmt.Sprintf("v2-home+%gms", homeExtraMs)
}

// RunName names the run of version under workload.
func RunName(version string, w Workload) string { return version + " / " + w.Name }

// CaseStudy returns the runs of the replay. Every run has its own seed,
// derived from seed, so no two runs share random numbers (as separate
// experiments on a real testbed would not):
//   - v1 under each workload of Table III;
//   - v2 with Home +1, +2, +5 and +10 ms under Mix I (paper §VIII);
//   - v2 with Home +1 ms under Mix II and Mix III as well;
//   - v1 under the heavy workload, the §IX high-utilization regime.
func CaseStudy(seed uint64) []Experiment {
	var out []Experiment
	n := uint64(0)
	add := func(w Workload, homeExtra float64) {
		n++
		cfg := DefaultConfig(w, seed*1000+n)
		cfg.Version = VersionName(homeExtra)
		if homeExtra != 0 {
			cfg.ExtraMs = map[string]float64{"Home": homeExtra}
		}
		out = append(out, Experiment{Name: RunName(cfg.Version, w), Config: cfg})
	}
	for _, w := range Mixes {
		add(w, 0)
	}
	for _, d := range HomeDeltas {
		add(MixI, d)
	}
	add(MixII, 1)
	add(MixIII, 1)
	add(MixHeavy, 0)
	return out
}

// MixRuns returns v1 under each Table III workload, observed for d each: the
// stability check with more data per signature than the paper's three hours.
// Seeds are derived from seed and distinct from CaseStudy's.
func MixRuns(seed uint64, d time.Duration) []Experiment {
	var out []Experiment
	for i, w := range Mixes {
		cfg := DefaultConfig(w, seed*1000+500+uint64(i))
		cfg.Duration = d
		out = append(out, Experiment{Name: RunName(cfg.Version, w), Config: cfg})
	}
	return out
}

// RunAll runs the experiments on all CPUs and returns their results in order.
func RunAll(exps []Experiment) []Result {
	out := make([]Result, len(exps))
	parallel.Do(len(exps), func(i int) { out[i] = Run(exps[i].Config) })
	return out
}

// Profiles builds one profile per key from rows.
func Profiles(rows []signature.Row) ([]*signature.Profile, error) {
	byKey := map[signature.Key]*signature.Profile{}
	var out []*signature.Profile
	for _, r := range rows {
		p := byKey[r.Key]
		if p == nil {
			p = signature.NewProfile(r.Key)
			byKey[r.Key] = p
			out = append(out, p)
		}
		if _, _, err := p.Add(r.Window); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AppSignature is the application signature of one run.
func AppSignature(res Result, opts signature.Options) (signature.AppSignature, error) {
	ps, err := Profiles(res.Rows)
	if err != nil {
		return signature.AppSignature{}, err
	}
	apps, err := signature.Signatures(ps, opts)
	if err != nil {
		return signature.AppSignature{}, err
	}
	if len(apps) != 1 {
		return signature.AppSignature{}, fmt.Errorf("tpcwsim: %d signatures in one run", len(apps))
	}
	return apps[0], nil
}
