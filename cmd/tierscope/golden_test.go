package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/golden"
)

// goldenStep is one command line of the golden session. $D in an argument is
// the session's scratch directory; files lists outputs written there whose
// contents (or, for large ones, digests) join the golden record.
type goldenStep struct {
	args    []string
	stdin   string
	files   []string
	digests []string
}

// The CLI's whole output over the repository's testdata, byte for byte: a
// refactor that changes any number, order or format shows up here as a diff.
// Regenerate (only when a change is meant) with
// `go test ./cmd/tierscope -run TestGoldenCLI -update`.
func TestGoldenCLI(t *testing.T) {
	steps := []goldenStep{
		{args: []string{"maketrace", "--config", "../../testdata/children-0-2.yaml", "--seed", "7", "--duration", "60s", "--out", "$D/trace.tsv"},
			digests: []string{"trace.tsv"}},
		{args: []string{"paths", "--in", "$D/trace.tsv", "--truth", "--top", "2"}},
		{args: []string{"paths", "--in", "$D/trace.tsv", "--format", "text", "--sort", "latency", "--top", "3"}},
		{args: []string{"paths", "--in", "$D/trace.tsv", "--format", "dot", "--top", "2"}},
		{args: []string{"paths", "--in", "-", "--format", "text"}, stdin: figure3},
		{args: []string{"maketrace", "--config", "../../testdata/relay-email.yaml", "--seed", "1", "--out", "$D/relay.tsv"},
			digests: []string{"relay.tsv"}},
		{args: []string{"paths", "--algorithm", "convolution", "--quantum", "30s", "--in", "$D/relay.tsv", "--format", "text", "--sort", "latency", "--top", "2", "--truth"}},
		{args: []string{"convert", "--from", "nezha", "--in", "../../testdata/nezha/excerpt.csv", "--strip", "cross-service", "--out", "$D/spans.jsonl"},
			digests: []string{"spans.jsonl"}},
		{args: []string{"stitch", "--in", "$D/spans.jsonl", "--out", "$D/stitched.jsonl", "--report", "$D/report.json"},
			files: []string{"report.json"}, digests: []string{"stitched.jsonl"}},
		{args: []string{"summary", "--in", "$D/stitched.jsonl", "--top", "3"}},
		{args: []string{"workfactor", "--in", wfProcessCSV}},
		{args: []string{"signature", "--in", sigV1, "--out", "$D/v1.json", "--max-utilization", "0.8"}, files: []string{"v1.json"}},
		{args: []string{"signature", "--in", sigV2, "--out", "$D/v2.json", "--max-utilization", "0.8"}},
		{args: []string{"signature", "compare", "--base", "$D/v1.json", "--candidate", "$D/v2.json"}},
		{args: append([]string{"gradient", "train", "--in", gradientData + "/baseline.csv", "--out", "$D/plan.json"}, exampleTrain...),
			files: []string{"plan.json"}},
		{args: []string{"gradient", "measure", "--in", gradientData + "/perturbed.csv", "--plan", "$D/plan.json",
			"--injection", gradientData + "/injection.json", "--out", "$D/gradient.json"}, files: []string{"gradient.json"}},
		{args: []string{"predict", "--gradients", "$D/gradient.json", "--baseline-ms", "Sync=101,Serial3=303,Async=10", "--change", "front->back=+20ms"}},
		{args: []string{"predict", "--format", "json", "--gradients", "$D/gradient.json", "--baseline-ms", "Sync=101,Async=10", "--change", "front->back=+20ms"}},
	}
	dir := t.TempDir()
	var rec strings.Builder
	for _, s := range steps {
		args := make([]string, len(s.args))
		for i, a := range s.args {
			args[i] = strings.ReplaceAll(a, "$D", dir)
		}
		code, stdout, stderr := runCLI(t, s.stdin, args...)
		fmt.Fprintf(&rec, "$ tierscope %s\nexit %d\n%s", strings.Join(s.args, " "), code, stdout)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", strings.Join(s.args, " "), code, stderr)
		}
		for _, f := range s.files {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rec, "--- $D/%s\n%s", f, data)
		}
		for _, f := range s.digests {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rec, "--- sha256($D/%s) = %x (%d bytes)\n", f, sha256.Sum256(data), len(data))
		}
	}
	golden.Compare(t, filepath.Join("testdata", "golden", "cli.txt"), strings.ReplaceAll(rec.String(), dir, "$D"))
}
