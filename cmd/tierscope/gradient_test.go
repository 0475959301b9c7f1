package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/gradient"
	sim "github.com/tierscope/tierscope/internal/sim/gradientsim"
	"github.com/tierscope/tierscope/internal/spectral"
)

const gradientData = "../../testdata/gradient"

// The training flags the example data was made for (testdata/gradient/README.md).
var exampleTrain = []string{"--transaction", "Sync", "--k", "8", "--n", "64"}

// TestGradientTestdata regenerates testdata/gradient from the simulator
// when TIERSCOPE_UPDATE_TESTDATA=1, and checks the files are current.
func TestGradientTestdata(t *testing.T) {
	if os.Getenv("TIERSCOPE_UPDATE_TESTDATA") != "1" {
		for _, f := range []string{"baseline.csv", "perturbed.csv", "injection.json"} {
			if _, err := os.Stat(filepath.Join(gradientData, f)); err != nil {
				t.Fatalf("%v (regenerate with TIERSCOPE_UPDATE_TESTDATA=1 go test -run TestGradientTestdata ./cmd/tierscope)", err)
			}
		}
		return
	}
	if err := writeGradientExample(gradientData); err != nil {
		t.Fatal(err)
	}
}

// writeGradientExample simulates a front calling a back end synchronously
// (Sync), three times in series (Serial3) and asynchronously (Async), then
// a square-wave delay on front->back, and writes the baseline, the
// perturbed samples and the injection.
func writeGradientExample(dir string) error {
	cfg := sim.Patterns(42, 0.1, 0.03)
	cfg.Clients[1].Count = 2
	cfg.Clients[2].Think = sim.Const(0.2)
	cfg.InjectorOffsetMs, cfg.InjectorJitterMs = 1, 0.2 // the injector overshoots by 1 ms
	s, err := sim.New(cfg)
	if err != nil {
		return err
	}
	s.RunUntil(s.Now() + 640)
	base := s.Drain()
	if err := writeSampleCSV(filepath.Join(dir, "baseline.csv"), base); err != nil {
		return err
	}
	f, _ := os.Open(filepath.Join(dir, "baseline.csv"))
	back, err := spectral.ReadSamples(f, "baseline.csv")
	f.Close()
	if err != nil {
		return err
	}
	tc := spectral.DefaultTrainConfig()
	tc.K, tc.N = 8, 64
	plan, err := spectral.Train(back, "Sync", tc)
	if err != nil {
		return err
	}
	amp := math.Round(plan.AmplitudeMs*10) / 10
	start := math.Ceil(s.Now()) + 3.3 // off the bin grid: the phase must not matter
	w := sim.Wave{Key: "a", Kind: "delay", Target: "front->back", Amplitude: amp, Start: start, Period: plan.PeriodSeconds, Cycles: plan.Kd + 1}
	if err := s.StartLease(w); err != nil {
		return err
	}
	end := start + float64(plan.N)*plan.BinSeconds
	s.RunUntil(end)
	inj, _ := s.StopLease("a")
	s.RunUntil(end + 10)
	var pert []spectral.Sample
	for _, x := range s.Drain() {
		if x.Time >= start-5 {
			pert = append(pert, x)
		}
	}
	if err := writeSampleCSV(filepath.Join(dir, "perturbed.csv"), pert); err != nil {
		return err
	}
	doc := gradient.Injection{Start: start, FrequencyHz: plan.FrequencyHz, AmplitudeMs: amp,
		ActualMeanDelayMs: math.Round(inj.Mean*1000) / 1000, ActualStdErrMs: math.Round(inj.StdErr*1e4) / 1e4, Element: "front->back"}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "injection.json"), b.Bytes(), 0o644)
}

