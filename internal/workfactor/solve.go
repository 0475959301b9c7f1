package workfactor

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// block is one independent regression problem: the flows and sources of one
// connected component of the flow–source graph (a source links the flows it
// serves). In machine mode with interlinked placements there is one block; per
// process CPU readings split the problem into one block per group of processes
// sharing flows (§4.6).
type block struct {
	flows   []int // flow indices, in name order
	sources []int
	nh      float64 // N_h
	yy      float64 // YᵀY
	b0, by  float64 // Σv², Σv²ρΩ
	// sigma2 is the mean σ_y² its sources remember from earlier solves (0:
	// none): the noise level when too few equations remain to measure it.
	sigma2 float64
	// The previous regime's totals (State.PrevC): N_h, YᵀY, Σv², Σv²ρΩ.
	pnh, pyy, pb0, pby float64
	// start is the first period of the block's current regime: the earliest
	// RegimeStart of its sources (a source that joins later does not shorten
	// the memory; a change sets every source's).
	start int64
}

// memberTol is the share of a source's rate sum below which a flow is no longer
// considered served by it (its traces have aged away).
const memberTol = 1e-12

// blocks splits the problem into its independent blocks (§4.6): the
// connected components of the graph in which a source links the flows it
// serves (flowComponents), each with its sources' totals; a source with only
// background (no flow) is a block of its own when a background column is on.
// The blocks are in a deterministic order: by first flow name, then by first
// source key.
func (e *Estimator) blocks() []block {
	k := len(e.st.Flows)
	members, find := e.flowComponents()
	// A flow no source serves any more (all its sums aged away) belongs to no block.
	served := make([]bool, k)
	for _, m := range members {
		for _, i := range m {
			served[i] = true
		}
	}
	byRoot := map[int]*block{}
	var roots []int
	for si, m := range members {
		var b *block
		if len(m) == 0 {
			if e.cfg.Background == BackgroundOff || e.cfg.Background == BackgroundAuto {
				continue
			}
			// Only background: a block of its own.
			b = &block{}
			byRoot[-1-si] = b
			roots = append(roots, -1-si)
		} else {
			r := find(m[0])
			if b = byRoot[r]; b == nil {
				b = &block{}
				byRoot[r] = b
				roots = append(roots, r)
			}
		}
		b.addSource(e.st.Sources[si], si, len(e.st.Sources))
	}
	for i := 0; i < k; i++ {
		if served[i] {
			b := byRoot[find(i)]
			b.flows = append(b.flows, i)
		}
	}
	out := make([]block, 0, len(roots))
	for _, r := range roots {
		b := byRoot[r]
		b.sigma2 *= float64(len(e.st.Sources)) / float64(len(b.sources))
		slices.SortFunc(b.flows, func(x, y int) int { return cmp.Compare(e.st.Flows[x], e.st.Flows[y]) })
		out = append(out, *b)
	}
	slices.SortFunc(out, func(x, y block) int {
		switch {
		case len(x.flows) > 0 && len(y.flows) > 0:
			return cmp.Compare(e.st.Flows[x.flows[0]], e.st.Flows[y.flows[0]])
		case len(x.flows) > 0:
			return -1
		case len(y.flows) > 0:
			return 1
		}
		return cmp.Compare(e.st.Sources[x.sources[0]].Key, e.st.Sources[y.sources[0]].Key)
	})
	return out
}

// flowComponents returns each source's flows (those above memberTol of its
// rate sum) and find, the union-find root of a flow's component: flows served
// by one source are in one component.
func (e *Estimator) flowComponents() (members [][]int, find func(int) int) {
	parent := make([]int, len(e.st.Flows))
	for i := range parent {
		parent[i] = i
	}
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) {
		ra, rb := find(a), find(b)
		if ra != rb {
			if ra < rb {
				parent[rb] = ra
			} else {
				parent[ra] = rb
			}
		}
	}
	members = make([][]int, len(e.st.Sources))
	for si, s := range e.st.Sources {
		total := 0.0
		for _, x := range s.SX {
			total += x
		}
		for i, x := range s.SX {
			if x > memberTol*total {
				members[si] = append(members[si], i)
			}
		}
		for _, i := range members[si] {
			union(members[si][0], i)
		}
	}
	return members, find
}

