//go:build long

package paperexp

// The full experiments of docs/workfactor-report.md: every seed, every variant.
// About a minute: go test -tags long -run Long -v ./internal/sim/paperexp/
// (scripts/bench-workfactor.sh writes the same tables to a file).

import (
	"bytes"
	"testing"

	"github.com/tierscope/tierscope/internal/workfactor"
)

// Per-process CPU meets the targets on every seed; machine CPU always beats the
// paper's algorithm on its own readings.
func TestLongSeeds(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		c := DefaultConfig()
		c.Seed = seed
		run, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		proc := evaluate(t, run, workfactor.DefaultConfig(), true).Verdict
		mach := evaluate(t, run, workfactor.DefaultConfig(), false).Verdict
		paper := evaluate(t, run, workfactor.PaperConfig(), false).Verdict
		t.Logf("seed %d: per-process %d/%d tails %d/%d; machine %d/%d tails %d/%d; machine, paper's algorithm %d/%d",
			seed, proc.Beaten, proc.SignificantCells, proc.TailWithin, proc.TailCells, mach.Beaten, mach.SignificantCells,
			mach.TailWithin, mach.TailCells, paper.Beaten, paper.SignificantCells)
		if proc.Beaten < 32 || proc.TailWithin < 8 {
			t.Errorf("seed %d, per-process: %d significant cells beaten (want ≥ 32), %d tails within 15%% (want ≥ 8)", seed, proc.Beaten, proc.TailWithin)
		}
		if mach.Beaten <= paper.Beaten {
			t.Errorf("seed %d, machine: %d cells beaten, the paper's algorithm %d", seed, mach.Beaten, paper.Beaten)
		}
	}
}

func TestLongReport(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReport(&b); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}
