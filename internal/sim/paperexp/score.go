package paperexp

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/tierscope/tierscope/internal/workfactor"
)

// Replay feeds a run to a new estimator, one period at a time, and returns the
// estimate of every period. perProcess selects the per-process readings (and
// sets cfg.PerProcess).
func Replay(run *Run, cfg workfactor.Config, perProcess bool) ([]*workfactor.Estimate, error) {
	cfg.PerProcess = perProcess
	e, err := workfactor.New(cfg)
	if err != nil {
		return nil, err
	}
	out := make([]*workfactor.Estimate, 0, len(run.Periods))
	for _, p := range run.Periods {
		obs := p.Machines
		if perProcess {
			obs = p.Processes
		}
		est, err := e.AddPeriod(p.Index, obs)
		if err != nil {
			return nil, err
		}
		out = append(out, est)
	}
	return out, nil
}

// Row is one (phase, stage) row of a Table-5-shaped table.
type Row struct {
	Phase int
	Tail  bool
	// MaxErrMHz is the maximum over the stage's periods of the power error
	// λ_k,i·|α̃_k,i − α_k,i| (§5.3), in standard MHz, α̃_k,i being "the alpha
	// estimate produced from that period". A period in which a flow has no
	// estimate yet has no error; it is counted in Missing.
	MaxErrMHz map[string]float64
	Missing   map[string]int
	// MaxRelErr is the maximum of |α̃ − α|/α: the power error relative to the true
	// power λα.
	MaxRelErr map[string]float64
	// MeanPowerMHz is the mean model power λα of each flow over the stage.
	MeanPowerMHz map[string]float64
	// TotalPowerMHz is the sum of MeanPowerMHz.
	TotalPowerMHz float64
}

// Share is a flow's share of the stage's total power.
func (r Row) Share(flow string) float64 {
	if r.TotalPowerMHz == 0 {
		return 0
	}
	return r.MeanPowerMHz[flow] / r.TotalPowerMHz
}

// Table is the scored replay.
type Table struct {
	Flows []string
	Rows  []Row
}

