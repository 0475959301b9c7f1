package stitcheval

import (
	"testing"

	"github.com/tierscope/tierscope/internal/stitch"
)

// stitchScores stitches scenario sc with the default options, once per seed,
// and pools the scores.
func stitchScores(t *testing.T, sc Scenario, seeds ...uint64) Scores {
	t.Helper()
	runs, err := Sweep([]Scenario{sc}, []Algorithm{{"stitch", Stitcher(stitch.DefaultOptions())}}, SweepOptions{Seeds: seeds, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	all := make([]Scores, len(runs))
	for i, r := range runs {
		all[i] = r.Scores
	}
	return Merge(all...)
}
