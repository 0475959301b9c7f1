package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/otlpjsonl"
	"github.com/tierscope/tierscope/internal/stitcheval"
)

// The summary scores inferred parents against the truth the spans carry: a
// generated application with its cross-process hops broken, stitched by the
// CLI, reports every broken hop as a lost link, and most of them given back.
func TestSummaryScoresAgainstTruth(t *testing.T) {
	p := stitcheval.DefaultParams()
	p.Requests, p.Concurrency = 60, 2
	td, err := stitcheval.SyntheticScenario("summary", "summary", 2, p, stitcheval.StripCrossProcess).Build(1)
	if err != nil {
		t.Fatal(err)
	}
	broken := stitcheval.Strip(td, stitcheval.StripCrossProcess)
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
	var links, back, written, right int
	var pct, prec float64
	line := stdout.String()
	i := strings.Index(line, "): ")
	if i < 0 {
		t.Fatalf("no truth line:\n%s", line)
	}
	if _, err := fmt.Sscanf(line[i+3:], "%d links lost their context, %d given their true parent back (%f%%); %d parents written, %d right (precision %f%%)",
		&links, &back, &pct, &written, &right, &prec); err != nil {
		t.Fatalf("truth line: %v\n%s", err, line)
	}
	t.Logf("broken %d; summary: %d lost, %d back, %d written, %d right", broken, links, back, written, right)
	if links != broken || back != right || written < right || back < broken*8/10 || prec < 90 {
		t.Errorf("broken %d; summary: %d lost, %d back (%.1f%%), %d written, %d right (%.1f%%): want every broken hop counted and ≥ 80%% given back at ≥ 90%% precision",
			broken, links, back, pct, written, right, prec)
	}
}