// Score computes the table from a run and its estimates.
func Score(run *Run, ests []*workfactor.Estimate) (*Table, error) {
	if len(ests) != len(run.Periods) {
		return nil, fmt.Errorf("paperexp: %d estimates for %d periods", len(ests), len(run.Periods))
	}
	t := &Table{Flows: run.Flows}
	idx := map[[2]int]int{}
	n := map[int]int{}
	for i, p := range run.Periods {
		if ests[i] == nil {
			return nil, fmt.Errorf("paperexp: no estimate for period %d", p.Index)
		}
		if p.Phase == 0 {
			continue
		}
		key := [2]int{p.Phase, b2i(p.Tail)}
		ri, ok := idx[key]
		if !ok {
			ri = len(t.Rows)
			idx[key] = ri
			t.Rows = append(t.Rows, Row{Phase: p.Phase, Tail: p.Tail, MaxErrMHz: map[string]float64{},
				MaxRelErr: map[string]float64{}, MeanPowerMHz: map[string]float64{}, Missing: map[string]int{}})
		}
		r := &t.Rows[ri]
		n[ri]++
		for _, f := range run.Flows {
			a := p.TrueAlpha[f]
			lam := p.Rate[f]
			r.MeanPowerMHz[f] += lam * a
			est, ok := ests[i].WorkFactorOf(f)
			if !ok {
				r.Missing[f]++
				continue
			}
			err := lam * math.Abs(est-a)
			r.MaxErrMHz[f] = max(r.MaxErrMHz[f], err)
			r.MaxRelErr[f] = max(r.MaxRelErr[f], math.Abs(est-a)/a)
		}
	}
	for ri := range t.Rows {
		r := &t.Rows[ri]
		for _, f := range run.Flows {
			r.MeanPowerMHz[f] /= float64(n[ri])
			r.TotalPowerMHz += r.MeanPowerMHz[f]
		}
	}
	return t, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// PaperTable5 is Table 5 of the paper: the maximum power error (standard MHz)
// per flow, for phases 1–5, transient then tail, flows A B E F G H I J K L M N O P.
var PaperTable5 = struct {
	Flows []string
	Rows  [][]float64
}{
	Flows: strings.Fields("A B E F G H I J K L M N O P"),
	Rows: [][]float64{
		{121.55, 87.07, 3.90, 17.87, 2.12, 1.36, 4.30, 1.03, 5.28, 0.12, 0.63, 0.19, 0.22, 0.35},
		{56.16, 35.37, 4.02, 25.53, 2.12, 1.49, 4.98, 1.15, 5.91, 0.09, 0.63, 0.38, 0.22, 0.35},
		{87.16, 242.37, 29.45, 28.79, 2.15, 12.66, 0.54, 0.96, 1.46, 0.64, 0.14, 0.38, 0.07, 0.17},
		{68.09, 60.36, 57.82, 17.79, 2.40, 16.21, 0.61, 0.98, 1.91, 0.85, 0.28, 0.38, 0.09, 0.22},
		{1147.25, 155.75, 62.41, 33.72, 4.27, 1.48, 2.65, 0.66, 2.30, 0.28, 0.17, 1.06, 0.09, 0.29},
		{291.98, 37.70, 28.31, 42.36, 4.39, 1.60, 3.28, 0.76, 2.58, 0.35, 0.28, 1.05, 0.12, 0.29},
		{747.09, 199.96, 7.23, 28.03, 13.61, 13.51, 0.65, 1.09, 0.68, 0.21, 0.09, 0.38, 0.84, 0.28},
		{271.39, 114.13, 7.30, 35.20, 13.72, 15.19, 0.76, 1.00, 0.94, 0.28, 0.09, 0.38, 0.85, 0.28},
		{1027.08, 28.51, 16.90, 30.75, 2.19, 1.80, 4.01, 3.12, 0.65, 0.17, 0.21, 0.63, 0.29, 0.12},
		{312.11, 68.48, 17.06, 37.25, 2.32, 1.83, 4.87, 3.13, 0.61, 0.22, 0.21, 0.84, 0.38, 0.12},
	},
}

// PaperCell returns Table 5's value for a flow, phase (1–5) and stage.
func PaperCell(flow string, phase int, tail bool) (float64, bool) {
	if phase < 1 || phase > 5 {
		return 0, false
	}
	for j, f := range PaperTable5.Flows {
		if f == flow {
			return PaperTable5.Rows[2*(phase-1)+b2i(tail)][j], true
		}
	}
	return 0, false
}

// Verdict compares a table with Table 5 and checks the accuracy target.
type Verdict struct {
	// Significant cells are flows drawing at least SignificantShare of the stage's
	// power; Beaten counts those whose error is below Table 5's.
	SignificantCells, Beaten int
	// AllCells and AllBeaten do the same over every flow.
	AllCells, AllBeaten int
	// Failures lists the significant cells not beaten.
	Failures []string
	// TailCells are tail cells of flows drawing at least HeavyShare; TailWithin
	// counts those within TailTolerance of the true power.
	TailCells, TailWithin int
	TailFailures          []string
}

// Thresholds of the verdict.
const (
	SignificantShare = 0.01
	HeavyShare       = 0.05
	TailTolerance    = 0.15
)

// Judge compares t (no-collinearity flows) with Table 5.
func Judge(t *Table) Verdict {
	var v Verdict
	for _, r := range t.Rows {
		for _, f := range t.Flows {
			paper, ok := PaperCell(f, r.Phase, r.Tail)
			if !ok {
				continue
			}
			got := r.MaxErrMHz[f]
			stage := "transient"
			if r.Tail {
				stage = "tail"
			}
			v.AllCells++
			if got < paper {
				v.AllBeaten++
			}
			if r.Share(f) >= SignificantShare {
				v.SignificantCells++
				if got < paper {
					v.Beaten++
				} else {
					v.Failures = append(v.Failures, fmt.Sprintf("phase %d %s %s: %.2f ≥ %.2f", r.Phase, stage, f, got, paper))
				}
			}
			if r.Tail && r.Share(f) >= HeavyShare {
				v.TailCells++
				if r.MaxRelErr[f] <= TailTolerance {
					v.TailWithin++
				} else {
					v.TailFailures = append(v.TailFailures, fmt.Sprintf("phase %d tail %s: %.1f%% of true power", r.Phase, f, 100*r.MaxRelErr[f]))
				}
			}
		}
	}
	return v
}

// WriteMarkdown writes the table in Table 5's shape, each cell followed by the
// paper's value when there is one; significant cells not beaten are marked.
func (t *Table) WriteMarkdown(w io.Writer, withPaper bool) {
	fmt.Fprintf(w, "| phase | stage |")
	for _, f := range t.Flows {
		fmt.Fprintf(w, " %s |", f)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---:|", len(t.Flows)))
	for _, r := range t.Rows {
		stage := "transient"
		if r.Tail {
			stage = "tail"
		}
		fmt.Fprintf(w, "| %d | %s |", r.Phase, stage)
		for _, f := range t.Flows {
			got := r.MaxErrMHz[f]
			cell := fmt.Sprintf("%.2f", got)
			if paper, ok := PaperCell(f, r.Phase, r.Tail); ok && withPaper {
				mark := ""
				if got >= paper && r.Share(f) >= SignificantShare {
					mark = " ✗"
				}
				cell = fmt.Sprintf("%.2f (%.2f)%s", got, paper, mark)
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
}

// WritePowers writes each stage's mean true power per flow and its share.
func (t *Table) WritePowers(w io.Writer) {
	fmt.Fprintf(w, "| phase | stage | total |")
	for _, f := range t.Flows {
		fmt.Fprintf(w, " %s |", f)
	}
	fmt.Fprintf(w, "\n|---|---|---:|%s\n", strings.Repeat("---:|", len(t.Flows)))
	for _, r := range t.Rows {
		stage := "transient"
		if r.Tail {
			stage = "tail"
		}
		fmt.Fprintf(w, "| %d | %s | %.0f |", r.Phase, stage, r.TotalPowerMHz)
		for _, f := range t.Flows {
			fmt.Fprintf(w, " %.1f (%.1f%%) |", r.MeanPowerMHz[f], 100*r.Share(f))
		}
		fmt.Fprintln(w)
	}
}