// addSource adds source si's totals to the block; the regime starts at the
// earliest RegimeStart of its sources; sigma2 accumulates σ_y²/nSources (the
// caller rescales it to the block's mean).
func (b *block) addSource(s SourceState, si, nSources int) {
	if len(b.sources) == 0 || s.RegimeStart < b.start {
		b.start = s.RegimeStart
	}
	b.sources = append(b.sources, si)
	b.nh += s.N
	b.yy += s.YY
	b.b0 += s.B0
	b.by += s.BY
	b.pnh += s.PrevN
	b.pyy += s.PrevYY
	b.pb0 += s.PrevB0
	b.pby += s.PrevBY
	b.sigma2 += s.Sigma2 / float64(nSources)
}

// column of the regression: one flow, several combined flows, or a background
// column over some sources. A fixed column is not solved: its coefficient is
// value, and its contribution is moved to the left-hand side.
type column struct {
	flows []int
	bg    []int // source indices, for a background column
	fixed bool
	value float64
	// bgScale weighs each of bg's sources (nil: 1 each).
	bgScale []float64
	// regime is the data the column spans: the current regime's equations
	// (the zero value), or the previous regime's, or both (State.PrevC).
	regime regime
}

type regime int

const (
	current regime = iota
	previous
	both
)

func (r regime) has(x regime) bool { return r == both || r == x }

// bgWeight is the background column's value on the equations of its j-th source.
func (c column) bgWeight(j int) float64 {
	if c.bgScale == nil {
		return 1
	}
	return c.bgScale[j]
}

// colFit is one column's solution.
type colFit struct {
	alpha float64
	g     float64
	// singular: the column was dropped (its pivot vanished, or it is empty), so
	// alpha "represents a problem with the floating-point calculations".
	singular bool
	// gOK: the goodness is defined (positive degrees of freedom).
	gOK         bool
	fixed       bool
	implausible bool
}

// fails is the failing criterion of §4.3: α̂ < 0, α̂ a floating-point problem,
// or g < 1; and, added here, α̂ implausible (above twice D_c/C_cc).
func (c colFit) fails() bool {
	return c.singular || !c.gOK || math.IsNaN(c.alpha) || math.IsInf(c.alpha, 0) || c.alpha < 0 || !(c.g >= 1) || c.implausible
}

type fit struct {
	cols        []colFit
	sse, sst    float64
	dof         float64
	mse, r2     float64
	mseOK, r2OK bool
	columns     int     // columns actually solved
	nh, b0      float64 // the totals of the equations fitted (N_h, Σv²)
}

// gMax caps |g| when the fit is exact (S_k = 0), keeping it finite.
const gMax = 1e9

