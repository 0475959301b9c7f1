package scenario

import "math"

// EvaluateOracle scores ordinary least squares that knows what no estimator
// can: the true model (collinear groups combined, a background per machine)
// and which flows the release changed (one coefficient before it and one
// after for those, one over the whole run for the others), over every period
// unaged. It bounds what the run's data can tell: a run it fails is beyond
// any estimator of this model at the same noise.
func EvaluateOracle(c Config) (Outcome, error) {
	run, err := Generate(c)
	if err != nil {
		return Outcome{}, err
	}
	units := trueUnits(run)
	cols := oracleColumns(run, units)
	coef := solveNormal(oracleNormal(run, units, cols))
	o := Outcome{Config: c, Worst: oracleWorst(run, units, cols, coef)}
	o.Pass = o.Worst <= Target
	return o, nil
}

// oracleUnit is a truly collinear group or a single flow, and whether the
// release changed it.
type oracleUnit struct {
	flows   []string
	changed bool
}

func trueUnits(run *Run) []oracleUnit {
	var units []oracleUnit
	group := map[string]int{}
	for _, f := range run.Flows {
		changed := f.AlphaAfter != f.Alpha && run.Release > 0
		if f.Group != "" {
			if u, ok := group[f.Group]; ok {
				units[u].flows = append(units[u].flows, f.Name)
				units[u].changed = units[u].changed || changed
				continue
			}
			group[f.Group] = len(units)
		}
		units = append(units, oracleUnit{flows: []string{f.Name}, changed: changed})
	}
	return units
}

// oracleColumn is a unit over the whole run (regime 0), before the release
// (1) or after it (2); or machine m's background (unit −1).
type oracleColumn struct{ unit, regime, machine int }

func oracleColumns(run *Run, units []oracleUnit) []oracleColumn {
	var cols []oracleColumn
	for i, u := range units {
		if u.changed {
			cols = append(cols, oracleColumn{i, 1, -1}, oracleColumn{i, 2, -1})
		} else {
			cols = append(cols, oracleColumn{i, 0, -1})
		}
	}
	for m := range run.CapacityMHz {
		cols = append(cols, oracleColumn{-1, 0, m})
	}
	return cols
}

// oracleNormal returns XᵀX and XᵀY over every machine and period.
func oracleNormal(run *Run, units []oracleUnit, cols []oracleColumn) ([][]float64, []float64) {
	n := len(cols)
	a := make([][]float64, n)
	for i := range a {
		a[i] = make([]float64, n)
	}
	b := make([]float64, n)
	x := make([]float64, n)
	for _, p := range run.Periods {
		for m, o := range p.Obs {
			for ci, cl := range cols {
				x[ci] = 0
				switch {
				case cl.unit < 0:
					if cl.machine == m {
						x[ci] = 1
					}
				case cl.regime == 1 && p.Index >= run.Release, cl.regime == 2 && p.Index < run.Release:
				default:
					for _, f := range units[cl.unit].flows {
						x[ci] += o.Rates[f]
					}
				}
			}
			y := o.Utilization * o.CapacityMHz
			for i := range x {
				b[i] += x[i] * y
				for j := range x {
					a[i][j] += x[i] * x[j]
				}
			}
		}
	}
	return a, b
}

// solveNormal solves A x = b by Gaussian elimination with partial pivoting.
func solveNormal(a [][]float64, b []float64) []float64 {
	n := len(b)
	m := make([][]float64, n)
	for i := range m {
		m[i] = append(append([]float64{}, a[i]...), b[i])
	}
	for c := 0; c < n; c++ {
		piv := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[piv][c]) {
				piv = r
			}
		}
		m[c], m[piv] = m[piv], m[c]
		if m[c][c] == 0 {
			continue
		}
		for r := 0; r < n; r++ {
			if r != c {
				f := m[r][c] / m[c][c]
				for k := c; k <= n; k++ {
					m[r][k] -= f * m[c][k]
				}
			}
		}
	}
	x := make([]float64, n)
	for i := range x {
		x[i] = m[i][n] / m[i][i]
	}
	return x
}

// oracleWorst is the worst power error at the last period over the units
// drawing at least SignificantShare of the CPU since the release (the whole
// run without one), as ScoreAt scores an estimate.
func oracleWorst(run *Run, units []oracleUnit, cols []oracleColumn, coef []float64) float64 {
	last := run.Periods[len(run.Periods)-1]
	power, total, truth := flowPower(run, int64(max(run.Release, 1)), last.Index)
	worst := 0.0
	for ci, cl := range cols {
		if cl.unit < 0 || cl.regime == 1 {
			continue
		}
		share, est, tru := 0.0, 0.0, 0.0
		for _, f := range units[cl.unit].flows {
			share += power[f] / total
			est += last.Rates[f] * coef[ci]
			tru += last.Rates[f] * run.AlphaAt(truth[f], last.Index)
		}
		if share >= SignificantShare && tru > 0 {
			worst = max(worst, math.Abs(est-tru)/tru)
		}
	}
	return worst
}
