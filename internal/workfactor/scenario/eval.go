package scenario

import (
	"fmt"
	"math"
	"slices"

	"github.com/tierscope/tierscope/internal/workfactor"
)

// Outcome is one scored run.
type Outcome struct {
	Config Config
	// Worst is the largest power error over the significant units, read at the
	// last period (scored over the periods since the release, or the whole run).
	Worst float64
	// Pass is Worst ≤ Target.
	Pass bool
	// Units are the scored units at the last period.
	Units []Error
	// SinceRelease[d] is the worst power error d periods after the release
	// (nil without a release).
	SinceRelease []float64
	// Shifts is the number of changes the estimator detected.
	Shifts int64
	// Groups are the collinear groups the estimator reported at the end.
	Groups []workfactor.Group
	// HalfLife is the estimator's memory at the end, in periods.
	HalfLife float64
}

// Target is the power error every significant flow must stay within (issue 37).
const Target = 0.15

// Evaluate generates the scenario, replays it through an estimator with cfg,
// and scores the last period's estimate.
func Evaluate(c Config, cfg workfactor.Config) (Outcome, error) {
	run, err := Generate(c)
	if err != nil {
		return Outcome{}, err
	}
	ests, err := Replay(run, cfg)
	if err != nil {
		return Outcome{}, err
	}
	last := ests[len(ests)-1]
	from := int64(1)
	if run.Release > 0 {
		from = run.Release
	}
	to := int64(len(run.Periods))
	o := Outcome{Config: c, Shifts: last.Counters.Shifts, Groups: last.Groups, HalfLife: last.HalfLife}
	o.Units = ScoreAt(run, last, from, to)
	o.Worst = Worst(o.Units)
	o.Pass = o.Worst <= Target
	if run.Release > 0 {
		for p := run.Release; p <= to; p++ {
			o.SinceRelease = append(o.SinceRelease, Worst(ScoreAt(run, ests[p-1], run.Release, to)))
		}
	}
	return o, nil
}

// Cell summarises the runs of one setting over seeds.
type Cell struct {
	Label  string
	Runs   int
	Passed int
	// Median and P90 of the runs' worst power errors.
	Median, P90 float64
}

// Summarise builds a cell from outcomes.
func Summarise(label string, outs []Outcome) Cell {
	c := Cell{Label: label, Runs: len(outs)}
	var w []float64
	for _, o := range outs {
		if o.Pass {
			c.Passed++
		}
		w = append(w, o.Worst)
	}
	c.Median, c.P90 = Quantile(w, 0.5), Quantile(w, 0.9)
	return c
}

// Quantile is the q-quantile of xs (nearest rank); NaN when empty.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Pct formats a fraction as a percentage ("inf" when infinite).
func Pct(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// ReferenceConfig is ordinary least squares with the true model's columns (a
// background per machine, collinear groups combined), no aging, no change
// detection, no smoothing: fed only the periods after a release, it is what
// those periods alone can tell (EvaluateAfterRelease).
func ReferenceConfig() workfactor.Config {
	c := workfactor.DefaultConfig()
	c.HalfLife, c.MaxHalfLife, c.SmoothHalfLife = 1e9, 0, 1e-3
	c.ShiftSigma, c.CusumThreshold = 0, 0
	c.Background = workfactor.BackgroundPerSource
	return c
}

// EvaluateAfterRelease scores ReferenceConfig fed only the periods from the
// release on (the whole run without a release).
func EvaluateAfterRelease(c Config) (Outcome, error) {
	run, err := Generate(c)
	if err != nil {
		return Outcome{}, err
	}
	e, err := workfactor.New(ReferenceConfig())
	if err != nil {
		return Outcome{}, err
	}
	from := max(run.Release, 1)
	var last *workfactor.Estimate
	for _, p := range run.Periods[from-1:] {
		if last, err = e.AddPeriod(p.Index, p.Obs); err != nil {
			return Outcome{}, err
		}
	}
	o := Outcome{Config: c, Groups: last.Groups}
	o.Units = ScoreAt(run, last, from, int64(len(run.Periods)))
	o.Worst = Worst(o.Units)
	o.Pass = o.Worst <= Target
	return o, nil
}