// gram adds regime r's part of the columns' normal equations to cg and dg:
// C and D (or the previous regime's) summed over the columns' flows, and the
// background entries Σv²λ, Σv², Σv²ρΩ of their sources.
func (e *Estimator) gram(r regime, cols []column, cg, dg []float64) {
	n := len(cols)
	k := len(e.st.Flows)
	src := e.st.Sources
	cm, dm := e.st.C, e.st.D
	if r == previous {
		cm, dm = e.st.PrevC, e.st.PrevD
	}
	bx := func(s, i int) float64 {
		v := src[s].BX
		if r == previous {
			v = src[s].PrevBX
		}
		if i < len(v) {
			return v[i]
		}
		return 0
	}
	b0 := func(s int) float64 {
		if r == previous {
			return src[s].PrevB0
		}
		return src[s].B0
	}
	by := func(s int) float64 {
		if r == previous {
			return src[s].PrevBY
		}
		return src[s].BY
	}
	for a, ca := range cols {
		if !ca.regime.has(r) {
			continue
		}
		for _, i := range ca.flows {
			dg[a] += dm[i]
		}
		for js, s := range ca.bg {
			dg[a] += ca.bgWeight(js) * by(s)
		}
		for bi := a; bi < n; bi++ {
			cb := cols[bi]
			if !cb.regime.has(r) {
				continue
			}
			v := 0.0
			for _, i := range ca.flows {
				for _, j := range cb.flows {
					v += cm[i*k+j]
				}
				for js, s := range cb.bg {
					v += cb.bgWeight(js) * bx(s, i)
				}
			}
			for js, s := range ca.bg {
				wa := ca.bgWeight(js)
				for _, j := range cb.flows {
					v += wa * bx(s, j)
				}
				if jt := slices.Index(cb.bg, s); jt >= 0 {
					v += wa * cb.bgWeight(jt) * b0(s)
				}
			}
			cg[a*n+bi] += v
			if bi != a {
				cg[bi*n+a] += v
			}
		}
	}
}

// flowResult is one flow's raw outcome of a period's solve.
type flowResult struct {
	block    int
	share    float64 // X̄_k/‖X̄‖ in its block
	rejected bool    // δ
	combined bool
	solved   bool // alpha and g are this period's estimate
	alpha, g float64
	// weight scales s(g) in the smoothing: 1 for a flow solved alone, its share
	// of the combined column's rate for a combined flow.
	weight float64
	// coef is the flow's coefficient in the fit (the fixed value of a fixed
	// combined column, 0 for a rejected or singular flow).
	coef float64
	// group names the flow's collinear group ("" when alone or combined).
	group string
	// changed: the flow's work factor changed at its block's last shift,
	// which started the current regime in period regime (acrossRegimes).
	changed bool
	regime  int64
}

type blockResult struct {
	b        block
	fit      fit
	solved   bool
	flows    []string
	bgAlpha  []float64 // per background column
	bgG      []float64
	bgOK     []bool
	bgSource []int     // source of each per-source background column (-1: shared)
	bgScale  []float64 // the shared column's weight per source of the block (nil: 1)
	// bgMeanCapacity is the block's mean capacity when bgScale is set: the
	// shared column's coefficient is the background of a machine this size.
	bgMeanCapacity float64
	groups         []Group
	// changed are the flows whose work factor changed at the block's last
	// shift (acrossRegimes); the others are estimated from both regimes.
	changed []int
	// delta is each flow's increment at the block's last shift (nil: not
	// estimated).
	delta map[int]float64
}

type solveResult struct {
	flows  map[int]*flowResult
	blocks []blockResult
}

func (e *Estimator) solveAll() *solveResult {
	res := &solveResult{flows: map[int]*flowResult{}}
	for bi, b := range e.blocks() {
		res.blocks = append(res.blocks, e.solveBlock(bi, b, res.flows))
	}
	return res
}

// changeZ is the goodness (estimate over standard error) from which a
// column's increment at the last shift is taken for a change.
const changeZ = 3

// maxSelectColumns bounds the selection of acrossRegimes (up to K solves
// per period); larger blocks estimate from the current regime only.
const maxSelectColumns = 24

