package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/inputlimit"
)

// TestReadersRefuseHostileInput: every reader stops at a line longer than
// inputlimit.MaxLine, and absurd or non-finite numbers are errors naming
// FILE:LINE, never a silent acceptance or a NaN downstream.
func TestReadersRefuseHostileInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := strings.Repeat("9", inputlimit.MaxLine+1)
	const wfHeader = "period,machine,capacity_mhz,cpu_utilization,flow,rate\n"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"workfactor long line", []string{"workfactor", "--in", write("wl.csv", wfHeader+"1,m1,1000,0.1,A,"+long+"\n")}, "wl.csv:2: line longer than"},
		{"workfactor 1e308", []string{"workfactor", "--in", write("w1.csv", wfHeader+"1,m1,1000,0.1,A,1e308\n")}, `w1.csv:2: rate "1e308" is beyond`},
		{"workfactor Inf", []string{"workfactor", "--in", write("w2.csv", wfHeader+"1,m1,Inf,0.1,A,1\n")}, `w2.csv:2: capacity_mhz "Inf" is not a finite number`},
		{"gradient 1e160", []string{"gradient", "train", "--in", write("g.csv", "timestamp,transaction,response_time_ms\n1,A,5\n2,A,1e160\n"), "--transaction", "A", "--out", filepath.Join(dir, "plan.json")}, "g.csv:3: bad response_time_ms"},
		{"gradient long line", []string{"gradient", "train", "--in", write("gl.csv", "1,A,"+long+"\n"), "--transaction", "A", "--out", filepath.Join(dir, "plan2.json")}, "gl.csv:1:"},
		{"signature 1e300", []string{"signature", "--in", write("s.csv", sigExample+"2026-01-01T00:00:00Z,shop,v1,Home,5,1e300,0,0,0.3\n")}, `s.csv:2: latency_ms "1e300" is beyond`},
		{"signature long line", []string{"signature", "--in", write("sl.csv", sigExample+long+"\n")}, "sl.csv:2: line longer than"},
		{"convert long line", []string{"convert", "--from", "nezha", "--in", write("c.log", long+"\n")}, "c.log:1: line longer than"},
		{"paths long line", []string{"paths", "--in", write("p.tsv", long+"\n")}, "p.tsv:1: line longer than"},
	}
	// Whole documents named on the command line are capped alike.
	huge := write("huge.json", "["+long+"]")
	cases = append(cases,
		struct {
			name string
			args []string
			want string
		}{"predict huge gradients", []string{"predict", "--gradients", huge, "--baseline-ms", "A=1", "--change", "a->b=+1ms"}, "huge.json:1: larger than"},
		struct {
			name string
			args []string
			want string
		}{"maketrace huge config", []string{"maketrace", "--config", huge, "--out", filepath.Join(dir, "t.tsv")}, "huge.json:1: larger than"},
	)
	for _, c := range cases {
		code, out, errs := runCLI(t, "", c.args...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", c.name, code, errs, c.want)
		}
		if out != "" {
			t.Errorf("%s: wrote %d bytes of output", c.name, len(out))
		}
	}
}
