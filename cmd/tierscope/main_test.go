package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/api"
)

// runCLI runs one command line in-process and returns its exit code and streams.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const figure3 = "# figure 3 of paper 001\n" +
	"1.000\tCALL_SENT\tA\tB\tx1\tp1\n" +
	"1.003\tCALL_SENT\tB\tC\tx2\tp1\n" +
	"1.005\tRET_SENT\tC\tB\tx2\tp1\n" +
	"1.007\tCALL_SENT\tB\tD\tx3\tp1\n" +
	"1.009\tRET_SENT\tD\tB\tx3\tp1\n" +
	"1.011\tRET_SENT\tB\tA\tx1\tp1\n"

func TestPathsJSONContract(t *testing.T) {
	in := writeFile(t, "trace.tsv", figure3)
	code, out, errs := runCLI(t, "", "paths", "--algorithm", "nesting", "--in", in, "--truth")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"algorithm", "messages", "call_pairs", "discarded_messages", "patterns", "truth"} {
		if _, ok := raw[field]; !ok {
			t.Errorf("missing field %q", field)
		}
	}
	var r api.PathsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Algorithm != "nesting" || r.Messages != 6 || r.CallPairs != 3 || r.DiscardedMessages != 0 {
		t.Fatalf("header %+v", r)
	}
	p := r.Patterns[0]
	if p.Signature != "A(B(C,D))" || p.Count != 1 || p.Root.Node != "A" || p.Root.LatencyMs != nil {
		t.Fatalf("pattern %+v", p)
	}
	b := p.Root.Children[0]
	if b.Node != "B" || b.LatencyMs == nil || b.LatencyMs.Mean < 10.99 || b.LatencyMs.Mean > 11.01 {
		t.Fatalf("node B %+v", b)
	}
	if d := b.Children[1]; d.Node != "D" || d.CallDelayMs.Mean < 6.99 || d.CallDelayMs.Mean > 7.01 || d.Children == nil {
		t.Fatalf("node D %+v (children must be [] not null)", d)
	}
	if len(r.Truth.TopNFalseNegatives) != 20 || r.Truth.FalsePositivePatterns != 0 || r.Truth.MessageAttributionError != 0 {
		t.Fatalf("truth %+v", r.Truth)
	}
}

func TestPathsFromStdinAndFormats(t *testing.T) {
	code, out, _ := runCLI(t, figure3, "paths", "--in", "-", "--format", "dot")
	if code != 0 || !strings.HasPrefix(out, "digraph paths {") || !strings.Contains(out, "subgraph cluster_0") || !strings.Contains(out, `label="1 × 11.00 ms`) {
		t.Fatalf("dot output (exit %d):\n%s", code, out)
	}
	code, out, _ = runCLI(t, figure3, "paths", "--in", "-", "--format", "text")
	if code != 0 || !strings.Contains(out, "#1  A(B(C,D))") {
		t.Fatalf("text output (exit %d):\n%s", code, out)
	}
}

func TestPathsWritesOutputFileOnlyOnSuccess(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "paths.json")
	in := writeFile(t, "trace.tsv", figure3)
	if code, _, errs := runCLI(t, "", "paths", "--in", in, "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 || st.Mode().Perm()&0o044 == 0 {
		t.Fatalf("output file: %v %v", st, err)
	}
	bad := writeFile(t, "bad.tsv", "1.0\tCALL_SENT\tA\n")
	failed := filepath.Join(dir, "failed.json")
	if code, _, _ := runCLI(t, "", "paths", "--in", bad, "--out", failed); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if _, err := os.Stat(failed); !os.IsNotExist(err) {
		t.Fatalf("a failed run left %s behind", failed)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

// The bad-input list: each gives one clear error line naming the file and
// line (exit 1), or is counted as discarded; never a panic.
func TestPathsBadInput(t *testing.T) {
	cases := []struct {
		name, content, wantErr string
	}{
		{"truncated.tsv", "1.0\tCALL_SENT\tA\tB\tx\n1.1\tRET_SENT\tB", "truncated.tsv:2:"},
		{"timestamp.tsv", "1.0\tCALL_SENT\tA\tB\tx\nabc\tRET_SENT\tB\tA\tx\n", "timestamp.tsv:2:"},
		{"op.tsv", "1.0\tCALL\tA\tB\tx\n", "op.tsv:1:"},
		{"empty.tsv", "", "empty.tsv: empty trace"},
		{"comments.tsv", "# only a comment\n\n", "comments.tsv: empty trace"},
	}
	for _, c := range cases {
		in := writeFile(t, c.name, c.content)
		code, out, errs := runCLI(t, "", "paths", "--in", in)
		if code != 1 || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want exit 1 and no output", c.name, code, out)
		}
		if !strings.Contains(errs, c.wantErr) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: error %q, want one line containing %q", c.name, errs, c.wantErr)
		}
	}
	// A return without a call, and a call without a return, are counted.
	in := writeFile(t, "orphans.tsv", "1.0\tRET_SENT\tB\tA\tx\n2.0\tCALL_SENT\tA\tB\ty\n3.0\tCALL_SENT\tA\tB\tz\n4.0\tRET_SENT\tB\tA\tz\n")
	code, out, errs := runCLI(t, "", "paths", "--in", in)
	if code != 0 {
		t.Fatalf("orphans: exit %d: %s", code, errs)
	}
	var r api.PathsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.DiscardedMessages != 2 || r.Discarded.ReturnWithoutCall != 1 || r.Discarded.CallWithoutReturn != 1 || r.CallPairs != 1 {
		t.Fatalf("orphans: %+v %+v", r, r.Discarded)
	}
}