func writeSampleCSV(path string, samples []spectral.Sample) error {
	var b strings.Builder
	b.WriteString("timestamp,transaction,response_time_ms\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%.6f,%s,%.3f\n", s.Time, s.Transaction, s.Ms)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// gradient train, gradient measure and predict on the example, through the
// command line, with the fields of docs/formats.md §7.
func TestGradientCLI(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	args := append([]string{"gradient", "train", "--in", filepath.Join(gradientData, "baseline.csv"), "--out", plan}, exampleTrain...)
	if code, _, errs := runCLI(t, "", args...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, errs)
	}
	var raw map[string]any
	data, _ := os.ReadFile(plan)
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"bin_seconds", "n", "frequency_hz", "k_d", "amplitude_ms", "baseline_fft_mean", "baseline_fft_std", "chunks"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("plan.json lacks %q", f)
		}
	}
	if raw["n"] != 64.0 || raw["chunks"] != 9.0 || len(raw["baseline_fft_mean"].([]any)) != 33 {
		t.Fatalf("plan: n %v, chunks %v", raw["n"], raw["chunks"])
	}

	gpath := filepath.Join(dir, "gradient.json")
	code, _, errs := runCLI(t, "", "gradient", "measure", "--in", filepath.Join(gradientData, "perturbed.csv"), "--plan", plan,
		"--injection", filepath.Join(gradientData, "injection.json"), "--out", gpath)
	if code != 0 {
		t.Fatalf("measure: exit %d: %s", code, errs)
	}
	data, _ = os.ReadFile(gpath)
	var g struct {
		Element      string                    `json:"element"`
		Transactions map[string]map[string]any `json:"transactions"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{"Sync": {1, 0.15}, "Serial3": {3, 0.45}, "Async": {0, 0.1}}
	for tx, w := range want {
		e := g.Transactions[tx]
		for _, f := range []string{"gradient", "ci95", "snr", "bins", "perturbation_ms"} {
			if _, ok := e[f]; !ok {
				t.Errorf("%s lacks %q", tx, f)
			}
		}
		if got := e["gradient"].(float64); math.Abs(got-w[0]) > w[1] {
			t.Errorf("%s: gradient %.3f, want %v ± %v", tx, got, w[0], w[1])
		}
		if e["bins"] != 64.0 {
			t.Errorf("%s: bins %v", tx, e["bins"])
		}
	}
	if g.Element != "front->back" {
		t.Fatalf("element %q", g.Element)
	}

	code, out, errs := runCLI(t, "", "predict", "--gradients", gpath, "--baseline-ms", "Sync=101,Serial3=303±1", "--change", "front->back=+20ms")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "# transaction") || !strings.HasPrefix(lines[1], "Sync\t101.00\t") {
		t.Fatalf("predict output:\n%s", out)
	}
	var sync [4]float64
	fmt.Sscanf(strings.TrimPrefix(lines[1], "Sync\t"), "%g\t%g\t%g\t%g", &sync[0], &sync[1], &sync[2], &sync[3])
	if math.Abs(sync[1]-121) > 3 || !(sync[2] < sync[1] && sync[1] < sync[3]) {
		t.Fatalf("Sync prediction %v", sync)
	}

	// Routing between two placements, and JSON output.
	code, out, errs = runCLI(t, "", "predict", "--format", "json", "--gradients", gpath, "--baseline-ms", "Sync=101,Async=10",
		"--option", "near:front->back=-10ms", "--option", "far:front->back=+10ms")
	if code != 0 {
		t.Fatalf("predict --option: exit %d: %s", code, errs)
	}
	var rep struct {
		Routing []gradient.Advice `json:"routing"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Routing) != 2 || rep.Routing[0].Best != "near" || rep.Routing[0].MarginMs < 15 {
		t.Fatalf("routing %s (%v)", out, err)
	}
}

