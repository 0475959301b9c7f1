package workfactor

import (
	"cmp"
	"math"
	"slices"
)

// Estimate is the result of one period: the document of docs/formats.md §5 (one
// object per flow, the model's r2 and mse), with the blocks, the background
// estimates and the counters added. Numbers that are undefined are null, never
// NaN.
type Estimate struct {
	Period int64  `json:"period"`
	Mode   string `json:"mode"`   // "machine" or "process"
	Method string `json:"method"` // "plain", "ridge" or "nnls"
	// R2 and MSE are the model's: the single block's, or pooled over blocks
	// (R² = 1 − ΣSSE/ΣSST, MSE = ΣSSE/Σdof). MSE is in (weighted) standard MHz².
	R2    *float64       `json:"r2"`
	MSE   *float64       `json:"mse"`
	Flows []FlowEstimate `json:"flows"`
	// Blocks are the independent regression problems solved this period.
	Blocks []BlockFit `json:"blocks,omitempty"`
	// Background holds the background column estimates (§4.8), when enabled
	// (with BackgroundAuto, in the blocks whose data identify it).
	Background []BackgroundEstimate `json:"background,omitempty"`
	// Groups are the collinear groups solved as one column, with their reason.
	Groups []Group `json:"groups,omitempty"`
	// HalfLife is the memory in periods (Config.MaxHalfLife): the single
	// block's, or the shortest over blocks.
	HalfLife float64  `json:"half_life,omitempty"`
	Counters Counters `json:"counters"`
}

// FlowEstimate is one flow's work factor.
type FlowEstimate struct {
	Flow string `json:"flow"`
	// WorkFactor is the estimate to use, in standard megacycles per request: the
	// smoothed α̃ (equation 8). Null until the flow has had a usable solve.
	WorkFactor *float64 `json:"work_factor"`
	// Goodness is g_k of this period's solve (of the combined column for a
	// combined flow). Null when the flow was not solved this period.
	Goodness *float64 `json:"goodness"`
	// Combined is true when the flow was solved as part of the combined flow of
	// §4.3 this period; its raw α is then the combined column's.
	Combined bool `json:"combined"`
	// AlphaRaw is this period's α̂; null when the flow was not solved.
	AlphaRaw *float64 `json:"alpha_raw"`
	// AlphaSmoothed is α̃, the same as WorkFactor.
	AlphaSmoothed *float64 `json:"alpha_smoothed"`
	// Rejected is true when the flow was dropped as insignificant (δ, §4.1).
	Rejected bool `json:"rejected,omitempty"`
	// Block is the index into Blocks of the flow's regression problem, -1 when
	// the flow was not part of this period's solve.
	Block int `json:"block"`
	// Group names the collinear group the flow was solved in (its members'
	// rates cannot be told apart, so they share one work factor); "" when alone.
	Group string `json:"group,omitempty"`
	// Changed is true when the flow's work factor changed at its block's last
	// detected shift (with ChangeAveraging, at a posterior probability of at
	// least ½); a flow that did not is estimated from the equations of both
	// the current and the previous regime.
	Changed bool `json:"changed,omitempty"`
	// Share is X̄_k/‖X̄‖ in the block: the flow's share of its block's (aged,
	// discounted) request rate.
	Share float64 `json:"share"`
}

// Group is a set of flows whose rates the data cannot tell apart: they share
// one work factor, and only their summed power λ·α is identified.
type Group struct {
	Name  string   `json:"name"`
	Flows []string `json:"flows"`
	Block int      `json:"block"`
	// Correlation is the highest aged, centred rate correlation that joined
	// a member; Reason says why in words.
	Correlation float64 `json:"correlation"`
	Reason      string  `json:"reason"`
}

// BlockFit describes one regression problem.
type BlockFit struct {
	Flows   []string `json:"flows"`
	Sources int      `json:"sources"`
	// HalfLife is the block's memory at this period, in periods: it grows from
	// Config.HalfLife since the last detected change, up to MaxHalfLife.
	HalfLife float64 `json:"half_life"`
	// NH is N_h, the aged number of equations; Columns the columns solved; DOF
	// is N_h − Columns − 1.
	NH      float64  `json:"n_h"`
	Columns int      `json:"columns"`
	DOF     float64  `json:"dof"`
	R2      *float64 `json:"r2"`
	MSE     *float64 `json:"mse"`
	Solved  bool     `json:"solved"`
}

