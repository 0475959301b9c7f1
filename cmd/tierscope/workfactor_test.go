package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	wfMachineCSV = "../../testdata/workfactor/paper-phase1.csv"
	wfProcessCSV = "../../testdata/workfactor/paper-phase1-process.csv"
)

// wfDoc is the docs/formats.md §5 document, decoded independently of the package.
type wfDoc struct {
	Period int64    `json:"period"`
	Mode   string   `json:"mode"`
	R2     *float64 `json:"r2"`
	MSE    *float64 `json:"mse"`
	Flows  []struct {
		Flow          string   `json:"flow"`
		WorkFactor    *float64 `json:"work_factor"`
		Goodness      *float64 `json:"goodness"`
		Combined      *bool    `json:"combined"`
		AlphaRaw      *float64 `json:"alpha_raw"`
		AlphaSmoothed *float64 `json:"alpha_smoothed"`
	} `json:"flows"`
	Counters map[string]int64 `json:"counters"`
}

func runWF(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"workfactor"}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func decodeWF(t *testing.T, s string) wfDoc {
	t.Helper()
	var d wfDoc
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		t.Fatalf("output is not a work-factor document: %v\n%s", err, s)
	}
	return d
}

func (d wfDoc) workFactor(t *testing.T, flow string) float64 {
	t.Helper()
	for _, f := range d.Flows {
		if f.Flow == flow {
			if f.WorkFactor == nil || f.AlphaSmoothed == nil || *f.WorkFactor != *f.AlphaSmoothed || f.Combined == nil {
				t.Fatalf("flow %s: incomplete estimate %+v", flow, f)
			}
			return *f.WorkFactor
		}
	}
	t.Fatalf("no flow %s", flow)
	return 0
}

// The replay's first 40 minutes (phase 1: A is request kind 8, 6.3 standard
// megacycles; B is kind 4, 11.1), per-process readings.
func TestWorkfactorPaperSample(t *testing.T) {
	out := filepath.Join(t.TempDir(), "estimates.json")
	code, _, stderr := runWF(t, "", "--in", wfProcessCSV, "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	d := decodeWF(t, string(b))
	if d.Period != 40 || d.Mode != "process" || d.R2 == nil || d.MSE == nil {
		t.Errorf("document: period %d, mode %q, r2 %v, mse %v", d.Period, d.Mode, d.R2, d.MSE)
	}
	for flow, want := range map[string]float64{"A": 6.3, "B": 11.1} {
		if got := d.workFactor(t, flow); math.Abs(got-want) > 0.15*want {
			t.Errorf("work factor of %s = %.2f, want %.1f ± 15%%", flow, got, want)
		}
	}
	// Machine readings: the machines' background CPU biases the paper's
	// estimates up, but not by more than half; the default's background column
	// (identified here) takes it, and A is within 15%.
	code, stdout, stderr := runWF(t, "", "--in", wfMachineCSV, "--half-life", "10", "--paper")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	d = decodeWF(t, stdout)
	if got := d.workFactor(t, "A"); d.Mode != "machine" || got < 6.3 || got > 1.5*6.3 {
		t.Errorf("paper, machine mode %q: work factor of A = %.2f", d.Mode, got)
	}
	code, stdout, stderr = runWF(t, "", "--in", wfMachineCSV)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	d = decodeWF(t, stdout)
	if got := d.workFactor(t, "A"); d.Mode != "machine" || math.Abs(got-6.3) > 0.15*6.3 {
		t.Errorf("machine mode %q: work factor of A = %.2f, want 6.3 ± 15%%", d.Mode, got)
	}
}

func TestWorkfactorEveryPeriodAndFlags(t *testing.T) {
	code, stdout, stderr := runWF(t, "", "--in", wfMachineCSV, "--every-period", "--method", "nnls", "--paper")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 40 {
		t.Fatalf("%d JSON lines, want one per period (40)", len(lines))
	}
	for i, l := range lines {
		if d := decodeWF(t, l); d.Period != int64(i+1) {
			t.Fatalf("line %d is period %d", i+1, d.Period)
		}
	}
	for _, args := range [][]string{
		{"--in", wfMachineCSV, "--method", "ridge", "--ridge-lambda", "0.1"},
		{"--in", wfMachineCSV, "--background", "per-source"},
		{"--in", wfMachineCSV, "--util-poly", "0,1", "--no-discount", "--q", "3", "--delta", "0"},
		{"--in", wfMachineCSV, "--combining", "rate", "--max-half-life", "0", "--cusum", "0", "--discount", "--background", "auto", "--background-max-vif", "10"},
		{"--in", wfMachineCSV, "--half-life", "20", "--max-half-life", "100", "--collinear-correlation", "0.95"},
		{"--in", wfProcessCSV, "--per-process", "off"}, // every row has a process: all skipped
	} {
		code, stdout, stderr := runWF(t, "", args...)
		if args[len(args)-1] == "off" {
			if code != exitBadInput || !strings.Contains(stderr, "no usable sample") {
				t.Errorf("%v: exit %d, %s", args, code, stderr)
			}
			continue
		}
		if code != exitOK {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
			continue
		}
		decodeWF(t, stdout)
	}
}

func TestWorkfactorUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--in", wfMachineCSV, "--method", "lasso"},
		{"--in", wfMachineCSV, "--half-life", "0"},
		{"--in", wfMachineCSV, "--background", "maybe"},
		{"--in", wfMachineCSV, "--combining", "maybe"},
		{"--in", wfMachineCSV, "--collinear-correlation", "1.5"},
		{"--in", wfMachineCSV, "--cusum", "-1"},
		{"--in", wfMachineCSV, "--util-poly", "1,x"},
		{"--in", wfMachineCSV, "--per-process", "sometimes"},
		{"--in", wfMachineCSV, "extra"},
	} {
		if code, _, stderr := runWF(t, "", args...); code != exitBadUsage {
			t.Errorf("%v: exit %d (%s), want %d", args, code, stderr, exitBadUsage)
		}
	}
	if code, _, _ := runWF(t, "", "-h"); code != exitOK {
		t.Errorf("-h: exit %d", code)
	}
}