// acrossRegimes re-solves the block with the previous regime's equations
// (State.PrevC) as well. A column that changed at the last shift gets one
// coefficient per regime, the others one over both. Which columns changed is
// Config.Changes: by default a model average over the subsets of changed
// columns (averageChanges), whose coefficients are the posterior means and
// whose changed columns are those of posterior probability ≥ ½; or one
// subset by backward elimination (backwardChanges), also used by Ridge and
// NNLS (the average's closed form is that of plain least squares). cur is
// the current regime's fit of cols; the result's first len(cols) columns are
// the current regime's, in the same order; with them come the changed flows
// and each column's increment at the shift (its posterior mean, or the
// difference of its two coefficients when selected). If the joint fit makes a column
// fail that passes on the current regime alone (a worse conditioned
// problem), cur is kept.
func (e *Estimator) acrossRegimes(b *block, cols []column, cur fit) (fit, []int, []float64) {
	n := len(cols)
	if n > maxSelectColumns {
		return cur, nil, nil
	}
	var post changePosterior
	averaged := false
	if e.cfg.Changes == ChangeAveraging && e.cfg.Method == Plain {
		post, averaged = e.averageChanges(b, cols)
	}
	changed := make([]bool, n)
	if averaged {
		for a := range cols {
			changed[a] = post.inclusion[a] >= 0.5
		}
	} else {
		changed = e.backwardChanges(b, cols)
	}
	// The final layout: changed columns over the current regime, their twins
	// over the previous one; the others over both.
	joint := slices.Clone(cols)
	var flows []int
	for a, c := range cols {
		if !changed[a] {
			joint[a].regime = both
			continue
		}
		flows = append(flows, c.flows...)
		twin := c
		twin.regime = previous
		joint = append(joint, twin)
	}
	jf := e.solveColumns(b, joint)
	if averaged {
		// The layout's fit gives the residuals; the coefficients are the
		// model average's.
		for a, c := range cols {
			if c.fixed || jf.cols[a].singular {
				continue
			}
			jf.cols[a].alpha = post.alpha[a]
			if sd := post.sd[a]; sd > 0 && !math.IsInf(sd, 0) {
				jf.cols[a].g = min(max(post.alpha[a]/sd, -gMax), gMax)
				jf.cols[a].gOK = true
			}
		}
	}
	for a := range cols {
		// A background column is judged by its own criterion (as in solve).
		failsJoint, failsCur := jf.cols[a].fails(), cur.cols[a].fails()
		if len(cols[a].bg) > 0 {
			failsJoint, failsCur = jf.cols[a].failsAsBackground(), cur.cols[a].failsAsBackground()
		}
		if jf.cols[a].singular || (!cols[a].fixed && failsJoint && !failsCur) {
			return cur, nil, nil // the joint problem is worse conditioned: keep the current fit
		}
	}
	delta := post.delta
	if !averaged {
		delta = make([]float64, n)
		for a, t := 0, n; a < n; a++ {
			if changed[a] {
				delta[a] = jf.cols[a].alpha - jf.cols[t].alpha
				t++
			}
		}
	}
	jf.cols = jf.cols[:n]
	return jf, flows, delta
}

