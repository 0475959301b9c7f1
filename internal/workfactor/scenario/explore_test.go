package scenario

import (
	"fmt"
	"testing"

	"github.com/tierscope/tierscope/internal/workfactor"
)

func TestExplore(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		for _, rel := range []float64{0, 0.75} {
			c := Default()
			c.Seed = seed
			c.ReleaseAt, c.ReleaseFlows = rel, 3
			run, err := Generate(c)
			if err != nil {
				t.Fatal(err)
			}
			ests, err := Replay(run, workfactor.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			last := ests[len(ests)-1]
			from := int64(1)
			if run.Release > 0 {
				from = run.Release
			}
			errs := ScoreAt(run, last, from, int64(len(run.Periods)))
			s := ""
			for _, e := range errs {
				s += fmt.Sprintf(" %v:%.0f%%/%.0f%%", e.Flows, 100*e.Share, 100*e.RelErr)
			}
			var bg string
			for _, b := range last.Background {
				if b.MHz != nil {
					bg += fmt.Sprintf(" bg=%.0f", *b.MHz)
				}
			}
			t.Logf("seed %d rel %.2f worst %.0f%% r2 %.2f shifts %d%s |%s", seed, rel, 100*Worst(errs), deref(last.R2), last.Counters.Shifts, bg, s)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}