// Bad input: a clear error naming the line, or skipped and counted; never NaN.
func TestWorkfactorBadInput(t *testing.T) {
	const header = "period,machine,capacity_mhz,cpu_utilization,flow,rate\n"
	good := ""
	for p := 1; p <= 30; p++ {
		for m, rates := range map[string][2]float64{"m1": {10, 5}, "m2": {4, 12}} {
			a, b := rates[0]*(1+0.1*math.Sin(float64(p*(len(m)+p)))), rates[1]*(1+0.1*math.Cos(float64(3*p)))
			util := (7*a + 3*b) / 1000
			good += strings.Join([]string{itoa(p), m, "1000", ftoa(util), "A", ftoa(a)}, ",") + "\n"
			good += strings.Join([]string{itoa(p), m, "1000", ftoa(util), "B", ftoa(b)}, ",") + "\n"
		}
	}
	errCases := map[string]struct{ csv, want string }{
		"empty":         {"", "empty input"},
		"header only":   {header, "no samples"},
		"missing col":   {"period,machine,flow,rate\n1,m,A,1\n", `missing column "capacity_mhz"`},
		"bad number":    {header + "1,m1,1000,high,A,1\n", ":2: cpu_utilization \"high\""},
		"bad period":    {header + "x,m1,1000,0.1,A,1\n", ":2: period"},
		"empty machine": {header + "1,,1000,0.1,A,1\n", ":2: empty machine"},
		"disagreeing":   {header + "1,m1,1000,0.1,A,1\n1,m1,1000,0.2,B,1\n", ":3: cpu_utilization 0.2"},
		"duplicate":     {header + "1,m1,1000,0.1,A,1\n1,m1,1000,0.1,A,2\n", ":3: flow \"A\" given twice"},
		"short row":     {header + "1,m1,1000\n", ":2: 3 fields"},
		"open quote":    {header + "\"1,m1\n", "line 2"},
		"all NaN":       {header + "1,m1,1000,NaN,A,1\n2,m1,1000,-0.5,A,1\n", "no usable sample: 2 observations skipped (bad utilization 2"},
		"all zero":      {header + "1,m1,1000,0.1,A,0\n1,m1,1000,0.1,B,0\n", "all-zero rates 1"},
	}
	for name, c := range errCases {
		code, stdout, stderr := runWF(t, c.csv, "--in", "-")
		if code != exitBadInput || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("%s: exit %d, stderr %q (want %q), stdout %q", name, code, stderr, c.want, stdout)
		}
	}
	// Invalid rows among valid ones are skipped and counted; missing periods
	// are counted; the estimates stay finite and right.
	mixed := header + good + "31,m1,1000,NaN,A,10\n31,m2,1000,-1,A,3\n35,m3,1000,0.1,A,-2\n40,m1,0,0.1,A,1\n"
	code, stdout, stderr := runWF(t, mixed, "--in", "-")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "skipped 4 observations") || !strings.Contains(stderr, "missing periods") {
		t.Errorf("stderr %q does not report the skipped observations and missing periods", stderr)
	}
	d := decodeWF(t, stdout)
	if d.Counters["bad_utilization"] != 2 || d.Counters["bad_rate"] != 1 || d.Counters["bad_capacity"] != 1 || d.Counters["missing_periods"] == 0 {
		t.Errorf("counters %v", d.Counters)
	}
	if a, b := d.workFactor(t, "A"), d.workFactor(t, "B"); math.Abs(a-7) > 0.1 || math.Abs(b-3) > 0.1 {
		t.Errorf("work factors A %.3f B %.3f, want 7 and 3", a, b)
	}
	// A single flow is an ordinary problem.
	single := header
	for p := 1; p <= 20; p++ {
		x := 10 + float64(p%7)
		single += strings.Join([]string{itoa(p), "m1", "1000", ftoa(5 * x / 1000), "only", ftoa(x)}, ",") + "\n"
	}
	code, stdout, stderr = runWF(t, single, "--in", "-")
	if code != exitOK {
		t.Fatalf("single flow: exit %d: %s", code, stderr)
	}
	if got := decodeWF(t, stdout).workFactor(t, "only"); math.Abs(got-5) > 0.01 {
		t.Errorf("single flow: work factor %.3f, want 5", got)
	}
}

func TestWorkfactorStateOut(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	if code, _, stderr := runWF(t, "", "--in", wfMachineCSV, "--state-out", state); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Flows []string  `json:"flows"`
		C     []float64 `json:"c"`
	}
	if err := json.Unmarshal(b, &st); err != nil || len(st.Flows) < 10 || len(st.C) != len(st.Flows)*len(st.Flows) {
		t.Errorf("state: %v, %d flows, %d C entries", err, len(st.Flows), len(st.C))
	}
}

func itoa(i int) string { return strings.TrimSpace(strings.Replace(jsonNum(float64(i)), ".0", "", 1)) }

func ftoa(f float64) string { return jsonNum(f) }

func jsonNum(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}
