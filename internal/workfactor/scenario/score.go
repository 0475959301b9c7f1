package scenario

import (
	"math"
	"slices"

	"github.com/tierscope/tierscope/internal/workfactor"
)

// Error is one scored unit: a flow, or a group of truly collinear flows that the
// estimator combined (scored as one, on their summed power).
type Error struct {
	Flows []string
	// Share is the unit's share of the total CPU (flows and background) over the
	// scored periods.
	Share float64
	// RelErr is |estimated power − true power| / true power at the period read.
	RelErr float64
	// Estimated is false when the estimator had no work factor for a flow.
	Estimated bool
}

// SignificantShare is the CPU share from which a flow is scored (issue 37).
const SignificantShare = 0.05

// flowPower is every flow's true CPU power summed over the periods [from, to]
// (1-based, inclusive), the total with the background, and the flows by name.
func flowPower(run *Run, from, to int64) (power map[string]float64, total float64, truth map[string]Flow) {
	power = map[string]float64{}
	for _, p := range run.Periods {
		if p.Index < from || p.Index > to {
			continue
		}
		for _, f := range run.Flows {
			w := p.Rates[f.Name] * run.AlphaAt(f, p.Index)
			power[f.Name] += w
			total += w
		}
		total += p.BackgroundMHz
	}
	truth = map[string]Flow{}
	for _, f := range run.Flows {
		truth[f.Name] = f
	}
	return power, total, truth
}

// ScoreAt scores the estimate of one period: the power error of every unit
// drawing at least SignificantShare of the CPU over the periods [from, to]
// (1-based, inclusive). A group the estimator reports (FlowEstimate.Group)
// counts as one unit only if all its members are truly collinear (the same
// Flow.Group); otherwise each member is scored on its own estimate.
func ScoreAt(run *Run, est *workfactor.Estimate, from, to int64) []Error {
	power, total, truth := flowPower(run, from, to)
	per := run.Periods[est.Period-1]
	// Units: estimator groups whose members are truly collinear, else single flows.
	groups := map[string][]string{}
	for _, fe := range est.Flows {
		if fe.Group != "" {
			groups[fe.Group] = append(groups[fe.Group], fe.Flow)
		}
	}
	var units [][]string
	done := map[string]bool{}
	for _, fe := range est.Flows {
		if done[fe.Flow] {
			continue
		}
		u := []string{fe.Flow}
		if m := groups[fe.Group]; fe.Group != "" && len(m) > 1 {
			g := truth[m[0]].Group
			same := g != ""
			for _, f := range m {
				same = same && truth[f].Group == g
			}
			if same {
				u = m
			}
		}
		for _, f := range u {
			done[f] = true
		}
		units = append(units, u)
	}
	var out []Error
	for _, u := range units {
		share, est0, tru := 0.0, 0.0, 0.0
		ok := true
		for _, f := range u {
			share += power[f] / total
			rate := per.Rates[f]
			tru += rate * run.AlphaAt(truth[f], est.Period)
			a, have := est.WorkFactorOf(f)
			ok = ok && have
			est0 += rate * a
		}
		if share < SignificantShare {
			continue
		}
		e := Error{Flows: slices.Clone(u), Share: share, Estimated: ok, RelErr: math.Inf(1)}
		if ok && tru > 0 {
			e.RelErr = math.Abs(est0-tru) / tru
		}
		out = append(out, e)
	}
	return out
}

// Worst is the largest RelErr (infinite when a unit has no estimate).
func Worst(errs []Error) float64 {
	w := 0.0
	for _, e := range errs {
		w = max(w, e.RelErr)
	}
	return w
}

// Replay feeds the run to a new estimator and returns every period's estimate.
func Replay(run *Run, cfg workfactor.Config) ([]*workfactor.Estimate, error) {
	e, err := workfactor.New(cfg)
	if err != nil {
		return nil, err
	}
	out := make([]*workfactor.Estimate, 0, len(run.Periods))
	for _, p := range run.Periods {
		est, err := e.AddPeriod(p.Index, p.Obs)
		if err != nil {
			return nil, err
		}
		out = append(out, est)
	}
	return out, nil
}
