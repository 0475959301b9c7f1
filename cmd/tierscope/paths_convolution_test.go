package main

import (
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// emailTrace writes the email-like relay trace (testdata/relay-email.yaml).
func emailTrace(t *testing.T) string {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "email.tsv")
	if code, _, errs := runCLI(t, "", "maketrace", "--config", "../../testdata/relay-email.yaml", "--seed", "1", "--out", trace); code != 0 {
		t.Fatalf("maketrace exit %d: %s", code, errs)
	}
	return trace
}

// docs/formats.md §2 for the convolution: patterns are chains, each node after the
// root with delays_ms and messages; --truth adds the common fields and the
// frequent-path view.
func TestPathsConvolutionJSON(t *testing.T) {
	trace := emailTrace(t)
	code, out, errs := runCLI(t, "", "paths", "--algorithm", "convolution", "--quantum", "5s", "--in", trace, "--truth")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"algorithm", "messages", "call_pairs", "discarded_messages", "patterns", "truth", "convolution"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("missing field %q", f)
		}
	}
	var r convolutionReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Algorithm != "convolution" || r.Messages < 60000 || r.Convolution.QuantumMs != 5000 || r.Convolution.Quanta < 1_000_000 || len(r.Convolution.Roots) != 7 {
		t.Fatalf("header %+v %+v", r.PathsReport, r.Convolution)
	}
	tr := r.Truth
	if tr == nil || len(tr.TopNFalseNegatives) != 20 || tr.Frequent != 100 || tr.FrequentTruthPatterns < 10 || tr.FrequentFalsePositives != 0 || tr.FrequentFalseNegatives != 0 {
		t.Fatalf("truth %+v", tr)
	}
	for i, p := range r.Patterns {
		if i > 0 && p.Count > r.Patterns[i-1].Count {
			t.Fatal("patterns not sorted by count")
		}
		// The root carries only its name; every later node one edge's labels.
		n, names := p.Root, []string{p.Root.Node}
		if n.DelaysMs != nil || n.Messages != 0 || n.LatencyMs != nil {
			t.Fatalf("root %+v", n)
		}
		for depth := 0; len(n.Children) > 0; depth++ {
			if len(n.Children) != 1 {
				t.Fatalf("%s is not a chain", p.Signature)
			}
			n = n.Children[0]
			names = append(names, n.Node)
			if n.Messages <= 0 || (depth > 0 && len(n.DelaysMs) == 0) || n.LatencyMs != nil {
				t.Fatalf("%s: node %+v", p.Signature, n)
			}
		}
		if n.Children == nil {
			t.Fatal("children must be [] not null")
		}
		if want := strings.Join(names, "(") + strings.Repeat(")", len(names)-1); p.Signature != want {
			t.Fatalf("signature %q, want %q", p.Signature, want)
		}
	}
	// The frequent paths show the relays' secondary spikes.
	if !strings.Contains(out, `"node": "virus"`) || !strings.Contains(out, "10012.") {
		t.Errorf("no 10 s spike on the edges into virus")
	}
}

func TestPathsConvolutionFormats(t *testing.T) {
	trace := emailTrace(t)
	code, out, errs := runCLI(t, "", "paths", "--algorithm", "convolution", "--quantum", "30s", "--in", trace, "--format", "dot", "--top", "3")
	if code != 0 || !strings.HasPrefix(out, "digraph paths {") || strings.Count(out, "subgraph cluster_") != 3 || !strings.Contains(out, " × ") {
		t.Fatalf("dot (exit %d, %s):\n%s", code, errs, out)
	}
	code, out, errs = runCLI(t, "", "paths", "--algorithm", "convolution", "--quantum", "30s", "--in", trace, "--format", "text", "--sort", "latency", "--top", "2", "--truth")
	if code != 0 || !strings.Contains(out, "#1  ") || !strings.Contains(out, "-[") || !strings.Contains(out, "truth: 13 true chains") {
		t.Fatalf("text (exit %d, %s):\n%s", code, errs, out)
	}
	// --root limits the graph to the paths of one node.
	code, out, _ = runCLI(t, "", "paths", "--algorithm", "convolution", "--quantum", "30s", "--in", trace, "--root", "corp")
	var r convolutionReport
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Patterns) != 2 || r.Patterns[0].Root.Node != "corp" {
		t.Fatalf("--root corp: exit %d, %+v", code, r.Patterns)
	}
}

// A small RPC trace through the command line: figure 3's path, many times over,
// with returns; the derived A→B→A is not reported.
func TestPathsConvolutionRPC(t *testing.T) {
	var b strings.Builder
	rng := rand.New(rand.NewPCG(1, 2)) // random arrivals: periodic ones correlate at their period
	for i := range 300 {
		base := rng.Float64() * 20000
		for _, l := range []struct {
			at       float64
			op, f, g string
		}{{0, "CALL_SENT", "A", "B"}, {0.3, "CALL_SENT", "B", "C"}, {0.5, "RET_SENT", "C", "B"}, {0.7, "CALL_SENT", "B", "D"}, {0.9, "RET_SENT", "D", "B"}, {1.1, "RET_SENT", "B", "A"}} {
			b.WriteString(strconv.FormatFloat(1000+base+l.at, 'f', 3, 64) + "\t" + l.op + "\t" + l.f + "\t" + l.g + "\t-\tp" + strconv.Itoa(i) + "\n")
		}
	}
	code, out, errs := runCLI(t, b.String(), "paths", "--algorithm", "convolution", "--quantum", "50ms", "--in", "-", "--truth")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r convolutionReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Patterns) != 1 || r.Patterns[0].Signature != "A(B(C(B(D(B(A))))))" || r.Patterns[0].Count != 300 || r.Truth.FalsePositivePatterns != 0 || r.Truth.FalseNegativeInstances != 0 {
		t.Fatalf("patterns %+v, truth %+v", r.Patterns, r.Truth)
	}
}

func TestPathsConvolutionUsage(t *testing.T) {
	in := writeFile(t, "trace.tsv", figure3)
	for _, args := range [][]string{
		{"--correlation", "magic"},
		{"--disable", "cycles,nope"},
		{"--quantum", "0s"},
		{"--spike-n", "2", "--spike-s", "3"},
		{"--frequent", "0"},
		{"--short-fraction", "2"},
	} {
		argv := append([]string{"paths", "--algorithm", "convolution", "--in", in}, args...)
		if code, _, errs := runCLI(t, "", argv...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d (stderr %q), want 2", args, code, errs)
		}
	}
	if code, _, errs := runCLI(t, "", "paths", "--algorithm", "convolution", "--in", in, "--root", "nobody"); code != 1 || !strings.Contains(errs, "nobody") {
		t.Errorf("unknown root: exit %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "paths", "--algorithm", "convolution", "--in", in, "--disable", "cycles,derived", "--correlation", "fft"); code != 0 {
		t.Errorf("valid flags: exit %d %q", code, errs)
	}
}