// BackgroundEstimate is the background power of §4.8, in standard MHz.
type BackgroundEstimate struct {
	// Source is the machine (or machine/process) of a per-source column; empty
	// for a block's shared column.
	Source   string   `json:"source,omitempty"`
	Block    int      `json:"block"`
	MHz      *float64 `json:"mhz"`
	Goodness *float64 `json:"goodness"`
	// ShareOfCapacity is set when the shared column was fitted as the same
	// share of every machine's capacity (the data fitted it better than the
	// same MHz on each): that share. MHz is then a machine of the block's
	// mean capacity.
	ShareOfCapacity *float64 `json:"share_of_capacity,omitempty"`
}

// Flow returns the estimate of one flow.
func (e *Estimate) Flow(name string) (FlowEstimate, bool) {
	i, ok := slices.BinarySearchFunc(e.Flows, name, func(f FlowEstimate, n string) int { return cmp.Compare(f.Flow, n) })
	if !ok {
		return FlowEstimate{}, false
	}
	return e.Flows[i], true
}

// WorkFactorOf returns the smoothed work factor of a flow, and whether it has one.
func (e *Estimate) WorkFactorOf(name string) (float64, bool) {
	f, ok := e.Flow(name)
	if !ok || f.WorkFactor == nil {
		return 0, false
	}
	return *f.WorkFactor, true
}

func num(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

func (e *Estimator) report(res *solveResult) *Estimate {
	est := &Estimate{Period: e.st.Period, Mode: "machine", Method: e.cfg.Method.String(), Counters: e.st.Count}
	if e.cfg.PerProcess {
		est.Mode = "process"
	}
	for i, f := range e.st.Flows {
		fe := FlowEstimate{Flow: f, Block: -1}
		if sm := e.st.Smooth[i]; sm.Q > 0 {
			fe.WorkFactor = num(sm.P / sm.Q)
			fe.AlphaSmoothed = num(sm.P / sm.Q)
		}
		if res != nil {
			if r := res.flows[i]; r != nil {
				fe.Block = r.block
				fe.Share = r.share
				fe.Rejected = r.rejected
				fe.Combined = r.combined
				fe.Group = r.group
				if r.solved && !r.rejected {
					fe.AlphaRaw = num(r.alpha)
					fe.Goodness = num(r.g)
				}
			}
		}
		est.Flows = append(est.Flows, fe)
	}
	slices.SortFunc(est.Flows, func(a, b FlowEstimate) int { return cmp.Compare(a.Flow, b.Flow) })
	if res == nil {
		return est
	}
	var sse, sst, dof float64
	solved := 0
	for bi, br := range res.blocks {
		bf := BlockFit{Flows: br.flows, Sources: len(br.b.sources), HalfLife: e.halfLife(br.b.start, e.st.Period),
			NH: br.b.nh, Columns: br.fit.columns, DOF: br.fit.dof, Solved: br.solved}
		if est.HalfLife == 0 || bf.HalfLife < est.HalfLife {
			est.HalfLife = bf.HalfLife
		}
		for _, i := range br.changed {
			for j := range est.Flows {
				if est.Flows[j].Flow == e.st.Flows[i] {
					est.Flows[j].Changed = true
				}
			}
		}
		for _, g := range br.groups {
			g.Block = bi
			est.Groups = append(est.Groups, g)
		}
		if br.solved {
			if br.fit.r2OK {
				bf.R2 = num(br.fit.r2)
			}
			if br.fit.mseOK {
				bf.MSE = num(br.fit.mse)
			}
			solved++
			sse += br.fit.sse
			if br.fit.r2OK {
				sst += br.fit.sst
			}
			if br.fit.mseOK {
				dof += br.fit.dof
			}
		}
		est.Blocks = append(est.Blocks, bf)
		for c := range br.bgAlpha {
			be := BackgroundEstimate{Block: bi}
			if s := br.bgSource[c]; s >= 0 {
				be.Source = e.st.Sources[s].Key
			}
			if br.bgOK[c] {
				be.MHz = num(br.bgAlpha[c])
				be.Goodness = num(br.bgG[c])
				if br.bgScale != nil && br.bgMeanCapacity > 0 {
					be.ShareOfCapacity = num(br.bgAlpha[c] / br.bgMeanCapacity)
				}
			}
			est.Background = append(est.Background, be)
		}
	}
	switch {
	case solved == 1:
		for _, b := range est.Blocks {
			if b.Solved {
				est.R2, est.MSE = b.R2, b.MSE
			}
		}
	case solved > 1:
		if sst > 0 {
			est.R2 = num(1 - sse/sst)
		}
		if dof > 0 {
			est.MSE = num(sse / dof)
		}
	}
	return est
}