func TestGradientCLIErrors(t *testing.T) {
	base := filepath.Join(gradientData, "baseline.csv")
	bad := writeFile(t, "bad.csv", "timestamp,transaction,response_time_ms\n1,A,2\n2,A,x\n")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"gradient"}, 2, "subcommand"},
		{[]string{"gradient", "fit"}, 2, "unknown subcommand"},
		{[]string{"gradient", "train", "--in", base}, 2, "--transaction is required"},
		{[]string{"gradient", "train", "--in", base, "--transaction", "Sync", "--n", "100"}, 2, "power of two"},
		{[]string{"gradient", "train", "--in", bad, "--transaction", "A"}, 1, "bad.csv:3:"},
		{[]string{"gradient", "train", "--in", base, "--transaction", "Nope"}, 1, `no samples of transaction "Nope"`},
		{[]string{"gradient", "train", "--in", base, "--transaction", "Sync", "--n", "4096"}, 1, "training needs"},
		{[]string{"gradient", "measure", "--in", base}, 2, "--plan and --injection"},
		{[]string{"predict", "--baseline-ms", "A=1", "--change", "x=+1ms"}, 2, "--gradients"},
	} {
		code, _, errs := runCLI(t, "", c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.msg)
		}
	}
	g := writeFile(t, "g.json", `{"element":"a->b","basis":{"kind":"link"},"transactions":{"T":{"gradient":2,"std_err":0.1}}}`)
	for _, c := range []struct {
		change, msg string
		code        int
	}{
		{"c->d=+1ms", `no gradient on element "c->d"`, 1},
		{"a->b=+1GHz", "not a number in the unit of a link", 2},
		{"a->b", "want ELEMENT=+20ms", 2},
	} {
		code, _, errs := runCLI(t, "", "predict", "--gradients", g, "--baseline-ms", "T=10", "--change", c.change)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%s: exit %d, stderr %q", c.change, code, errs)
		}
	}
	code, out, errs := runCLI(t, "", "predict", "--gradients", g, "--baseline-ms", "T=10", "--change", "a->b=+1.5ms±0.5ms")
	if code != 0 || !strings.Contains(out, "T\t10.00\t13.00\t") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	// The exporter's /api/v1/gradients document: the error comes from ci95.
	api := writeFile(t, "api.json", `{"gradients":[{"element":"link:a->b","transaction":"T","gradient":2,"ci95":[1.608,2.392],"snr":9,"bins":128,"perturbation_ms":20}]}`)
	code, out, errs = runCLI(t, "", "predict", "--format", "json", "--gradients", api, "--baseline-ms", "T=10", "--change", "link:a->b=+10ms")
	var rep predictReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || math.Abs(rep.Predictions[0].PredictedMs-30) > 1e-9 || math.Abs(rep.Predictions[0].StdErr-2) > 1e-3 {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
}

// predict reads an experiment's result (the exporter's document) and works
// through a capacity basis.
func TestPredictExperimentResultCapacity(t *testing.T) {
	basis := gradient.Basis{Kind: gradient.KindCapacity, Operating: 0.8, FrequencyMHz: 1000, Alpha: 10, Workload: 40}
	res := gradient.Result{Phase: gradient.PhaseDone, Elements: []gradient.ElementResult{{Element: "cpu", Basis: basis, Status: "done",
		Transactions: map[string]spectral.Estimate{"Cap": {Gradient: 10000, StdErr: 500}}}}}
	b, _ := json.Marshal(res)
	path := writeFile(t, "result.json", string(b))
	code, out, errs := runCLI(t, "", "predict", "--gradients", path, "--baseline-ms", "Cap=26", "--change", "cpu=@60%")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// 26 + 10000·(1/(600−400) − 1/(800−400)) = 51.
	if !strings.Contains(out, "Cap\t26.00\t51.00\t") {
		t.Fatalf("%s", out)
	}
}

// predict reads the exporter's capacity gradients measured on both sides of
// the operating point and predicts each change from the one on its side.
func TestPredictCapacityOnBothSides(t *testing.T) {
	basis := `"kind":"capacity","operating":0.8,"frequency_mhz":1000,"alpha":10,"workload":40`
	path := writeFile(t, "api.json", `{"gradients":[`+
		`{"element":"cpu","transaction":"Cap","gradient":10000,"ci95":[9000,11000],"basis":{`+basis+`,"side":"below"},"interval":[0.6,0.8]},`+
		`{"element":"cpu","transaction":"Cap","gradient":6000,"ci95":[5000,7000],"basis":{`+basis+`,"side":"above"},"interval":[0.8,1.0]}]}`)
	for change, want := range map[string]string{
		"cpu=@60%":  "Cap\t26.00\t51.00\t", // 26 + 10000·(1/200 − 1/400)
		"cpu=@100%": "Cap\t26.00\t21.00\t", // 26 + 6000·(1/600 − 1/400)
		// Between the two secants' reaches, −1/1200 and 1/400, Δb = 1/1200
		// is halfway: 26 + 8000/1200.
		"cpu=@70%": "Cap\t26.00\t32.67\t",
	} {
		code, out, errs := runCLI(t, "", "predict", "--gradients", path, "--baseline-ms", "Cap=26", "--change", change)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("%s: exit %d: %s %s; want %q", change, code, out, errs, want)
		}
	}
}
