package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/api"
)

// The acceptance test, end to end: a message trace whose per-hop delays
// are 0.1–1 ms (testdata/multitier-subms.yaml, with call ids) has none of its top
// 10 patterns missing under `paths --truth`; with the paper's bins from 1 ms
// (--bins 340 --bins-below 0) some are. The same trace out of time order, and on
// standard input, gives the same report.
func TestPathsSubMillisecondHops(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "subms.tsv")
	if code, _, errs := runCLI(t, "", "maketrace", "--config", "../../testdata/multitier-subms.yaml", "--seed", "1", "--out", trace); code != 0 {
		t.Fatalf("maketrace exit %d: %s", code, errs)
	}
	paths := func(stdin string, args ...string) (string, *api.PathsReport) {
		t.Helper()
		code, out, errs := runCLI(t, stdin, append([]string{"paths", "--truth"}, args...)...)
		if code != 0 {
			t.Fatalf("paths %v: exit %d: %s", args, code, errs)
		}
		var r api.PathsReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return out, &r
	}
	out, r := paths("", "--in", trace)
	t.Logf("default bins: top-N false negatives %v, false-negative instances %.2f%%, %d false-positive patterns",
		r.Truth.TopNFalseNegatives, 100*r.Truth.FalseNegativeInstanceRate, r.Truth.FalsePositivePatterns)
	if fn := r.Truth.TopNFalseNegatives[9]; fn != 0 || r.Truth.FalseNegativeInstanceRate > 0.01 {
		t.Errorf("top-10 false negatives %d, false-negative instances %.2f%%; want 0 and ≤ 1%%", fn, 100*r.Truth.FalseNegativeInstanceRate)
	}
	_, paper := paths("", "--in", trace, "--bins", "340", "--bins-below", "0")
	t.Logf("paper's bins: top-N false negatives %v, false-negative instances %.2f%%", paper.Truth.TopNFalseNegatives, 100*paper.Truth.FalseNegativeInstanceRate)
	if paper.Truth.TopNFalseNegatives[9] == 0 {
		t.Errorf("with every delay under 1 ms in one bin, no top-10 pattern went missing; the trace no longer shows the collapse")
	}

	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if stdinOut, _ := paths(string(data), "--in", "-"); stdinOut != out {
		t.Error("the trace on standard input gave another report")
	}
	lines := strings.SplitAfter(string(data), "\n")
	for i, j := 1, len(lines)-2; i < j; i, j = i+1, j-1 { // keep the header, reverse the rest
		lines[i], lines[j] = lines[j], lines[i]
	}
	reversed := filepath.Join(dir, "reversed.tsv")
	if err := os.WriteFile(reversed, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if revOut, _ := paths("", "--in", reversed); revOut != out {
		t.Error("the trace out of time order gave another report")
	}
}
