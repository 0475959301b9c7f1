package scenario

import (
	"math"

	"github.com/tierscope/tierscope/internal/workfactor"
)

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
	return readSinceRelease(c, oracleColumns, func(_ []oracleUnit, cols []oracleColumn, sums *normalSums) ([]oracleColumn, []float64) {
		return cols, solveNormal(sums.a, sums.b)
	})
}

// normalSums are the normal equations XᵀX (a) and XᵀY (b) of the rows so far,
// with YᵀY and the number of rows.
type normalSums struct {
	a    [][]float64
	b    []float64
	yy   float64
	rows int
}

// readSinceRelease generates c's run, adds each period's equations on the
// columns that columns lays out and, from the release on, scores the fit of
// the periods so far at every period (the columns fit returns are scored
// with its coefficients, as oracleWorst does). nil without a release.
func readSinceRelease(c Config, columns func(*Run, []oracleUnit) []oracleColumn,
	fit func([]oracleUnit, []oracleColumn, *normalSums) ([]oracleColumn, []float64)) ([]float64, error) {
	run, err := Generate(c)
	if err != nil {
		return nil, err
	}
	if run.Release <= 0 {
		return nil, nil
	}
	units := trueUnits(run)
	cols := columns(run, units)
	sums := &normalSums{}
	sums.a, sums.b = newNormal(len(cols))
	to := int64(len(run.Periods))
	var out []float64
	for _, p := range run.Periods {
		addOracleRows(run, units, cols, p, sums.a, sums.b)
		for _, o := range p.Obs {
			y := o.Utilization * o.CapacityMHz
			sums.yy += y * y
			sums.rows++
		}
		if p.Index >= run.Release {
			scored, coef := fit(units, cols, sums)
			out = append(out, oracleWorst(run, units, scored, coef, p, run.Release, to))
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
	for m := range p.Obs {
		addRow(a, b, x, oracleRow(run, units, cols, p, m, x))
	}
}

// oracleRow fills x with machine m's equation of period p on cols and
// returns its left side, the machine's CPU in MHz.
func oracleRow(run *Run, units []oracleUnit, cols []oracleColumn, p Period, m int, x []float64) float64 {
	o := p.Obs[m]
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
	return o.Utilization * o.CapacityMHz
}

// addRow adds the equation y = xᵀβ to XᵀX (a) and XᵀY (b).
func addRow(a [][]float64, b []float64, x []float64, y float64) {
	for i := range x {
		b[i] += x[i] * y
		for j := range x {
			a[i][j] += x[i] * x[j]
		}
	}
}

// EvaluateOraclePeriodBackground is the oracle of EvaluateOracle with a
// background of its own in every period, in the run's true form (the same
// share of every machine, or with Config.BackgroundSameMHz the same MHz), in
// place of a constant one per machine: any background that moves in time is
// taken out, at the cost of one equation per period. Each period's equations
// are projected off the form's vector w (y − w·wᵀy/wᵀw, and so each column),
// which gives the estimates of a column per period (Frisch and Waugh). On
// one machine nothing is left: it reads +Inf.
func EvaluateOraclePeriodBackground(c Config) (Outcome, error) {
	run, err := Generate(c)
	if err != nil {
		return Outcome{}, err
	}
	if c.Machines < 2 {
		// One equation per period: a background of its own leaves nothing.
		return Outcome{Config: c, Worst: math.Inf(1)}, nil
	}
	units := trueUnits(run)
	var cols []oracleColumn
	for _, cl := range oracleColumns(run, units) {
		if cl.unit >= 0 {
			cols = append(cols, cl)
		}
	}
	a, b := newNormal(len(cols))
	rows := make([][]float64, c.Machines)
	ys, w := make([]float64, c.Machines), make([]float64, c.Machines)
	wx := make([]float64, len(cols))
	for _, p := range run.Periods {
		clear(wx)
		wy, ww := 0.0, 0.0
		for m := range p.Obs {
			if rows[m] == nil {
				rows[m] = make([]float64, len(cols))
			}
			ys[m] = oracleRow(run, units, cols, p, m, rows[m])
			w[m] = p.Obs[m].CapacityMHz
			if c.BackgroundSameMHz {
				w[m] = 1
			}
			wy, ww = wy+w[m]*ys[m], ww+w[m]*w[m]
			for i, v := range rows[m] {
				wx[i] += w[m] * v
			}
		}
		for m := range p.Obs {
			for i := range rows[m] {
				rows[m][i] -= w[m] * wx[i] / ww
			}
			addRow(a, b, rows[m], ys[m]-w[m]*wy/ww)
		}
	}
	last := run.Periods[len(run.Periods)-1]
	o := Outcome{Config: c, Worst: oracleWorst(run, units, cols, solveNormal(a, b), last, int64(max(run.Release, 1)), last.Index)}
	o.Pass = o.Worst <= Target
	return o, nil
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

// EvaluateAveraging scores AveragingSinceRelease at the run's last period:
// what the run's data tell an estimator that is told when the release was
// but not which flows it changed.
func EvaluateAveraging(c Config) (Outcome, error) {
	since, err := AveragingSinceRelease(c)
	if err != nil || since == nil {
		return Outcome{Config: c}, err
	}
	o := Outcome{Config: c, Worst: since[len(since)-1]}
	o.Pass = o.Worst <= Target
	return o, nil
}

// AveragingSinceRelease is a reference between the default and the oracle,
// read at every period from the release on, as OracleSinceRelease is: least
// squares with the true model's columns over every period unaged, told the
// release period but not which units changed, averaging over the subsets S of
// changed units with the default's priors (workfactor's ChangeAveraging: a
// flat prior on the work factors, increments δ_u ~ N(0, τ_u²) with τ_u =
// ChangeScale times the larger of the unit's two work factors in the model
// where every unit changed, and its prior over S, workfactor.LogSubsetPrior). With β and
// δ_S integrated out, S weighs
//
//	log p(S | y) = log p(S) − Σ_{u∈S} log τ_u − ½ log det H_S + ½ |S| log σ² + ½ θ̂_Sᵀ r_S / σ²,
//
// H_S the normal equations of S's columns plus σ²/τ_u² on each increment,
// θ̂_S = H_S⁻¹ r_S, σ² the MSE of the model where every unit changed. A unit's
// work factor after the release is the weighted mean of β̂_u + δ̂_u. Where the
// default trails it, the default loses what knowing the release period gives;
// where it trails the oracle, the data cannot tell which units changed.
func AveragingSinceRelease(c Config) ([]float64, error) {
	return readSinceRelease(c, averagingColumns, func(units []oracleUnit, cols []oracleColumn, sums *normalSums) ([]oracleColumn, []float64) {
		// A unit's whole-run column holds its work factor after the release.
		return cols[:len(units)], averageUnits(sums.a, sums.b, sums.yy, sums.rows, len(units))
	})
}

// averagingColumns are AveragingSinceRelease's columns: each unit over the
// whole run, then its increment after the release (regime 2 is zero before
// it), then one background per machine.
func averagingColumns(run *Run, units []oracleUnit) []oracleColumn {
	var cols []oracleColumn
	for u := range units {
		cols = append(cols, oracleColumn{u, 0, -1})
	}
	for u := range units {
		cols = append(cols, oracleColumn{u, 2, -1})
	}
	for m := range run.CapacityMHz {
		cols = append(cols, oracleColumn{-1, 0, m})
	}
	return cols
}

// averageUnits is AveragingSinceRelease's model average on the normal
// equations a, b (columns: nu units, nu increments, the backgrounds) of rows
// equations whose Σy² is yy: each unit's work factor after the release, NaN
// when the data do not yet determine it.
func averageUnits(a [][]float64, b []float64, yy float64, rows, nu int) []float64 {
	n := len(b)
	undetermined := make([]float64, nu)
	for i := range undetermined {
		undetermined[i] = math.NaN()
	}
	if rows <= n {
		return undetermined
	}
	theta := solveNormal(a, b)
	fit := 0.0
	for i := range theta {
		fit += theta[i] * b[i]
	}
	sigma2 := (yy - fit) / float64(rows-n)
	prior := workfactor.DefaultConfig()
	tau := make([]float64, nu)
	for u := range tau {
		tau[u] = prior.ChangeScale * max(math.Abs(theta[u]), math.Abs(theta[u]+theta[nu+u]))
		if !(tau[u] > 0) || !(sigma2 > 0) {
			return undetermined
		}
	}
	sum := make([]float64, nu)
	total, top := 0.0, math.Inf(-1)
	type subset struct {
		logw float64
		coef []float64
	}
	subsets := make([]subset, 0, 1<<nu)
	for mask := 0; mask < 1<<nu; mask++ {
		var idx []int
		var prec []float64
		for i := 0; i < n; i++ {
			if i < nu || i >= 2*nu {
				idx, prec = append(idx, i), append(prec, 0)
			}
		}
		k, logw := 0, 0.0
		for u := 0; u < nu; u++ {
			if mask>>u&1 == 1 {
				idx, prec = append(idx, nu+u), append(prec, sigma2/(tau[u]*tau[u]))
				k++
				logw -= math.Log(tau[u])
			}
		}
		logw += workfactor.LogSubsetPrior(k, nu, prior.ChangePrior)
		h, r := subNormal(a, b, idx, prec)
		ld, ok := logDetSPD(h)
		if !ok {
			continue
		}
		th := solveNormal(h, r)
		q := 0.0
		for i := range th {
			q += th[i] * r[i]
		}
		logw += -0.5*ld + 0.5*float64(k)*math.Log(sigma2) + 0.5*q/sigma2
		coef := make([]float64, nu)
		for i, col := range idx {
			switch {
			case col < nu:
				coef[col] += th[i]
			case col < 2*nu:
				coef[col-nu] += th[i]
			}
		}
		subsets = append(subsets, subset{logw, coef})
		top = max(top, logw)
	}
	for _, s := range subsets {
		w := math.Exp(s.logw - top)
		total += w
		for u := range sum {
			sum[u] += w * s.coef[u]
		}
	}
	if !(total > 0) {
		return undetermined
	}
	for u := range sum {
		sum[u] /= total
	}
	return sum
}

// subNormal is the normal equations of the columns idx, with prec added to
// the diagonal (nil: none).
func subNormal(a [][]float64, b []float64, idx []int, prec []float64) ([][]float64, []float64) {
	h, r := newNormal(len(idx))
	for i, ii := range idx {
		r[i] = b[ii]
		for j, jj := range idx {
			h[i][j] = a[ii][jj]
		}
		if prec != nil {
			h[i][i] += prec[i]
		}
	}
	return h, r
}

// logDetSPD is the log determinant of a symmetric positive definite matrix
// (Cholesky); false when it is not positive definite.
func logDetSPD(a [][]float64) (float64, bool) {
	n := len(a)
	l := make([][]float64, n)
	for i := range l {
		l[i] = make([]float64, n)
	}
	ld := 0.0
	for j := 0; j < n; j++ {
		d := a[j][j]
		for k := 0; k < j; k++ {
			d -= l[j][k] * l[j][k]
		}
		if !(d > 0) {
			return 0, false
		}
		l[j][j] = math.Sqrt(d)
		ld += 2 * math.Log(l[j][j])
		for i := j + 1; i < n; i++ {
			s := a[i][j]
			for k := 0; k < j; k++ {
				s -= l[i][k] * l[j][k]
			}
			l[i][j] = s / l[j][j]
		}
	}
	return ld, true
}
