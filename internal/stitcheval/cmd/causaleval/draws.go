package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tierscope/tierscope/internal/stitch"
	se "github.com/tierscope/tierscope/internal/stitcheval"
)

// evaluateDraws runs cfg.draws random draws of every knob at once
// (se.RandomParams), each with every id stripped and with the hops broken,
// and writes them worst precision first to OUT/NAME-draws.md: where the knobs
// interact badly, the table's top says which.
func evaluateDraws(cfg config, stderr io.Writer) error {
	began := time.Now()
	var scs []se.Scenario
	var draws []se.Draw
	for i := range cfg.draws {
		d := se.RandomParams(i)
		for _, s := range strips() {
			scs = append(scs, se.SyntheticScenario(fmt.Sprintf("draw %d/%s", i, s.mode), s.series, d.Concurrency, d.Params, s.mode))
			draws = append(draws, d)
		}
	}
	algos := []se.Algorithm{{Name: "stitch", Stitch: se.Stitcher(stitch.DefaultOptions())}}
	runs, err := se.Sweep(scs, algos, se.SweepOptions{Seeds: []uint64{1}, Workers: cfg.workers, Progress: func(done, total int, rs []se.Run) {
		if len(rs) > 0 {
			fmt.Fprintf(stderr, "causaleval: [%d/%d] %s: %.3f right, %.4f precise (%.0fs)\n", done, total, rs[0].Scenario, rs[0].Scores.Accuracy, rs[0].Scores.Precision, time.Since(began).Seconds())
		}
	}})
	if err != nil {
		return err
	}
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(runs[a].Scores.Precision, runs[b].Scores.Precision) })
	var below int
	var b strings.Builder
	fmt.Fprintf(&b, "# Random draws of every knob at once\n\n")
	fmt.Fprintf(&b, "`go run ./internal/stitcheval/cmd/causaleval -draws %d` (stitcheval.RandomParams, seed 1 each), worst precision first.\n\n", cfg.draws)
	fmt.Fprintf(&b, "| run | precision | right | links | strip | draw |\n|---|---|---|---|---|---|\n")
	for _, i := range order {
		r := runs[i]
		if r.Scores.Precision < 0.98 {
			below++
		}
		fmt.Fprintf(&b, "| %s | %.1f%% | %.1f%% | %d | %s | %s |\n", r.Scenario, 100*r.Scores.Precision, 100*r.Scores.Accuracy, r.Scores.Links, scs[i].Strip, draws[i])
	}
	fmt.Fprintf(&b, "\n%d of %d runs below 98%% precision; %d runs in %.0f s.\n", below, len(runs), len(runs), time.Since(began).Seconds())
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(cfg.out, cfg.name+"-draws.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "causaleval: %d of %d runs below 98%% precision; wrote %s\n", below, len(runs), path)
	return nil
}