func TestUsageErrors(t *testing.T) {
	in := writeFile(t, "trace.tsv", figure3)
	cases := [][]string{
		{},
		{"nosuchcommand"},
		{"paths"},
		{"paths", "--in", in, "--format", "xml"},
		{"paths", "--in", in, "--algorithm", "magic"},
		{"paths", "--in", in, "--top", "-1"},
		{"paths", "--in", in, "--bogus"},
		{"paths", "--in", in, "extra"},
		{"paths", "--in", in, "--penalty-overlap", "-1"},
		{"maketrace"},
		{"maketrace", "--config", "x.yaml", "--drop-rate", "1.5"},
	}
	for _, args := range cases {
		if code, _, errs := runCLI(t, "", args...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d (stderr %q), want 2 with a message", args, code, errs)
		}
	}
	if code, _, _ := runCLI(t, "", "paths", "--in", filepath.Join(t.TempDir(), "missing.tsv")); code != 1 {
		t.Errorf("missing input file: exit %d, want 1", code)
	}
	if code, _, _ := runCLI(t, "", "paths", "-h"); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
}

func TestPathsTruthNeedsPathColumn(t *testing.T) {
	in := writeFile(t, "nopath.tsv", "1.0\tCALL_SENT\tA\tB\tx\n2.0\tRET_SENT\tB\tA\tx\n")
	code, _, errs := runCLI(t, "", "paths", "--in", in, "--truth")
	if code != 1 || !strings.Contains(errs, "path column") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func TestMaketraceThenPaths(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.tsv")
	code, _, errs := runCLI(t, "", "maketrace", "--config", "../../testdata/children-0-2.yaml", "--seed", "7", "--duration", "60s", "--out", trace)
	if code != 0 {
		t.Fatalf("maketrace exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "messages in") {
		t.Errorf("maketrace summary missing: %q", errs)
	}
	again := filepath.Join(dir, "again.tsv")
	runCLI(t, "", "maketrace", "--config", "../../testdata/children-0-2.yaml", "--seed", "7", "--duration", "60s", "--out", again)
	a, _ := os.ReadFile(trace)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Fatal("the same seed gave different traces")
	}
	code, out, errs := runCLI(t, "", "paths", "--in", trace, "--truth", "--top", "2")
	if code != 0 {
		t.Fatalf("paths exit %d: %s", code, errs)
	}
	var r api.PathsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Patterns) != 2 || r.Truth == nil || r.Truth.TopNFalseNegatives[1] != 0 {
		t.Fatalf("report: %d patterns, truth %+v", len(r.Patterns), r.Truth)
	}
	if code, _, errs := runCLI(t, "", "maketrace", "--config", "../../testdata/children-0-2.yaml", "--skew", "NOPE=+1ms", "--out", filepath.Join(dir, "x.tsv")); code != 1 || !strings.Contains(errs, "NOPE") {
		t.Fatalf("unknown skew node: exit %d: %s", code, errs)
	}
}

// Writing to a device must not replace it: --out /dev/null once turned the
// device into a regular file through the temporary-file rename.
func TestOutputToDeviceWritesInPlace(t *testing.T) {
	in := writeFile(t, "trace.tsv", figure3)
	if code, _, errs := runCLI(t, "", "paths", "--in", in, "--out", os.DevNull); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	info, err := os.Stat(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is now %v, not a character device", os.DevNull, info.Mode())
	}
}
