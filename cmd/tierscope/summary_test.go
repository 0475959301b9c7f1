package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/otlpjsonl"
	"github.com/tierscope/tierscope/internal/stitcheval"
)

// The summary scores inferred parents against the truth the spans carry, as
// the evaluation harness does: a generated application with its hops broken,
// stitched by the CLI, gives the harness's counts of lost links, parents
// written and parents right.
func TestSummaryScoresAgainstTruth(t *testing.T) {
	p := stitcheval.DefaultParams()
	p.Requests, p.Concurrency = 60, 2
	td, err := stitcheval.SyntheticScenario("summary", "summary", 2, p, stitcheval.StripCrossProcess).Build(1)
	if err != nil {
		t.Fatal(err)
	}
	stitcheval.Strip(td, stitcheval.StripCrossProcess)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	if err := otlpjsonl.WriteFile(in, td); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := runStitch([]string{"--in", in, "--out", out}, nil, &stdout, &stderr); err != nil {
		t.Fatalf("stitch: %v: %s", err, stderr.String())
	}
	stdout.Reset()
	if err := runSummary([]string{"--in", out, "--top", "1"}, nil, &stdout, &stderr); err != nil {
		t.Fatalf("summary: %v: %s", err, stderr.String())
	}
	g, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	batches, err := otlpjsonl.ReadBatches(g, out)
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := stitcheval.Score(batches...)
	want := fmt.Sprintf("%d links lost their context, %d given their true parent back", s.Links, s.Correct)
	wantWritten := fmt.Sprintf("%d parents written, %d right", s.Written, s.Correct)
	if s.Links == 0 || !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), wantWritten) {
		t.Errorf("summary:\n%s\nwant %q and %q", stdout.String(), want, wantWritten)
	}
}
