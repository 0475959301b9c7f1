package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