// backwardChanges selects the changed columns by backward elimination:
// start with every free column changed, then drop, one at a time, the one
// whose increment is least significant beside the others, while its
// goodness is below changeZ.
func (e *Estimator) backwardChanges(b *block, cols []column) []bool {
	n := len(cols)
	changed := make([]bool, n)
	// incG solves with an increment (a copy over the current regime only) for
	// every column of set, and returns each increment's |goodness| (0 when
	// undefined), by column.
	incG := func(set []bool) []float64 {
		joint := slices.Clone(cols)
		for a := range joint {
			joint[a].regime = both
		}
		pos := make([]int, n)
		for a, c := range cols {
			if set[a] {
				inc := c
				inc.regime = current
				pos[a] = len(joint)
				joint = append(joint, inc)
			}
		}
		jf := e.solveColumns(b, joint)
		g := make([]float64, n)
		for a := range cols {
			if ic := jf.cols[pos[a]]; set[a] && !ic.singular && ic.gOK {
				g[a] = math.Abs(ic.g)
			}
		}
		return g
	}
	for a, c := range cols {
		changed[a] = !c.fixed
	}
	for {
		g := incG(changed)
		worst, worstG := -1, float64(changeZ)
		for a := range cols {
			if changed[a] && g[a] < worstG {
				worst, worstG = a, g[a]
			}
		}
		if worst < 0 {
			break
		}
		changed[worst] = false
	}
	return changed
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// groupName names a collinear group by its members, in name order.
func groupName(flows []string, col []int) string {
	names := make([]string, len(col))
	for j, i := range col {
		names[j] = flows[i]
	}
	slices.Sort(names)
	return strings.Join(names, "+")
}

// failsAsBackground is the failing criterion for a background column: a
// background power is never negative. (A small positive one with g < 1 is
// kept: dropping it would give its power to the steadiest flows.)
func (c colFit) failsAsBackground() bool {
	return c.singular || math.IsNaN(c.alpha) || c.alpha < 0
}

// centredCov returns the aged, centred covariance of the block's flows' rates
// over its equations (weights v²): C_ij − bx_i·bx_j/B0 with bx = Σv²λ. With
// bothRegimes and a previous regime kept, the previous regime's equations
// count too: a release changes work factors, not how the rates move, and a
// regime only a few periods old would make any two trending rates look
// collinear.
func (e *Estimator) centredCov(b *block, flows []int, bothRegimes bool) (cov []float64, bx []float64) {
	k := len(e.st.Flows)
	m := len(flows)
	prev := bothRegimes && b.pb0 > 0 && len(e.st.PrevC) == k*k && !e.cfg.memoryFixed()
	b0 := b.b0
	if prev {
		b0 += b.pb0
	}
	bx = make([]float64, m)
	for _, s := range b.sources {
		src := e.st.Sources[s]
		for p, i := range flows {
			if i < len(src.BX) {
				bx[p] += src.BX[i]
			}
			if prev && i < len(src.PrevBX) {
				bx[p] += src.PrevBX[i]
			}
		}
	}
	cov = make([]float64, m*m)
	for p, i := range flows {
		for q, j := range flows {
			cov[p*m+q] = e.st.C[i*k+j]
			if prev {
				cov[p*m+q] += e.st.PrevC[i*k+j]
			}
			if b0 > 0 {
				cov[p*m+q] -= bx[p] * bx[q] / b0
			}
		}
	}
	return cov, bx
}

// collinearGroups splits the kept flows into columns: flows whose aged,
// centred rate correlation reaches CollinearCorrelation (transitively) share
// one, every other flow has its own. Columns are ordered by decreasing power
// (Σ rate × work factor, the smoothed one when there is one, else the
// single-column fit D_k/C_kk). The groups and their reasons go to br.groups.
func (e *Estimator) collinearGroups(b *block, kept []int, sx map[int]float64, br *blockResult) [][]int {
	m := len(kept)
	cov, _ := e.centredCov(b, kept, true)
	parent := make([]int, m)
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	best := make([]float64, m) // highest correlation that joined each flow
	for p := 0; p < m; p++ {
		for q := p + 1; q < m; q++ {
			vp, vq := cov[p*m+p], cov[q*m+q]
			if !(vp > 0 && vq > 0) {
				continue
			}
			r := cov[p*m+q] / math.Sqrt(vp*vq)
			if r >= e.cfg.CollinearCorrelation {
				best[p], best[q] = max(best[p], r), max(best[q], r)
				if rp, rq := find(p), find(q); rp != rq {
					parent[max(rp, rq)] = min(rp, rq)
				}
			}
		}
	}
	byRoot := map[int][]int{}
	var roots []int
	corr := map[int]float64{}
	for p := 0; p < m; p++ {
		r := find(p)
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], kept[p])
		corr[r] = max(corr[r], best[p])
	}
	k := len(e.st.Flows)
	power := func(col []int) float64 {
		w := 0.0
		for _, i := range col {
			a := 0.0
			if sm := e.st.Smooth[i]; sm.Q > 0 {
				a = sm.P / sm.Q
			} else if c := e.st.C[i*k+i]; c > 0 {
				a = max(e.st.D[i], 0) / c
			}
			w += sx[i] * a
		}
		return w
	}
	cols := make([][]int, 0, len(roots))
	for _, r := range roots {
		col := byRoot[r]
		slices.Sort(col)
		cols = append(cols, col)
		if len(col) > 1 {
			br.groups = append(br.groups, Group{Name: groupName(e.st.Flows, col), Flows: flowNames(e.st.Flows, col),
				Correlation: corr[r], Reason: fmt.Sprintf("rate correlation %.4f ≥ %v", corr[r], e.cfg.CollinearCorrelation)})
		}
	}
	pw := make(map[int]float64, len(cols))
	for _, c := range cols {
		pw[c[0]] = power(c)
	}
	slices.SortStableFunc(cols, func(x, y []int) int { return cmp.Compare(pw[y[0]], pw[x[0]]) })
	return cols
}

