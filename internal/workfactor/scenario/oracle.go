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
	a, b := newNormal(len(cols))
	for _, p := range run.Periods {
		addOracleRows(run, units, cols, p, a, b)
	}
	last := run.Periods[len(run.Periods)-1]
	o := Outcome{Config: c, Worst: oracleWorst(run, units, cols, solveNormal(a, b), last, int64(max(run.Release, 1)), last.Index)}
	o.Pass = o.Worst <= Target
	return o, nil
}

// OracleSinceRelease is the oracle of EvaluateOracle read d periods after
// the release, for every d: fitted on the periods up to then and scored as
// Outcome.SinceRelease is (units significant over the whole time since the
// release). A unit the periods so far cannot determine is off by +Inf.
func OracleSinceRelease(c Config) ([]float64, error) {
	run, err := Generate(c)
	if err != nil {
		return nil, err
	}
	if run.Release <= 0 {
		return nil, nil
	}
	units := trueUnits(run)
	cols := oracleColumns(run, units)
	a, b := newNormal(len(cols))
	to := int64(len(run.Periods))
	var out []float64
	for _, p := range run.Periods {
		addOracleRows(run, units, cols, p, a, b)
		if p.Index >= run.Release {
			out = append(out, oracleWorst(run, units, cols, solveNormal(a, b), p, run.Release, to))
		}
	}
	return out, nil
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

func newNormal(n int) ([][]float64, []float64) {
	a := make([][]float64, n)
	for i := range a {
		a[i] = make([]float64, n)
	}
	return a, make([]float64, n)
}

// addOracleRows adds period p's equations, one per machine, to XᵀX (a) and
// XᵀY (b).
func addOracleRows(run *Run, units []oracleUnit, cols []oracleColumn, p Period, a [][]float64, b []float64) {
	x := make([]float64, len(cols))
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

// oracleWorst is the worst power error at period at over the units drawing
// at least SignificantShare of the CPU over periods [from, to], as ScoreAt
// scores an estimate; +Inf when a scored unit's coefficient is undetermined.
func oracleWorst(run *Run, units []oracleUnit, cols []oracleColumn, coef []float64, at Period, from, to int64) float64 {
	power, total, truth := flowPower(run, from, to)
	worst := 0.0
	for ci, cl := range cols {
		if cl.unit < 0 || (cl.regime == 1 && at.Index >= run.Release) || (cl.regime == 2 && at.Index < run.Release) {
			continue
		}
		share, est, tru := 0.0, 0.0, 0.0
		for _, f := range units[cl.unit].flows {
			share += power[f] / total
			est += at.Rates[f] * coef[ci]
			tru += at.Rates[f] * run.AlphaAt(truth[f], at.Index)
		}
		if share >= SignificantShare && tru > 0 {
			e := math.Abs(est-tru) / tru
			if math.IsNaN(e) {
				e = math.Inf(1)
			}
			worst = max(worst, e)
		}
	}
	return worst
}
