package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/spectral"
)

const gradientSynopsis = `gradient train|measure [flags]

  gradient train   --in baseline.csv --transaction T [--k 8] [--n 128] [--scale 30] [--out plan.json]
  gradient measure --in perturbed.csv --plan plan.json --injection injection.json [--out gradient.json]

The sample files have one request per row: timestamp,transaction,response_time_ms
(docs/formats.md §7).`

// runGradient dispatches gradient train and gradient measure.
func runGradient(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: tierscope %s\n", gradientSynopsis)
		return usagef("a subcommand is required: train or measure")
	}
	switch args[0] {
	case "train":
		return runGradientTrain(args[1:], stdin, stdout, stderr)
	case "measure":
		return runGradientMeasure(args[1:], stdin, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintf(stderr, "usage: tierscope %s\n", gradientSynopsis)
		return errHelp
	}
	return usagef("unknown subcommand %q (train or measure)", args[0])
}

func runGradientTrain(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("gradient train", "gradient train --in baseline.csv --transaction T [--k 8] [--n 128] [--scale 30] [--out plan.json]", stderr)
	def := spectral.DefaultTrainConfig()
	var (
		in     = fs.String("in", "", "unperturbed samples (docs/formats.md §7); - for standard input")
		out    = fs.String("out", "", "plan file (default standard output)")
		tx     = fs.String("transaction", "", "transaction whose baseline chooses the plan (required)")
		k      = fs.Int("k", def.K, "minimum requests per bin: ΔTs = mean + 3σ of the time k requests span")
		n      = fs.Int("n", def.N, "bins per measurement, a power of two")
		scale  = fs.Float64("scale", def.Scale, "delay scale factor d: A_d = d·σ(FFT⁰)(f)")
		chunks = fs.Int("chunks", def.Chunks, "M, the N-bin chunks of baseline averaged (fewer if the data is shorter, at least 2)")
		spp    = fs.Float64("min-samples-per-period", def.MinSamplesPerPeriod, "lowest number of bins per injection period (figure 8(a))")
		kd     = fs.Int("kd", 0, "force the injection frequency index k_d instead of choosing it (0 = choose)")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *tx == "" {
		return usagef("--transaction is required")
	}
	cfg := spectral.TrainConfig{K: *k, N: *n, Chunks: *chunks, Scale: *scale, MinSamplesPerPeriod: *spp, Kd: *kd}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	samples, name, err := readGradientSamples(*in, stdin)
	if err != nil {
		return err
	}
	plan, err := spectral.Train(samples, *tx, cfg)
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return writeGradientJSON(*out, stdout, plan)
}

func runGradientMeasure(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("gradient measure", "gradient measure --in perturbed.csv --plan plan.json --injection injection.json [--out gradient.json]", stderr)
	var (
		in        = fs.String("in", "", "samples of the active phase (docs/formats.md §7); - for standard input")
		out       = fs.String("out", "", "gradient file (default standard output)")
		planPath  = fs.String("plan", "", "plan from gradient train (required)")
		injPath   = fs.String("injection", "", "injection.json: start, frequency_hz, amplitude_ms, actual_mean_delay_ms (required)")
		element   = fs.String("element", "", "name of the perturbed element, e.g. app->db (overrides injection.json)")
		aligned   = fs.Bool("aligned", false, "the wave's edges fell on bin edges: use equation 3's gain without the phase correction")
		transName = fs.String("transaction", "", "measure only this transaction (default all with a baseline)")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *planPath == "" || *injPath == "" {
		return usagef("--plan and --injection are required")
	}
	var plan spectral.Plan
	if err := readGradientJSON(*planPath, &plan); err != nil {
		return err
	}
	if err := plan.Validate(); err != nil {
		return fmt.Errorf("%s: %v", *planPath, err)
	}
	var inj gradient.Injection
	if err := readGradientJSON(*injPath, &inj); err != nil {
		return err
	}
	if *element != "" {
		inj.Element = *element
	}
	inj.Aligned = inj.Aligned || *aligned
	samples, name, err := readGradientSamples(*in, stdin)
	if err != nil {
		return err
	}
	if *transName != "" {
		kept := samples[:0]
		for _, s := range samples {
			if s.Transaction == *transName {
				kept = append(kept, s)
			}
		}
		samples = kept
	}
	m, err := gradient.Measure(&plan, samples, inj)
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return writeGradientJSON(*out, stdout, m)
}

// readGradientSamples reads a docs/formats.md §7 sample file named by --in.
func readGradientSamples(path string, stdin io.Reader) ([]spectral.Sample, string, error) {
	r, name, closeIn, err := input(path, stdin)
	if err != nil {
		return nil, "", err
	}
	defer closeIn()
	samples, err := spectral.ReadSamples(r, name)
	if err != nil {
		return nil, name, err
	}
	if len(samples) == 0 {
		return nil, name, fmt.Errorf("%s: no samples", name)
	}
	return samples, name, nil
}

// readGradientJSON decodes one JSON document, naming the file in errors.
func readGradientJSON(path string, v any) error {
	data, err := readFileCapped(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s:%d: %v", path, gradientJSONLine(data, err), err)
	}
	return nil
}

// gradientJSONLine is the line of a JSON syntax or type error (1 if unknown).
func gradientJSONLine(data []byte, err error) int {
	var off int64
	switch e := err.(type) {
	case *json.SyntaxError:
		off = e.Offset
	case *json.UnmarshalTypeError:
		off = e.Offset
	default:
		return 1
	}
	line := 1
	for i := int64(0); i < off && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line++
		}
	}
	return line
}

// writeGradientJSON writes v indented to --out (or standard output).
func writeGradientJSON(path string, stdout io.Writer, v any) error {
	o, err := openOutput(path, stdout)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(o)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // element names like app->db stay readable
	if err := enc.Encode(v); err != nil {
		o.abort()
		return err
	}
	return o.commit()
}
