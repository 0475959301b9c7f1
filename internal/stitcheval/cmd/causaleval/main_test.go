package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/otlpjsonl"
	se "github.com/tierscope/tierscope/internal/stitcheval"
)

// A smoke run writes every file, and a second run draws the first as its
// baseline.
func TestQuickRun(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-quick", "-seeds", "1", "-out", dir, "-data", "../../../../testdata/nezha"}
	var stderr bytes.Buffer
	if code := run(append(args, "-name", "first"), &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, f := range []string{"first.json", "first.md", "first/concurrency.png", "first/reliability.png", "first/precision-coverage.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(stderr.String(), "[1/") {
		t.Errorf("no progress on stderr: %s", stderr.String())
	}
	stderr.Reset()
	if code := run(append(args, "-name", "second", "-baseline", filepath.Join(dir, "first.json")), &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "second.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| accuracy in first | Δ accuracy |") || !strings.Contains(string(md), "| +0.0 |") {
		t.Errorf("the table does not compare with the baseline:\n%s", md)
	}
	if code := run([]string{"-seeds", "0"}, &stderr); code != 2 {
		t.Errorf("-seeds 0: exit %d, want 2", code)
	}
}

// -spans scores a recording: a generated application with full context,
// written as OTLP/JSON lines, comes out as a table with both strip modes and
// an accuracy no stripped trace could reach without stitching.
func TestScoreRecording(t *testing.T) {
	p := se.DefaultParams()
	p.Requests, p.Concurrency = 40, 1
	td, err := se.SyntheticScenario("rec", "rec", 1, p, se.StripAll).Build(1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "spans.jsonl")
	if err := otlpjsonl.WriteFile(path, td); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := scoreRecording(path, &out); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(rows) != 4 || !strings.HasPrefix(rows[2], "| all |") || !strings.HasPrefix(rows[3], "| cross-process |") {
		t.Fatalf("want a header and two rows:\n%s", out.String())
	}
	var links int
	var acc float64
	if _, err := fmt.Sscanf(rows[2], "| all | %d | %f%%", &links, &acc); err != nil || links < 100 || acc < 80 {
		t.Errorf("all: %d links, %.1f%% right (%v); want ≥ 100 links and ≥ 80%%:\n%s", links, acc, err, out.String())
	}
	var stderr bytes.Buffer
	if code := run([]string{"-spans", filepath.Join(t.TempDir(), "missing.jsonl")}, &stderr); code != 1 || !strings.Contains(stderr.String(), "missing.jsonl") {
		t.Errorf("a missing recording: exit %d, %q", code, stderr.String())
	}
}