// failingCollinear is the rate correlation from which a column that fails
// alone is grouped with the column it moves with.
const failingCollinear = 0.9

// partner returns the column of ind (other than c, not already joined) whose
// rates correlate best with column c's, if at least failingCollinear, and
// that correlation; -1 if none.
func (e *Estimator) partner(b *block, ind [][]int, c int, joined map[int]bool) (int, float64) {
	var flows []int
	for _, col := range ind {
		flows = append(flows, col...)
	}
	cov, _ := e.centredCov(b, flows, true)
	m := len(flows)
	// Column sums of the flows' covariance.
	pos := make([]int, len(ind)+1)
	for a, col := range ind {
		pos[a+1] = pos[a] + len(col)
	}
	sum := func(a, d int) float64 {
		v := 0.0
		for p := pos[a]; p < pos[a+1]; p++ {
			for q := pos[d]; q < pos[d+1]; q++ {
				v += cov[p*m+q]
			}
		}
		return v
	}
	best, bestR := -1, failingCollinear
	vc := sum(c, c)
	for d := range ind {
		if d == c || joined[d] || !(vc > 0) {
			continue
		}
		vd := sum(d, d)
		if !(vd > 0) {
			continue
		}
		if r := sum(c, d) / math.Sqrt(vc*vd); r >= bestR {
			best, bestR = d, r
		}
	}
	return best, bestR
}

func flowNames(flows []string, col []int) []string {
	names := make([]string, len(col))
	for j, i := range col {
		names[j] = flows[i]
	}
	slices.Sort(names)
	return names
}

// backgroundVIF is the variance inflation of a background column beside the
// given columns: B0/(B0 − bᵀC⁻¹b), 1 when the rates are orthogonal to a
// constant, large when a combination of them is nearly constant.
func (e *Estimator) backgroundVIF(b *block, cols [][]int) float64 {
	if !(b.b0 > 0) {
		return math.Inf(1)
	}
	var flows []int
	for _, c := range cols {
		flows = append(flows, c...)
	}
	k := len(e.st.Flows)
	m := len(cols)
	cg := make([]float64, m*m)
	bg := make([]float64, m)
	_, bxf := e.centredCov(b, flows, false)
	pos := 0
	for a, ca := range cols {
		for range ca {
			bg[a] += bxf[pos]
			pos++
		}
		for c, cb := range cols {
			for _, i := range ca {
				for _, j := range cb {
					cg[a*m+c] += e.st.C[i*k+j]
				}
			}
		}
	}
	// Standardize for the factorization, as solveColumns does.
	sc := make([]float64, m)
	ex := make([]bool, m)
	for a := 0; a < m; a++ {
		if d := cg[a*m+a]; d > 0 {
			sc[a] = 1 / math.Sqrt(d)
		} else {
			ex[a] = true
		}
	}
	for a := 0; a < m; a++ {
		bg[a] *= sc[a]
		for c := 0; c < m; c++ {
			cg[a*m+c] *= sc[a] * sc[c]
		}
	}
	l, _ := cholesky(cg, m, ex)
	x := cholSolve(l, m, ex, bg)
	explained := 0.0
	for a := range x {
		if !ex[a] {
			explained += bg[a] * x[a]
		}
	}
	left := b.b0 - explained
	if !(left > 0) {
		return math.Inf(1)
	}
	return b.b0 / left
}

// smooth applies equation 8: P ← 2^(−1/t)P + s(g)α̂, Q ← 2^(−1/t)Q + s(g). The
// decay was applied with the data's aging when the period was folded in. A
// combined flow's s(g) is scaled by its share of the combined column's rate: the
// combined estimate is a rate-weighted mean, and says little about a minor member.
func (e *Estimator) smooth(res *solveResult) {
	for i, r := range res.flows {
		if !r.solved || r.rejected {
			continue
		}
		w := SmoothingWeight(r.g) * r.weight
		if !(w > 0) || math.IsNaN(r.alpha) || math.IsInf(r.alpha, 0) {
			continue
		}
		sm := &e.st.Smooth[i]
		if r.changed && sm.Since > 0 && sm.Since <= r.regime {
			// Found changed at the last shift (possibly many periods after it):
			// its smoothed past belongs to the previous regime.
			eps := math.Exp2(-e.cfg.ShiftForget)
			sm.P *= eps
			sm.Q *= eps
			sm.Since = 0
		}
		if e.st.Period <= sm.Until && !r.combined && e.cfg.ShiftSigma > 0 {
			// Shortly after a shift of the block, or the flow's appearance:
			// forget the smoothed past if the estimate is incompatible with it.
			if se := r.alpha / r.g; sm.Q > 0 && math.Abs(r.alpha-sm.P/sm.Q) > e.cfg.ShiftSigma*se {
				eps := math.Exp2(-e.cfg.ShiftForget)
				sm.P *= eps
				sm.Q *= eps
				sm.Since = 0
			}
		}
		if sm.Since == 0 {
			sm.Since = e.st.Period
		}
		sm.P += w * r.alpha
		sm.Q += w
	}
}

// remember keeps what shift detection needs from this solve: each flow's
// coefficient, and per source its block's residual variance σ_y² (per
// unweighted equation: SSE·N_h/(Σv²·dof)) and background.
func (e *Estimator) remember(res *solveResult) {
	for i := range e.st.Smooth {
		e.st.Smooth[i].Raw, e.st.Smooth[i].RawOK = 0, false
		e.st.Smooth[i].Delta, e.st.Smooth[i].DeltaOK = 0, false
	}
	for _, br := range res.blocks {
		for _, s := range br.b.sources {
			e.st.Sources[s].Bg = 0
		}
		if !br.solved {
			continue
		}
		// σ_y² is renewed from a fit with as many spare equations as columns; a
		// younger fit keeps the previous one (noise does not change at a shift,
		// and an overfit σ would make everything look suspect). Until a first σ
		// is known, any fit with a spare equation gives one: a burst in the first
		// periods must already be recognised.
		if br.fit.dof >= 1 && br.fit.b0 > 0 {
			sigma2 := br.fit.sse * br.fit.nh / (br.fit.b0 * br.fit.dof)
			for _, s := range br.b.sources {
				if src := &e.st.Sources[s]; br.fit.dof >= float64(br.fit.columns) || src.Sigma2 == 0 {
					src.Sigma2 = sigma2
				}
				e.st.Sources[s].Leverage = float64(br.fit.columns) / br.fit.nh
			}
		}
		for c, s := range br.bgSource {
			if s >= 0 {
				e.st.Sources[s].Bg = br.bgAlpha[c]
				continue
			}
			for j, t := range br.b.sources {
				e.st.Sources[t].Bg = br.bgAlpha[c]
				if br.bgScale != nil {
					e.st.Sources[t].Bg *= br.bgScale[j]
				}
			}
		}
		for _, i := range br.b.flows {
			sm := &e.st.Smooth[i]
			sm.RawOK = true
			if r := res.flows[i]; r != nil && !r.rejected {
				sm.Raw = r.coef
			}
			sm.Delta, sm.DeltaOK = br.delta[i]
		}
	}
}
